// One cluster's four circuit breakers (clusters[].circuitBreaker), their counts and their
// accounting in one place. Each limit is asked where it applies and counted by whoever starts
// and ends what it counts; overflow answers 14 at once (decided_by overflow) with the message
// overflow() makes, and dojang_upstream_overflow_total{cluster, limit} counts it.
//
//   maxConnections   sessions not yet closed (the cluster's `open` set; an endpoint asks
//                    mayConnect before it opens one)
//   maxPendingCalls  attempts waiting: among a connecting session's waiters (for its SETTINGS)
//                    or in an endpoint's queue for a stream slot (session.ts, endpoint.ts)
//   maxCalls         calls routed here that have not ended (the call: admitCall/releaseCall)
//   maxRetries       retry attempts running, not waiting out their back-off (call/retry.ts:
//                    mayRetry when decided, retryStarted/retryEnded around its attempt)
//
// No allocation on the normal path: a check is a comparison, a string is made only to refuse.
// Must not import src/proxy/call.
import type { ClusterConfig } from "../../config/schema.js";
import type { Metrics } from "../observe/metrics.js";
import type { UpstreamSession } from "./session.js";

/** Circuit breaker names, as in the config and the overflow metric's `limit` label. */
export type BreakerLimit = "maxConnections" | "maxPendingCalls" | "maxCalls" | "maxRetries";
export const BREAKER_LIMITS: readonly BreakerLimit[] = ["maxConnections", "maxPendingCalls", "maxCalls", "maxRetries"];

export class Breaker {
  /** calls routed here that have not ended (maxCalls) */
  activeCalls = 0;
  /** attempts waiting now, for a session's SETTINGS or in an endpoint's queue (maxPendingCalls) */
  pendingAttempts = 0;
  /** retry attempts running (maxRetries) */
  activeRetries = 0;
  private readonly overflowCounters: Record<BreakerLimit, { inc(): void }>;

  constructor(
    private readonly cluster: string,
    private readonly limits: ClusterConfig["circuitBreaker"],
    /** the cluster's sessions not yet closed: their number is what maxConnections limits */
    private readonly open: ReadonlySet<UpstreamSession>,
    metrics: Metrics,
  ) {
    const oc = {} as Record<BreakerLimit, { inc(): void }>;
    for (const l of BREAKER_LIMITS) oc[l] = metrics.upstreamOverflow.labels(cluster, l);
    this.overflowCounters = oc;
  }

  /** A limit was reached: counts it, and returns the message the call ends with. */
  overflow(limit: BreakerLimit): string {
    this.overflowCounters[limit].inc();
    return `cluster ${this.cluster}: ${limit} ${this.limits[limit]} reached`;
  }

  // === maxConnections ===

  /** May another session be opened? */
  mayConnect(): boolean {
    return this.open.size < this.limits.maxConnections;
  }

  // === maxPendingCalls ===

  /** May one more attempt wait (for a session's SETTINGS or a stream slot)? */
  mayWait(): boolean {
    return this.pendingAttempts < this.limits.maxPendingCalls;
  }

  /** `n` attempts started waiting. */
  waiting(n: number): void {
    this.pendingAttempts += n;
  }

  /** `n` attempts stopped waiting (served, failed, or gave up). */
  doneWaiting(n: number): void {
    this.pendingAttempts -= n;
  }

  // === maxCalls ===

  /** A call routed here starts: counted, or the overflow message when maxCalls are running. */
  admitCall(): string | undefined {
    if (this.activeCalls >= this.limits.maxCalls) return this.overflow("maxCalls");
    this.activeCalls++;
    return undefined;
  }

  /** A call admitCall counted has ended. */
  releaseCall(): void {
    this.activeCalls--;
  }

  // === maxRetries ===

  /** May a retry be decided? `holding`: the call's own running retry ends with this decision. */
  mayRetry(holding: boolean): boolean {
    return this.activeRetries - (holding ? 1 : 0) < this.limits.maxRetries;
  }

  /** A retry's attempt starts (it was allowed by mayRetry). */
  retryStarted(): void {
    this.activeRetries++;
  }

  /** A retry's attempt was abandoned, or its call ended. */
  retryEnded(): void {
    this.activeRetries--;
  }

  /** GET /clusters: each limit's count now and its limit (in BREAKER_LIMITS order). */
  view(): Record<BreakerLimit, { readonly current: number; readonly limit: number }> {
    const l = this.limits;
    return {
      maxConnections: { current: this.open.size, limit: l.maxConnections },
      maxPendingCalls: { current: this.pendingAttempts, limit: l.maxPendingCalls },
      maxCalls: { current: this.activeCalls, limit: l.maxCalls },
      maxRetries: { current: this.activeRetries, limit: l.maxRetries },
    };
  }
}
