// The filter registry: every filter a listener's chain can hold, in the order a call meets them,
// each with why it sits there, how it is built, the decided_by reasons it may end a call with
// and the metrics it writes (one line per layer and its reason, as linkerd2-proxy's stack is
// written). snapshot.ts builds each listener's chain from this list and nothing else; the
// reasons' texts live in translate/outcome.ts FILTER_DECIDED_BY and the metrics' definitions in
// observe/metrics.ts (lower layers, which may not import this one), and
// test/proxy/filters/registry.test.ts holds the three together. docs/contributing/architecture.md
// states the same order (test/docs/contributing.test.ts), and docs/contributing/extending.md
// says what a new filter touches.
import type { Logger } from "pino";
import type { Config, ListenerConfig } from "../../config/index.js";
import type { FaultParsers } from "../../config/parsers.js";
import type { FilterDecidedBy } from "../../translate/index.js";
import type { FilterFactory } from "../call/filter.js";
import type { Metrics } from "../observe/metrics.js";
import { authFilterFactory } from "./auth/filter.js";
import { faultFilterFactory, type FaultCounter } from "./fault/filter.js";
import type { FaultSet } from "./fault/select.js";
import { headerRulesFilterFactory } from "./headers/filter.js";
import { rateLimitFilterFactory } from "./rate-limit/filter.js";
import { globalRateLimitFilterFactory } from "./rate-limit/global.js";
import type { Cluster } from "../upstream/cluster.js";
import type { SideClusters } from "../upstream/side-clusters.js";

/** What the filters are built with that outlives a snapshot (process-wide state, reused by every snapshot). */
export interface FilterDeps {
  readonly metrics: Metrics;
  readonly log: Logger;
  /** every fault rule (config and API); the set outlives snapshots, the API edits it in place */
  readonly faults: FaultSet;
  readonly faultCounter: FaultCounter;
  /**
   * the config's fault parsers, which a listener's header faults (faultHeaders) need; null until
   * loaded (Dojang loads them before it serves a config that has header faults, and builds its
   * snapshots again with them)
   */
  readonly faultParsers: FaultParsers | null;
  /** monotonic milliseconds */
  readonly now: () => number;
  /** the clusters of the side calls' services given by address (rateLimit.global.service, extAuthz.address), shared by every snapshot */
  readonly side: SideClusters;
}

export interface FilterEntry {
  /** snake_case, as the docs name it */
  readonly name: string;
  /** why it sits where it does in the chain */
  readonly why: string;
  /** the listener's factory, or null when no route of the listener needs the filter (no cost per call) */
  readonly build: (listener: ListenerConfig, config: Config, deps: FilterDeps, clusters: ReadonlyMap<string, Cluster>) => FilterFactory | null;
  /** the decided_by reasons it may end a call with (translate/outcome.ts FILTER_DECIDED_BY) */
  readonly decidedBy: readonly FilterDecidedBy[];
  /** the metrics it writes besides dojang_calls_total (observe/metrics.ts) */
  readonly metrics: readonly string[];
}

/** The chain's order: a call meets the first entry first. */
export const FILTERS: readonly FilterEntry[] = Object.freeze([
  {
    name: "auth",
    why: "first (issue 21): authentication, then the rules, then the external check, before every limit, so a refused caller spends no token and asks no service",
    build: (l, _config, deps, clusters) => authFilterFactory(l.routes, { listener: l.name, metrics: deps.metrics, log: deps.log, now: deps.now, side: deps.side, clusters }),
    decidedBy: ["jwt", "rbac", "ext_authz"],
    metrics: ["dojang_auth_decisions_total", "dojang_ext_authz_calls_total", "dojang_jwks_fetches_total"],
  },
  {
    name: "rate_limit",
    why: "the route's local token buckets (issue 12), before anything that costs more: a refused call meets no fault rule",
    build: (l, _config, deps) => rateLimitFilterFactory(l.routes, deps.now),
    decidedBy: ["rate_limited"],
    metrics: [],
  },
  {
    name: "rate_limit_global",
    why: "after the local limit (issue 20): a call the local limit refused never asks the rate-limit service",
    build: (l, _config, deps, clusters) => globalRateLimitFilterFactory(l.routes, { metrics: deps.metrics, side: deps.side, clusters }),
    decidedBy: ["rate_limited_global", "rate_limit_service_failed"],
    metrics: ["dojang_rate_limit_service_calls_total"],
  },
  {
    name: "header_rules",
    why: "after every refusal (issue 12): it changes the head of a call that goes upstream, and a status dojang answers itself is left alone",
    build: (l) => headerRulesFilterFactory(l.routes),
    decidedBy: [],
    metrics: [],
  },
  {
    name: "fault",
    why: "last (issue 12): a call a filter before it refused meets no fault rule; always built, since the admin API may add a rule at any time (no rule: one size test per call)",
    build: (l, config, deps) =>
      faultFilterFactory({
        listener: l.name,
        headers: l.faultHeaders ? deps.faultParsers : null,
        trailer: l.faultTrailer,
        seed: config.faultInjection.seed,
        set: deps.faults,
        counter: deps.faultCounter,
        metrics: deps.metrics,
        log: deps.log,
        now: deps.now,
      }),
    decidedBy: ["fault"],
    metrics: ["dojang_faults_injected_total"],
  },
] satisfies FilterEntry[]);

/** A listener's factories, in the registry's order, without the filters it does not need. */
export function listenerFilters(listener: ListenerConfig, config: Config, deps: FilterDeps, clusters: ReadonlyMap<string, Cluster>): FilterFactory[] {
  const out: FilterFactory[] = [];
  for (const f of FILTERS) {
    const factory = f.build(listener, config, deps, clusters);
    if (factory !== null) out.push(factory);
  }
  return out;
}
