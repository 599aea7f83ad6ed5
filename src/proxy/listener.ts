// The downstream side: one node:http2 h2c server per configured listener (core stream API,
// not the compatibility API), its session limits, GOAWAY on drain, the connection lifetime
// (maxConnectionAge + grace, idleTimeout: one timer per session, none per call), and the
// opt-in grpc.health.v1 service answered from the listener's clusters (healthService).
import http2, { type Http2SecureServer, type Http2Server, type IncomingHttpHeaders, type ServerHttp2Session, type ServerHttp2Stream } from "node:http2";
import type { TLSSocket } from "node:tls";
import { HandshakeErrors, ListenerTls, tlsModeOf, xfccOf, type TlsMode } from "./downstream/tls.js";
import { kClientCert, kPeer, kRequestBytes, type ClientCertSession, type PeerSession, type RequestBytesSession } from "./call/headers.js";
import { clientPeer } from "./downstream/peer.js";
import type { AddressInfo, Socket } from "node:net";
import type { IncomingMessage, Server as HttpServer, ServerResponse } from "node:http";
import type { Server as HttpsServer } from "node:https";
import { http, https } from "./downstream/node-http.js";
import { handleWebHttp1, handleWebHttp2, refuseWebHttp1 } from "./downstream/grpc-web.js";
import { compileCors, preflightCors, responseCors, type CorsPolicy } from "./downstream/cors.js";
import { parseWebContentType } from "../translate/grpc-web.js";
import type { ListenerConfig } from "../config/index.js";
import { ListenError } from "../errors.js";
import { Code, GRPC_CONTENT_TYPE, encodeGrpcMessage, outcome } from "../translate/index.js";
import { HEALTH_CHECK_PATH, HEALTH_WATCH_PATH, ServingStatus, decodeHealthRequest, encodeHealthResponse } from "../translate/health.js";
import { handleStream, type CallContext } from "./call/call.js";
import { heapPressure, responseBuffers } from "./observe/overload.js";
import type { Cluster } from "./upstream/cluster.js";

/**
 * node reports an nghttp2 *stream* error to JS as a session error, and then destroys the whole
 * session (GOAWAY INTERNAL_ERROR, every call on the connection lost; issue 10 item 11): its
 * invalid-frame callback passes NGHTTP2_ERR_PROTO up as if nghttp2 had already ended the
 * connection, but nghttp2 also reports stream errors with that code, e.g. DATA beyond a
 * request's content-length, for which it resets only that stream (PROTOCOL_ERROR) and carries
 * on. Probed on Node 24 with a plain node:http2 server: the same GOAWAY, from
 * onSessionInternalError -> session.destroy(NghttpError -505). The error reaches JS before the
 * stream's own 'stream' handler could refuse it when HEADERS and DATA arrive together, so the
 * fix sits at the session: a destroy() with that one error first asks the session whether it
 * still serves (a PING); if the peer answers, nghttp2 is still running it and only the stream
 * was reset; if not (nghttp2 really ended it: GOAWAY sent), the destroy goes ahead after
 * PROTO_PROBE_MS. One probe at a time per session; nothing on the call path.
 */
const NGHTTP2_ERR_PROTO = -505;
const PROTO_PROBE_MS = 2000;
const kProbing = Symbol("dojang.protoProbe");
type GuardedSession = ServerHttp2Session & { [kProbing]?: boolean };
type Destroy = (this: ServerHttp2Session, err?: Error, code?: number) => ServerHttp2Session;
/** node's own Http2Session destroy (its class is not exported), taken from the first session. */
let sessionDestroy: Destroy | undefined;

function isStreamLevelProtoError(err: unknown): boolean {
  return err instanceof Error && (err as NodeJS.ErrnoException).code === "ERR_HTTP2_ERROR" && (err as NodeJS.ErrnoException).errno === NGHTTP2_ERR_PROTO;
}

/**
 * The session errors node reports for floods nghttp2 stops by itself (probed on Node 24 with raw
 * frames, test/behaviour/attack-floods.test.ts): NGHTTP2_ERR_FLOODED (-904: PING or SETTINGS
 * whose ACKs pile up unread), NGHTTP2_ERR_TOO_MANY_CONTINUATIONS (-905), and node's own count of
 * invalid frames (maxSessionInvalidFrames, default 1000: e.g. empty DATA frames).
 */
const NGHTTP2_ERR_FLOODED = -904;
const NGHTTP2_ERR_TOO_MANY_CONTINUATIONS = -905;
const ENHANCE_YOUR_CALM = http2.constants.NGHTTP2_ENHANCE_YOUR_CALM;
function isAbuse(err: Error): boolean {
  const e = err as NodeJS.ErrnoException;
  if (e.code === "ERR_HTTP2_TOO_MANY_INVALID_FRAMES") return true;
  return e.code === "ERR_HTTP2_ERROR" && (e.errno === NGHTTP2_ERR_FLOODED || e.errno === NGHTTP2_ERR_TOO_MANY_CONTINUATIONS);
}

/** Installed as the session's own destroy(); module-level, no closure per session. */
function guardedDestroy(this: GuardedSession, err?: Error, code?: number): ServerHttp2Session {
  const destroy = sessionDestroy!;
  // A flood nghttp2 stopped ends with GOAWAY ENHANCE_YOUR_CALM, not node's INTERNAL_ERROR: the
  // cause is the client's abuse, and the code tells it (and its logs) so.
  if (err instanceof Error && code === undefined && isAbuse(err)) return destroy.call(this, err, ENHANCE_YOUR_CALM);
  if (err === undefined || !isStreamLevelProtoError(err) || this.destroyed) return destroy.call(this, err, code);
  if (this[kProbing] === true) return this;
  this[kProbing] = true;
  const timer = setTimeout(probeFailed, PROTO_PROBE_MS, this, err);
  timer.unref(); // a probe never holds the process open
  try {
    this.ping((pingErr) => {
      clearTimeout(timer);
      this[kProbing] = false;
      if (pingErr !== null) destroy.call(this, err, code);
    });
  } catch {
    clearTimeout(timer);
    return destroy.call(this, err, code);
  }
  return this;
}

function probeFailed(s: GuardedSession, err: Error): void {
  s[kProbing] = false;
  if (!s.destroyed) sessionDestroy!.call(s, err);
}

/**
 * Streams over the limit (issue 10 item 10). nghttp2 treats a stream over an *acknowledged*
 * SETTINGS_MAX_CONCURRENT_STREAMS as a connection error (GOAWAY PROTOCOL_ERROR, every call on
 * the connection lost; nghttp2 issue 687), and node advertises exactly what nghttp2 enforces.
 * So nghttp2 is given more room than the configured limit (advertisedStreams), and dojang
 * itself refuses each stream above `maxConcurrentStreams` with RST_STREAM(REFUSED_STREAM): the
 * client loses only its extra streams, as with nginx and HAProxy, and a REFUSED_STREAM is safe
 * for any gRPC client to retry (the call was never processed). Only a client that ignores
 * even the advertised number loses its own connection. One counter per session, a module-level
 * close listener: no closure per stream.
 */
export function advertisedStreams(limit: number): number {
  return Math.min(0xffffffff, limit + Math.max(limit, 100));
}
const kOpen = Symbol("dojang.openStreams");
const kCounted = Symbol("dojang.countedSession");
/** monotonic ms when the session's last open stream closed (or it opened); kept only with idleTimeout */
const kIdleSince = Symbol("dojang.idleSince");
const kLife = Symbol("dojang.lifetime");
/** the maxConcurrentStreams a connection was made under (a reload changes it for later ones) */
const kLimit = Symbol("dojang.streamLimit");
/** requestHeadersTimeout's timer, until the connection's first request (or its close) */
const kHeadersTimer = Symbol("dojang.requestHeadersTimer");
/** rapid reset: streams the connection has closed, and how many of them its client reset prematurely */
const kClosed = Symbol("dojang.closedStreams");
const kPremature = Symbol("dojang.prematureResets");
/** when a stream opened (monotonic ms): a reset within PREMATURE_RESET_MS of it is premature */
const kOpenedAt = Symbol("dojang.openedAt");
type CountedSession = ServerHttp2Session & {
  [kOpen]?: number;
  [kIdleSince]?: number;
  [kLife]?: Lifetime;
  [kLimit]?: number;
  [kHeadersTimer]?: NodeJS.Timeout | undefined;
  [kClosed]?: number;
  [kPremature]?: number;
};
type CountedStream = ServerHttp2Stream & { [kCounted]?: CountedSession; [kOpenedAt]?: number };

function ignoreError(): void {}

function onCountedStreamClose(this: CountedStream): void {
  const s = this[kCounted];
  if (s === undefined) return;
  if (--s[kOpen]! === 0 && s[kIdleSince] !== undefined) s[kIdleSince] = performance.now();
  // a stream dojang refused (over maxConcurrentStreams, overload) is not one the client opened
  // and served: it counts on neither side of the premature-reset ratio
  if (this.rstCode === NGHTTP2_REFUSED_STREAM) return;
  const closed = (s[kClosed] ?? 0) + 1;
  s[kClosed] = closed;
  // aborted: the stream closed before dojang finished its response (a reset, either side's)
  if (this.aborted) countPrematureReset(s, this, closed);
}

/**
 * Rapid reset (CVE-2023-44487): a client that opens streams and resets each at once makes the
 * proxy start (and cancel) work for every one at no cost to itself. As Envoy 1.27.1 does, dojang
 * counts *premature* resets per connection: a stream the client reset (any code but the ones
 * dojang itself sends: INTERNAL_ERROR, REFUSED_STREAM, ENHANCE_YOUR_CALM) before dojang finished
 * its response and within PREMATURE_RESET_MS of its start. Once a connection has
 * PREMATURE_RESET_MIN of them and they are at least half of the streams it opened, it gets GOAWAY
 * ENHANCE_YOUR_CALM, every stream it opens after that is refused (REFUSED_STREAM, no call made),
 * and CALM_GOAWAY_FLUSH_MS later it is destroyed. A client that cancels calls now and then never
 * gets near that. Counted on the stream's close (a listener it already has); the open path pays
 * one timestamp.
 *
 * Why destroy and not close(): close() waits for the streams still open, and while the client's
 * flood kept arriving on such a closing session, Node 24 aborted the process in about one of five
 * loaded runs (Http2Session destructor, `current_nghttp2_memory_ == 0`, run from a GC). The same
 * attack ended with destroy() (GOAWAY first, destroy after the flush delay) did not abort in 12
 * runs of the process test (README, Protections).
 */
export const PREMATURE_RESET_MIN = 100;
export const PREMATURE_RESET_MS = 1000;
/**
 * How long the ENHANCE_YOUR_CALM GOAWAY is given before the connection is destroyed. Destroying a
 * socket whose client is still writing sends a TCP RST, and a client that has not read the
 * GOAWAY by then loses it; nghttp2 ignores every stream above the GOAWAY's last stream id, so
 * the wait costs the attacker's bytes and no JS work.
 */
const CALM_GOAWAY_FLUSH_MS = 1000;
/** How often the gRPC-Web HTTP/1.1 server checks its connections' requestHeadersTimeout. */
const HTTP1_CHECK_MS = 1000;
const { NGHTTP2_INTERNAL_ERROR, NGHTTP2_REFUSED_STREAM } = http2.constants;

function countPrematureReset(s: CountedSession, stream: CountedStream, closed: number): void {
  const code = stream.rstCode;
  if (code === undefined || code === NGHTTP2_INTERNAL_ERROR || code === NGHTTP2_REFUSED_STREAM || code === ENHANCE_YOUR_CALM) return;
  const t0 = stream[kOpenedAt];
  if (t0 !== undefined && performance.now() - t0 > PREMATURE_RESET_MS) return;
  const n = (s[kPremature] ?? 0) + 1;
  s[kPremature] = n;
  // closed + still open = the streams the connection opened (kOpen is already one less)
  if (n >= PREMATURE_RESET_MIN && 2 * n >= closed + s[kOpen]! && s[kLimit] !== 0 && !s.destroyed) cutForResets(s, stream.id ?? 0);
}

function cutForResets(s: CountedSession, lastStreamId: number): void {
  cutCalm(s, lastStreamId, `rapid reset: ${PREMATURE_RESET_MIN} or more streams reset by the client within ${PREMATURE_RESET_MS} ms of their start`);
}

/** GOAWAY ENHANCE_YOUR_CALM, no new stream taken, destroyed CALM_GOAWAY_FLUSH_MS later. */
function cutCalm(s: CountedSession, lastStreamId: number, why: string): void {
  // from now on every new stream is over the connection's limit: refused at once, no call made
  s[kLimit] = 0;
  try {
    s.goaway(ENHANCE_YOUR_CALM, lastStreamId);
  } catch {
    /* already closing */
  }
  setTimeout(destroyCalm, CALM_GOAWAY_FLUSH_MS, s, why).unref();
}

function destroyCalm(s: ServerHttp2Session, why: string): void {
  if (!s.destroyed) s.destroy(new Error(why), ENHANCE_YOUR_CALM);
}

/**
 * Floods nghttp2 does not stop and node gives JS no event for (WINDOW_UPDATE, PRIORITY, frames
 * on closed streams): once a second each client connection's socket is measured, and the bytes
 * it read that were neither request bodies (counted by the calls, kRequestBytes) nor new streams
 * (UNPRODUCTIVE_PER_STREAM each, for their headers) are *unproductive*. A connection may send
 * UNPRODUCTIVE_BASE of them per second plus a share of what dojang sent it (a fast download
 * brings WINDOW_UPDATEs and PINGs in proportion; Envoy allows 10 WINDOW_UPDATEs per DATA frame
 * sent, far less than this share); past that it is cut as for rapid reset (GOAWAY
 * ENHANCE_YOUR_CALM, destroyed 1 s later). One timer per listener, four numbers per connection.
 */
export const UNPRODUCTIVE_BASE = 1_048_576;
export const UNPRODUCTIVE_PER_STREAM = 16_384;
/** a quarter of the bytes dojang sent the connection in the same second */
const UNPRODUCTIVE_WRITTEN_SHARE = 4;
const UNPRODUCTIVE_SWEEP_MS = 1000;
const kMeter = Symbol("dojang.meter");
interface Meter {
  read: number;
  written: number;
  requested: number;
  opened: number;
}
type MeteredSession = CountedSession & RequestBytesSession & { [kMeter]?: Meter };

/** Pure: whether one second of a connection's traffic is over its unproductive-bytes allowance. */
export function overUnproductive(readBytes: number, requestBytes: number, streamsOpened: number, writtenBytes: number): boolean {
  const unproductive = readBytes - requestBytes - UNPRODUCTIVE_PER_STREAM * streamsOpened;
  return unproductive > UNPRODUCTIVE_BASE + writtenBytes / UNPRODUCTIVE_WRITTEN_SHARE;
}

function meterSession(s: MeteredSession): void {
  const sock = s.socket as { bytesRead?: number; bytesWritten?: number } | undefined;
  if (sock === undefined || s.destroyed || s[kLimit] === 0) return;
  const read = sock.bytesRead ?? 0;
  const written = sock.bytesWritten ?? 0;
  const requested = s[kRequestBytes] ?? 0;
  const opened = (s[kClosed] ?? 0) + (s[kOpen] ?? 0);
  const m = s[kMeter];
  if (m === undefined) {
    s[kMeter] = { read, written, requested, opened };
    return;
  }
  const over = overUnproductive(read - m.read, requested - m.requested, opened - m.opened, written - m.written);
  m.read = read;
  m.written = written;
  m.requested = requested;
  m.opened = opened;
  if (over) cutCalm(s, Math.max(0, opened * 2 - 1), "unproductive bytes: the connection sent more than its allowance of frames that are neither requests nor their bodies (a WINDOW_UPDATE, PRIORITY or similar flood)");
}

function sweepUnproductive(l: { readonly sessions: ReadonlySet<ServerHttp2Session> }): void {
  for (const s of l.sessions) meterSession(s as MeteredSession);
}

/** A session's timers (maxConnectionAge, its grace, idleTimeout); all cleared when it closes. */
interface Lifetime {
  age: NodeJS.Timeout | undefined;
  grace: NodeJS.Timeout | undefined;
  idle: NodeJS.Timeout | undefined;
}

/** grpc-go's MaxConnectionAge jitter: ±10 %, so connections made together do not all end together. */
export function jitteredAge(ageMs: number, random: number): number {
  return Math.max(1, Math.round(ageMs * (0.9 + 0.2 * random)));
}

/** The stream id grpc-go puts in the first, announcing GOAWAY (2^31−1: every stream still welcome). */
const MAX_STREAM_ID = 2 ** 31 - 1;
/** How long the announcing GOAWAY is given when the client never answers its PING. */
const GOAWAY_PING_WAIT_MS = 1000;

/**
 * The graceful end of a connection, as grpc-go's server does it (http2_server.go drain): a
 * GOAWAY with the largest stream id first (the client stops opening streams, while streams it
 * sent in the meantime are still taken), a PING, and once the PING is answered (every stream the
 * client sent before the GOAWAY has arrived) the real GOAWAY with the last stream processed.
 * The session ends by itself when its last stream closes.
 */
function goawayGracefully(s: ServerHttp2Session): void {
  if (s.closed || s.destroyed) return;
  let done = false;
  const finish = (): void => {
    if (done) return;
    done = true;
    clearTimeout(t);
    if (!s.closed && !s.destroyed) s.close();
  };
  const t = setTimeout(finish, GOAWAY_PING_WAIT_MS);
  try {
    s.goaway(http2.constants.NGHTTP2_NO_ERROR, MAX_STREAM_ID);
    if (!s.ping(finish)) finish();
  } catch {
    finish();
  }
}

/** A session's state for the health service's replies (the clusters behind a service name). */
export type HealthTargets = (service: string) => readonly Cluster[] | null;

/** What the listener asks its owner: the current snapshot's health targets, whether dojang drains. */
export interface ListenerOwner {
  readonly health: { current: HealthTargets };
  readonly draining: () => boolean;
}

/** Request bytes a health call may send (a HealthCheckRequest is a service name). */
const MAX_HEALTH_REQUEST = 16 * 1024;
/** How often open Watch streams are re-evaluated (one timer per listener while any is open). */
const WATCH_INTERVAL_MS = 1000;

interface Watcher {
  readonly stream: ServerHttp2Stream;
  readonly service: string;
  last: number;
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
  private readonly watchers = new Set<Watcher>();
  private watchTimer: NodeJS.Timeout | undefined = undefined;
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
  /** HTTP/1.1 connections on a TLS listener (gRPC-Web; tlsAllowsHttp1) */
  private readonly tlsHttp1Sockets = new Set<Socket>();

  constructor(
    public cfg: ListenerConfig,
    callContext: CallContext,
    private readonly owner: ListenerOwner = { health: { current: () => null }, draining: () => false },
  ) {
    // The listener's own settings the calls read (the same `active` set and counters).
    const ctx: CallContext = { ...callContext, streamIdleTimeoutMs: cfg.streamIdleTimeoutMs, attemptsHeader: cfg.attemptsHeader };
    this.ctx = ctx;
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
      secure = http2.createSecureServer({ ...serverOptions, ...t.serverOptions(tlsAllowsHttp1(cfg)) });
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
    if (cfg.grpcWeb && cfg.http1Address !== null) {
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
        const h1s = https().createServer({ ...opts, ...this.tls.http1Options() }, onRequest);
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
    server.on("session", (s: CountedSession) => {
      sessionDestroy ??= (Object.getPrototypeOf(s) as { destroy: Destroy }).destroy;
      s.destroy = guardedDestroy;
      // who the client is (the access record's client_address, tls_*): once per connection
      (s as PeerSession)[kPeer] = clientPeer(s.socket);
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
      // A reload changes these for connections made after it (this.cfg is the current config).
      const lc = this.cfg;
      s[kLimit] = lc.maxConcurrentStreams;
      const connWindow = lc.connectionWindowSize;
      const life = this.startLifetime(s, lc);
      // slowloris: a connection must send its first request within requestHeadersTimeout
      if (lc.requestHeadersTimeoutMs !== null) s[kHeadersTimer] = setTimeout(onRequestHeadersTimeout, clampTimer(lc.requestHeadersTimeoutMs), this, s);
      s.on("close", () => {
        if (s[kHeadersTimer] !== undefined) clearTimeout(s[kHeadersTimer]);
        if (this.sessions.delete(s)) live.downstreamSessions--;
        if (life !== undefined) {
          clearTimeout(life.age);
          clearTimeout(life.grace);
          clearTimeout(life.idle);
        }
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
    server.on("stream", (stream: CountedStream, headers, flags, rawHeaders) => {
      const sess = stream.session as CountedSession | undefined;
      if (sess !== undefined) {
        const open = (sess[kOpen] ?? 0) + 1;
        sess[kOpen] = open;
        // the first request arrived: requestHeadersTimeout is met (the timer is cleared once)
        if (sess[kHeadersTimer] !== undefined) {
          clearTimeout(sess[kHeadersTimer]);
          sess[kHeadersTimer] = undefined;
        }
        stream[kCounted] = sess;
        stream[kOpenedAt] = performance.now();
        stream.on("close", onCountedStreamClose);
        // Past the process's response-buffer budget (observe/overload.ts) no new stream is
        // taken until the stalled buffers are cut back: REFUSED_STREAM is safe to retry.
        const overloaded = responseBuffers.overloaded || heapPressure.pressed;
        if (overloaded || open > (sess[kLimit] ?? this.cfg.maxConcurrentStreams)) {
          if (overloaded) responseBuffers.refused++;
          ctx.metrics.refusedStreams.inc();
          // node reports the reset it sends as the stream's 'error': without a listener it would
          // be thrown, and end the process
          stream.on("error", ignoreError);
          stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
          return;
        }
      }
      // gRPC-Web on the h2c port: one flag test on the native path.
      if (this.cfg.grpcWeb && this.serveWebStream(stream, headers, rawHeaders as unknown as string[])) return;
      if (this.cfg.healthService) {
        const p = headers[":path"];
        if (p === HEALTH_CHECK_PATH || p === HEALTH_WATCH_PATH) return this.serveHealth(stream, headers, p === HEALTH_WATCH_PATH);
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
    this.server.updateSettings({
      maxConcurrentStreams: advertisedStreams(cfg.maxConcurrentStreams),
      initialWindowSize: cfg.initialWindowSize,
      maxHeaderListSize: cfg.maxHeaderListSize,
      enablePush: false,
    });
  }

  // === gRPC-Web (grpcWeb: true): HTTP/2 here, HTTP/1.1 on http1Address ===

  /** A stream on the h2c port that is gRPC-Web or its CORS preflight; false: a native call. */
  private serveWebStream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, raw: readonly string[]): boolean {
    const method = headers[":method"];
    const origin = typeof headers["origin"] === "string" ? headers["origin"] : undefined;
    if (method === "OPTIONS") {
      stream.on("error", ignoreError);
      const acrm = headers["access-control-request-method"];
      const acrh = headers["access-control-request-headers"];
      const h = preflightCors(this.cors, origin, typeof acrm === "string" ? acrm : undefined, typeof acrh === "string" ? acrh : undefined);
      stream.respond({ ":status": h === null ? 403 : 204, ...h }, { endStream: true });
      return true;
    }
    const ct = headers["content-type"];
    const web = parseWebContentType(typeof ct === "string" ? ct : undefined);
    if (web === null) return false;
    handleWebHttp2(this.ctx, web, stream, headers, raw, responseCors(this.cors, origin));
    return true;
  }

  /** A request on the HTTP/1.1 socket: gRPC-Web, or its CORS preflight; anything else is refused. */
  private serveHttp1(req: IncomingMessage, res: ServerResponse): void {
    const origin = req.headers.origin;
    if (req.method === "OPTIONS") {
      const acrm = req.headers["access-control-request-method"];
      const acrh = req.headers["access-control-request-headers"];
      const h = preflightCors(this.cors, origin, acrm, typeof acrh === "string" ? acrh : undefined);
      res.writeHead(h === null ? 403 : 204, h ?? {});
      res.end();
      return;
    }
    const web = parseWebContentType(req.headers["content-type"]);
    if (web === null || req.method !== "POST") {
      // Not gRPC-Web: this socket serves nothing else (a plain HTTP answer, no call made).
      res.writeHead(web === null ? 415 : 405, { "content-type": "text/plain; charset=utf-8" });
      res.end(web === null ? "dojang: this port takes gRPC-Web requests (content-type application/grpc-web...)\n" : "dojang: gRPC-Web requests are POST\n");
      return;
    }
    // Past the process's response-buffer budget no call is taken (the native port's
    // REFUSED_STREAM): 14 UNAVAILABLE, safe for the client to retry, and never sent upstream.
    if (responseBuffers.overloaded || heapPressure.pressed) {
      responseBuffers.refused++;
      this.ctx.metrics.refusedStreams.inc();
      refuseWebHttp1(web, res, responseCors(this.cors, origin), Code.UNAVAILABLE, "dojang is overloaded (response-buffer budget or heap): call not started, retry later");
      return;
    }
    handleWebHttp1(this.ctx, web, req, res, responseCors(this.cors, origin));
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

  // === connection lifetime: maxConnectionAge (+ grace), idleTimeout ===

  private startLifetime(s: CountedSession, cfg: ListenerConfig): Lifetime | undefined {
    const age = cfg.maxConnectionAgeMs;
    const idle = cfg.idleTimeoutMs;
    if (age === null && idle === null) return undefined;
    const life: Lifetime = { age: undefined, grace: undefined, idle: undefined };
    s[kLife] = life;
    if (age !== null) life.age = setTimeout(onMaxAge, clampTimer(jitteredAge(age, Math.random())), this, s, cfg.maxConnectionAgeGraceMs);
    if (idle !== null) {
      s[kIdleSince] = performance.now();
      life.idle = setTimeout(onIdleCheck, clampTimer(idle), this, s, idle);
    }
    return life;
  }

  /** maxConnectionAge reached: GOAWAY, and after the grace what still runs on it is cut. */
  ageOut(s: CountedSession, graceMs: number): void {
    const life = s[kLife];
    if (life === undefined || s.closed || s.destroyed) return;
    life.age = undefined;
    this.ctx.log.debug({ listener: this.cfg.name }, "client connection reached maxConnectionAge: GOAWAY");
    goawayGracefully(s);
    life.grace = setTimeout(onAgeGraceOver, clampTimer(graceMs), this, s);
  }

  /**
   * The grace after maxConnectionAge is over: each call still on the connection ends with 14
   * UNAVAILABLE, decided_by shutdown (dojang ended the connection in an orderly way, as at a
   * drain's end: safe for the client to retry elsewhere), then the connection is destroyed
   * once those last frames are out.
   */
  cutAgedSession(s: CountedSession): void {
    const life = s[kLife];
    if (life !== undefined) life.grace = undefined;
    if (s.destroyed) return;
    for (const c of [...this.ctx.active]) {
      if (c.down.session === s) c.finish(outcome(Code.UNAVAILABLE, "the client connection reached maxConnectionAge and its grace is over", "shutdown"));
    }
    setTimeout(destroySession, 50, s).unref();
  }

  /** idleTimeout: fires once per period; closes the connection only if no stream was open for a whole period. */
  checkIdle(s: CountedSession, idleMs: number): void {
    const life = s[kLife];
    if (life === undefined || s.closed || s.destroyed) return;
    const open = s[kOpen] ?? 0;
    const since = s[kIdleSince] ?? 0;
    const quiet = performance.now() - since;
    if (open === 0 && quiet >= idleMs - 1) {
      life.idle = undefined;
      this.ctx.log.debug({ listener: this.cfg.name, idleMs }, "client connection idle: GOAWAY");
      goawayGracefully(s);
      return;
    }
    life.idle = setTimeout(onIdleCheck, clampTimer(open === 0 ? idleMs - quiet : idleMs), this, s, idleMs);
  }

  // === grpc.health.v1 (healthService: true) ===

  /**
   * The status of `service` on this listener: NOT_SERVING while dojang or this listener drains;
   * else SERVING when every cluster behind it has a healthy endpoint; null for a service no
   * route would take (NOT_FOUND for Check).
   */
  healthStatus(service: string): ServingStatus | null {
    const targets = this.owner.health.current(service);
    if (targets === null) return null;
    if (this.draining || this.owner.draining()) return ServingStatus.NOT_SERVING;
    for (const c of targets) if (!c.hasHealthyEndpoint()) return ServingStatus.NOT_SERVING;
    return ServingStatus.SERVING;
  }

  private serveHealth(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, watch: boolean): void {
    stream.on("error", ignoreError);
    if (headers[":method"] !== "POST") {
      stream.respond({ ":status": 405, "content-type": GRPC_CONTENT_TYPE, "grpc-status": String(Code.INTERNAL), "grpc-message": "health: method must be POST" }, { endStream: true });
      return;
    }
    const chunks: Buffer[] = [];
    let n = 0;
    stream.on("data", (d: Buffer) => {
      n += d.length;
      if (n <= MAX_HEALTH_REQUEST) chunks.push(d);
    });
    stream.on("end", () => {
      if (stream.closed || stream.destroyed) return;
      const body = Buffer.concat(chunks);
      const len = body.length >= 5 ? body.readUInt32BE(1) : -1;
      if (n > MAX_HEALTH_REQUEST) return trailersOnly(stream, Code.RESOURCE_EXHAUSTED, "health: request too large");
      if (len < 0 || body[0] !== 0 || body.length !== 5 + len) return trailersOnly(stream, Code.INTERNAL, "health: expected one uncompressed HealthCheckRequest");
      const req = decodeHealthRequest(body.subarray(5));
      if (!req.ok) return trailersOnly(stream, Code.INTERNAL, `health: ${req.error}`);
      const status = this.healthStatus(req.service);
      if (!watch) {
        // grpc-go's health server: an unregistered service is NOT_FOUND "unknown service".
        if (status === null) return trailersOnly(stream, Code.NOT_FOUND, "unknown service");
        stream.respond({ ":status": 200, "content-type": GRPC_CONTENT_TYPE }, { waitForTrailers: true });
        stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0", "grpc-message": "" }));
        stream.end(healthMessage(status));
        return;
      }
      // Watch: the current status now (SERVICE_UNKNOWN for a service no route takes, as
      // grpc-go), then every change, until the client ends the stream or dojang drains.
      const first = status ?? ServingStatus.SERVICE_UNKNOWN;
      stream.respond({ ":status": 200, "content-type": GRPC_CONTENT_TYPE }, { waitForTrailers: true });
      stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0", "grpc-message": "" }));
      stream.write(healthMessage(first));
      const w: Watcher = { stream, service: req.service, last: first };
      this.watchers.add(w);
      stream.once("close", () => this.watchers.delete(w));
      if (this.watchTimer === undefined) this.watchTimer = setInterval(() => this.tickWatchers(), WATCH_INTERVAL_MS).unref();
    });
  }

  private tickWatchers(): void {
    if (this.watchers.size === 0) {
      clearInterval(this.watchTimer);
      this.watchTimer = undefined;
      return;
    }
    for (const w of this.watchers) {
      if (w.stream.closed || w.stream.destroyed) {
        this.watchers.delete(w);
        continue;
      }
      const s = this.healthStatus(w.service) ?? ServingStatus.SERVICE_UNKNOWN;
      if (s === w.last) continue;
      w.last = s;
      w.stream.write(healthMessage(s));
    }
  }

  async listen(): Promise<AddressInfo> {
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
    for (const w of this.watchers) {
      if (w.stream.closed || w.stream.destroyed) continue;
      if (w.last !== ServingStatus.NOT_SERVING) w.stream.write(healthMessage(ServingStatus.NOT_SERVING));
      w.stream.end();
    }
    this.watchers.clear();
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
    if (this.watchTimer !== undefined) clearInterval(this.watchTimer);
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

function onMaxAge(l: Listener, s: CountedSession, graceMs: number): void {
  l.ageOut(s, graceMs);
}

function onAgeGraceOver(l: Listener, s: CountedSession): void {
  l.cutAgedSession(s);
}

/** requestHeadersTimeout passed without a request: the connection is closed (nothing of it is served). */
function onRequestHeadersTimeout(l: Listener, s: CountedSession): void {
  s[kHeadersTimer] = undefined;
  if (s.closed || s.destroyed) return;
  l.ctx.log.debug({ listener: l.cfg.name }, "client connection sent no request within requestHeadersTimeout: closed");
  s.destroy();
}

function onIdleCheck(l: Listener, s: CountedSession, idleMs: number): void {
  l.checkIdle(s, idleMs);
}

function destroySession(s: ServerHttp2Session): void {
  if (!s.destroyed) s.destroy();
}

/**
 * ALPN on a TLS listener: h2 only, or h2 and http/1.1. With grpcWeb, http/1.1 is offered too and
 * its requests arrive at the secure server's 'request' event (gRPC-Web over HTTP/1.1 on the same
 * TLS port, served as on http1Address); without it a client that cannot speak h2 is refused in
 * the handshake.
 */
export function tlsAllowsHttp1(cfg: ListenerConfig): boolean {
  return cfg.tls !== null && cfg.grpcWeb;
}

/** setTimeout's limit (2^31−1 ms). */
function clampTimer(ms: number): number {
  return ms > 2_147_483_647 ? 2_147_483_647 : ms;
}

function healthMessage(status: ServingStatus): Buffer {
  const m = encodeHealthResponse(status);
  const b = Buffer.allocUnsafe(5 + m.length);
  b[0] = 0;
  b.writeUInt32BE(m.length, 1);
  b.set(m, 5);
  return b;
}

function trailersOnly(stream: ServerHttp2Stream, code: number, message: string): void {
  if (stream.headersSent || stream.closed) return;
  stream.respond({ ":status": 200, "content-type": GRPC_CONTENT_TYPE, "grpc-status": String(code), "grpc-message": encodeGrpcMessage(message) }, { endStream: true });
}
