// The per-cluster retry budget: retries may be at most `percent` of the calls in a sliding window, with a floor of `minRetriesPerSecond` (linkerd's budget; Envoy's retry_budget).
//
// Pure state and step functions; the caller passes monotonic milliseconds. The window is split
// into slots so old calls age out smoothly without a timer: counts live in a small ring.

/** `retryBudget` in the config. */
export interface RetryBudgetConfig {
  /** retries allowed as a percentage of calls started in the window (0..1000) */
  readonly percent: number;
  /** retries always allowed per second, whatever the traffic (the floor) */
  readonly minRetriesPerSecond: number;
  /** the window, ms (default 10 s, linkerd's TTL) */
  readonly windowMs: number;
}

export const DEFAULT_RETRY_BUDGET: RetryBudgetConfig = Object.freeze({ percent: 20, minRetriesPerSecond: 10, windowMs: 10_000 });

const SLOTS = 10;

/** Mutable by the step functions only; one per cluster, kept across reloads. */
export interface RetryBudgetState {
  readonly calls: number[];
  readonly retries: number[];
  /** index of the slot `slotStartMs` belongs to */
  slot: number;
  slotStartMs: number;
}

export function newRetryBudget(nowMs: number): RetryBudgetState {
  return { calls: new Array<number>(SLOTS).fill(0), retries: new Array<number>(SLOTS).fill(0), slot: 0, slotStartMs: nowMs };
}

/** Moves the ring to `nowMs`, zeroing the slots that fell out of the window. */
function advance(s: RetryBudgetState, cfg: RetryBudgetConfig, nowMs: number): void {
  const slotMs = cfg.windowMs / SLOTS;
  let steps = Math.floor((nowMs - s.slotStartMs) / slotMs);
  if (steps <= 0) return;
  if (steps > SLOTS) steps = SLOTS;
  for (let i = 0; i < steps; i++) {
    s.slot = (s.slot + 1) % SLOTS;
    s.calls[s.slot] = 0;
    s.retries[s.slot] = 0;
  }
  s.slotStartMs = nowMs - ((nowMs - s.slotStartMs) % slotMs);
}

const sum = (a: readonly number[]): number => {
  let n = 0;
  for (const x of a) n += x;
  return n;
};

/** A call (first attempt) started on the cluster: it deposits into the budget. */
export function recordCall(s: RetryBudgetState, cfg: RetryBudgetConfig, nowMs: number): void {
  advance(s, cfg, nowMs);
  s.calls[s.slot]! += 1;
}

/** How many retries the window allows now. */
export function retriesAllowed(s: RetryBudgetState, cfg: RetryBudgetConfig, nowMs: number): number {
  advance(s, cfg, nowMs);
  const floor = (cfg.minRetriesPerSecond * cfg.windowMs) / 1000;
  return Math.max(floor, (sum(s.calls) * cfg.percent) / 100);
}

/** Asks for one retry: true (and counted) when the window has room, false otherwise. */
export function tryWithdraw(s: RetryBudgetState, cfg: RetryBudgetConfig, nowMs: number): boolean {
  const allowed = retriesAllowed(s, cfg, nowMs);
  if (sum(s.retries) + 1 > allowed) return false;
  s.retries[s.slot]! += 1;
  return true;
}
