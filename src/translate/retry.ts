// Retry decisions for one call: which attempt endings may be tried again, when, and why not (gRFC A6, Envoy's router, linkerd's replay).
//
// Pure: the call gathers the facts of an attempt's end (how it ended, the status, what the
// upstream can have seen) and the state of its budgets, and asks decideRetry() what to do. No
// clock, timers or randomness here: the caller passes the jitter draw in [0, 1).

import { Code } from "./codes.js";

/**
 * How an attempt ended, as far as retrying is concerned.
 * - `status`: the upstream sent a grpc-status (Trailers-Only, or trailers after headers with no
 *   message: a status counts either way, which Envoy and linkerd miss).
 * - `refused`: RST_STREAM(REFUSED_STREAM), or a stream above a GOAWAY's last-stream-id, or a
 *   connect that failed before the stream was opened: the upstream never processed the call.
 * - `reset_before_request_end`: reset or connection lost while the request was still being sent.
 * - `reset_after_request_end`: reset or connection lost after the whole request was sent: the
 *   upstream may have done the work (Envoy retries these anyway: envoyproxy/envoy#39800).
 * - `per_try_timeout`: the attempt's own timer (perTryTimeout) ran out.
 */
export type AttemptEnd = "status" | "refused" | "reset_before_request_end" | "reset_after_request_end" | "per_try_timeout";

/** Why a retry happened: the label of dojang_retries_total{reason}. Closed list. */
export const RETRY_REASONS = {
  status: "the upstream's grpc-status is in the route's retryOn",
  refused: "the upstream never processed the attempt (REFUSED_STREAM, above GOAWAY's last-stream-id, connect failed): a transparent retry",
  reset: "the attempt was reset (before the request was fully sent, or after it with retryResetAfterRequest)",
  per_try_timeout: "the attempt's perTryTimeout passed",
} as const;
export type RetryReason = keyof typeof RETRY_REASONS;

/** Why no (further) retry: for logs and the journal. */
export type NoRetryWhy =
  | "committed"
  | "not_retryable"
  | "attempts_exhausted"
  | "pushback_stop"
  | "deadline"
  | "budget_exhausted"
  | "breaker_open"
  | "reset_after_request";

/** A route's retry policy, normalized (config keys in parentheses). */
export interface RetryPolicy {
  /** gRPC codes that are retried (`retryOn`), as a bit set: bit n = code n */
  readonly retryOnMask: number;
  /** attempts in all, the first included (`maxAttempts`, ≥ 1) */
  readonly maxAttempts: number;
  /** each attempt's own limit (`perTryTimeout`); null = only the call's deadline */
  readonly perTryTimeoutMs: number | null;
  /** `backoff.base` and `backoff.max`: delay before retry n is random(0, min(base × 2^(n−1), max)) */
  readonly backoffBaseMs: number;
  readonly backoffMaxMs: number;
  /** request bytes kept for replay (`bufferBytes`); past it the call commits */
  readonly bufferBytes: number;
  /** retry resets that came after the whole request was sent (`retryResetAfterRequest`) */
  readonly retryResetAfterRequest: boolean;
}

/** The bit set of a list of codes (retryOn). */
export function codeMask(codes: readonly number[]): number {
  let m = 0;
  for (const c of codes) if (Number.isInteger(c) && c >= 0 && c <= 16) m |= 1 << c;
  return m;
}

/** gRFC A6's default: retry UNAVAILABLE only. */
export const DEFAULT_RETRY_ON_MASK = codeMask([Code.UNAVAILABLE]);

// === grpc-retry-pushback-ms ===

export type Pushback =
  | { readonly kind: "none" }
  | { readonly kind: "stop" }
  | { readonly kind: "delay"; readonly ms: number };

const NO_PUSHBACK: Pushback = Object.freeze({ kind: "none" });
const STOP: Pushback = Object.freeze({ kind: "stop" });

/**
 * The upstream's `grpc-retry-pushback-ms` trailer (gRFC A6): absent → none; a non-negative
 * decimal integer → wait that long instead of the back-off; anything else (negative, malformed,
 * several values) → do not retry.
 */
export function parsePushback(value: string | undefined): Pushback {
  if (value === undefined) return NO_PUSHBACK;
  const v = value.trim();
  if (!/^\d{1,10}$/.test(v)) return STOP;
  const ms = Number(v);
  return ms > 2_147_483_647 ? STOP : { kind: "delay", ms };
}

// === back-off ===

/**
 * Delay before retry number `retry` (1 = the first retry): full jitter over an exponential
 * ceiling, random(0, min(base × 2^(retry−1), max)) as gRFC A6 and Envoy do. `draw` is in [0, 1).
 */
export function backoffMs(retry: number, baseMs: number, maxMs: number, draw: number): number {
  const exp = retry <= 1 ? 1 : 2 ** Math.min(retry - 1, 52);
  const ceiling = Math.min(baseMs * exp, maxMs);
  const d = draw < 0 ? 0 : draw >= 1 ? 0.999999 : draw;
  return Math.floor(ceiling * d);
}

// === the decision ===

export interface RetryFacts {
  readonly end: AttemptEnd;
  /** the grpc-status of a `status` end */
  readonly code?: number | undefined;
  /** the upstream's grpc-retry-pushback-ms, parsed */
  readonly pushback: Pushback;
  /** attempts made so far, this one included (≥ 1) */
  readonly attempts: number;
  /** a transparent retry (`refused`) already happened for this call: only one per call */
  readonly transparentUsed: boolean;
  /** a response message went to the client, or the buffer overflowed: no retry is possible */
  readonly committed: boolean;
  /** ms left of the call's deadline budget; Infinity without one */
  readonly budgetLeftMs: number;
  /** the cluster's retry budget and retry breaker allow one more retry now */
  readonly budgetAllows: boolean;
  readonly breakerAllows: boolean;
  /** the draw for the back-off's jitter, in [0, 1) */
  readonly draw: number;
}

export type RetryDecision =
  | { readonly retry: true; readonly reason: RetryReason; readonly delayMs: number; readonly transparent: boolean }
  | { readonly retry: false; readonly why: NoRetryWhy };

const no = (why: NoRetryWhy): RetryDecision => ({ retry: false, why });

/**
 * Should the call try again after this attempt ended? `policy` null = the route has no retry
 * policy (only transparent retries). Rules, in order:
 * 1. A committed call is never retried (the client has seen a message).
 * 2. `refused` (never processed) is retried once per call, at once, with or without a policy,
 *    within the deadline; it counts against neither maxAttempts nor the budget nor the retry
 *    breaker (maxRetries): the upstream did no work, and one per call bounds them by the calls
 *    themselves (a restarting upstream refuses every call waiting on its connect at once, and
 *    a breaker of 3 would fail all but three of them).
 * 3. Without a policy nothing else is retried.
 * 4. The ending must be retryable: a status in retryOn, a per-try timeout, a reset before the
 *    request ended, or a reset after it with retryResetAfterRequest.
 * 5. Attempts left (maxAttempts), pushback not "stop", the budget and breaker allow it.
 * 6. The delay (pushback, else jittered back-off) must end before the deadline: a retry never
 *    outlives the client's deadline.
 */
export function decideRetry(policy: RetryPolicy | null, f: RetryFacts): RetryDecision {
  if (f.committed) return no("committed");
  if (f.end === "refused" && !f.transparentUsed) {
    if (f.budgetLeftMs <= 0) return no("deadline");
    return { retry: true, reason: "refused", delayMs: 0, transparent: true };
  }
  if (policy === null) return no("not_retryable");
  let reason: RetryReason;
  switch (f.end) {
    case "status":
      if (f.code === undefined || f.code < 0 || f.code > 16 || (policy.retryOnMask & (1 << f.code)) === 0) return no("not_retryable");
      reason = "status";
      break;
    case "per_try_timeout":
      reason = "per_try_timeout";
      break;
    case "reset_after_request_end":
      if (!policy.retryResetAfterRequest) return no("reset_after_request");
      reason = "reset";
      break;
    case "reset_before_request_end":
    case "refused": // a second refusal: an ordinary retry under the policy
      reason = f.end === "refused" ? "refused" : "reset";
      break;
  }
  if (f.attempts >= policy.maxAttempts) return no("attempts_exhausted");
  if (f.pushback.kind === "stop") return no("pushback_stop");
  if (!f.breakerAllows) return no("breaker_open");
  if (!f.budgetAllows) return no("budget_exhausted");
  const delayMs = f.pushback.kind === "delay" ? f.pushback.ms : backoffMs(f.attempts, policy.backoffBaseMs, policy.backoffMaxMs, f.draw);
  if (delayMs >= f.budgetLeftMs) return no("deadline");
  return { retry: true, reason, delayMs, transparent: false };
}
