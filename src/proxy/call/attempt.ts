// One attempt: one upstream stream on one session of one endpoint. It opens the stream (waiting
// for the session's SETTINGS, or in the endpoint's queue for a stream slot, if need be), writes
// the request corked per loop turn, and reports facts to its owner (the Call): the response
// head, data, trailers, how the stream ended and closed, and whether the upstream can have
// processed the request. It decides no status: the call does, with src/translate. It reports its
// result to its endpoint exactly once.
//
// Hot-path rules (style.md §3.7): stream listeners are module-level functions that find the
// attempt in one symbol slot on the stream; 'drain' is listened to only after a first write()
// that returned false.
//
// The owner hears the head first, whatever order node emits the events in: on a TLS session
// node:http2 can emit a stream's 'data' (and so, in principle, its 'trailers' and 'end') before
// its 'response', and before a 1xx 'headers' too (docs/concepts/node-http2.md; probed by
// scripts/node-http2-order-probe.mjs). Whatever comes before the head waits: DATA back in the
// stream, which pauses until the head is in; trailers and the end on the attempt. One flag test
// per event on the normal path.
import http2, { type ClientHttp2Stream, type IncomingHttpHeaders } from "node:http2";
import { Readable, addAbortSignal } from "node:stream";
import { Code, decideUpstreamEnd, outcome, type Outcome } from "../../translate/index.js";
import type { AttemptResult, Endpoint } from "../upstream/endpoint.js";
import { describeConnectError, kStreamOwner, type SlotWaiter, type UpstreamSession } from "../upstream/session.js";
import { headerList, type OutgoingHeaders } from "./headers.js";
import type { ReplaySink } from "./retry-buffer.js";

const { NGHTTP2_CANCEL, NGHTTP2_REFUSED_STREAM } = http2.constants;

/**
 * node's AbortError class (not exported): `stream.destroy(new AbortErrorClass())` is the one way
 * to reset a request stream with CANCEL that never sends END_STREAM first, whatever the timing
 * (probed on Node 24: HEADERS, DATA, RST_STREAM(CANCEL); `close(CANCEL)` on a request opened
 * without waitForTrailers may send DATA(END_STREAM) before the RST, spec §10.2 P1).
 * Taken once from an aborted stream.
 */
const AbortErrorClass: new (message?: string) => Error = (() => {
  const r = new Readable({ read() {} });
  r.on("error", () => {});
  addAbortSignal(AbortSignal.abort(), r);
  return (r.errored as Error).constructor as new (message?: string) => Error;
})();

/** request()'s options, one object per combination (node copies what it is given). */
const REQUEST_OPTIONS = [
  { endStream: false, waitForTrailers: false },
  { endStream: true, waitForTrailers: false },
  { endStream: false, waitForTrailers: true },
  { endStream: true, waitForTrailers: true },
] as const;

type AttemptStream = ClientHttp2Stream & { [kStreamOwner]?: Attempt };

/** What an attempt reports to (implemented by Call). Every method is called with the attempt. */
export interface AttemptOwner {
  /** the stream is open: the request body may flow into it */
  onAttemptOpen(a: Attempt): void;
  /** no stream could be opened (session failed before it was ready, request headers refused) */
  onAttemptFailed(a: Attempt, o: Outcome): void;
  onAttemptHead(a: Attempt, headers: IncomingHttpHeaders, flags: number, raw: readonly string[]): void;
  onAttemptData(a: Attempt, chunk: Buffer): void;
  onAttemptTrailers(a: Attempt, raw: readonly string[]): void;
  /** the readable side ended (`a.endedByReset` tells END_STREAM from RST_STREAM(NO_ERROR)) */
  onAttemptEnd(a: Attempt): void;
  onAttemptClose(a: Attempt): void;
  /** the upstream took what was written: the request source may resume */
  onAttemptDrain(a: Attempt): void;
  /** the attempt's own timer (armTimeout: a retry policy's perTryTimeout) ran out */
  onAttemptTimeout(a: Attempt): void;
  /**
   * Asked when the request has ended (endRequest): may END_STREAM go out now? False when the
   * call is over or the client reset (a client's RST_STREAM also ends node's readable side,
   * and that cancel must not reach the upstream as END_STREAM, spec §10.2 P1), or when the owner
   * decides the end is an error of its own (it may end the call, and so cancel this attempt).
   */
  mayEndRequest(): boolean;
}

export class Attempt implements SlotWaiter, ReplaySink {
  /** the session this attempt rides on (or waits for); undefined while it waits in the endpoint's queue */
  session: UpstreamSession | undefined = undefined;
  /** SlotWaiter: the endpoint queue's links */
  qPrev: SlotWaiter | undefined = undefined;
  qNext: SlotWaiter | undefined = undefined;
  /** the upstream stream, once opened */
  up: ClientHttp2Stream | undefined = undefined;
  /** the response head ('response') is in: until then nothing else reaches the owner */
  headIn = false;
  /**
   * What came before the head and waits for it (EARLY_*): DATA put back in the paused stream,
   * the trailers in earlyTrailers, the end.
   */
  early = 0;
  earlyTrailers: readonly string[] | undefined = undefined;
  /** the readable side ended */
  ended = false;
  /** 'end' came with the stream already closed: an RST_STREAM(NO_ERROR), not END_STREAM on DATA */
  endedByReset = false;
  /** the stream's 'close' has run */
  closed = false;
  /** the stream's error, if any (read at close for the connect failure's cause) */
  error: Error | undefined = undefined;
  /** the upstream's own grpc-status, once the call has forwarded it (for the endpoint's report) */
  status = -1;
  /** dojang cancelled this attempt (its result says nothing of the endpoint) */
  private cancelled = false;
  /** start() ran: the endpoint counts this attempt, and hears its result once */
  private started = false;
  private reported = false;
  /** a setImmediate(flush) is queued and the stream is corked until it runs */
  private flushQueued = false;
  /** endRequest(true): flush() ends the upstream request unless the owner says no */
  private endPending = false;
  private drainHooked = false;
  /** the request's END_STREAM was written (requestEnded) */
  private endSent = false;
  /**
   * This attempt's own time limit (a retry policy's perTryTimeout, armed by the call's retry
   * controller until it commits), as Envoy's UpstreamRequest owns its per_try_timeout_.
   */
  private timer: NodeJS.Timeout | undefined = undefined;

  constructor(
    readonly owner: AttemptOwner,
    readonly endpoint: Endpoint,
    /**
     * The request head for this attempt (a filter may change it before start()); let go once
     * the stream is opened (node has taken it), as a held call should not keep it.
     */
    public headers: OutgoingHeaders | undefined,
    /** the request ended with its HEADERS */
    readonly endStream: boolean,
    /**
     * How the request is opened and reset, fixed per attempt. false (no filter): no
     * waitForTrailers, so node ends the request with END_STREAM on its last DATA frame (the
     * corked write makes the last chunk and end() meet in one tick): one frame, one write and
     * one upstream wake-up fewer per call; a cancel is destroy(AbortError), a bare
     * RST_STREAM(CANCEL). true (a filter may reset with any code): waitForTrailers, and resets
     * by close(code), because only close(code) can send an arbitrary code, and close(code) is a
     * bare RST only with waitForTrailers (spec §10.2 P1).
     */
    readonly resetByClose: boolean,
  ) {}

  /**
   * Takes a stream slot on the endpoint: a free one at once, or it waits (for a session's
   * SETTINGS, or in the endpoint's queue until a stream there ends) while the call's deadline
   * runs. A full circuit breaker (maxConnections, maxPendingCalls) refuses at once with a message
   * naming the limit; the call ends 14 decided_by overflow, and does not count this attempt (no
   * stream was opened, nothing waited; the endpoint hears "local").
   */
  start(): void {
    this.started = true;
    this.endpoint.attemptStarted();
    const s = this.endpoint.slot(this);
    if (s === undefined) return; // queued at the endpoint: onSlot, or cancel()
    if (typeof s === "string") {
      this.report("local");
      return this.owner.onAttemptFailed(this, outcome(Code.UNAVAILABLE, s, "overflow"));
    }
    this.use(s);
  }

  /**
   * Opens the stream on `sess`, or waits for it: a session is used only once the peer's
   * SETTINGS are in, so a burst never exceeds its SETTINGS_MAX_CONCURRENT_STREAMS and gets
   * REFUSED_STREAM (streams sent before SETTINGS arrive are not bound by it).
   */
  private use(sess: UpstreamSession): void {
    this.session = sess;
    if (!sess.connected) {
      sess.addWaiter(this);
      return;
    }
    let up: ClientHttp2Stream;
    try {
      up = sess.h2.request(headerList(this.headers!), REQUEST_OPTIONS[(this.endStream ? 1 : 0) + (this.resetByClose ? 2 : 0)]);
    } catch (err) {
      if (sess.h2.destroyed || sess.h2.closed) {
        this.report("unreachable");
        return this.owner.onAttemptFailed(
          this,
          outcome(Code.UNAVAILABLE, sess.failure ?? `upstream session to ${sess.endpoint.label} is closed`, "upstream_unreachable"),
        );
      }
      this.report("local");
      return this.owner.onAttemptFailed(this, outcome(Code.INTERNAL, `cannot forward request headers: ${(err as Error).message}`, "bad_request"));
    }
    sess.active++;
    sess.opened++;
    this.headers = undefined;
    this.up = up;
    (up as AttemptStream)[kStreamOwner] = this;
    up.on("response", onUpResponse);
    up.on("data", onUpData);
    up.on("trailers", onUpTrailers);
    up.on("end", onUpEnd);
    up.on("close", onUpClose);
    up.on("error", onUpError);
    if (this.resetByClose) up.on("wantTrailers", onUpWantTrailers);
    this.owner.onAttemptOpen(this);
  }

  /** SlotWaiter: a slot on `sess` (the session this attempt waited for has its SETTINGS, or the endpoint's queue moved on). */
  onSlot(sess: UpstreamSession): void {
    if (this.cancelled) return;
    this.use(sess);
  }

  /** SlotWaiter: the session failed before it was ready (refused, timeout, closed). */
  onSessionFailed(sess: UpstreamSession): void {
    if (this.cancelled) return;
    this.report("unreachable");
    this.owner.onAttemptFailed(this, outcome(Code.UNAVAILABLE, sess.failure ?? `upstream ${sess.endpoint.label} unreachable`, "upstream_unreachable"));
  }

  /** SlotWaiter: no slot will come (the endpoint left the cluster): nothing reached it, a retry may go elsewhere. */
  onSlotFailed(why: string): void {
    if (this.cancelled) return;
    this.report("local");
    this.owner.onAttemptFailed(this, outcome(Code.UNAVAILABLE, why, "upstream_unreachable"));
  }

  /** SlotWaiter: dojang cancelled it. */
  get abandoned(): boolean {
    return this.cancelled;
  }

  // === request ===

  /** Writes one request chunk (corked until this loop turn's check phase); false = wait for onAttemptDrain. */
  write(chunk: Buffer): boolean {
    const up = this.up!;
    this.holdWrites(up);
    if (up.write(chunk)) return true;
    if (!this.drainHooked) {
      this.drainHooked = true;
      up.on("drain", onUpDrain);
    }
    return false;
  }

  /**
   * The request has ended: END_STREAM goes out now, on the last DATA frame (end() uncorks the
   * chunks held this turn and ends in one tick), so the request's HEADERS, its DATA and
   * END_STREAM leave in one write when this loop turn's pending frames are sent. Flushing in
   * the check phase instead sent the HEADERS alone (node's own write runs first there) and the
   * DATA one loop turn later: one turn, one write and one upstream wake-up more per call.
   * Decided now, not later: a client's RST_STREAM marks the client stream aborted before node
   * ends its readable side (probed on Node 24 with HEADERS, DATA and RST_STREAM in one read,
   * CANCEL and NO_ERROR alike: 'aborted', then 'end'), so the owner still tells that cancel
   * from an END_STREAM here, and a cancel never reaches the upstream as END_STREAM (spec
   * §10.2 P1).
   *
   * `atCheckPhase`: decided in this loop turn's check phase instead (flush), after the turn's
   * events, for a client side that learns of a reset only at its 'close' (the gRPC-Web
   * adapter, whose 'end' comes first).
   */
  endRequest(atCheckPhase = false): void {
    const up = this.up;
    if (up === undefined || up.writableEnded || up.destroyed || this.endSent) return;
    if (atCheckPhase) {
      this.endPending = true;
      this.holdWrites(up);
      return;
    }
    if (!this.owner.mayEndRequest()) return;
    this.endSent = true;
    up.end();
  }

  /**
   * Corks the stream until the check phase of this loop turn (setImmediate), where flush()
   * uncorks it, unless the request ends first: the request's end ('end' follows in the same
   * turn when the client's DATA carried END_STREAM) then rides on the last DATA frame
   * (Writable.end() uncorks and ends in one tick), and the chunks read in one turn leave in
   * one writev. One setImmediate per loop turn for all the attempts that wrote in it, not one
   * per attempt or per chunk.
   */
  private holdWrites(up: ClientHttp2Stream): void {
    if (this.flushQueued) return;
    this.flushQueued = true;
    up.cork();
    corked[nCorked++] = this;
    if (nCorked === 1) setImmediate(flushCorked);
  }

  /** See holdWrites. */
  flush(): void {
    this.flushQueued = false;
    const up = this.up;
    if (up === undefined || up.destroyed || up.writableEnded) return;
    if (this.endPending && this.owner.mayEndRequest()) {
      this.endPending = false;
      this.endSent = true;
      up.end();
    } else if (!this.cancelled && up.writableCorked > 0) {
      // (cancelled: the owner's answer may have been to end the call, which cancelled this attempt)
      up.uncork();
    }
  }

  // === response flow control ===

  /** dojang paused this stream's reading: the session's sampler tick it paused in (-1: reading), counted on the session (its window, session.ts) */
  upPausedAt = -1;

  pause(): void {
    const up = this.up;
    if (up === undefined) return;
    up.pause();
    if (this.upPausedAt < 0) this.upPausedAt = this.session!.streamPaused();
  }

  resume(): void {
    const up = this.up;
    if (up === undefined) return;
    up.resume();
    if (this.upPausedAt >= 0) {
      this.session!.streamResumed(this.upPausedAt);
      this.upPausedAt = -1;
    }
  }

  // === per-try timer ===

  /** Starts this attempt's own timer: the owner hears onAttemptTimeout after `ms`. */
  armTimeout(ms: number): void {
    this.timer = setTimeout(onAttemptTimer, ms, this);
  }

  stopTimeout(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  /** See armTimeout. */
  onTimer(): void {
    this.timer = undefined;
    this.owner.onAttemptTimeout(this);
  }

  // === ends ===

  /** dojang ends this attempt: RST_STREAM(CANCEL) if the stream is open, or leaves the session queue. */
  cancel(): void {
    this.stopTimeout();
    if (this.closed) return;
    const up = this.up;
    if (up === undefined) {
      // Waiting for a session or a slot (or never opened): nothing on the wire; a late slot is
      // ignored. Out of the session's waiters or the endpoint's queue at once, so it no longer
      // counts against maxPendingCalls.
      this.cancelled = true;
      this.session?.unwait(this);
      this.endpoint.unqueue(this);
      this.report("local");
      return;
    }
    if (up.closed) return;
    this.cancelled = true;
    // RST_STREAM(CANCEL), never a plain destroy() (NO_ERROR) or destroy(err) (INTERNAL_ERROR),
    // spec §10.2 P2. Either way unread DATA is discarded (P7).
    if (this.resetByClose) up.close(NGHTTP2_CANCEL);
    else up.destroy(new AbortErrorClass("dojang cancelled the upstream call"));
    // (the shared upstream connection's reset budget: session.ts noteReset)
    this.session?.noteReset();
  }

  /**
   * The status for a stream that closed without trailers to forward (null: none to give, the
   * stream ended normally and the call's own path decides).
   */
  outcomeAtClose(responded: boolean, budgetExpired: boolean): Outcome | null {
    const sess = this.session!;
    const up = this.up!;
    if (!sess.connected) {
      // The stream learns of a failed connect before the session does: the reason is the
      // cause of the stream's own error ("pending stream has been canceled (caused by: ...)").
      const cause = (this.error as (Error & { cause?: unknown }) | undefined)?.cause;
      const why =
        sess.failure ??
        (cause instanceof Error ? describeConnectError(cause as NodeJS.ErrnoException, sess.endpoint) : `upstream ${sess.endpoint.label} unreachable`);
      return outcome(Code.UNAVAILABLE, why, "upstream_unreachable");
    }
    const rst = up.rstCode;
    return decideUpstreamEnd({
      statusFixed: false,
      rstCode: rst,
      endedWithoutTrailers: this.ended && responded && !this.endedByReset,
      sessionLost: sess.lost || sess.h2.destroyed,
      refused: this.refused,
      budgetExpired,
    });
  }

  /** The whole request went out (END_STREAM written, or sent with the HEADERS): a reset now may come after the upstream did the work. */
  get requestEnded(): boolean {
    // (not up.writableEnded: node ends the writable side of a stream that was reset, too)
    return this.endStream || this.endSent;
  }

  /** The upstream refused the stream or never saw it (RST REFUSED_STREAM, or above a GOAWAY's last-stream-id). */
  get refused(): boolean {
    const up = this.up;
    const sess = this.session;
    if (up === undefined || sess === undefined) return false;
    return up.rstCode === NGHTTP2_REFUSED_STREAM || (sess.goawayLastStreamId >= 0 && (up.id ?? 0) > sess.goawayLastStreamId);
  }

  /**
   * Whether the upstream can have processed this request: false when no stream reached it (no
   * stream opened, the session never connected, or the stream was refused); true otherwise.
   * The fact a transparent retry will need.
   */
  get mayHaveProcessed(): boolean {
    if (this.up === undefined) return false;
    const sess = this.session;
    if (sess === undefined || !sess.connected) return false;
    return !this.refused;
  }

  /** Tells the endpoint how this attempt ended; once. */
  private report(result: AttemptResult): void {
    if (this.reported || !this.started) return;
    this.reported = true;
    // (CLUSTER, #11) the status decides whether an answer counts as a failure for outlier detection
    this.endpoint.attemptEnded(result, this.status);
  }

  /** Called after the owner heard of the close: the result from what is known by then. */
  private reportAtClose(): void {
    let r: AttemptResult;
    if (this.status >= 0) r = this.status === 0 ? "ok" : "status";
    else if (this.cancelled) r = "local";
    else if (!this.session!.connected) r = "unreachable";
    else if (this.refused) r = "refused";
    else r = "reset";
    this.report(r);
  }

  /** The stream's 'close': the owner decides first, then the endpoint hears the result. */
  onStreamClose(): void {
    this.closed = true;
    if (this.upPausedAt >= 0) {
      this.session!.streamResumed(this.upPausedAt);
      this.upPausedAt = -1;
    }
    // (first: the slot goes to the endpoint's queue before the owner may start another attempt)
    this.session!.streamClosed();
    this.owner.onAttemptClose(this);
    this.reportAtClose();
  }
}

// === module-level listeners: `this` is the stream, the attempt is in its kStreamOwner slot ===

function attemptOf(s: unknown): Attempt {
  return (s as AttemptStream)[kStreamOwner]!;
}
/** What waits for the head (Attempt.early). */
const EARLY_DATA = 1;
const EARLY_TRAILERS = 2;
const EARLY_END = 4;

function onUpResponse(this: ClientHttp2Stream, headers: IncomingHttpHeaders, flags: number, raw: string[]): void {
  const a = attemptOf(this);
  a.headIn = true;
  if (a.early === 0) return a.owner.onAttemptHead(a, headers, flags, raw);
  headAfterEarly(this, a, headers, flags, raw);
}
function onUpData(this: ClientHttp2Stream, chunk: Buffer): void {
  const a = attemptOf(this);
  // the session's bandwidth-delay sampler counts what came in (its window, session.ts)
  const s = a.session!;
  if ((s.rxLeft -= chunk.length) <= 0) s.onRx();
  if (!a.headIn) return holdEarlyData(this, a, chunk);
  a.owner.onAttemptData(a, chunk);
}
function onUpTrailers(this: ClientHttp2Stream, _t: IncomingHttpHeaders, _flags: number, raw: string[]): void {
  const a = attemptOf(this);
  if (!a.headIn) {
    a.early |= EARLY_TRAILERS;
    a.earlyTrailers = raw;
    return;
  }
  a.owner.onAttemptTrailers(a, raw);
}
function onUpEnd(this: ClientHttp2Stream): void {
  // node emits 'end' for RST_STREAM(NO_ERROR) too; then the stream is already closed, while
  // after END_STREAM on DATA it is not yet (probed on Node 24). This tells apart what spec §10.2
  // P4 calls indistinguishable, for the message and decided_by (the code is 13 either way).
  const a = attemptOf(this);
  a.ended = true;
  a.endedByReset = this.closed;
  if (!a.headIn) {
    a.early |= EARLY_END;
    return;
  }
  a.owner.onAttemptEnd(a);
}

/**
 * DATA before the head (node:http2 on a TLS session: the 'response' event waits in the
 * nextTick queue while DATA read in the same pass is emitted at once): the chunk goes back to
 * the front of the stream, which pauses, so it and whatever follows it (and so the stream's
 * 'end', which node emits only once its buffer is empty) wait in the stream, flow-controlled,
 * until the head is in. No copy.
 */
function holdEarlyData(up: ClientHttp2Stream, a: Attempt, chunk: Buffer): void {
  a.early |= EARLY_DATA;
  up.pause();
  up.unshift(chunk);
}

/**
 * The head after something that waited for it: the owner hears the head, then what came
 * before it, in the stream's own order (DATA, then trailers, then the end). The owner acts on
 * trailers only at the end, so trailers heard before the DATA still in the stream are in order.
 */
function headAfterEarly(up: ClientHttp2Stream, a: Attempt, headers: IncomingHttpHeaders, flags: number, raw: string[]): void {
  const early = a.early;
  a.early = 0;
  // Resumed before the owner hears the head: the DATA flows from a later tick, and an owner
  // that pauses the attempt in onAttemptHead (a filter holding the head) keeps it waiting.
  if ((early & EARLY_DATA) !== 0) up.resume();
  a.owner.onAttemptHead(a, headers, flags, raw);
  if ((early & EARLY_TRAILERS) !== 0) {
    const t = a.earlyTrailers!;
    a.earlyTrailers = undefined;
    a.owner.onAttemptTrailers(a, t);
  }
  if ((early & EARLY_END) !== 0) a.owner.onAttemptEnd(a);
}
function onUpClose(this: ClientHttp2Stream): void {
  attemptOf(this).onStreamClose();
}
function onUpError(this: ClientHttp2Stream, err: Error): void {
  attemptOf(this).error = err;
}
function onUpDrain(this: ClientHttp2Stream): void {
  const a = attemptOf(this);
  a.owner.onAttemptDrain(a);
}
/**
 * The attempts corked in this loop turn (holdWrites), flushed together in its check phase. The
 * array keeps its size (a count says how much is in use): emptied with `length = 0`, V8 drops
 * its backing store, and the next turn's first write would allocate one again.
 */
const corked: (Attempt | undefined)[] = [];
let nCorked = 0;
function flushCorked(): void {
  // (one corked while this runs is flushed in this pass too)
  for (let i = 0; i < nCorked; i++) {
    const a = corked[i]!;
    corked[i] = undefined;
    a.flush();
  }
  nCorked = 0;
}
function onAttemptTimer(a: Attempt): void {
  a.onTimer();
}
function onUpWantTrailers(this: ClientHttp2Stream): void {
  // End of the request body: an empty DATA(END_STREAM), the normal end (probe U).
  this.sendTrailers({});
}
