// A named group of endpoints: the resolver's addresses, a picker over them, the open sessions,
// and the counters circuit breakers and the retry budget will read (placeholders today: counted,
// never enforced). Must not import src/proxy/call.
import type { Logger } from "pino";
import type { ClusterConfig, HostPort } from "../../config/index.js";
import type { Metrics } from "../observe/metrics.js";
import { roundRobinPicker, type Picker } from "./balancer.js";
import { Endpoint } from "./endpoint.js";
import { staticResolver, type Resolver } from "./resolver.js";
import type { UpstreamSession } from "./session.js";

/** Concurrency counters a breaker compares with its limits (not enforced yet). */
export interface BreakerCounters {
  /** calls routed here that have not ended */
  activeCalls: number;
  /** attempts waiting for a stream slot (a session not yet ready) */
  pendingAttempts: number;
  /** retries in flight */
  activeRetries: number;
}

/** The retry budget's running totals (no retry policy exists yet; kept so reloads can carry it). */
export interface RetryBudget {
  retries: number;
}

export class Cluster {
  readonly name: string;
  readonly endpoints: readonly Endpoint[];
  readonly picker: Picker<Endpoint>;
  readonly resolver: Resolver;
  readonly connectCounters: Record<"ok" | "error" | "timeout", { inc(): void }>;
  /** every session not yet closed, in rotation or draining */
  readonly open = new Set<UpstreamSession>();
  readonly breaker: BreakerCounters = { activeCalls: 0, pendingAttempts: 0, activeRetries: 0 };
  readonly budget: RetryBudget = { retries: 0 };

  constructor(
    readonly cfg: ClusterConfig,
    readonly metrics: Metrics,
    readonly log: Logger,
  ) {
    this.name = cfg.name;
    this.resolver = staticResolver(cfg);
    this.endpoints = this.resolver.resolve().map((e) => new Endpoint(this, e.host, e.port));
    this.picker = roundRobinPicker(this.endpoints);
    this.connectCounters = {
      ok: metrics.upstreamConnects.labels(cfg.name, "ok"),
      error: metrics.upstreamConnects.labels(cfg.name, "error"),
      timeout: metrics.upstreamConnects.labels(cfg.name, "timeout"),
    };
  }

  /**
   * The endpoint for the next attempt; undefined when the cluster has none (yet). `avoid` (the
   * endpoint a retried attempt just failed on) is skipped when another endpoint can be had.
   */
  pick(avoid?: Endpoint): Endpoint | undefined {
    const e = this.picker.pick();
    if (avoid === undefined || e !== avoid || this.picker.endpoints.length < 2) return e;
    return this.picker.pick();
  }

  sessionOpened(s: UpstreamSession): void {
    this.open.add(s);
    this.metrics.live.upstreamSessions++;
  }

  sessionClosed(s: UpstreamSession): void {
    if (this.open.delete(s)) this.metrics.live.upstreamSessions--;
  }

  /**
   * Replaces the endpoint list (DNS, reload): endpoints that stay keep their Endpoint objects and
   * sessions; removed ones are retired (their sessions drain, calls on them finish).
   */
  setEndpoints(endpoints: readonly HostPort[], weights: readonly number[]): void {
    void endpoints;
    void weights;
  }

  /** Some endpoint is healthy and not ejected (for /ready readyClusters and the health service). */
  hasHealthyEndpoint(): boolean {
    return this.endpoints.some((e) => e.healthy && !e.ejected);
  }

  /** Stops health checkers, DNS and keepalive timers (a reload dropped the cluster; Dojang.close). */
  stop(): void {}

  /** Closes every session: gracefully (GOAWAY, let streams finish) or at once. */
  close(force: boolean): void {
    for (const s of [...this.open]) {
      if (force) s.h2.destroy();
      else s.retire();
    }
  }
}
