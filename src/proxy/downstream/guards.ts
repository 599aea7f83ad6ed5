// The client connection's abuse guards, outside the call path: the PROTO probe and the flood codes
// (a replaced session.destroy), the stream limit dojang enforces below nghttp2's, rapid reset
// (premature resets counted on each stream's close) and the unproductive-bytes meter (one sweep
// per listener per second). Their state is the connection's ConnState (connection.ts); the
// listener (src/proxy/listener.ts) installs them on each session and stream.
import http2, { type ServerHttp2Session } from "node:http2";
import { kRequestBytes, type RequestBytesSession } from "../call/headers.js";
import { responseBuffers } from "../observe/overload.js";
import { connOf, kConn, kOpenedAt, type ConnSession, type ConnState, type ConnStream } from "./connection.js";

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
type Destroy = (this: ServerHttp2Session, err?: Error, code?: number) => ServerHttp2Session;
/** node's own Http2Session destroy (its class is not exported), taken from the first session. */
let sessionDestroy: Destroy | undefined;

/** Replaces the session's destroy() with guardedDestroy (module-level: no closure per session). */
export function guardDestroy(s: ServerHttp2Session): void {
  sessionDestroy ??= (Object.getPrototypeOf(s) as { destroy: Destroy }).destroy;
  s.destroy = guardedDestroy;
}

function isStreamLevelProtoError(err: unknown): boolean {
  return err instanceof Error && (err as NodeJS.ErrnoException).code === "ERR_HTTP2_ERROR" && (err as NodeJS.ErrnoException).errno === NGHTTP2_ERR_PROTO;
}

/**
 * The session errors node reports for floods nghttp2 stops by itself (probed on Node 24 with raw
 * frames, test/behaviour/attack-floods.test.ts): NGHTTP2_ERR_FLOODED (-904: PING or SETTINGS
 * whose ACKs pile up unread), NGHTTP2_ERR_TOO_MANY_CONTINUATIONS (-905), and node's own count of
 * invalid frames (maxSessionInvalidFrames, default 1000: e.g. empty DATA frames); and
 * NGHTTP2_ERR_CALLBACK_FAILURE (-902), which is how node ends a session whose client opened more
 * streams in a row than node could take (maxSessionRejectedStreams, listener.ts;
 * node_http2.cc OnBeginHeadersCallback).
 */
const NGHTTP2_ERR_CALLBACK_FAILURE = -902;
const NGHTTP2_ERR_FLOODED = -904;
const NGHTTP2_ERR_TOO_MANY_CONTINUATIONS = -905;
const ENHANCE_YOUR_CALM = http2.constants.NGHTTP2_ENHANCE_YOUR_CALM;
function isAbuse(err: Error): boolean {
  const e = err as NodeJS.ErrnoException;
  if (e.code === "ERR_HTTP2_TOO_MANY_INVALID_FRAMES") return true;
  return e.code === "ERR_HTTP2_ERROR" && (e.errno === NGHTTP2_ERR_FLOODED || e.errno === NGHTTP2_ERR_TOO_MANY_CONTINUATIONS || e.errno === NGHTTP2_ERR_CALLBACK_FAILURE);
}

/** Installed as the session's own destroy(); module-level, no closure per session. */
function guardedDestroy(this: ServerHttp2Session, err?: Error, code?: number): ServerHttp2Session {
  const destroy = sessionDestroy!;
  // A flood nghttp2 stopped ends with GOAWAY ENHANCE_YOUR_CALM, not node's INTERNAL_ERROR: the
  // cause is the client's abuse, and the code tells it (and its logs) so.
  if (err instanceof Error && code === undefined && isAbuse(err)) return destroy.call(this, err, ENHANCE_YOUR_CALM);
  if (err === undefined || !isStreamLevelProtoError(err) || this.destroyed) return destroy.call(this, err, code);
  const conn = connOf(this);
  if (conn === undefined) return destroy.call(this, err, code);
  if (conn.probing) return this;
  conn.probing = true;
  const timer = setTimeout(probeFailed, PROTO_PROBE_MS, conn, err);
  timer.unref(); // a probe never holds the process open
  try {
    this.ping((pingErr) => {
      clearTimeout(timer);
      conn.probing = false;
      if (pingErr !== null) destroy.call(this, err, code);
    });
  } catch {
    clearTimeout(timer);
    return destroy.call(this, err, code);
  }
  return this;
}

function probeFailed(conn: ConnState, err: Error): void {
  conn.probing = false;
  if (!conn.session.destroyed) sessionDestroy!.call(conn.session, err);
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

export function ignoreError(): void {}

/**
 * A stream arrived on a connection: counted (its close is counted too, onCountedStreamClose), and
 * whether it is over the connection's stream limit (the caller refuses it, REFUSED_STREAM).
 */
export function countStream(conn: ConnState, stream: ConnStream): boolean {
  const open = conn.open + 1;
  conn.open = open;
  // the first request arrived: requestHeadersTimeout is met (the timer is cleared once)
  if (conn.headersTimer !== undefined) {
    clearTimeout(conn.headersTimer);
    conn.headersTimer = undefined;
  }
  stream[kConn] = conn;
  stream[kOpenedAt] = performance.now();
  stream.on("close", onCountedStreamClose);
  return open > conn.limit || open > conn.narrowLimit;
}

/**
 * The client's SETTINGS (the session's 'remoteSettings'; the first comes before any stream). A
 * client whose stream window is under one DATA frame (UNREAD_WINDOW_BELOW; the zero-window attack
 * sets 0) cannot take a byte of any answer until it sends a WINDOW_UPDATE for that stream, so
 * each of its calls is unread from its first response frame (observe/overload.ts). Such a
 * connection may have open only as many streams as its unread budget covers (12 by default);
 * more are refused with REFUSED_STREAM, before any upstream call (safe to retry: gRPC clients
 * retry it transparently). Without this, the unread budget cut the calls only as their answers
 * arrived, after the upstream had sent each its window (issue 22: 10 connections × 100 streams
 * at window 0 grew RSS by +28 to +39 MiB).
 */
export function onClientSettings(this: ConnSession, settings: http2.Settings): void {
  const conn = this[kConn];
  if (conn === undefined) return;
  // (the calls it has open already are unread from their response heads too: a client that
  // closes its window after opening its streams; observe/overload.ts unreadAtHead)
  const narrow = responseBuffers.noteClientWindow(this, settings.initialWindowSize);
  conn.narrowLimit = narrow ? responseBuffers.unreadCallsPerConnection : Infinity;
}

function onCountedStreamClose(this: ConnStream): void {
  const c = this[kConn];
  if (c === undefined) return;
  if (--c.open === 0 && c.idleSince !== undefined) c.idleSince = performance.now();
  // a stream dojang refused (over maxConcurrentStreams, overload) is not one the client opened
  // and served: it counts on neither side of the premature-reset ratio
  if (this.rstCode === NGHTTP2_REFUSED_STREAM) return;
  const closed = c.closed + 1;
  c.closed = closed;
  // aborted: the stream closed before dojang finished its response (a reset, either side's)
  if (this.aborted) countPrematureReset(c, this, closed);
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
const { NGHTTP2_INTERNAL_ERROR, NGHTTP2_REFUSED_STREAM } = http2.constants;

function countPrematureReset(c: ConnState, stream: ConnStream, closed: number): void {
  const code = stream.rstCode;
  if (code === undefined || code === NGHTTP2_INTERNAL_ERROR || code === NGHTTP2_REFUSED_STREAM || code === ENHANCE_YOUR_CALM) return;
  const t0 = stream[kOpenedAt];
  if (t0 !== undefined && performance.now() - t0 > PREMATURE_RESET_MS) return;
  const n = c.premature + 1;
  c.premature = n;
  // closed + still open = the streams the connection opened (open is already one less)
  if (n >= PREMATURE_RESET_MIN && 2 * n >= closed + c.open && c.limit !== 0 && !c.session.destroyed) cutForResets(c, stream.id ?? 0);
}

function cutForResets(c: ConnState, lastStreamId: number): void {
  cutCalm(c, lastStreamId, `rapid reset: ${PREMATURE_RESET_MIN} or more streams reset by the client within ${PREMATURE_RESET_MS} ms of their start`);
}

/** GOAWAY ENHANCE_YOUR_CALM, no new stream taken, destroyed CALM_GOAWAY_FLUSH_MS later. */
function cutCalm(c: ConnState, lastStreamId: number, why: string): void {
  // from now on every new stream is over the connection's limit: refused at once, no call made
  c.limit = 0;
  try {
    c.session.goaway(ENHANCE_YOUR_CALM, lastStreamId);
  } catch {
    /* already closing */
  }
  setTimeout(destroyCalm, CALM_GOAWAY_FLUSH_MS, c.session, why).unref();
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
export const UNPRODUCTIVE_SWEEP_MS = 1000;

/** Pure: whether one second of a connection's traffic is over its unproductive-bytes allowance. */
export function overUnproductive(readBytes: number, requestBytes: number, streamsOpened: number, writtenBytes: number): boolean {
  const unproductive = readBytes - requestBytes - UNPRODUCTIVE_PER_STREAM * streamsOpened;
  return unproductive > UNPRODUCTIVE_BASE + writtenBytes / UNPRODUCTIVE_WRITTEN_SHARE;
}

function meterConnection(c: ConnState): void {
  const s = c.session as ServerHttp2Session & RequestBytesSession;
  const sock = s.socket as { bytesRead?: number; bytesWritten?: number } | undefined;
  if (sock === undefined || s.destroyed || c.limit === 0) return;
  const read = sock.bytesRead ?? 0;
  const written = sock.bytesWritten ?? 0;
  const requested = s[kRequestBytes] ?? 0;
  const opened = c.closed + c.open;
  if (!c.metered) {
    c.metered = true;
  } else if (overUnproductive(read - c.meterRead, requested - c.meterRequested, opened - c.meterOpened, written - c.meterWritten)) {
    cutCalm(c, Math.max(0, opened * 2 - 1), "unproductive bytes: the connection sent more than its allowance of frames that are neither requests nor their bodies (a WINDOW_UPDATE, PRIORITY or similar flood)");
  }
  c.meterRead = read;
  c.meterWritten = written;
  c.meterRequested = requested;
  c.meterOpened = opened;
}

/** One sweep of a listener's connections (every UNPRODUCTIVE_SWEEP_MS, from its first connection on). */
export function sweepUnproductive(l: { readonly sessions: ReadonlySet<ServerHttp2Session> }): void {
  for (const s of l.sessions) {
    const c = connOf(s);
    if (c !== undefined) meterConnection(c);
  }
}
