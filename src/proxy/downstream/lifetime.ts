// A client connection's lifetime, one timer each and none per call: requestHeadersTimeout (the
// first request must come in time), maxConnectionAge (+ its grace, jittered as grpc-go does) and
// idleTimeout, and the graceful GOAWAY that ends a connection. The timers live on the
// connection's ConnState (connection.ts) and are cleared when it closes (ConnState.clearTimers).
import http2, { type ServerHttp2Session } from "node:http2";
import type { ListenerConfig } from "../../config/index.js";
import { Code, outcome } from "../../translate/index.js";
import type { CallContext } from "../call/context.js";
import { clampTimer, type ConnState } from "./connection.js";

/** What the lifetime asks its listener: the calls in flight (to end an aged connection's) and the log. */
export interface ConnHost {
  readonly ctx: CallContext;
  readonly cfg: ListenerConfig;
}

/**
 * Starts a new connection's timers from the listener's current config (a reload changes them for
 * connections made after it; open ones keep theirs). `random()` in [0, 1) jitters maxConnectionAge.
 */
export function startLifetime(l: ConnHost, c: ConnState, cfg: ListenerConfig, random: () => number): void {
  // slowloris: a connection must send its first request within requestHeadersTimeout
  if (cfg.requestHeadersTimeoutMs !== null) c.headersTimer = setTimeout(onRequestHeadersTimeout, clampTimer(cfg.requestHeadersTimeoutMs), l, c);
  const age = cfg.maxConnectionAgeMs;
  const idle = cfg.idleTimeoutMs;
  if (age !== null) c.ageTimer = setTimeout(onMaxAge, clampTimer(jitteredAge(age, random())), l, c, cfg.maxConnectionAgeGraceMs);
  if (idle !== null) {
    c.idleSince = performance.now();
    c.idleTimer = setTimeout(onIdleCheck, clampTimer(idle), l, c, idle);
  }
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

/**
 * requestHeadersTimeout passed. The decision waits for this turn's poll phase (setImmediate): node
 * runs expired timers before it reads the sockets, so on a process whose loop lagged past the
 * timeout a first request that arrived in time may still sit unread in the socket, and closing
 * then would reset a client that did nothing wrong (test/behaviour/headers-timeout-lag.test.ts).
 * The timer stays in c.headersTimer until then: countStream clears it when a request is read.
 */
function onRequestHeadersTimeout(l: ConnHost, c: ConnState): void {
  setImmediate(requestHeadersMissed, l, c);
}

/** No request after requestHeadersTimeout, the socket read: the connection is closed (nothing of it is served). */
function requestHeadersMissed(l: ConnHost, c: ConnState): void {
  if (c.headersTimer === undefined) return;
  // held unread by dojang (turns.ts), or let go in this turn and not read since: what the client
  // sent in time waits in the socket, as above; looked at again after the next read
  if (c.held || c.justReleased) {
    c.justReleased = false;
    setImmediate(onRequestHeadersTimeout, l, c);
    return;
  }
  c.headersTimer = undefined;
  const s = c.session;
  if (s.closed || s.destroyed) return;
  l.ctx.log.debug({ listener: l.cfg.name }, "client connection sent no request within requestHeadersTimeout: closed");
  s.destroy();
}

/** maxConnectionAge reached: GOAWAY, and after the grace what still runs on it is cut. */
function onMaxAge(l: ConnHost, c: ConnState, graceMs: number): void {
  c.ageTimer = undefined;
  const s = c.session;
  if (s.closed || s.destroyed) return;
  l.ctx.log.debug({ listener: l.cfg.name }, "client connection reached maxConnectionAge: GOAWAY");
  goawayGracefully(s);
  c.graceTimer = setTimeout(onAgeGraceOver, clampTimer(graceMs), l, c);
}

/**
 * The grace after maxConnectionAge is over: each call still on the connection ends with 14
 * UNAVAILABLE, decided_by shutdown (dojang ended the connection in an orderly way, as at a
 * drain's end: safe for the client to retry elsewhere), then the connection is destroyed
 * once those last frames are out.
 */
function onAgeGraceOver(l: ConnHost, c: ConnState): void {
  c.graceTimer = undefined;
  const s = c.session;
  if (s.destroyed) return;
  for (const call of [...l.ctx.active]) {
    if (call.down.session === s) call.finish(outcome(Code.UNAVAILABLE, "the client connection reached maxConnectionAge and its grace is over", "shutdown"));
  }
  setTimeout(destroySession, 50, s).unref();
}

/** idleTimeout: fires once per period; closes the connection only if no stream was open for a whole period. */
function onIdleCheck(l: ConnHost, c: ConnState, idleMs: number): void {
  const s = c.session;
  if (s.closed || s.destroyed) {
    c.idleTimer = undefined;
    return;
  }
  const open = c.open;
  const quiet = performance.now() - (c.idleSince ?? 0);
  if (open === 0 && quiet >= idleMs - 1) {
    c.idleTimer = undefined;
    l.ctx.log.debug({ listener: l.cfg.name, idleMs }, "client connection idle: GOAWAY");
    goawayGracefully(s);
    return;
  }
  c.idleTimer = setTimeout(onIdleCheck, clampTimer(open === 0 ? idleMs - quiet : idleMs), l, c, idleMs);
}

function destroySession(s: ServerHttp2Session): void {
  if (!s.destroyed) s.destroy();
}
