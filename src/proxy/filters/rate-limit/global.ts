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
// filter object, its descriptors and one unary gRPC call with its timer (a call without
// descriptors — every descriptor needed a header it lacks — asks nothing).
import type { RouteConfig } from "../../../config/index.js";
import { formatHostPort } from "../../../config/units.js";
import { Code, outcome, type Outcome } from "../../../translate/index.js";
import { buildDescriptors, globalVerdict, type Descriptor, type EntrySpec, type RlsResponse } from "../../../translate/rate-limit-global.js";
import type { CallFilter, FilterCall, FilterFactory } from "../../call/filter.js";
import type { CompiledRoute } from "../../router.js";
import type { Metrics, RlsResult } from "../../observe/metrics.js";
import type { Cluster } from "../../upstream/cluster.js";
import { sideCall, type SideCallHandle, type SideOutcome, type Settle } from "../../upstream/side-call.js";
// a type only (erased): rls-client.ts itself is loaded with import() below
import type { RlsClient } from "./rls-client.js";

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

/** The service addresses of the routes' global limits. */
function serviceAddresses(routes: readonly RouteConfig[]): string[] {
  return [...new Set(routes.flatMap((r) => (r.rateLimit?.global != null ? [formatHostPort(r.rateLimit.global.service)] : [])))];
}

/**
 * Loads the client module and makes the channel of every service the routes' global limits name.
 * Dojang awaits it before it serves a config that has any (start, reload): a call's timeout is for
 * its question, and the import and the descriptors are work a first call would otherwise do (the
 * descriptors are loaded synchronously: no timer can end a call while they are). No-op without one.
 */
export async function readyRlsPool(pool: RlsPool, routes: readonly RouteConfig[]): Promise<void> {
  const addresses = serviceAddresses(routes);
  if (addresses.length === 0 || pool.closed) return;
  const m = await loadClientModule(pool);
  if (!pool.closed) for (const a of addresses) clientFor(pool, m, a);
}

function clientFor(pool: RlsPool, m: typeof import("./rls-client.js"), address: string): RlsClient {
  let c = pool.clients.get(address);
  if (c === undefined) {
    c = m.newRlsClient(address);
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
  /** dojang_rate_limit_service_calls_total's children for the service, bound once */
  readonly counters: Readonly<Record<RlsResult, { inc(): void }>>;
}

const FAILURE_TEXT: Readonly<Record<RlsResult, string>> = {
  ok: "",
  over_limit: "",
  timeout: "no answer in time",
  unavailable: "unavailable",
  error: "error",
  cancelled: "",
};

/**
 * One call's question to the service; it holds the call's request head until the answer. The
 * descriptors are built when its turn comes, from the request head as the filters before it left
 * it (a header auth set or removed counts as such: the client cannot pick its own bucket by
 * sending a header a stage before replaces).
 */
class GlobalCheck implements CallFilter {
  private pending: SideCallHandle | null = null;
  private ended = false;
  private descriptors: readonly Descriptor[] = [];
  constructor(
    private readonly pool: RlsPool,
    private readonly g: GlobalRoute,
  ) {}

  onRequestHead(c: FilterCall): boolean {
    const h = c.upHeaders;
    if (h === undefined || this.pool.closed) return true;
    this.descriptors = buildDescriptors(this.g.specs, { path: c.path, clientAddress: c.clientAddress, head: h });
    // every descriptor needed a header the call lacks: nothing to ask
    if (this.descriptors.length === 0) return true;
    const g = this.g;
    // One side call from here to the answer, the first calls' wait for the client module included:
    // it ends within the route's timeout whatever the service, grpc-js or the import does.
    this.pending = sideCall<RlsResponse>(g.timeoutMs, (settle) => this.start(settle), (o) => this.answered(c, o));
    return false;
  }

  /** The question's I/O: at once, or once the client module is loaded (the first calls after the first global config). */
  private start(settle: Settle<RlsResponse>): () => void {
    const pool = this.pool;
    const g = this.g;
    const m = pool.module;
    if (m !== undefined) return clientFor(pool, m, g.address).start(g.domain, this.descriptors, g.timeoutMs, settle);
    let stop: (() => void) | null = null;
    let stopped = false;
    loadClientModule(pool).then(
      (mod) => {
        if (!stopped && !pool.closed) stop = clientFor(pool, mod, g.address).start(g.domain, this.descriptors, g.timeoutMs, settle);
      },
      (err: unknown) => settle({ result: "error", detail: `client module: ${(err as Error).message}` }),
    );
    return () => {
      stopped = true;
      stop?.();
    };
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
  // (Dojang has awaited readyRlsPool for a config it serves; a snapshot built otherwise starts it here)
  void readyRlsPool(pool, routes).catch(() => undefined);
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
      counters: pool.metrics.rateLimitServiceCounters(address),
    });
  });
  return {
    forCall(_c: FilterCall, route: CompiledRoute<Cluster>): CallFilter | null {
      const g = byRoute[route.index];
      return g === undefined || g === null ? null : new GlobalCheck(pool, g);
    },
  };
}
