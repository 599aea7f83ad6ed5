// The global rate limit per route (issue 20 part 3): `rateLimit.global: { service | cluster,
// domain, timeout, failureModeDeny, descriptors }`. One limit kept by an Envoy RateLimitService
// (such as envoyproxy/ratelimit on redis) for every dojang replica: each call on the route asks it
// ShouldRateLimit with the route's descriptors and waits for the answer in its request-head hook,
// before any attempt. The local limit (filter.ts) runs first: a call it refuses never asks.
//
//   OVER_LIMIT          → 8 RESOURCE_EXHAUSTED, decided_by rate_limited_global, with
//                         x-ratelimit-limit/-remaining/-reset and grpc-retry-pushback-ms
//                         (rateLimit.responseHeaders) on the Trailers-Only status
//   OK (or UNKNOWN)     → the call goes on
//   no answer within `timeout`, or a failure (unavailable, any other error)
//                       → the call goes on and dojang_rate_limit_service_calls_total counts the
//                         failure by its result; with failureModeDeny: 14 UNAVAILABLE,
//                         decided_by rate_limit_service_failed
//
// The pure half (descriptors from the call, the answer's meaning, the headers) is
// src/translate/rate-limit-global.ts, the request and answer on the wire src/translate/rls-wire.ts
// (the request written from a template compiled with the route). The question rides dojang's own
// upstream (upstream/unary.ts), on the cluster `cluster` names or the address's own
// (upstream/side-clusters.ts), as a side call (upstream/side-call.ts) that ends within `timeout`.
//
// Cost: a listener with no global limit gets no factory; a call on a route with one gets one
// filter object, its request's bytes, one stream on a session of the service's cluster, and a
// side call's object and timer (a call without descriptors — every descriptor needed a header it
// lacks — asks nothing).
import type { RouteConfig } from "../../../config/index.js";
import { Code, outcome, type Outcome } from "../../../translate/index.js";
import { globalVerdict, type RlsResponse } from "../../../translate/rate-limit-global.js";
import { compileRlsRequest, decodeRlsResponse, encodeRlsRequest, RLS_PATH, type RlsRequestTemplate } from "../../../translate/rls-wire.js";
import type { CallFilter, FilterCall, FilterFactory } from "../../call/filter.js";
import type { CompiledRoute } from "../../router.js";
import type { Metrics, RlsResult } from "../../observe/metrics.js";
import type { Cluster } from "../../upstream/cluster.js";
import type { SideClusters } from "../../upstream/side-clusters.js";
import { sideCall, type SideCallHandle, type SideOutcome } from "../../upstream/side-call.js";
import { startUnary, unaryTarget, type UnaryTarget } from "../../upstream/unary.js";

/** What the factory needs beyond the routes. */
export interface GlobalDeps {
  readonly metrics: Metrics;
  /** the address clusters (shared by every snapshot) */
  readonly side: SideClusters;
  /** the snapshot's clusters (a `cluster` the limit names is one of them) */
  readonly clusters: ReadonlyMap<string, Cluster>;
}

interface GlobalRoute {
  /** the service in messages and metrics: the cluster's name, or its address */
  readonly label: string;
  readonly target: UnaryTarget;
  readonly template: RlsRequestTemplate;
  readonly decode: (m: Uint8Array) => RlsResponse | null;
  readonly timeoutMs: number;
  readonly failureModeDeny: boolean;
  readonly hints: boolean;
  readonly overLimit: Outcome;
  /** dojang_rate_limit_service_calls_total's children for the service, bound once */
  readonly counters: Readonly<Record<RlsResult, { inc(): void }>>;
  readonly side: SideClusters;
}

const FAILURE_TEXT: Readonly<Record<RlsResult, string>> = {
  ok: "",
  over_limit: "",
  timeout: "no answer in time",
  unavailable: "unavailable",
  error: "error",
  cancelled: "",
};

/** The answer's overall code; read again with its statuses when it refuses (the hints need them). */
function decodeWithHints(m: Uint8Array): RlsResponse | null {
  const r = decodeRlsResponse(m, false);
  return r?.overall_code === "OVER_LIMIT" ? decodeRlsResponse(m, true) : r;
}
function decodeOverallCode(m: Uint8Array): RlsResponse | null {
  return decodeRlsResponse(m, false);
}

/**
 * One call's question to the service; it holds the call's request head until the answer. The
 * descriptors are built when its turn comes, from the request head as the filters before it left
 * it (a header auth set or removed counts as such: the client cannot pick its own bucket by
 * sending a header a stage before replaces).
 */
class GlobalCheck implements CallFilter {
  private pending: SideCallHandle | null = null;
  private ended = false;
  constructor(private readonly g: GlobalRoute) {}

  onRequestHead(c: FilterCall): boolean {
    const h = c.upHeaders;
    const g = this.g;
    if (h === undefined || g.side.closed) return true;
    const message = encodeRlsRequest(g.template, { path: c.path, clientAddress: c.clientAddress, head: h });
    // every descriptor needed a header the call lacks: nothing to ask
    if (message === null) return true;
    // one side call from here to the answer: it ends within the route's timeout whatever the service does
    this.pending = sideCall<RlsResponse>(g.timeoutMs, (settle) => startUnary(g.target, message, g.decode, settle), (o) => this.answered(c, o));
    return false;
  }

  /** The side call's one end: counted, then the verdict (or the failure mode). */
  private answered(c: FilterCall, o: SideOutcome<RlsResponse>): void {
    this.pending = null;
    const g = this.g;
    if (o.result !== "ok") {
      g.counters[o.result].inc();
      if (o.result === "cancelled" || this.ended || c.done) return;
      return this.failed(c, o.result);
    }
    const v = globalVerdict(o.value, g.hints);
    g.counters[v.over ? "over_limit" : "ok"].inc();
    if (this.ended || c.done) return;
    if (!v.over) c.continueRequestHead(this);
    else c.finishLocal(g.overLimit, v.headers);
  }

  private failed(c: FilterCall, result: RlsResult): void {
    if (!this.g.failureModeDeny) return c.continueRequestHead(this);
    c.finishLocal(outcome(Code.UNAVAILABLE, `rate limit service ${this.g.label} failed: ${FAILURE_TEXT[result]}`, "rate_limit_service_failed"));
  }

  onEnd(): void {
    this.ended = true;
    const p = this.pending;
    if (p !== null) {
      this.pending = null;
      p.cancel();
    }
  }
}

/** The listener's global rate-limit filter factory; null when none of its routes has rateLimit.global. */
export function globalRateLimitFilterFactory(routes: readonly RouteConfig[], deps: GlobalDeps): FilterFactory | null {
  if (!routes.some((r) => r.rateLimit?.global != null)) return null;
  const byRoute: (GlobalRoute | null)[] = routes.map((r) => {
    const g = r.rateLimit?.global;
    if (g === undefined || g === null) return null;
    const side = deps.side.route({ cluster: g.cluster, address: g.service }, deps.clusters);
    const hints = r.rateLimit!.responseHeaders;
    return Object.freeze({
      label: side.label,
      target: unaryTarget(side.cluster, RLS_PATH, side.authority, g.timeoutMs),
      template: compileRlsRequest(g.domain, g.descriptors),
      // the statuses are read only when a refusal carries them
      decode: hints ? decodeWithHints : decodeOverallCode,
      timeoutMs: g.timeoutMs,
      failureModeDeny: g.failureModeDeny,
      hints,
      overLimit: outcome(Code.RESOURCE_EXHAUSTED, `rate limited by the global rate limit service (domain ${g.domain})`, "rate_limited_global"),
      counters: deps.metrics.rateLimitServiceCounters(side.label),
      side: deps.side,
    });
  });
  return {
    forCall(_c: FilterCall, route: CompiledRoute<Cluster>): CallFilter | null {
      const g = byRoute[route.index];
      return g === undefined || g === null ? null : new GlobalCheck(g);
    },
  };
}
