// One question to a side service (the global rate-limit service, the external authorization
// service, a JWKS server) that settles exactly once, within its timeout, whatever the service or
// the transport does. Must not import src/proxy/call or any client library: the I/O (unary.ts for
// the rate-limit service and ext_authz, filters/auth/jwks.ts's HTTPS fetch) starts inside it and
// reports to it.
//
// Why a timer of dojang's own: a transport's deadline only works when its own state machine
// reports the end. grpc-js (which carried these calls before 0.6) reported a service's
// RST_STREAM(CANCEL) as CANCELLED, the same code it gives a call the caller cancelled; node:https's
// `timeout` is an idle timer that a server trickling one byte at a time never trips. A result a
// transport drops, or never produces, left the dojang call waiting for the transport's own
// deadline (issue "0.5.1: what outside judges found", item 8). Here the first of {answer,
// failure, timer, cancel} wins; the others are ignored, and the I/O is stopped when the timer or
// the caller ends it.
//
// Cost per side call: one object and one timer (the side call itself is a network round trip).

/** How a side call ended without an answer. */
export type SideFailure = "timeout" | "unavailable" | "error" | "cancelled";

/** A side call's end: the answer, or the failure and a short text saying what happened (never a credential). */
export type SideOutcome<T> = { readonly result: "ok"; readonly value: T } | { readonly result: SideFailure; readonly detail: string };

/** What the I/O calls when it has an end; only the first call counts. */
export type Settle<T> = (o: SideOutcome<T>) => void;

/** How the I/O is stopped: a function, or an object whose stop() does it (no closure per call). */
export type SideStop = (() => void) | { stop(): void };

/** A side call in flight. */
export interface SideCallHandle {
  /** the caller no longer wants the answer: settles "cancelled" (unless settled already) and stops the I/O */
  cancel(): void;
}

/** node's timers take at most 2^31-1 ms (a longer delay fires at once, with a warning). */
const MAX_TIMER_MS = 2_147_483_647;

class SideCall<T> implements SideCallHandle {
  settled = false;
  /** inside start(): an end reported now is kept and settled after sideCall() returns */
  starting = true;
  early: SideOutcome<T> | undefined = undefined;
  /** stops the I/O; set once start() returned */
  abort: SideStop | undefined = undefined;
  readonly timer: NodeJS.Timeout;

  constructor(
    private readonly timeoutMs: number,
    private readonly done: (o: SideOutcome<T>) => void,
  ) {
    this.timer = setTimeout(onTimer, Math.min(Math.max(timeoutMs, 0), MAX_TIMER_MS), this);
    // the timer must not keep a process alive on its own (a closing Dojang cancels its calls)
    this.timer.unref();
  }

  /** The one way out. `stop`: the I/O is still running and must be ended. */
  settle(o: SideOutcome<T>, stop: boolean): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.timer);
    if (stop) {
      const a = this.abort;
      this.abort = undefined;
      if (a !== undefined) {
        try {
          if (typeof a === "function") a();
          else a.stop();
        } catch {
          /* the I/O is gone either way; its end is the outcome settled here */
        }
      }
    }
    this.done(o);
  }

  /** The I/O's report (settle for start()). */
  report(o: SideOutcome<T>): void {
    if (this.starting) this.early ??= o;
    else this.settle(o, false);
  }

  cancel(): void {
    this.settle({ result: "cancelled", detail: "the call ended first" }, true);
  }

  timedOut(): void {
    this.settle({ result: "timeout", detail: `no answer in ${this.timeoutMs} ms` }, true);
  }
}

function onTimer<T>(c: SideCall<T>): void {
  c.timedOut();
}

/**
 * Starts one side call: `start` begins the I/O, reports its end through `settle` (any number of
 * times; the first counts) and returns how to stop it. `done` runs exactly once, with the answer,
 * the I/O's failure, "timeout" when `timeoutMs` passes first, or "cancelled" when the handle is
 * cancelled first; never inside sideCall() itself (an end reported while starting, or a throw,
 * settles on the next microtask), so a caller may start one from a hook and return.
 */
export function sideCall<T>(timeoutMs: number, start: (settle: Settle<T>) => SideStop, done: (o: SideOutcome<T>) => void): SideCallHandle {
  const c = new SideCall<T>(timeoutMs, done);
  try {
    c.abort = start((o) => c.report(o));
  } catch (err) {
    c.early ??= { result: "error", detail: (err as Error).message };
  }
  c.starting = false;
  const early = c.early;
  if (early !== undefined) queueMicrotask(() => c.settle(early, true));
  return c;
}

/** gRPC status codes as the side call's failures: 4 → timeout, 14 → unavailable, any other → error (1 CANCELLED included: a caller's own cancel never reaches here). */
export function failureOfGrpcCode(code: number): SideFailure {
  return code === 4 ? "timeout" : code === 14 ? "unavailable" : "error";
}

/** node's connection errors: the service could not be reached or dropped the connection. */
const UNREACHABLE = new Set(["ECONNREFUSED", "ECONNRESET", "EHOSTUNREACH", "ENETUNREACH", "EPIPE", "ENOTFOUND", "EAI_AGAIN", "ECONNABORTED"]);

/** A node:net / node:https error as the side call's failure. */
export function failureOfNodeError(err: unknown): SideOutcome<never> {
  const e = err as { code?: unknown; message?: unknown };
  const code = typeof e.code === "string" ? e.code : undefined;
  const detail = code ?? (typeof e.message === "string" ? e.message : "error");
  return { result: code !== undefined && UNREACHABLE.has(code) ? "unavailable" : "error", detail };
}
