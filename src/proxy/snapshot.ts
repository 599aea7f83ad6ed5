// A config snapshot: everything the data plane reads from the config, compiled once and immutable
// — the clusters, and per listener its route table and filter chain. Calls read their listener's
// part once, at their start (RoutesCell), and keep it to their end; a reload builds a new
// snapshot and Dojang swaps it in. Imports run one way: nothing below src/proxy/dojang.ts
// imports this file.
import type { Config } from "../config/index.js";
import { DojangError } from "../errors.js";
import type { ListenerRoutes } from "./call/context.js";
import { compileFilterChain } from "./call/filter.js";
import { listenerFilters, type FilterDeps } from "./filters/index.js";
import type { HealthTargets } from "./downstream/health-service.js";
import { compileRoutes } from "./router.js";
import { Cluster } from "./upstream/cluster.js";

/**
 * What a snapshot is built with that outlives it (process-wide state, reused by every snapshot):
 * what the filters are built with (filters/index.ts), which is all it needs besides the config.
 */
export type SnapshotDeps = FilterDeps;

export interface Snapshot {
  /** 1 for the config dojang started with, +1 per swap */
  readonly version: number;
  readonly config: Config;
  readonly clusters: ReadonlyMap<string, Cluster>;
  /** by listener name */
  readonly listeners: ReadonlyMap<string, ListenerRoutes>;
  /** by listener name: the clusters a grpc.health.v1 service name is routed to (health service) */
  readonly health: ReadonlyMap<string, HealthTargets>;
}

/**
 * HealthTargets (listener.ts): the clusters behind a service name on one listener: "" → every cluster the listener routes
 * to; "pkg.Svc" → the clusters of the routes that could match a call to one of its methods
 * (a `service` route for it, a `path` route under `/pkg.Svc/`, a `prefix` route that `/pkg.Svc/`
 * starts with or that starts with it); null when no route would take it (NOT_FOUND, as
 * grpc-go's health server answers a service it does not know). Authority limits are ignored.
 */
export function healthTargets(routes: Config["listeners"][number]["routes"], clusters: ReadonlyMap<string, Cluster>): HealthTargets {
  const all = [...new Set(routes.map((r) => clusters.get(r.cluster)!))];
  const cache = new Map<string, readonly Cluster[] | null>();
  return (service) => {
    if (service === "") return all;
    const hit = cache.get(service);
    if (hit !== undefined || cache.has(service)) return hit ?? null;
    const base = `/${service}/`;
    const found = new Set<Cluster>();
    for (const r of routes) {
      const m = r.match;
      const takes =
        m.service !== undefined
          ? m.service === service
          : m.path !== undefined
            ? m.path.startsWith(base)
            : base.startsWith(m.prefix ?? "/") || (m.prefix ?? "/").startsWith(base);
      if (takes) found.add(clusters.get(r.cluster)!);
    }
    const v = found.size === 0 ? null : [...found];
    // bounded: names come from clients
    if (cache.size < 1000) cache.set(service, v);
    return v;
  };
}

/**
 * Builds a snapshot. `clusterFor` may hand back a cluster to keep (a reload keeps the clusters
 * whose name remains: Dojang.reload); by default every cluster is new.
 */
export function buildSnapshot(
  config: Config,
  deps: SnapshotDeps,
  version: number,
  clusterFor: (cfg: Config["clusters"][number]) => Cluster = (c) => new Cluster(c, deps.metrics, deps.log),
): Snapshot {
  const clusters = new Map<string, Cluster>();
  for (const c of config.clusters) clusters.set(c.name, clusterFor(c));
  const listeners = new Map<string, ListenerRoutes>();
  const health = new Map<string, HealthTargets>();
  for (const l of config.listeners) {
    health.set(l.name, healthTargets(l.routes, clusters));
    const router = compileRoutes(l.routes, (name) => {
      const c = clusters.get(name);
      // The config parser rejects unknown clusters; reaching this is a bug.
      if (c === undefined) throw new DojangError("DOJANG_ERR_INTERNAL", `route names unknown cluster ${name}`);
      return c;
    });
    // the filters, in the registry's order (filters/index.ts says why each sits where it does)
    const filters = compileFilterChain(listenerFilters(l, config, deps, clusters));
    listeners.set(l.name, Object.freeze({ router, filters }));
  }
  return Object.freeze({ version, config, clusters, listeners, health });
}
