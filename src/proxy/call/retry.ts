// The retry rules of one call (src/translate/retry.ts decides; this file gathers the facts and
// acts). On a route with a retry policy the controller keeps a retry buffer (views of the
// request chunks, up to bufferBytes) and holds the upstream's response head until the first
// response message or the trailers, so a status counts whether it came as Trailers-Only or as
// trailers after headers with no message. The call commits to its attempt (lets the buffer go,
// forwards the head) on the first response message, when the buffer overflows, when attempts
// run out, or on a status it does not retry. Each retry opens a new Attempt (another endpoint
// when the cluster has one, cluster.pick(avoid)) with grpc-previous-rpc-attempts and what is
// left of the deadline as its grpc-timeout, replays the buffer into it, and waits the jittered
// back-off (or the upstream's grpc-retry-pushback-ms) first; nothing outlives the call's deadline.
//
// Transparent retries (REFUSED_STREAM, above a GOAWAY's last-stream-id, a connect that failed
// before the stream opened: the upstream never processed the call) happen once per call, with
// or without a policy. Without a policy there is no buffer: the call keeps a reference to its
// first request chunk (`call.replayChunk`, no copy) until a second chunk arrives or the response
// starts. A transparent retry needs nothing more: a connect failure comes before any request
// byte is read (the body is read only once a stream is open), and a unary request is usually
// one chunk. A refused stream after two or more request chunks went out is not retried without
// a policy.
//
// Allocation (Envoy's RetryStateImpl::create short circuit): a call on a route without a policy
// has no controller (`call.retry === null`, one null test per event); one is made only when an
// attempt of such a call ends refused (RetryController.transparent), the rare path.
//
// The controller sees its call as a RetryHost (declared here, implemented by Call): what it reads,
// and the call's own steps it asks for (abandon, startAttempt, holdHead, deliverHead, finish).
// It assigns one call field, `retry` (the controller itself); every other field has its writer
// elsewhere (test/architecture/layers.test.ts).
import http2, { type IncomingHttpHeaders } from "node:http2";
import { Code, isGrpcContentType, outcome, parseGrpcStatus, type Outcome } from "../../translate/index.js";
import { decideRetry, parsePushback, type AttemptEnd, type RetryPolicy, type RetryReason } from "../../translate/retry.js";
import type { CompiledRoute } from "../router.js";
import type { Cluster } from "../upstream/cluster.js";
import type { Endpoint } from "../upstream/endpoint.js";
import type { Attempt } from "./attempt.js";
import type { CallContext } from "./context.js";
import type { OutgoingHeaders } from "./headers.js";
import { RetryBuffer } from "./retry-buffer.js";
import { BY_RETRY, type HeldResponse } from "./held.js";
import { pastDeadline } from "./deadline.js";

/** What the retry rules need of a call (implemented by Call); `retry` is the one field written here. */
export interface RetryHost {
  readonly ctx: CallContext;
  readonly route: CompiledRoute<Cluster> | undefined;
  readonly attempt: Attempt | null;
  readonly attempts: number;
  readonly done: boolean;
  readonly responded: boolean;
  readonly reqEnded: boolean;
  readonly replayChunk: Buffer | null | undefined;
  readonly deadlineAt: number;
  readonly held: HeldResponse | undefined;
  readonly upTrailers: OutgoingHeaders | undefined;
  /** the call's controller: null until a route's policy or a transparent retry makes one (here) */
  retry: RetryController | null;
  /** `a` is given up for another attempt */
  abandon(a: Attempt): void;
  /** picks an endpoint and starts the next attempt */
  startAttempt(): void;
  /** the response head of the current attempt waits (BY_RETRY) for a status or the first message */
  holdHead(headers: IncomingHttpHeaders, flags: number, raw: readonly string[]): void;
  /** the head the retry rules held goes the normal way (the call lets go of it first) */
  deliverHead(a: Attempt, headers: IncomingHttpHeaders, flags: number, raw: readonly string[], released?: HeldResponse): void;
  forwardStatus(block: OutgoingHeaders, trailersOnly: boolean): void;
  finish(o: Outcome): void;
}

const { NGHTTP2_FLAG_END_STREAM } = http2.constants;

export class RetryController {
  /**
   * The request chunks kept for another attempt (retry-buffer.ts). null once the call has
   * committed to its attempt, and always without a policy (transparent retries replay
   * `call.replayChunk`).
   */
  buffer: RetryBuffer | null;
  /** transparent retries made (at most one) */
  transparentRetries = 0;
  /** a retry's back-off */
  private timer: NodeJS.Timeout | undefined = undefined;
  /** the endpoint the last failed attempt used (the next one avoids it) */
  avoid: Endpoint | undefined = undefined;
  /** the label of the last abandoned attempt's endpoint (the record's `upstream` between attempts) */
  lastUpstream: string | undefined = undefined;
  /** this call counts in its cluster's breaker.activeRetries (maxRetries) */
  private countedRetry = false;
  /** the next attempt is a retry under the policy (it takes a maxRetries slot) */
  private nextIsRetry = false;

  private constructor(
    readonly call: RetryHost,
    /** the route's retry policy (null: transparent retries only) */
    readonly policy: RetryPolicy | null,
  ) {
    this.buffer = policy === null ? null : new RetryBuffer(policy.bufferBytes);
  }

  /** A route with a retry policy: made at the call's start, with its buffer. */
  static forRoute(call: RetryHost, policy: RetryPolicy): void {
    call.retry = new RetryController(call, policy);
  }

  /** A call without a policy whose attempt ended refused: made then, for its one transparent retry. */
  static transparent(call: RetryHost): RetryController {
    return (call.retry = new RetryController(call, null));
  }

  /**
   * Attempt `a` ended without a status the call forwards yet (`end`; `code` and `pushback` for
   * a status end). Asks decideRetry, and starts the next attempt (now or after the back-off)
   * when it says so; true then, and `a` is abandoned. false: the caller ends the call as it would
   * without retries. (The call has checked that `a` is current and the call not done.)
   */
  tryRetry(a: Attempt, end: AttemptEnd, code: number | undefined, pushback: string | undefined): boolean {
    const c = this.call;
    const policy = this.policy;
    // Without a policy, a replay is possible while at most one request chunk has been read.
    const committed = policy !== null ? this.buffer === null : c.responded || c.replayChunk === null;
    if (committed && end !== "refused") return false;
    if (policy === null && end !== "refused") return false;
    const cluster = c.route!.cluster;
    const d = decideRetry(policy, {
      end,
      code,
      pushback: parsePushback(pushback),
      attempts: c.attempts - this.transparentRetries,
      transparentUsed: this.transparentRetries > 0,
      committed,
      budgetLeftMs: c.deadlineAt - c.ctx.now(),
      // asked below, once everything else agrees (a withdrawal counts)
      budgetAllows: true,
      // (this call's own running retry ends with this decision)
      breakerAllows: cluster.breaker.mayRetry(this.countedRetry),
      draw: c.ctx.rand(),
    });
    if (!d.retry) {
      if (d.why !== "breaker_open") return false;
      // maxRetries: the retry the policy allows is refused at once, named.
      c.finish(outcome(Code.UNAVAILABLE, cluster.breaker.overflow("maxRetries"), "overflow"));
      return true;
    }
    // Budget denial ends retrying: the attempt's own status goes to the client.
    if (!d.transparent && !cluster.budget.withdraw()) return false;
    this.retryWith(a, d.reason, d.delayMs, d.transparent, code);
    return true;
  }

  /** Abandons `a` and schedules the next attempt. */
  private retryWith(a: Attempt, reason: RetryReason, delayMs: number, transparent: boolean, code: number | undefined): void {
    const c = this.call;
    c.route!.cluster.budget.count(reason);
    if (transparent) this.transparentRetries++;
    // The retry breaker (maxRetries) counts retry attempts running, not waiting: checked when a
    // retry is decided, counted from its attempt's start until that attempt is abandoned or the
    // call ends. (Counting the back-off too, as Envoy's max_retries does, fails every retry but
    // three of the calls a killed upstream drops at once: they are all decided in one tick.)
    this.releaseSlot();
    this.nextIsRetry = !transparent;
    if (code !== undefined) a.status = code; // the endpoint hears that it answered
    if (a.session !== undefined) this.lastUpstream = a.endpoint.label; // (an attempt a filter failed never reached it)
    this.avoid = a.endpoint;
    c.abandon(a);
    if (delayMs <= 0) c.startAttempt();
    else this.timer = setTimeout(onBackoffTimer, delayMs, this);
  }

  /** The retry breaker's slot, given back (the retry's attempt was abandoned, or the call ended). */
  releaseSlot(): void {
    if (this.countedRetry) {
      this.countedRetry = false;
      this.call.route!.cluster.breaker.retryEnded();
    }
  }

  onBackoff(): void {
    this.timer = undefined;
    if (!this.call.done) this.call.startAttempt();
  }

  /** Attempt `a` is about to start: a retry takes its maxRetries slot; its per-try timer runs until the commit. */
  onAttemptStarting(a: Attempt): void {
    if (this.nextIsRetry) {
      this.nextIsRetry = false;
      this.countedRetry = true;
      this.call.route!.cluster.breaker.retryStarted();
    }
    const policy = this.policy;
    if (policy !== null && policy.perTryTimeoutMs !== null && this.buffer !== null) a.armTimeout(policy.perTryTimeoutMs);
  }

  /** The call ends: no back-off or per-try timer outlives it. */
  clearTimers(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    this.call.attempt?.stopTimeout();
  }

  /** The call stays with its current attempt whatever happens: the retry buffer lets go. */
  commit(): void {
    const rb = this.buffer;
    if (rb === null) return;
    rb.commit();
    this.buffer = null;
    this.call.attempt?.stopTimeout();
  }

  /**
   * The call stays with its current attempt: the held response head goes out, the retry
   * buffer lets go, the per-try timer stops. Called on the first response message, on a
   * status that is not retried, and when the buffer overflows.
   */
  commitHeld(a: Attempt): void {
    this.commit();
    const c = this.call;
    const h = c.held;
    if (h !== undefined && h.by === BY_RETRY) c.deliverHead(a, h.headers, h.flags, h.raw, h);
  }

  /**
   * The buffer overflowed: the call commits to its attempt (a held head goes out). With no
   * open attempt to commit to (between attempts) the request cannot be replayed whole: the
   * call ends with 14. false when the call ended.
   */
  commitOnOverflow(): boolean {
    const c = this.call;
    const a = c.attempt;
    if (a === null || a.up === undefined) {
      this.commit();
      c.finish(outcome(Code.UNAVAILABLE, `request larger than the retry buffer (${this.policy!.bufferBytes} bytes) arrived between attempts`, "upstream_unreachable"));
      return false;
    }
    this.commitHeld(a);
    return !c.done;
  }

  /** A retried attempt is open: what the client sent so far goes into it; false: wait for its drain. */
  replayInto(a: Attempt): boolean {
    const rb = this.buffer;
    if (rb !== null) return rb.replayTo(a);
    const c = this.call;
    const chunk = c.replayChunk;
    let ok = true;
    if (chunk !== null && chunk !== undefined) ok = a.write(chunk);
    if (c.reqEnded) a.endRequest();
    return ok;
  }

  /**
   * The response head of `a`, while a retry is still possible (the buffer is kept): a status
   * decides it, a message commits. true: taken (held, a 1xx skipped, or a retry started); false:
   * the call committed and the head goes the normal way.
   */
  onHead(a: Attempt, headers: IncomingHttpHeaders, flags: number, raw: readonly string[]): boolean {
    const st = headers[":status"];
    const endStream = (flags & NGHTTP2_FLAG_END_STREAM) !== 0;
    if (typeof st === "number" && st >= 100 && st < 200 && !endStream) return true;
    if (!endStream) {
      // (held.ts: the head waits for the status or the first message)
      this.call.holdHead(headers, flags, raw);
      return true;
    }
    // Trailers-Only: its grpc-status, if it is a gRPC one, may be retried.
    const gs = headers["grpc-status"];
    const ct = headers["content-type"];
    if (typeof gs === "string" && isGrpcContentType(typeof ct === "string" ? ct : undefined)) {
      const code = parseGrpcStatus(gs);
      const pb = headers["grpc-retry-pushback-ms"];
      if (code !== undefined && code !== 0 && tryRetry(this.call, a, "status", code, typeof pb === "string" ? pb : undefined)) return true;
    }
    this.commit();
    return false;
  }

  /** Trailers came after a held head and no message: retry on their status, or forward both. */
  onHeldStatus(a: Attempt): void {
    const c = this.call;
    const t = c.upTrailers!;
    const gs = t["grpc-status"];
    const code = parseGrpcStatus(typeof gs === "string" ? gs : undefined);
    const pb = t["grpc-retry-pushback-ms"];
    if (code !== undefined && code !== 0 && tryRetry(c, a, "status", code, typeof pb === "string" ? pb : undefined)) return;
    this.commitHeld(a);
    // The head went out (or a filter holds it, and continueResponseHead forwards the trailers).
    if (!c.done && c.held === undefined && c.upTrailers !== undefined) c.forwardStatus(c.upTrailers, false);
  }
}

/**
 * Attempt `a` of call `c` ended without a status the call forwards yet: true when a retry was
 * started (or the retry breaker ended the call), and `a` is abandoned. Without a controller only
 * a transparent retry is possible, while the request can still be replayed: the controller is
 * made then (the rare path).
 */
export function tryRetry(c: RetryHost, a: Attempt, end: AttemptEnd, code: number | undefined, pushback: string | undefined): boolean {
  if (c.done || a !== c.attempt) return false;
  let r = c.retry;
  if (r === null) {
    // (decideRetry says "committed" to these)
    if (end !== "refused" || c.responded || c.replayChunk === null) return false;
    r = RetryController.transparent(c);
  }
  return r.tryRetry(a, end, code, pushback);
}

/** The retry decision for attempt `a`, whose stream closed before a status: true when a retry was started. */
export function retryFromClose(c: RetryHost, a: Attempt): boolean {
  if (c.upTrailers !== undefined) return false; // a status came (a held head's close races its end)
  const r = c.retry;
  if ((r === null || r.policy === null) && (c.responded || c.replayChunk === null)) return false;
  let end: AttemptEnd;
  if (!a.mayHaveProcessed) end = "refused";
  else {
    const o = a.outcomeAtClose(c.responded, pastDeadline(c));
    if (o === null || (o.decidedBy !== "upstream_reset" && o.decidedBy !== "upstream_connection_lost")) return false;
    end = a.requestEnded ? "reset_after_request_end" : "reset_before_request_end";
  }
  return tryRetry(c, a, end, undefined, undefined);
}

function onBackoffTimer(r: RetryController): void {
  r.onBackoff();
}
