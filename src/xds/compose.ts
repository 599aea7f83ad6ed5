// The accepted xDS resources and the static (YAML) config → the one Config dojang serves, the same
// typed config a YAML file produces, so a control-plane change is applied by the whole-config
// reload (Dojang.reload: clusters kept by name, endpoints moved in place, the snapshot swapped,
// calls in flight untouched). Pure.
//
// Warming, as Envoy does it: a listener is served once its route table is there (inline or RDS);
// an EDS cluster once its ClusterLoadAssignment arrived or was marked missing (then with no
// endpoints: calls to it end 14 UNAVAILABLE, as Envoy's "no healthy upstream").
import { DEFAULTS, LIMITS, type ClusterConfig, type ClusterTlsConfig, type Config, type ListenerConfig, type RouteConfig } from "../config/types.js";
import type { Issue, XdsCluster, XdsEndpoints, XdsListener, XdsRoute, XdsRouteTable } from "./map/index.js";
import { defaultCluster } from "../config/types.js";

export interface XdsState {
  readonly listeners: ReadonlyMap<string, XdsListener>;
  readonly routes: ReadonlyMap<string, XdsRouteTable>;
  /** with their TLS as files (the client writes inline certificates to private files) */
  readonly clusters: ReadonlyMap<string, { readonly cluster: XdsCluster; readonly tls: ClusterTlsConfig | null }>;
  readonly endpoints: ReadonlyMap<string, XdsEndpoints>;
  /** EDS names the 15 s timer marked missing: their clusters are served with no endpoints */
  readonly missing: ReadonlySet<string>;
}

export interface Composed {
  readonly config: Config;
  /** listeners waiting for their RDS, clusters for their EDS */
  readonly warming: readonly string[];
  /** names the xDS resources claim that the static config has already (the resource is refused) */
  readonly conflicts: readonly Issue[];
  /** the same, by kind and name */
  readonly conflicting: { readonly listeners: readonly string[]; readonly clusters: readonly string[] };
}

/** An EDS cluster whose ClusterLoadAssignment has neither arrived nor been marked missing. */
export function isWarming(cluster: XdsCluster, s: Pick<XdsState, "endpoints" | "missing">): boolean {
  return cluster.eds !== null && !s.endpoints.has(cluster.eds) && !s.missing.has(cluster.eds);
}

/** The name of the cluster a weighted split is served by (its members' endpoints, weighted). */
export function weightedName(clusters: readonly { readonly name: string; readonly weight: number }[]): string {
  return "weighted:" + clusters.map((c) => `${c.name}=${c.weight}`).join(",");
}

export function compose(base: Config, s: XdsState): Composed {
  const warming: string[] = [];
  const conflicts: Issue[] = [];
  const conflicting = { listeners: [] as string[], clusters: [] as string[] };
  const staticClusters = new Set(base.clusters.map((c) => c.name));
  const staticListeners = new Set(base.listeners.map((l) => l.name));
  const clusters = new Map<string, ClusterConfig>();
  for (const [name, { cluster, tls }] of s.clusters) {
    if (staticClusters.has(name)) {
      conflicts.push({ path: `cluster ${name}`, message: "a static cluster has this name" });
      conflicting.clusters.push(name);
      continue;
    }
    if (isWarming(cluster, s)) {
      warming.push(`cluster ${name}`);
      continue;
    }
    const eps = cluster.eds !== null ? s.endpoints.get(cluster.eds) : (cluster.staticEndpoints ?? undefined);
    clusters.set(name, { ...cluster.config, endpoints: eps?.endpoints ?? [], endpointWeights: eps?.weights ?? [], tls });
  }
  const known = (n: string): boolean => staticClusters.has(n) || clusters.has(n);
  const listeners: ListenerConfig[] = [];
  const extra = new Map<string, ClusterConfig>();
  for (const [name, l] of s.listeners) {
    if (staticListeners.has(name)) {
      conflicts.push({ path: `listener ${name}`, message: "a static listener has this name" });
      conflicting.listeners.push(name);
      continue;
    }
    const table = l.rds === null ? l.inline : (s.routes.get(l.rds) ?? null);
    if (table === null) {
      warming.push(`listener ${name}`);
      continue;
    }
    const routes: RouteConfig[] = [];
    // Envoy picks the virtual host by its domains first, "*" last; dojang tries routes in order,
    // each limited to its authority, so the exact hosts' routes come before the catch-all's.
    const hosts = [...table.virtualHosts].sort((a, b) => Number(a.domains.includes("*")) - Number(b.domains.includes("*")));
    for (const vh of hosts) {
      const authorities: readonly (string | undefined)[] = vh.domains.includes("*") ? [undefined] : vh.domains;
      for (const authority of authorities) for (const r of vh.routes) routes.push(routeConfig(r, authority, l, (cs) => clusterFor(cs, known, clusters, base, extra)));
    }
    if (routes.length === 0) {
      // a listener without a route answers every call 12 UNIMPLEMENTED (no route)
      warming.push(`listener ${name} (no routes)`);
      continue;
    }
    listeners.push({
      name,
      address: l.address,
      routes,
      ...DEFAULTS.listener,
      faults: l.faults,
      faultHeaders: false,
      faultTrailer: false,
      streamIdleTimeoutMs: l.streamIdleTimeoutMs,
      grpcWeb: l.grpcWeb,
      cors: l.cors && table.corsOrigins.length > 0 ? { allowOrigins: table.corsOrigins } : null,
    });
  }
  for (const [n, c] of extra) clusters.set(n, c);
  return {
    config: { ...base, listeners: [...base.listeners, ...listeners], clusters: [...base.clusters, ...clusters.values()] },
    warming,
    conflicts,
    conflicting,
  };
}

function routeConfig(r: XdsRoute, authority: string | undefined, l: XdsListener, clusterOf: (cs: XdsRoute["clusters"]) => string): RouteConfig {
  const match = r.path !== null ? { path: r.path } : { prefix: r.prefix ?? "/" };
  return {
    match: authority === undefined ? match : { ...match, authority },
    cluster: clusterOf(r.clusters),
    timeoutMs: r.timeoutMs,
    maxRequestMessageBytes: DEFAULTS.route.maxRequestMessageBytes,
    maxResponseMessageBytes: DEFAULTS.route.maxResponseMessageBytes,
    faults: [],
    streamIdleTimeoutMs: null,
    retry: r.retry,
    rateLimit: l.rateLimit,
    headers: r.headers,
    rewriteAuthority: r.rewriteAuthority,
    rewritePrefix: r.rewritePrefix,
    // the xDS mapping does not take jwt_authn, rbac or ext_authz filters (docs/guides/xds.md)
    jwt: null,
    rbac: null,
    extAuthz: null,
  };
}

/**
 * The cluster a route's action names: the one cluster, or for a weighted split a cluster of its
 * own whose endpoints are the members' (each endpoint's weight: its cluster's share of the split,
 * over the cluster's endpoint count, times its own weight), with the first member's settings.
 */
function clusterFor(
  cs: XdsRoute["clusters"],
  known: (n: string) => boolean,
  dyn: ReadonlyMap<string, ClusterConfig>,
  base: Config,
  extra: Map<string, ClusterConfig>,
): string {
  if (cs.length === 1) {
    const n = cs[0]!.name;
    // a cluster no one has sent: empty, so its calls end 14 UNAVAILABLE
    if (!known(n) && !extra.has(n)) extra.set(n, defaultCluster(n));
    return n;
  }
  const name = weightedName(cs);
  if (extra.has(name)) return name;
  const of = (n: string): ClusterConfig | undefined => dyn.get(n) ?? base.clusters.find((c) => c.name === n);
  const total = cs.reduce((a, c) => a + c.weight, 0);
  const endpoints: ClusterConfig["endpoints"][number][] = [];
  const weights: number[] = [];
  for (const m of cs) {
    const c = of(m.name);
    if (c === undefined || c.endpoints.length === 0) continue;
    const wsum = c.endpointWeights.reduce((a, w) => a + w, 0) || c.endpoints.length;
    c.endpoints.forEach((e, i) => {
      endpoints.push(e);
      const w = (m.weight / total) * ((c.endpointWeights[i] ?? 1) / wsum) * LIMITS.weight.max;
      weights.push(Math.min(LIMITS.weight.max, Math.max(1, Math.round(w))));
    });
  }
  const first = of(cs[0]!.name) ?? defaultCluster(name);
  extra.set(name, { ...first, name, endpoints, endpointWeights: weights, dns: null });
  return name;
}

/** An XdsState as plain JSON (its maps as [name, value] lists): how the primary hands it to workers over IPC. */
export interface XdsStateJson {
  readonly listeners: readonly (readonly [string, XdsListener])[];
  readonly routes: readonly (readonly [string, XdsRouteTable])[];
  readonly clusters: readonly (readonly [string, { readonly cluster: XdsCluster; readonly tls: ClusterTlsConfig | null }])[];
  readonly endpoints: readonly (readonly [string, XdsEndpoints])[];
  readonly missing: readonly string[];
}

export function stateToJson(s: XdsState): XdsStateJson {
  return { listeners: [...s.listeners], routes: [...s.routes], clusters: [...s.clusters], endpoints: [...s.endpoints], missing: [...s.missing] };
}

/** The state from stateToJson's output (as it comes over IPC: trusted, the primary made it). */
export function stateFromJson(j: XdsStateJson): XdsState {
  return { listeners: new Map(j.listeners), routes: new Map(j.routes), clusters: new Map(j.clusters), endpoints: new Map(j.endpoints), missing: new Set(j.missing) };
}
