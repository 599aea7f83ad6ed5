// The call's clocks: its deadline (the client's grpc-timeout capped by the route's timeout, one
// timer per call) and its stream-idle watch (idle.ts: no timer of its own). Module functions
// taking the call's ClockHost (no per-call object); the clock fields (deadlineAt, budgetOutMs,
// timer, idleGroup, idleMs) are written here only (test/architecture/layers.test.ts).
import { Code, outcome, type Outcome } from "../../translate/index.js";
import type { CompiledRoute } from "../router.js";
import type { Cluster } from "../upstream/cluster.js";
import type { CallContext } from "./context.js";
import { timeoutHeaderFor } from "./request-head.js";
import { unwatchIdle, watchIdle, type IdleGroup, type IdleWatched } from "./idle.js";

/** What a deadline is read from: the clock and the absolute deadline (Infinity: none). */
export interface Deadlined {
  readonly ctx: { readonly now: () => number };
  readonly deadlineAt: number;
}

/** What the clocks need of a call, and the fields they own (implemented by Call). */
export interface ClockHost extends IdleWatched, Deadlined {
  readonly ctx: CallContext;
  readonly t0: number;
  readonly done: boolean;
  /** the retry controller's own timers stop with the call's */
  readonly retry: { clearTimers(): void } | null;
  /** absolute monotonic ms; Infinity when there is no budget */
  deadlineAt: number;
  /** the grpc-timeout the first attempt sends (ms) */
  budgetOutMs: number | undefined;
  timer: NodeJS.Timeout | undefined;
  idleGroup: IdleGroup | undefined;
  idleMs: number;
  finish(o: Outcome): void;
}

/** setTimeout's limit (2^31−1 ms); longer budgets re-arm (grpc-js deadline.ts does the same). */
const MAX_TIMER_MS = 2_147_483_647;
/** A deadline timer may fire up to a tick late; an upstream CANCEL that lands this close to
 * the deadline is the deadline (spec §11.2). */
const DEADLINE_SLACK_MS = 2;
/** A client's deadline is anchored before dojang's (at its send time, not at dojang's t0), so
 * its own timer usually fires first and it resets the stream with CANCEL a transit time before
 * dojang's timer would: a client reset this close to the deadline is the deadline deciding. */
const CLIENT_DEADLINE_SLACK_MS = 10;

/**
 * The budget: the client's grpc-timeout (`clientMs`) capped by the route's timeout; the clock
 * started when the request headers arrived (t0). Arms the deadline timer and the idle watch.
 * Returns the grpc-timeout the upstream gets (undefined: no budget), or null when the time is
 * already up (the call is finished: grpc-go's client never sends such a call, createHeaderFields).
 */
export function startClocks(c: ClockHost, clientMs: number | undefined, route: CompiledRoute<Cluster>): string | undefined | null {
  let budget = clientMs;
  if (route.timeoutMs !== null && (budget === undefined || route.timeoutMs < budget)) budget = route.timeoutMs;
  let timeoutHeader: string | undefined;
  if (budget !== undefined) {
    c.deadlineAt = c.t0 + budget;
    const left = c.deadlineAt - c.ctx.now();
    if (left <= 0) {
      c.finish(outcome(Code.DEADLINE_EXCEEDED, "context deadline exceeded", "deadline"));
      return null;
    }
    timeoutHeader = timeoutHeaderFor(left);
    c.budgetOutMs = left;
    armTimer(c, left);
  }
  const idle = route.streamIdleTimeoutMs ?? c.ctx.streamIdleTimeoutMs ?? 0;
  if (idle > 0 && c.deadlineAt - c.t0 > idle) {
    c.idleMs = idle > MAX_TIMER_MS ? MAX_TIMER_MS : idle;
    c.idleGroup = watchIdle(c, c.idleMs);
  }
  return timeoutHeader;
}

function armTimer(c: ClockHost, ms: number): void {
  // Whole milliseconds: node keeps one timer list per duration, and a budget's fractional
  // remainder made a new list (and its queue entry) per call; calls with the same
  // grpc-timeout now share one. The deadline is still checked when it fires (onDeadline).
  c.timer = setTimeout(onDeadline, ms > MAX_TIMER_MS ? MAX_TIMER_MS : Math.ceil(ms), c);
}

function onDeadline(c: ClockHost): void {
  c.timer = undefined;
  if (c.done) return;
  const left = c.deadlineAt - c.ctx.now();
  if (left > DEADLINE_SLACK_MS) return armTimer(c, left);
  c.finish(outcome(Code.DEADLINE_EXCEEDED, "context deadline exceeded", "deadline"));
}

/** IdleWatched: nothing moved for a whole period. */
export function idleTimedOut(c: ClockHost): void {
  if (c.done) return;
  // 14: an intermediary giving up on a silent stream, as a connection idle timeout surfaces
  // in gRPC; 4 would blame a deadline the client never set (Envoy answers 408 "stream timeout").
  c.finish(outcome(Code.UNAVAILABLE, `stream idle timeout: nothing moved either way for ${c.idleMs} ms`, "stream_idle"));
}

/** The deadline has passed, give or take a timer's lateness (an upstream CANCEL this close to it is the deadline). */
export function pastDeadline(c: Deadlined): boolean {
  return c.ctx.now() >= c.deadlineAt - DEADLINE_SLACK_MS;
}

/** A client's reset this close to the deadline is the deadline deciding (CLIENT_DEADLINE_SLACK_MS). */
export function clientPastDeadline(c: Deadlined): boolean {
  return c.ctx.now() >= c.deadlineAt - CLIENT_DEADLINE_SLACK_MS;
}

/** The call's status is fixed: its timers stop (the deadline, the retry's, the idle watch). */
export function stopClocks(c: ClockHost): void {
  if (c.timer !== undefined) {
    clearTimeout(c.timer);
    c.timer = undefined;
  }
  if (c.retry !== null) c.retry.clearTimers();
  const g = c.idleGroup;
  if (g !== undefined) {
    c.idleGroup = undefined;
    unwatchIdle(c, g);
  }
}
