// The global rate limit per route (issue 20 part 3): `rateLimit.global: { service, domain,
// timeout, failureModeDeny, descriptors }`. One limit kept by an Envoy RateLimitService (such as
// envoyproxy/ratelimit on redis) for every dojang replica: each call on the route asks it
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
// src/translate/rate-limit-global.ts. The gRPC client (rls-client.ts, @grpc/grpc-js) is loaded
// with import() when a config first has a global limit, and its channels are shared per service
// address through the Dojang's RlsPool.
//
// Cost: a listener with no global limit gets no factory; a call on a route with one gets one
// filter object, its descriptors and one unary gRPC call (a call without descriptors — every
// descriptor needed a header it lacks — asks nothing).
import type { RouteConfig } from "../../../config/index.js";
import { formatHostPort } from "../../../config/units.js";
import { Code, outcome, type Outcome } from "../../../translate/index.js";
import { buildDescriptors, globalVerdict, type Descriptor, type EntrySpec, type RlsResponse } from "../../../translate/rate-limit-global.js";
import type { CallFilter, FilterCall, FilterFactory } from "../../call/filter.js";
import type { CompiledRoute } from "../../router.js";
import type { Metrics, RlsResult } from "../../observe/metrics.js";
import type { Cluster } from "../../upstream/cluster.js";

/** One service's client (rls-client.ts): one shared channel. */
export interface RlsClient {
  readonly address: string;
  /** ShouldRateLimit with a deadline of `timeoutMs`; `done` runs once, unless the ask is cancelled */
  ask(domain: string, descriptors: readonly Descriptor[], timeoutMs: number, done: (result: RlsResult, res: RlsResponse | undefined) => void): { cancel(): void };
  close(): void;
}

/** The clients of one Dojang, by service address; they outlive snapshots (a reload keeps them). */
export interface RlsPool {
  readonly metrics: Metrics;
  readonly clients: Map<string, RlsClient>;
  /** rls-client.ts, once loaded */
  module: typeof import("./rls-client.js") | undefined;
  loading: Promise<typeof import("./rls-client.js")> | undefined;
  closed: boolean;
}

export function newRlsPool(metrics: Metrics): RlsPool {
  return { metrics, clients: new Map(), module: undefined, loading: undefined, closed: false };
}

/** Closes every channel (Dojang.close). */
export function closeRlsPool(pool: RlsPool): void {
  pool.closed = true;
  for (const c of pool.clients.values()) c.close();
  pool.clients.clear();
}

function loadClientModule(pool: RlsPool): Promise<typeof import("./rls-client.js")> {
  pool.loading ??= import("./rls-client.js").then((m) => (pool.module = m));
  return pool.loading;
}

function clientFor(pool: RlsPool, m: typeof import("./rls-client.js"), address: string): RlsClient {
  let c = pool.clients.get(address);
  if (c === undefined) {
    c = m.newRlsClient(address, pool.metrics);
    pool.clients.set(address, c);
  }
  return c;
}

interface GlobalRoute {
  readonly address: string;
  readonly domain: string;
  readonly timeoutMs: number;
  readonly failureModeDeny: boolean;
  readonly hints: boolean;
  readonly specs: readonly (readonly EntrySpec[])[];
  readonly overLimit: Outcome;
}

const FAILURE_TEXT: Readonly<Record<RlsResult, string>> = {
  ok: "",
  over_limit: "",
  timeout: "no answer in time",
  unavailable: "unavailable",
  error: "error",
};

/** One call's question to the service; it holds the call's request head until the answer. */
class GlobalCheck implements CallFilter {
  private pending: { cancel(): void } | null = null;
  private ended = false;
  constructor(
    private readonly pool: RlsPool,
    private readonly g: GlobalRoute,
    private readonly descriptors: readonly Descriptor[],
  ) {}

  onRequestHead(c: FilterCall): boolean {
    const m = this.pool.module;
    if (m !== undefined) return this.ask(c, m);
    // the first calls after the first global config: wait for the client module
    loadClientModule(this.pool).then(
      (mod) => {
        if (!this.ended && !c.done && this.ask(c, mod)) c.continueRequestHead(this);
      },
      () => {
        if (!this.ended && !c.done) this.failed(c, "error");
      },
    );
    return false;
  }

  /** Sends the question; false (held) until the answer. */
  private ask(c: FilterCall, m: typeof import("./rls-client.js")): boolean {
    if (this.pool.closed) return true;
    const g = this.g;
    this.pending = clientFor(this.pool, m, g.address).ask(g.domain, this.descriptors, g.timeoutMs, (result, res) => {
      this.pending = null;
      if (this.ended || c.done) return;
      if (res === undefined) return this.failed(c, result);
      const v = globalVerdict(res, g.hints);
      if (!v.over) c.continueRequestHead(this);
      else c.finishLocal(g.overLimit, v.headers);
    });
    return false;
  }

  private failed(c: FilterCall, result: RlsResult): void {
    if (!this.g.failureModeDeny) return c.continueRequestHead(this);
    c.finishLocal(outcome(Code.UNAVAILABLE, `rate limit service ${this.g.address} failed: ${FAILURE_TEXT[result]}`, "rate_limit_service_failed"));
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
export function globalRateLimitFilterFactory(routes: readonly RouteConfig[], pool: RlsPool): FilterFactory | null {
  if (!routes.some((r) => r.rateLimit?.global != null)) return null;
  void loadClientModule(pool);
  const byRoute: (GlobalRoute | null)[] = routes.map((r) => {
    const g = r.rateLimit?.global;
    if (g === undefined || g === null) return null;
    const address = formatHostPort(g.service);
    return Object.freeze({
      address,
      domain: g.domain,
      timeoutMs: g.timeoutMs,
      failureModeDeny: g.failureModeDeny,
      hints: r.rateLimit!.responseHeaders,
      specs: g.descriptors,
      overLimit: outcome(Code.RESOURCE_EXHAUSTED, `rate limited by the global rate limit service (domain ${g.domain})`, "rate_limited_global"),
    });
  });
  return {
    forCall(c: FilterCall, route: CompiledRoute<Cluster>, raw: readonly string[]): CallFilter | null {
      const g = byRoute[route.index];
      if (g === undefined || g === null) return null;
      const descriptors = buildDescriptors(g.specs, { path: c.path, clientAddress: c.clientAddress, raw });
      if (descriptors.length === 0) return null;
      return new GlobalCheck(pool, g, descriptors);
    },
  };
}
