// The downstream side: one node:http2 server per configured listener (h2c or TLS; core stream
// API, not the compatibility API), its HTTP/1.1 socket, the order in which a new stream is taken
// (count and refuse, overload, the bridged protocols, health, call), drain and retire.
// Per-connection state is one ConnState (downstream/connection.ts); the abuse guards are
// downstream/guards.ts, the connection timers downstream/lifetime.ts, the grpc.health.v1
// service downstream/health-service.ts; the protocols besides native gRPC (gRPC-Web, Connect,
// JSON transcoding) are one table, downstream/dispatch.ts, which this file iterates.
import http2, { type Http2SecureServer, type Http2Server, type ServerHttp2Session } from "node:http2";
import type { TLSSocket } from "node:tls";
import { HandshakeErrors, ListenerTls, tlsModeOf, xfccOf, type TlsMode } from "./downstream/tls.js";
import type { CertificateSource } from "./observe/metrics.js";
import { kClientCert, kPeer, type ClientCertSession, type PeerSession } from "./call/headers.js";
import { clientPeer } from "./downstream/peer.js";
import type { AddressInfo, Server as NetServer, Socket } from "node:net";
import type { ListenOn } from "./upgrade-sockets.js";
import type { IncomingMessage, Server as HttpServer, ServerResponse } from "node:http";
import type { Server as HttpsServer } from "node:https";
import { http, https } from "./downstream/node-http.js";
import { ListenerWays, dispatchH1, dispatchH2, servesHttp1, tlsAllowsHttp1 } from "./downstream/dispatch.js";
import { compileCors, type CorsPolicy } from "./downstream/cors.js";
import { ConnState, kConn, type ConnSession, type ConnStream } from "./downstream/connection.js";
import { UNPRODUCTIVE_SWEEP_MS, advertisedStreams, countStream, guardDestroy, ignoreError, onClientSettings, sweepUnproductive } from "./downstream/guards.js";
import { startLifetime } from "./downstream/lifetime.js";
import { countTurn, track, untrack } from "./downstream/turns.js";
import { HealthService, type HealthTargets } from "./downstream/health-service.js";
import type { ListenerConfig } from "../config/index.js";
import { ListenError } from "../errors.js";
import { Code, outcome } from "../translate/index.js";
import { HEALTH_CHECK_PATH, HEALTH_WATCH_PATH } from "../translate/health.js";
import { handleStream } from "./call/call.js";
import type { CallContext } from "./call/context.js";
import { heapPressure, responseBuffers } from "./observe/overload.js";

export { advertisedStreams } from "./downstream/guards.js";
export type { HealthTargets } from "./downstream/health-service.js";

/** How often the HTTP/1.1 server checks its connections' requestHeadersTimeout. */
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
  /** its certificates as dojang_tls_certificate_expiry_timestamp_seconds reads them (TLS listeners) */
  private certificates: CertificateSource | null = null;
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
  /** the CORS policy the bridges answer with (bridge.ts ListenerSide) */
  cors: CorsPolicy | null = null;
  /** the protocols besides native gRPC that are on, in the table's order (none: one length test per stream) */
  private readonly ways: ListenerWays;
  /** HTTP/1.1 connections on a TLS listener (tlsAllowsHttp1) */
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
      // node refuses a new stream while it cannot take one (its table full at
      // maxConcurrentStreams, or no session memory left: maxSessionMemory), and streams reset in
      // one read stay in that table until the turn ends; past 100 refusals in a row (node's
      // default) it ends the session itself as a callback failure, at once, before dojang's
      // rapid-reset cut (guards.ts: GOAWAY ENHANCE_YOUR_CALM, destroyed 1 s later). Under a
      // memory budget, with reads bounded per turn (turns.ts: a held connection's flood comes in
      // whole reads), that ended 1 to 3 of the battery's 10 rapid-reset clients in about half its
      // runs (dojang's debug log: "The user callback function failed"), and those clients, still
      // writing, lost the GOAWAY; with 1,000, none in 8 runs. A client that passes it anyway is
      // ended as abuse (guards.ts isAbuse: ENHANCE_YOUR_CALM).
      maxSessionRejectedStreams: 1000,
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
      this.certificates = { listener: cfg.name, expiries: () => t.expiries() };
      ctx.metrics.certificateSources.add(this.certificates);
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
    this.ways = new ListenerWays((name, err) => ctx.log.error({ listener: this.cfg.name, err: err.message }, `${name} not reloaded`));
    this.ways.use(cfg, true);
    // The bridged protocols over HTTP/1.1 (dispatch.ts): node's h2c server speaks only HTTP/2, so
    // plain-text HTTP/1.1 has a socket of its own; keep-alive as browsers expect, no request
    // timeout of node's own (the call's deadline and streamIdleTimeout bound a call).
    // The HTTP/2 listener's limits hold here too: requestHeadersTimeout (slowloris: node's
    // headersTimeout, checked every HTTP1_CHECK_MS instead of node's 30 s), maxHeaderListSize
    // and maxConnections.
    // On a TLS listener that socket is HTTPS/1.1 (node:https) with the listener's own TLS: the
    // same certificates (SNI, reloads), the same client-certificate rule, and the verified
    // identity goes upstream as x-forwarded-client-cert as on the TLS port (grpc-web.ts reads it
    // from the socket). A plain-text socket beside an mTLS port would let any client past
    // requireClientCert (issue 18 item 1).
    if (servesHttp1(cfg) && cfg.http1Address !== null) {
      const opts = {
        requestTimeout: 0,
        keepAliveTimeout: 60_000,
        headersTimeout: cfg.requestHeadersTimeoutMs ?? 0,
        connectionsCheckingInterval: HTTP1_CHECK_MS,
        maxHeaderSize: cfg.maxHeaderListSize,
      };
      const onRequest = (req: IncomingMessage, res: ServerResponse): void => dispatchH1(this, this.ways, req, res);
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
    // On a TLS listener with a protocol that has an HTTP/1.1 form, ALPN also offers http/1.1 (tlsAllowsHttp1) and node hands
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
        dispatchH1(this, this.ways, req, res);
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
      track(conn);
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
        untrack(conn);
        responseBuffers.forgetSession(s);
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
      // A session made after drain() (a TLS connection accepted before the listener stopped
      // accepting, whose handshake finished later) missed the drain's GOAWAY: it gets its own now,
      // so its client takes new calls elsewhere (after `dojang upgrade`, to the new process)
      // instead of starting them here to be cut off when the drain ends.
      if (this.draining) s.close();
    });
    // The order is load-bearing: a stream is counted first (so its close is, whatever happens
    // next; and in its connection's loop turn, downstream/turns.ts, which may stop reading the
    // connection for the rest of the turn), refused over the connection's limit or the process's
    // budget, then the bridged
    // protocols (dispatch.ts, in its table's order), the health service, and only then a call.
    server.on("stream", (stream: ConnStream, headers, flags, rawHeaders) => {
      const conn = (stream.session as ConnSession | undefined)?.[kConn];
      if (conn !== undefined) {
        const overLimit = countStream(conn, stream);
        countTurn(conn, stream);
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
      // gRPC-Web, Connect, JSON transcoding: one length test on the native path when all are off.
      if (this.ways.ways.length !== 0 && dispatchH2(this, this.ways, stream, headers, rawHeaders as unknown as string[])) return;
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
  reconfigure(cfg: ListenerConfig, accessLog: boolean, accessLogRedact: CallContext["accessLogRedact"]): void {
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
    ctx.accessLogRedact = accessLogRedact;
    this.cors = cfg.cors === null ? null : compileCors(cfg.cors.allowOrigins);
    this.ways.use(cfg, false);
    this.server.updateSettings({
      maxConcurrentStreams: advertisedStreams(cfg.maxConcurrentStreams),
      initialWindowSize: cfg.initialWindowSize,
      maxHeaderListSize: cfg.maxHeaderListSize,
      enablePush: false,
    });
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

  /**
   * Binds the listener's address (and its http1Address), or, on `dojang upgrade`, listens on the
   * sockets the previous process handed over (`on`: src/proxy/upgrade-sockets.ts): the same
   * socket and accept queue, so no connection waiting in it is refused.
   */
  async listen(on: { readonly main?: ListenOn | undefined; readonly http1?: ListenOn | undefined } = {}): Promise<AddressInfo> {
    if (this.ways.loading !== null) await this.ways.loading;
    const { host, port } = this.cfg.address;
    const bound = await new Promise<AddressInfo>((resolve, reject) => {
      const onError = (err: Error): void => reject(new ListenError(`${host}:${port} (listener ${this.cfg.name})`, { cause: err }));
      this.server.once("error", onError);
      listenOn(this.server, on.main, port, host, () => {
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
          listenOn(h1, on.http1, a.port, a.host, () => {
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
   * Connections to the listener's own port that are still open: HTTP/2 sessions (told GOAWAY by
   * drain(): their clients close them once their calls are done) and TLS connections whose
   * handshake has not made a session yet. HTTP/1.1 ones (gRPC-Web) are left out: a keep-alive
   * connection would stay until its idle timeout.
   */
  openConnections(): Promise<number> {
    return new Promise((resolve) => this.server.getConnections((err, n) => resolve(err === null ? Math.max(0, n - this.tlsHttp1Sockets.size) : 0)));
  }

  /**
   * Ends what is left after the drain timeout: each call still in flight gets a stamp
   * (14 UNAVAILABLE, decided_by shutdown: safe for the client to retry elsewhere), then the
   * sessions are closed once those last frames are flushed.
   */
  async destroy(): Promise<void> {
    this.tls?.close();
    if (this.certificates !== null) this.ctx.metrics.certificateSources.delete(this.certificates);
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

/** server.listen() on a handed-over socket (a handle, or a descriptor a cluster primary holds), else on host:port. */
function listenOn(server: NetServer, on: ListenOn | undefined, port: number, host: string, cb: () => void): void {
  if (on === undefined) server.listen(port, host, cb);
  else server.listen(on, cb);
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
 * A TLS socket's handshake is bounded by requestHeadersTimeout, as the first request is: node's
 * own bound is 120 s, long enough for a slowloris that never finishes its handshake (no session
 * exists yet, so the listener's own timer cannot see it). node ends it with
 * ERR_TLS_HANDSHAKE_TIMEOUT, counted as reason "timeout". Fixed when the server is made (a reload
 * changes it for neither TLS socket); requestHeadersTimeout null keeps node's 120 s.
 */
function handshakeTimeout(cfg: ListenerConfig): { handshakeTimeout?: number } {
  return cfg.requestHeadersTimeoutMs === null ? {} : { handshakeTimeout: cfg.requestHeadersTimeoutMs };
}
