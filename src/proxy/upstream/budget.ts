// One cluster's retry budget (src/translate/retry-budget.ts holds the arithmetic): every call
// routed to the cluster deposits, every retry withdraws, and retries may be at most `percent` of
// the calls in a 10 s window, with a floor of `minRetriesPerSecond` (linkerd's budget, Envoy's
// retry_budget). One per Cluster (`cluster.budget`); a reload that keeps the cluster keeps it.
// It also holds the cluster's dojang_retries_total children, bound once. Must not import
// src/proxy/call.
import type { Counter } from "prom-client";
import { DEFAULT_RETRY_BUDGET, newRetryBudget, recordCall, retriesAllowed, tryWithdraw, type RetryBudgetConfig, type RetryBudgetState } from "../../translate/retry-budget.js";
import type { RetryReason } from "../../translate/retry.js";
import type { Metrics } from "../observe/metrics.js";

export class RetryBudget {
  readonly cfg: RetryBudgetConfig;
  private readonly state: RetryBudgetState;
  /** retries withdrawn since start (for /clusters and tests) */
  withdrawn = 0;
  /** retries the budget refused since start */
  denied = 0;
  /** dojang_retries_total{cluster, reason}, bound once */
  readonly counters: Readonly<Record<RetryReason, Counter.Internal>>;

  constructor(
    cluster: string,
    cfg: { readonly percent: number; readonly minRetriesPerSecond: number },
    metrics: Metrics,
    /** monotonic milliseconds */
    private readonly now: () => number = performance.now.bind(performance),
  ) {
    this.cfg = Object.freeze({ percent: cfg.percent, minRetriesPerSecond: cfg.minRetriesPerSecond, windowMs: DEFAULT_RETRY_BUDGET.windowMs });
    this.state = newRetryBudget(this.now());
    this.counters = metrics.retryCounters(cluster);
  }

  /** A call was routed to the cluster (its first attempt): a deposit. `nowMs`: the caller's monotonic clock reading, if it has one. */
  deposit(nowMs: number = this.now()): void {
    recordCall(this.state, this.cfg, nowMs);
  }

  /** One retry, if the window has room (counted when granted). */
  withdraw(): boolean {
    if (tryWithdraw(this.state, this.cfg, this.now())) {
      this.withdrawn++;
      return true;
    }
    this.denied++;
    return false;
  }

  /** Retries the window allows now (for /clusters). */
  allowed(): number {
    return retriesAllowed(this.state, this.cfg, this.now());
  }

  /** A retry happened (after the decision): dojang_retries_total. */
  count(reason: RetryReason): void {
    this.counters[reason].inc();
  }
}
