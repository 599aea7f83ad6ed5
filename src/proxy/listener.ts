// The downstream side: one node:http2 server per configured listener (h2c or TLS; core stream
// API, not the compatibility API), its HTTP/1.1 gRPC-Web socket, the order in which a new
// stream is taken (count and refuse, overload, gRPC-Web, health, call), drain and retire.
// Per-connection state is one ConnState (downstream/connection.ts); the abuse guards are
// downstream/guards.ts, the connection timers downstream/lifetime.ts, the grpc.health.v1
// service downstream/health-service.ts.
import http2, { type Http2SecureServer, type Http2Server, type IncomingHttpHeaders, type ServerHttp2Session, type ServerHttp2Stream } from "node:http2";
import type { TLSSocket } from "node:tls";
import { HandshakeErrors, ListenerTls, tlsModeOf, xfccOf, type TlsMode } from "./downstream/tls.js";
import { kClientCert, kPeer, type ClientCertSession, type PeerSession } from "./call/headers.js";
import { clientPeer } from "./downstream/peer.js";
import type { AddressInfo, Socket } from "node:net";
import type { IncomingMessage, Server as HttpServer, ServerResponse } from "node:http";
import type { Server as HttpsServer } from "node:https";
import { http, https } from "./downstream/node-http.js";
import { handleWebHttp1, handleWebHttp2, refuseWebHttp1 } from "./downstream/grpc-web.js";
import type { JsonTranscoding } from "./downstream/transcode.js";
import { classifyConnect, handleConnectHttp1, handleConnectHttp2, refuseConnectHttp1 } from "./downstream/connect.js";
import { compileCors, preflightCors, responseCors, type CorsPolicy } from "./downstream/cors.js";
import { ConnState, kConn, type ConnSession, type ConnStream } from "./downstream/connection.js";
import { UNPRODUCTIVE_SWEEP_MS, advertisedStreams, countStream, guardDestroy, ignoreError, onClientSettings, sweepUnproductive } from "./downstream/guards.js";
import { startLifetime } from "./downstream/lifetime.js";
import { HealthService, type HealthTargets } from "./downstream/health-service.js";
import { parseWebContentType } from "../translate/grpc-web.js";
import { parseConnectContentType } from "../translate/connect.js";
import type { JsonTranscodingConfig, ListenerConfig } from "../config/index.js";
import { ListenError } from "../errors.js";
import { Code, outcome } from "../translate/index.js";
import { HEALTH_CHECK_PATH, HEALTH_WATCH_PATH } from "../translate/health.js";
import { handleStream } from "./call/call.js";
import type { CallContext } from "./call/context.js";
import { heapPressure, responseBuffers } from "./observe/overload.js";

export { advertisedStreams } from "./downstream/guards.js";
export type { HealthTargets } from "./downstream/health-service.js";

/**
 * JSON transcoding (downstream/transcode.ts, with @bufbuild/protobuf) is loaded by the first
 * listener that has jsonTranscoding, never at start: a process without it does not evaluate it.
 */
type TranscodeModule = typeof import("./downstream/transcode.js");
let transcodeModule: TranscodeModule | undefined;
function loadTranscodeModule(): Promise<TranscodeModule> {
  return import("./downstream/transcode.js").then((m) => (transcodeModule = m));
}

/** What an HTTP/1.1 request refused under overload is told (refusesHttp1Call), in each protocol's form. */
const OVERLOADED_MESSAGE = "dojang is overloaded (response-buffer budget or heap): call not started, retry later";

/** How often the gRPC-Web HTTP/1.1 server checks its connections' requestHeadersTimeout. */
const HTTP1_CHECK_MS = 1000;

/** What the listener asks its owner: the current snapshot's health targets, whether dojang drains. */
export interface ListenerOwner {
  readonly health: { current: HealthTargets };
  readonly draining: () => boolean;
}

type MutableContext = { -readonly [K in keyof CallContext]: CallContext[K] };

export class Listener {
  /** h2c, or TLS (ALPN h2) when the listener has `tls` */
  readonly server: Http2Server | Http2SecureServer;
  /** the listener's certificates (SNI, client certificates, reload on file change); null = h2c */
  readonly tls: ListenerTls | null;
  readonly sessions = new Set<ServerHttp2Session>();
  readonly ctx: CallContext;
  private bound: AddressInfo | undefined;
  private draining = false;
  /** grpc.health.v1 (healthService: true); its Watch streams end at drain */
  private readonly health: HealthService;
  /** the unproductive-bytes sweep (sweepUnproductive), from the first connection on */
  private meterTimer: NodeJS.Timeout | undefined = undefined;
  /**
   * gRPC-Web: the HTTP/1.1 server on http1Address (null when not configured): plain HTTP/1.1 on
   * an h2c listener, HTTPS/1.1 with the listener's own TLS (certificates, client-certificate
   * rule) on a TLS listener, so no socket of a listener is weaker than its TLS port.
   */
  readonly http1: HttpServer | HttpsServer | null = null;
  /** ALPN protocols of the listener's own port as its server was made (h2c: none, "h2c" here) */
  private readonly protocols: readonly string[];
  /** refused handshakes on the TLS port and the HTTPS/1.1 socket (null = h2c) */
  readonly handshakeErrors: HandshakeErrors | null = null;
  private http1Bound: AddressInfo | undefined;
  private cors: CorsPolicy | null = null;
  /** jsonTranscoding: the compiled descriptor set (null = off: one field test per stream) */
  private json: JsonTranscoding | null = null;
  /** the transcoding module loading for this listener (listen() waits for it and throws its error) */
  private jsonLoading: Promise<void> | null = null;
  /** HTTP/1.1 connections on a TLS listener (gRPC-Web; tlsAllowsHttp1) */
  private readonly tlsHttp1Sockets = new Set<Socket>();

  constructor(
    public cfg: ListenerConfig,
    callContext: CallContext,
    owner: ListenerOwner = { health: { current: () => null }, draining: () => false },
  ) {
    // The listener's own settings the calls read (the same `active` set and counters).
    const ctx: CallContext = { ...callContext, streamIdleTimeoutMs: cfg.streamIdleTimeoutMs, attemptsHeader: cfg.attemptsHeader };
    this.ctx = ctx;
    this.health = new HealthService(owner.health, () => this.draining || owner.draining());
    const serverOptions: http2.ServerOptions = {
      settings: {
        maxConcurrentStreams: advertisedStreams(cfg.maxConcurrentStreams),
        initialWindowSize: cfg.initialWindowSize,
        maxHeaderListSize: cfg.maxHeaderListSize,
        enablePush: false,
      },
      // node's default of 128 header pairs resets ordinary calls that carry much metadata with
      // ENHANCE_YOUR_CALM, which a client reads as RESOURCE_EXHAUSTED (spec §1.1, probe Y).
      maxHeaderListPairs: cfg.maxHeaderListPairs,
      maxSessionMemory: cfg.maxSessionMemoryMiB,
      // nghttp2 would drop a field with leading or trailing whitespace (RFC 9113 §8.2.1) and
      // pass the call on without it; let it through so dojang refuses the call instead
      // (copyRequestHeaders, issue 10 item 9). Node 24.2+.
      strictFieldWhitespaceValidation: false,
    };
    // TLS (src/proxy/downstream/tls.ts): the same HTTP/2 options on a secure server; the h2c
    // path is unchanged. Certificate files are read now (a bad one fails the start, naming the
    // key) and watched: new handshakes get renewed certificates, open connections keep theirs.
    // (typed as the h2c server below: both emit the same session and stream events)
    let server: Http2Server;
    let secure: Http2SecureServer | undefined;
    if (cfg.tls === null) {
      this.tls = null;
      server = http2.createServer(serverOptions);
    } else {
      const t = new ListenerTls(cfg.tls, `listener ${JSON.stringify(cfg.name)}`, ctx.log);
      this.tls = t;
      secure = http2.createSecureServer({ ...serverOptions, ...t.serverOptions(tlsAllowsHttp1(cfg)), ...handshakeTimeout(cfg) });
      server = secure as unknown as Http2Server;
      // A failed handshake (no client certificate under requireClientCert, one the CA does not
      // verify, no common ALPN protocol, not TLS at all) is the client's problem: counted by
      // reason and logged rate-limited (downstream/tls.ts HandshakeErrors), never thrown.
      const name = cfg.name;
      const errors = new HandshakeErrors(name, (reason) => ctx.metrics.tlsHandshakeErrors.labels(name, reason), ctx.log);
      this.handshakeErrors = errors;
      server.on("tlsClientError", (err: Error, sock: TLSSocket) => errors.record(err, sock, "address"));
      server.on("connection", notePeer);
    }
    this.server = server;
    this.protocols = cfg.tls === null ? ["h2c"] : tlsAllowsHttp1(cfg) ? ["h2", "http/1.1"] : ["h2"];
    // maxConnections: node's net.Server closes a connection over the limit as it is accepted
    server.maxConnections = cfg.maxConnections ?? Infinity;
    this.cors = cfg.cors === null ? null : compileCors(cfg.cors.allowOrigins);
    this.useJson(cfg.jsonTranscoding, true);
    // gRPC-Web over HTTP/1.1 (grpc-web.ts): node's h2c server speaks only HTTP/2, so plain-text
    // HTTP/1.1 has a socket of its own; keep-alive as browsers expect, no request timeout of
    // node's own (the call's deadline and streamIdleTimeout bound a call).
    // The HTTP/2 listener's limits hold here too: requestHeadersTimeout (slowloris: node's
    // headersTimeout, checked every HTTP1_CHECK_MS instead of node's 30 s), maxHeaderListSize
    // and maxConnections.
    // On a TLS listener that socket is HTTPS/1.1 (node:https) with the listener's own TLS: the
    // same certificates (SNI, reloads), the same client-certificate rule, and the verified
    // identity goes upstream as x-forwarded-client-cert as on the TLS port (grpc-web.ts reads it
    // from the socket). A plain-text socket beside an mTLS port would let any client past
    // requireClientCert (issue 18 item 1).
    if ((cfg.grpcWeb || cfg.connect || cfg.jsonTranscoding !== null) && cfg.http1Address !== null) {
      const opts = {
        requestTimeout: 0,
        keepAliveTimeout: 60_000,
        headersTimeout: cfg.requestHeadersTimeoutMs ?? 0,
        connectionsCheckingInterval: HTTP1_CHECK_MS,
        maxHeaderSize: cfg.maxHeaderListSize,
      };
      const onRequest = (req: IncomingMessage, res: ServerResponse): void => this.serveHttp1(req, res);
      if (this.tls === null) this.http1 = http.createServer(opts, onRequest);
      else {
        const h1s = https().createServer({ ...opts, ...this.tls.http1Options(), ...handshakeTimeout(cfg) }, onRequest);
        const errors = this.handshakeErrors!;
        h1s.on("tlsClientError", (err: Error, sock: TLSSocket) => errors.record(err, sock, "http1Address"));
        h1s.on("connection", notePeer);
        this.http1 = h1s;
      }
      this.http1.maxConnections = cfg.maxConnections ?? Infinity;
    }
    // certificate files watched: new handshakes on every TLS socket of the listener get renewals
    if (this.tls !== null) {
      if (this.http1 !== null) this.tls.watch(secure!, this.http1 as HttpsServer);
      else this.tls.watch(secure!);
    }
    // On a TLS listener with grpcWeb, ALPN also offers http/1.1 (tlsAllowsHttp1) and node hands
    // those connections' requests to the secure server's 'request' event. A 'request' listener
    // makes node add its compatibility 'stream' handler as well (which would take every HTTP/2
    // stream too): it is removed at once, before dojang's own 'stream' handler is added below,
    // so HTTP/2 streams stay on the core API and only HTTP/1.1 requests arrive here.
    if (tlsAllowsHttp1(cfg)) {
      server.on("request", (req: IncomingMessage, res: ServerResponse) => {
        // (kept so destroy() can end keep-alive connections, which server.close() would wait for)
        const sock = req.socket;
        if (!this.tlsHttp1Sockets.has(sock)) {
          this.tlsHttp1Sockets.add(sock);
          sock.once("close", () => this.tlsHttp1Sockets.delete(sock));
        }
        this.serveHttp1(req, res);
      });
      server.removeAllListeners("stream");
    }
    const live = ctx.metrics.live;
    server.on("session", (s: ConnSession) => {
      guardDestroy(s);
      // A reload changes these for connections made after it (this.cfg is the current config).
      const lc = this.cfg;
      const conn = new ConnState(s, lc.maxConcurrentStreams);
      s[kConn] = conn;
      s.on("remoteSettings", onClientSettings);
      // who the client is (the access record's client_address, tls_*): once per connection
      (s as unknown as PeerSession)[kPeer] = clientPeer(s.socket);
      // mTLS: the verified client certificate, once per connection, for every call on it
      if (this.tls !== null && this.tls.cfg.caFile !== null) {
        const xfcc = xfccOf(s.socket as TLSSocket);
        if (xfcc !== undefined) (s as ClientCertSession)[kClientCert] = xfcc;
      }
      this.sessions.add(s);
      if (this.meterTimer === undefined) {
        this.meterTimer = setInterval(sweepUnproductive, UNPRODUCTIVE_SWEEP_MS, this);
        this.meterTimer.unref();
      }
      live.downstreamSessions++;
      const connWindow = lc.connectionWindowSize;
      startLifetime(this, conn, lc, Math.random);
      s.on("close", () => {
        conn.clearTimers();
        if (this.sessions.delete(s)) live.downstreamSessions--;
      });
      s.on("error", (err) => ctx.log.debug({ err: err.message, listener: this.cfg.name }, "client session error"));
      s.once("localSettings", () => {
        try {
          s.setLocalWindowSize(connWindow);
        } catch {
          /* closing */
        }
      });
    });
    // The order is load-bearing: a stream is counted first (so its close is, whatever happens
    // next), refused over the connection's limit or the process's budget, then gRPC-Web, the
    // health service, and only then a call.
    server.on("stream", (stream: ConnStream, headers, flags, rawHeaders) => {
      const conn = (stream.session as ConnSession | undefined)?.[kConn];
      if (conn !== undefined) {
        const overLimit = countStream(conn, stream);
        heapPressure.onStream();
        // Past the process's response-buffer budget (observe/overload.ts) no new stream is
        // taken until the stalled buffers are cut back: REFUSED_STREAM is safe to retry.
        const overloaded = responseBuffers.overloaded || heapPressure.pressed;
        if (overloaded || overLimit) {
          if (overloaded) responseBuffers.refused++;
          ctx.metrics.refusedStreams.inc();
          // node reports the reset it sends as the stream's 'error': without a listener it would
          // be thrown, and end the process
          stream.on("error", ignoreError);
          stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
          return;
        }
      }
      // JSON transcoding (a request that is not gRPC's and matches a rule): one field test when off.
      // On a listener that also takes Connect, a request no rule matches goes on to Connect when it
      // is a Connect call (unknownPaths: notFound answers only what neither takes).
      if (
        this.json !== null &&
        transcodeModule!.takesJson(headers["content-type"]) &&
        transcodeModule!.serveJsonHttp2(ctx, this.json, stream, headers, rawHeaders as unknown as string[], this.cfg.connect && classifyConnect(String(headers[":method"]), String(headers[":path"]), headers) !== null)
      ) return;
      // gRPC-Web and Connect on the h2c port: one flag test on the native path.
      if ((this.cfg.grpcWeb || this.cfg.connect) && this.serveWebStream(stream, headers, rawHeaders as unknown as string[])) return;
      if (this.cfg.healthService) {
        const p = headers[":path"];
        if (p === HEALTH_CHECK_PATH || p === HEALTH_WATCH_PATH) return this.health.serve(stream, headers, p === HEALTH_WATCH_PATH);
      }
      handleStream(ctx, stream, headers, flags, rawHeaders as unknown as string[]);
    });
    server.on("sessionError", (err) => ctx.log.debug({ err: err.message, listener: this.cfg.name }, "client session error"));
  }

  /**
   * A reload kept this listener (same name, same address): calls that start from now on read
   * the new streamIdleTimeout, attemptsHeader and access-log switch, new connections the new
   * limits, windows, maxConnectionAge and idleTimeout (connections already open keep the timers they started
   * with), and the health service switch applies to the next stream. maxHeaderListPairs and
   * maxSessionMemoryMiB are node server options fixed at creation (the reload report says so).
   */
  reconfigure(cfg: ListenerConfig, accessLog: boolean): void {
    this.cfg = cfg;
    this.server.maxConnections = cfg.maxConnections ?? Infinity;
    if (this.http1 !== null) {
      this.http1.maxConnections = cfg.maxConnections ?? Infinity;
      this.http1.headersTimeout = cfg.requestHeadersTimeoutMs ?? 0;
    }
    const ctx = this.ctx as MutableContext;
    ctx.streamIdleTimeoutMs = cfg.streamIdleTimeoutMs;
    ctx.attemptsHeader = cfg.attemptsHeader;
    ctx.accessLog = accessLog;
    this.cors = cfg.cors === null ? null : compileCors(cfg.cors.allowOrigins);
    if (JSON.stringify(cfg.jsonTranscoding) !== JSON.stringify(this.json?.cfg ?? null)) this.useJson(cfg.jsonTranscoding, false);
    this.server.updateSettings({
      maxConcurrentStreams: advertisedStreams(cfg.maxConcurrentStreams),
      initialWindowSize: cfg.initialWindowSize,
      maxHeaderListSize: cfg.maxHeaderListSize,
      enablePush: false,
    });
  }

  /**
   * jsonTranscoding's descriptor set, compiled (the module loaded first if no listener has yet).
   * `strict` (a new listener): a set that does not load fails listen(); on a reload it is logged
   * and the one in use is kept.
   */
  private useJson(cfg: JsonTranscodingConfig | null, strict: boolean): void {
    if (cfg === null) {
      this.json = null;
      return;
    }
    const use = (m: TranscodeModule): void => {
      try {
        this.json = m.loadJsonTranscoding(cfg);
      } catch (err) {
        if (strict) throw err;
        this.ctx.log.error({ listener: this.cfg.name, err: (err as Error).message }, "jsonTranscoding not reloaded");
      }
    };
    if (transcodeModule !== undefined) return use(transcodeModule);
    const p = loadTranscodeModule().then(use);
    p.catch(() => {}); // (listen() reports it)
    this.jsonLoading = p;
  }

  // === gRPC-Web (grpcWeb: true): HTTP/2 here, HTTP/1.1 on http1Address ===

  /** A stream on the h2c port that is gRPC-Web, Connect, or a CORS preflight; false: a native call. */
  private serveWebStream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, raw: readonly string[]): boolean {
    const cfg = this.cfg;
    const method = headers[":method"];
    const origin = typeof headers["origin"] === "string" ? headers["origin"] : undefined;
    if (method === "OPTIONS") {
      stream.on("error", ignoreError);
      const acrm = headers["access-control-request-method"];
      const acrh = headers["access-control-request-headers"];
      const h = preflightCors(this.cors, origin, typeof acrm === "string" ? acrm : undefined, typeof acrh === "string" ? acrh : undefined, cfg.connect);
      stream.respond({ ":status": h === null ? 403 : 204, ...h }, { endStream: true });
      return true;
    }
    // which protocol, by content type and method (translate/: grpc-web.ts, connect.ts)
    if (cfg.grpcWeb) {
      const ct = headers["content-type"];
      const web = parseWebContentType(typeof ct === "string" ? ct : undefined);
      if (web !== null) {
        handleWebHttp2(this.ctx, web, stream, headers, raw, responseCors(this.cors, origin));
        return true;
      }
    }
    if (cfg.connect) {
      const p = headers[":path"];
      const c = classifyConnect(String(method ?? ""), typeof p === "string" ? p : "", headers);
      if (c !== null) {
        handleConnectHttp2(this.ctx, c, stream, headers, raw, responseCors(this.cors, origin));
        return true;
      }
    }
    return false;
  }

  /** A request on the HTTP/1.1 socket: gRPC-Web, or its CORS preflight; anything else is refused. */
  private serveHttp1(req: IncomingMessage, res: ServerResponse): void {
    const origin = req.headers.origin;
    if (req.method === "OPTIONS") {
      const acrm = req.headers["access-control-request-method"];
      const acrh = req.headers["access-control-request-headers"];
      const h = preflightCors(this.cors, origin, acrm, typeof acrh === "string" ? acrh : undefined, this.cfg.connect);
      res.writeHead(h === null ? 403 : 204, h ?? {});
      res.end();
      return;
    }
    const web = this.cfg.grpcWeb ? parseWebContentType(req.headers["content-type"]) : null;
    const connect = web === null && this.cfg.connect ? classifyConnect(req.method ?? "", req.url ?? "", req.headers) : null;
    if (web === null && this.json !== null && transcodeModule!.takesJson(req.headers["content-type"])) {
      if (this.refusesHttp1Call()) {
        res.writeHead(503, { "content-type": "application/json" });
        res.end(JSON.stringify({ code: Code.UNAVAILABLE, message: OVERLOADED_MESSAGE }));
        return;
      }
      if (transcodeModule!.serveJsonHttp1(this.ctx, this.json, req, res, connect !== null)) return;
    }
    if (connect !== null) return this.serveConnectHttp1(connect, req, res, origin);
    if (web === null || req.method !== "POST") {
      // Not gRPC-Web nor Connect: this socket serves nothing else (a plain HTTP answer, no call
      // made). A gRPC-Web or Connect content type with another method is 405.
      const known = web !== null || (this.cfg.connect && parseConnectContentType(req.headers["content-type"]) !== null);
      res.writeHead(known ? 405 : 415, { "content-type": "text/plain; charset=utf-8" });
      const what = this.cfg.grpcWeb && this.cfg.connect ? "gRPC-Web and Connect" : this.cfg.connect ? "Connect" : "gRPC-Web";
      res.end(known ? `dojang: ${what} requests are POST${this.cfg.connect ? " (a Connect unary call may be GET)" : ""}\n` : `dojang: this port takes ${what} requests (see its content types in the docs)\n`);
      return;
    }
    if (this.refusesHttp1Call()) {
      refuseWebHttp1(web, res, responseCors(this.cors, origin), Code.UNAVAILABLE, OVERLOADED_MESSAGE);
      return;
    }
    handleWebHttp1(this.ctx, web, req, res, responseCors(this.cors, origin));
  }

  /**
   * An HTTP/1.1 request (gRPC-Web, Connect, JSON) arrives: past the process's response-buffer
   * budget or under heap pressure no call is taken (the native port's REFUSED_STREAM; there is no
   * stream to refuse here, so the caller answers "unavailable, retry" in its protocol's form, and
   * nothing goes upstream). True: refused, and counted.
   */
  private refusesHttp1Call(): boolean {
    heapPressure.onStream();
    if (!responseBuffers.overloaded && !heapPressure.pressed) return false;
    responseBuffers.refused++;
    this.ctx.metrics.refusedStreams.inc();
    return true;
  }

  /** A Connect request on the HTTP/1.1 socket (the overload refusal as gRPC-Web's, in Connect's form). */
  private serveConnectHttp1(c: NonNullable<ReturnType<typeof classifyConnect>>, req: IncomingMessage, res: ServerResponse, origin: string | undefined): void {
    if (this.refusesHttp1Call()) {
      refuseConnectHttp1(c, res, responseCors(this.cors, origin), OVERLOADED_MESSAGE);
      return;
    }
    handleConnectHttp1(this.ctx, c, req, res, responseCors(this.cors, origin));
  }

  /**
   * Every socket the listener has open (after listen()), with the protocols it serves and its
   * TLS mode: what the start-up line lists.
   */
  sockets(): { address: AddressInfo; protocols: string[]; tls: TlsMode }[] {
    // what the servers were made with (a reload of tls keys needs a restart)
    const mode = tlsModeOf(this.tls?.cfg ?? null);
    const out: { address: AddressInfo; protocols: string[]; tls: TlsMode }[] = [];
    if (this.bound !== undefined) out.push({ address: this.bound, protocols: [...this.protocols], tls: mode });
    if (this.http1Bound !== undefined) out.push({ address: this.http1Bound, protocols: ["http/1.1"], tls: mode });
    return out;
  }

  /** "host:port" the HTTP/1.1 gRPC-Web socket is bound to (after listen()). */
  get http1Address(): AddressInfo | undefined {
    return this.http1Bound;
  }

  async listen(): Promise<AddressInfo> {
    if (this.jsonLoading !== null) await this.jsonLoading;
    const { host, port } = this.cfg.address;
    const bound = await new Promise<AddressInfo>((resolve, reject) => {
      const onError = (err: Error): void => reject(new ListenError(`${host}:${port} (listener ${this.cfg.name})`, { cause: err }));
      this.server.once("error", onError);
      this.server.listen(port, host, () => {
        this.server.off("error", onError);
        this.bound = this.server.address() as AddressInfo;
        resolve(this.bound);
      });
    });
    const h1 = this.http1;
    const a = this.cfg.http1Address;
    if (h1 !== null && a !== null) {
      try {
        this.http1Bound = await new Promise<AddressInfo>((resolve, reject) => {
          const onError = (err: Error): void => reject(new ListenError(`${a.host}:${a.port} (listener ${this.cfg.name} http1Address)`, { cause: err }));
          h1.once("error", onError);
          h1.listen(a.port, a.host, () => {
            h1.off("error", onError);
            resolve(h1.address() as AddressInfo);
          });
        });
      } catch (err) {
        this.server.close();
        throw err;
      }
    }
    return bound;
  }

  get address(): AddressInfo | undefined {
    return this.bound;
  }

  /** Stops accepting connections and sends GOAWAY to every client; in-flight streams go on. */
  drain(): void {
    this.draining = true;
    // Watch streams hear NOT_SERVING now, then end, so a draining connection is not held open.
    this.health.drain();
    this.server.close();
    // gRPC-Web over HTTP/1.1: no new connections; idle keep-alive ones close now, busy ones after their call.
    if (this.http1 !== null) {
      this.http1.close();
      this.http1.closeIdleConnections();
    }
    for (const s of this.sessions) {
      if (!s.closed && !s.destroyed) s.close();
    }
  }

  /**
   * Ends what is left after the drain timeout: each call still in flight gets a stamp
   * (14 UNAVAILABLE, decided_by shutdown: safe for the client to retry elsewhere), then the
   * sessions are closed once those last frames are flushed.
   */
  async destroy(): Promise<void> {
    this.tls?.close();
    for (const c of [...this.ctx.active]) c.finish(outcome(Code.UNAVAILABLE, "proxy is shutting down", "shutdown"));
    if (this.sessions.size > 0) await new Promise((r) => setTimeout(r, 50));
    for (const s of this.sessions) s.destroy();
    this.health.close();
    clearInterval(this.meterTimer);
    if (this.http1 !== null) this.http1.closeAllConnections();
    for (const sock of this.tlsHttp1Sockets) sock.destroy();
  }

  /**
   * A reload removed or re-addressed this listener: drain (GOAWAY, no new connections), let its
   * calls finish for up to `drainTimeoutMs`, then destroy() what is left. Resolves when closed.
   */
  async retire(drainTimeoutMs: number): Promise<void> {
    this.drain();
    const until = performance.now() + drainTimeoutMs;
    while (this.sessions.size > 0 && performance.now() < until) await new Promise((r) => setTimeout(r, 50));
    await this.destroy();
    if (this.server.listening) await new Promise<void>((r) => this.server.close(() => r()));
    const h1 = this.http1;
    if (h1 !== null && h1.listening) await new Promise<void>((r) => h1.close(() => r()));
  }
}

/**
 * A TLS listener's accepted connection: its peer address read now, so a refused handshake after
 * which node destroys the socket (a client certificate the CA does not verify) can still be
 * logged with it (HandshakeErrors.record). One getpeername per TLS connection.
 */
function notePeer(raw: Socket): void {
  void raw.remoteAddress;
}

/**
 * ALPN on a TLS listener: h2 only, or h2 and http/1.1. With grpcWeb, http/1.1 is offered too and
 * its requests arrive at the secure server's 'request' event (gRPC-Web over HTTP/1.1 on the same
 * TLS port, served as on http1Address); without it a client that cannot speak h2 is refused in
 * the handshake.
 */
export function tlsAllowsHttp1(cfg: ListenerConfig): boolean {
  return cfg.tls !== null && (cfg.grpcWeb || cfg.connect);
}

/**
 * A TLS socket's handshake is bounded by requestHeadersTimeout, as the first request is: node's
 * own bound is 120 s, long enough for a slowloris that never finishes its handshake (no session
 * exists yet, so the listener's own timer cannot see it). node ends it with
 * ERR_TLS_HANDSHAKE_TIMEOUT, counted as reason "timeout". Fixed when the server is made (a reload
 * changes it for neither TLS socket); requestHeadersTimeout null keeps node's 120 s.
 */
function handshakeTimeout(cfg: ListenerConfig): { handshakeTimeout?: number } {
  return cfg.requestHeadersTimeoutMs === null ? {} : { handshakeTimeout: cfg.requestHeadersTimeoutMs };
}
