// xDS resources (decoded into plain objects: snake_case fields, longs and enums as strings, as
// src/protos/load.ts decodes them) → dojang's own config pieces. Pure: no I/O, no clock. Each
// mapper returns the piece or every issue it found, each naming the field by its path in the
// resource (`virtual_hosts[0].routes[1].match.headers`), which the client sends back in a NACK's
// error_detail. What dojang cannot do faithfully is refused (a NACK), never silently widened; what
// is only advice (an optional filter, an HTTP-level retry condition) is skipped with a note the
// client logs.
import { DEFAULTS, LIMITS, RULE_FORBIDDEN, RULE_HEADER_RE, type ClusterConfig, type HeaderRulesConfig, type LbPolicy, type RateLimitConfig, type RetryConfig } from "../config/types.js";
import { MAX_DURATION_MS, type HostPort } from "../config/units.js";
import type { FaultAction, FaultRule } from "../config/faults/model.js";
import type { ConfigIssue } from "../errors.js";
import { defaultCluster } from "../config/types.js";

/** A problem in a resource, by its field's path: the shape ConfigError reports. */
export type Issue = ConfigIssue;

export type Mapped<T> = { readonly ok: true; readonly value: T; readonly notes: readonly string[] } | { readonly ok: false; readonly issues: readonly Issue[] };

/** A decoded message: a plain object. */
export type Msg = Readonly<Record<string, unknown>>;

/** Decodes a nested `google.protobuf.Any` (typed_config); injected so this module stays pure. */
export type AnyDecoder = (any: Msg) => { readonly typeName: string; readonly value: Msg };

export const TYPE = {
  listener: "type.googleapis.com/envoy.config.listener.v3.Listener",
  route: "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
  cluster: "type.googleapis.com/envoy.config.cluster.v3.Cluster",
  endpoint: "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
} as const;
export type TypeUrl = (typeof TYPE)[keyof typeof TYPE];

// === the pieces ===

export interface XdsRoute {
  readonly prefix: string | null;
  readonly path: string | null;
  /** one cluster, or a weighted split */
  readonly clusters: readonly { readonly name: string; readonly weight: number }[];
  readonly timeoutMs: number | null;
  readonly retry: RetryConfig | null;
  readonly headers: HeaderRulesConfig | null;
  readonly rewriteAuthority: string | null;
  readonly rewritePrefix: string | null;
}

export interface XdsVirtualHost {
  readonly name: string;
  /** lower-cased; "*" matches any */
  readonly domains: readonly string[];
  readonly routes: readonly XdsRoute[];
}

export interface XdsRouteTable {
  readonly name: string;
  readonly virtualHosts: readonly XdsVirtualHost[];
  /** the virtual hosts' CorsPolicy origins (exact ones, and "*" for the regex .*) */
  readonly corsOrigins: readonly string[];
}

export interface XdsListener {
  readonly name: string;
  readonly address: HostPort;
  /** RDS: the RouteConfiguration's name; null with an inline route_config */
  readonly rds: string | null;
  readonly inline: XdsRouteTable | null;
  readonly grpcWeb: boolean;
  /** the cors filter is in the chain (the origins come from the route table) */
  readonly cors: boolean;
  /** the local_ratelimit filter's bucket, on every route of the listener */
  readonly rateLimit: RateLimitConfig | null;
  readonly streamIdleTimeoutMs: number;
  /** the fault filter's abort and delay, as dojang fault rules on the listener */
  readonly faults: readonly FaultRule[];
}

/** A cluster's TLS with certificates given inline: the client writes them to private files. */
export interface XdsTls {
  readonly ca: TlsSource | null;
  readonly cert: TlsSource | null;
  readonly key: TlsSource | null;
  readonly serverName: string | null;
}
export type TlsSource = { readonly file: string } | { readonly inline: string };

export interface XdsCluster {
  readonly name: string;
  /** EDS: the ClusterLoadAssignment's name; null for STATIC and DNS clusters */
  readonly eds: string | null;
  /** STATIC: the inline load_assignment's endpoints */
  readonly staticEndpoints: XdsEndpoints | null;
  /** everything but the endpoints and TLS (config.endpoints empty, config.tls null) */
  readonly config: ClusterConfig;
  readonly tls: XdsTls | null;
}

export interface XdsEndpoints {
  readonly name: string;
  readonly endpoints: readonly HostPort[];
  readonly weights: readonly number[];
}

// === small readers ===

class Ctx {
  readonly issues: Issue[] = [];
  readonly notes: string[] = [];
  constructor(readonly decode: AnyDecoder) {}
  bad(path: string, message: string): void {
    this.issues.push({ path, message });
  }
  done<T>(value: T): Mapped<T> {
    return this.issues.length > 0 ? { ok: false, issues: this.issues } : { ok: true, value, notes: this.notes };
  }
}

export const obj = (v: unknown): Msg | undefined => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Msg) : undefined);
export const arr = (v: unknown): readonly Msg[] => (Array.isArray(v) ? (v as Msg[]) : []);
const str = (v: unknown): string => (typeof v === "string" ? v : "");
const at = (base: string, key: string): string => (base === "" ? key : `${base}.${key}`);

/** google.protobuf.Duration → ms; undefined when absent. */
function durationMs(v: unknown): number | undefined {
  const d = obj(v);
  if (d === undefined) return undefined;
  const s = Number(d["seconds"] ?? 0);
  const n = Number(d["nanos"] ?? 0);
  return Math.round(s * 1000 + n / 1e6);
}

/** google.protobuf.UInt32Value → number; undefined when absent. */
function u32(v: unknown): number | undefined {
  const d = obj(v);
  if (d === undefined) return undefined;
  return Number(d["value"] ?? 0);
}

function duration(c: Ctx, v: unknown, path: string, min = 0): number | undefined {
  const ms = durationMs(v);
  if (ms === undefined) return undefined;
  if (!Number.isFinite(ms) || ms < min || ms > MAX_DURATION_MS) {
    c.bad(path, `duration out of range (${ms}ms)`);
    return undefined;
  }
  return ms;
}

function inRange(c: Ctx, n: number | undefined, path: string, lim: { readonly min: number; readonly max: number }): number | undefined {
  if (n === undefined) return undefined;
  if (!Number.isInteger(n) || n < lim.min || n > lim.max) {
    c.bad(path, `must be ${lim.min} to ${lim.max} (got ${n})`);
    return undefined;
  }
  return n;
}

function socketAddress(c: Ctx, v: unknown, path: string): HostPort | undefined {
  const sa = obj(obj(v)?.["socket_address"]);
  if (sa === undefined) {
    c.bad(at(path, "socket_address"), "dojang needs a socket_address (pipes and internal addresses are not supported)");
    return undefined;
  }
  const host = str(sa["address"]);
  const port = Number(sa["port_value"] ?? NaN);
  if (host === "") c.bad(at(path, "socket_address.address"), "is required");
  if (sa["named_port"] !== undefined) c.bad(at(path, "socket_address.named_port"), "named ports are not supported: give port_value");
  if (str(sa["protocol"]) === "UDP") c.bad(at(path, "socket_address.protocol"), "UDP is not supported");
  if (!Number.isInteger(port) || port < 0 || port > 65535) c.bad(at(path, "socket_address.port_value"), "needs a port 0 to 65535");
  if (host === "" || !Number.isInteger(port)) return undefined;
  return { host: host.startsWith("[") ? host.slice(1, -1) : host, port };
}

// === Listener ===

const FILTER = {
  hcm: "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
  router: "envoy.extensions.filters.http.router.v3.Router",
  grpcWeb: "envoy.extensions.filters.http.grpc_web.v3.GrpcWeb",
  cors: "envoy.extensions.filters.http.cors.v3.Cors",
  fault: "envoy.extensions.filters.http.fault.v3.HTTPFault",
  localRateLimit: "envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit",
  tls: "envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
  httpOptions: "envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
} as const;

export function mapListener(l: Msg, decode: AnyDecoder): Mapped<XdsListener> {
  const c = new Ctx(decode);
  const name = str(l["name"]);
  if (name === "") c.bad("name", "is required");
  if (l["api_listener"] !== undefined) c.bad("api_listener", "an API listener is for a gRPC client; dojang serves a socket address");
  const address = socketAddress(c, l["address"], "address");
  if (arr(l["listener_filters"]).length > 0) c.notes.push(`listener ${name}: listener_filters skipped`);
  if (obj(l["use_original_dst"])?.["value"] === true) c.bad("use_original_dst", "is not supported (no iptables capture)");
  const chains = arr(l["filter_chains"]);
  if (chains.length !== 1) c.bad("filter_chains", `dojang serves exactly one filter chain (got ${chains.length})`);
  const chain = chains[0] ?? {};
  if (chain["filter_chain_match"] !== undefined && Object.keys(obj(chain["filter_chain_match"]) ?? {}).length > 0) c.bad("filter_chains[0].filter_chain_match", "is not supported");
  if (chain["transport_socket"] !== undefined) c.bad("filter_chains[0].transport_socket", "downstream TLS from xDS is not supported yet (give the listener in the YAML with tls)");
  const filters = arr(chain["filters"]);
  let hcm: Msg | undefined;
  filters.forEach((f, i) => {
    const p = `filter_chains[0].filters[${i}]`;
    const tc = obj(f["typed_config"]);
    const t = tc === undefined ? undefined : safeDecode(c, tc, `${p}.typed_config`);
    if (t?.typeName === FILTER.hcm) hcm = t.value;
    else c.bad(p, `network filter ${JSON.stringify(str(f["name"]) || t?.typeName || "")} is not supported: dojang needs one http_connection_manager`);
  });
  let out: XdsListener | undefined;
  if (hcm !== undefined && address !== undefined) out = mapHcm(c, name, address, hcm, "filter_chains[0].filters[0].typed_config");
  else if (hcm === undefined && filters.length === 0) c.bad("filter_chains[0].filters", "needs an http_connection_manager");
  return c.done(out as XdsListener);
}

function safeDecode(c: Ctx, any: Msg, path: string): { readonly typeName: string; readonly value: Msg } | undefined {
  try {
    return c.decode(any);
  } catch (err) {
    c.bad(path, (err as Error).message);
    return undefined;
  }
}

function mapHcm(c: Ctx, name: string, address: HostPort, h: Msg, path: string): XdsListener {
  const codec = str(h["codec_type"]);
  if (codec === "HTTP1" || codec === "HTTP3") c.bad(at(path, "codec_type"), `${codec} is not supported: dojang serves HTTP/2`);
  let rds: string | null = null;
  let inline: XdsRouteTable | null = null;
  if (h["rds"] !== undefined) {
    const r = obj(h["rds"])!;
    const cs = obj(r["config_source"]);
    if (cs !== undefined && cs["ads"] === undefined && cs["self"] === undefined) c.bad(at(path, "rds.config_source"), "dojang takes RDS over ADS only (config_source.ads)");
    rds = str(r["route_config_name"]);
    if (rds === "") c.bad(at(path, "rds.route_config_name"), "is required");
  } else if (h["route_config"] !== undefined) {
    inline = mapRouteTableInto(c, obj(h["route_config"])!, at(path, "route_config"));
  } else if (h["scoped_routes"] !== undefined) c.bad(at(path, "scoped_routes"), "scoped routes are not supported");
  else c.bad(at(path, "route_specifier"), "needs rds or route_config");
  let grpcWeb = false;
  let cors = false;
  let rateLimit: RateLimitConfig | null = null;
  let router = false;
  const faults: FaultRule[] = [];
  const filters = arr(h["http_filters"]);
  filters.forEach((f, i) => {
    const p = at(path, `http_filters[${i}]`);
    const fname = str(f["name"]);
    const optional = f["is_optional"] === true;
    const tc = obj(f["typed_config"]);
    if (tc === undefined) {
      if (optional) c.notes.push(`listener ${name}: optional filter ${fname} without typed_config skipped`);
      else c.bad(p, `filter ${JSON.stringify(fname)} has no typed_config`);
      return;
    }
    const url = str(tc["type_url"]);
    const typeName = url.slice(url.lastIndexOf("/") + 1);
    if (router) c.bad(p, "the router filter must be the last filter");
    switch (typeName) {
      case FILTER.router:
        router = true;
        return;
      case FILTER.grpcWeb:
        grpcWeb = true;
        return;
      case FILTER.cors:
        // the origins are in the virtual hosts' CorsPolicy (typed_per_filter_config)
        cors = true;
        return;
      case FILTER.localRateLimit: {
        const d = safeDecode(c, tc, at(p, "typed_config"));
        if (d !== undefined) rateLimit = localRateLimit(c, d.value, at(p, "typed_config"));
        return;
      }
      case FILTER.fault: {
        const d = safeDecode(c, tc, at(p, "typed_config"));
        if (d !== undefined) faults.push(...faultRules(c, name, d.value, at(p, "typed_config")));
        return;
      }
      default:
        if (optional) c.notes.push(`listener ${name}: optional filter ${fname || typeName} skipped (not supported)`);
        else c.bad(p, `filter ${JSON.stringify(fname || typeName)} (${typeName}) is not supported and not is_optional`);
    }
  });
  if (!router) c.bad(at(path, "http_filters"), "needs the router filter (envoy.filters.http.router) last");
  if (cors && !grpcWeb) {
    c.notes.push(`listener ${name}: CORS without the grpc_web filter skipped (dojang answers CORS for gRPC-Web)`);
    cors = false;
  }
  const idle = duration(c, h["stream_idle_timeout"], at(path, "stream_idle_timeout"));
  return { name, address, rds, inline, grpcWeb, cors, rateLimit, streamIdleTimeoutMs: idle ?? DEFAULTS.listener.streamIdleTimeoutMs, faults };
}

/** FractionalPercent → a percentage, not capped (unset: 0, as Envoy reads it). */
function percent(v: unknown): number {
  const d = obj(v);
  if (d === undefined) return 0;
  const num = Number(d["numerator"] ?? 0);
  const den = str(d["denominator"]) || "HUNDRED";
  return den === "HUNDRED" ? num : den === "TEN_THOUSAND" ? num / 100 : num / 10_000;
}

/** FractionalPercent → 0..100 (a fault's chance). */
function fractionOf(v: unknown): number {
  return Math.min(100, percent(v));
}

/**
 * Envoy's HTTPFault as dojang fault rules on the listener (src/config/faults/model.ts): `delay`
 * (fixed_delay) before the call goes upstream, `abort` with a gRPC status (or an HTTP status),
 * each with its own percentage. Header-driven faults and the request matchers are refused.
 */
function faultRules(c: Ctx, listener: string, f: Msg, path: string): FaultRule[] {
  for (const k of ["headers", "downstream_nodes", "upstream_cluster", "response_rate_limit"]) {
    const v = f[k];
    if (v !== undefined && !(Array.isArray(v) && v.length === 0) && v !== "") c.bad(at(path, k), "is not supported");
  }
  if (f["max_active_faults"] !== undefined) c.notes.push(`listener ${listener}: fault max_active_faults skipped (faultInjection.maxActiveFaults is process-wide)`);
  const id = (kind: string): string => `xds.${listener.replace(/[^A-Za-z0-9_.-]/g, "_")}.${kind}`.slice(0, 64);
  const rule = (kind: string, percentage: number, action: FaultAction): FaultRule => ({
    id: id(kind),
    description: `xDS fault filter (${kind}) of listener ${listener}`,
    enabled: true,
    match: { listener, route: null, service: null, method: null, metadata: [], direction: null },
    fire: { percentage, calls: null, every: null, maxTimes: null, afterMs: 0, forMs: null },
    action,
    seed: null,
    source: "config",
  });
  const out: FaultRule[] = [];
  const delay = obj(f["delay"]);
  if (delay !== undefined) {
    if (delay["header_delay"] !== undefined) c.bad(at(path, "delay.header_delay"), "is not supported (faultHeaders is dojang's own switch)");
    const ms = duration(c, delay["fixed_delay"], at(path, "delay.fixed_delay"));
    if (ms !== undefined) out.push(rule("delay", fractionOf(delay["percentage"]), { kind: "delay", at: "request", message: null, direction: "request", delay: { type: "fixed", ms }, jitterSeed: 0 }));
  }
  const abort = obj(f["abort"]);
  if (abort !== undefined) {
    const pct = fractionOf(abort["percentage"]);
    if (abort["header_abort"] !== undefined) c.bad(at(path, "abort.header_abort"), "is not supported (faultHeaders is dojang's own switch)");
    else if (abort["grpc_status"] !== undefined) {
      const code = Number(abort["grpc_status"]);
      if (!Number.isInteger(code) || code < 1 || code > 16) c.bad(at(path, "abort.grpc_status"), "must be a gRPC code 1 to 16");
      else out.push(rule("abort", pct, { kind: "abort", code, message: "fault filter abort", details: null, afterMessages: null }));
    } else if (abort["http_status"] !== undefined) {
      const status = Number(abort["http_status"]);
      if (!Number.isInteger(status) || status < 200 || status > 599) c.bad(at(path, "abort.http_status"), "must be 200 to 599");
      else out.push(rule("abort", pct, { kind: "http", status, body: "fault filter abort", contentType: "text/plain" }));
    }
  }
  return out;
}

function localRateLimit(c: Ctx, v: Msg, path: string): RateLimitConfig | null {
  const enabled = percentOf(obj(v["filter_enabled"]));
  const enforced = percentOf(obj(v["filter_enforced"]));
  // Envoy's defaults: a filter without filter_enabled (or filter_enforced) limits nothing
  if (enabled === 0 || enforced === 0) {
    c.notes.push("local_ratelimit: filter_enabled or filter_enforced is 0% (Envoy's default): not applied");
    return null;
  }
  if (enabled !== 100 || enforced !== 100) c.bad(at(path, "filter_enabled"), "only 0% or 100% is supported");
  const tb = obj(v["token_bucket"]);
  if (tb === undefined) {
    c.bad(at(path, "token_bucket"), "is required");
    return null;
  }
  const max = Number(tb["max_tokens"] ?? 0);
  const perFill = u32(tb["tokens_per_fill"]) ?? 1;
  const every = duration(c, tb["fill_interval"], at(path, "token_bucket.fill_interval"), 1);
  if (!Number.isInteger(max) || max < 1) c.bad(at(path, "token_bucket.max_tokens"), "must be at least 1");
  if (every === undefined || max < 1) return null;
  if (arr(v["descriptors"]).length > 0) c.notes.push("local_ratelimit: descriptors skipped (one bucket per route)");
  return { callsPerSecond: (perFill * 1000) / every, burst: max, key: "route", responseHeaders: true, global: null };
}

/** RuntimeFractionalPercent's default_value as a percentage; undefined fields → 0. */
function percentOf(v: Msg | undefined): number {
  return percent(v?.["default_value"]);
}

// === RouteConfiguration ===

export function mapRouteConfiguration(rc: Msg, decode: AnyDecoder): Mapped<XdsRouteTable> {
  const c = new Ctx(decode);
  const t = mapRouteTableInto(c, rc, "");
  return c.done(t);
}

function headerRules(c: Ctx, m: Msg, path: string): HeaderRulesConfig | null {
  const set = (addKey: string, removeKey: string): { add: Record<string, string>; remove: string[] } => {
    const add: Record<string, string> = {};
    arr(m[addKey]).forEach((o, i) => {
      const h = obj(o["header"]) ?? {};
      const k = str(h["key"]).toLowerCase();
      // the YAML schema's own check (a header HTTP/2 or gRPC framing owns is refused the same way)
      if (!RULE_HEADER_RE.test(k) || RULE_FORBIDDEN.has(k)) {
        c.bad(at(path, `${addKey}[${i}].header.key`), `${JSON.stringify(k)} cannot be set by a header rule`);
        return;
      }
      if (str(h["value"]).includes("%")) c.notes.push(`${at(path, addKey)}[${i}]: command operators (%...%) are sent as written`);
      add[k] = str(h["value"]);
    });
    const remove = (Array.isArray(m[removeKey]) ? (m[removeKey] as unknown[]) : []).map((x) => str(x).toLowerCase());
    return { add, remove };
  };
  const request = set("request_headers_to_add", "request_headers_to_remove");
  const response = set("response_headers_to_add", "response_headers_to_remove");
  if (Object.keys(request.add).length + request.remove.length + Object.keys(response.add).length + response.remove.length === 0) return null;
  return { request, response };
}

/** Outer rules first, inner ones win (Envoy applies route, then virtual host, then route table). */
function mergeHeaders(...sets: (HeaderRulesConfig | null)[]): HeaderRulesConfig | null {
  const given = sets.filter((s): s is HeaderRulesConfig => s !== null);
  if (given.length === 0) return null;
  const side = (k: "request" | "response") => ({
    add: Object.assign({}, ...given.map((g) => g[k].add)) as Record<string, string>,
    remove: [...new Set(given.flatMap((g) => g[k].remove))],
  });
  return { request: side("request"), response: side("response") };
}

function mapRouteTableInto(c: Ctx, rc: Msg, path: string): XdsRouteTable {
  const name = str(rc["name"]);
  const tableHeaders = headerRules(c, rc, path);
  const origins: string[] = [];
  const vhosts = arr(rc["virtual_hosts"]).map((vh, vi): XdsVirtualHost => {
    const vp = at(path, `virtual_hosts[${vi}]`);
    const domains = (Array.isArray(vh["domains"]) ? (vh["domains"] as unknown[]) : []).map((d) => str(d).toLowerCase());
    if (domains.length === 0) c.bad(at(vp, "domains"), "needs at least one domain");
    domains.forEach((d, di) => {
      if (d !== "*" && d.includes("*")) c.bad(at(vp, `domains[${di}]`), `wildcard domain ${JSON.stringify(d)} is not supported: give "*" or exact hosts`);
    });
    const vhHeaders = headerRules(c, vh, vp);
    const cors = obj(obj(vh["typed_per_filter_config"])?.["envoy.filters.http.cors"]);
    if (cors !== undefined) {
      const d = safeDecode(c, cors, at(vp, 'typed_per_filter_config["envoy.filters.http.cors"]'));
      arr(d?.value["allow_origin_string_match"]).forEach((m, i) => {
        if (typeof m["exact"] === "string") origins.push(m["exact"]);
        else if (obj(m["safe_regex"])?.["regex"] === ".*") origins.push("*");
        else c.bad(at(vp, `typed_per_filter_config["envoy.filters.http.cors"].allow_origin_string_match[${i}]`), "only exact origins and the regex .* are supported");
      });
    }
    if (vh["retry_policy"] !== undefined) c.notes.push(`${vp}.retry_policy: give it on each route (virtual host retry policies are not merged)`);
    const routes = arr(vh["routes"]).map((r, ri) => mapRoute(c, r, at(vp, `routes[${ri}]`), mergeHeaders(tableHeaders, vhHeaders)));
    return { name: str(vh["name"]), domains, routes: routes.filter((r): r is XdsRoute => r !== undefined) };
  });
  return { name, virtualHosts: vhosts, corsOrigins: [...new Set(origins)] };
}

const RETRY_ON_GRPC: Readonly<Record<string, number>> = { cancelled: 1, "deadline-exceeded": 4, internal: 13, "resource-exhausted": 8, unavailable: 14 };
/** HTTP-level conditions: dojang retries a refused stream or a connection failure transparently already. */
const RETRY_ON_HTTP = new Set(["5xx", "gateway-error", "reset", "reset-before-request", "connect-failure", "envoy-ratelimited", "retriable-4xx", "refused-stream", "retriable-status-codes", "retriable-headers", "http3-post-connect-failure"]);

function mapRoute(c: Ctx, r: Msg, path: string, outer: HeaderRulesConfig | null): XdsRoute | undefined {
  const m = obj(r["match"]) ?? {};
  let prefix: string | null = null;
  let p: string | null = null;
  if (typeof m["prefix"] === "string") prefix = m["prefix"] === "" ? "/" : m["prefix"];
  else if (typeof m["path"] === "string") p = m["path"];
  else c.bad(at(path, "match"), "dojang matches prefix or path (safe_regex, path_separated_prefix and path templates are not supported)");
  if ((prefix !== null && !prefix.startsWith("/")) || (p !== null && !p.startsWith("/"))) c.bad(at(path, "match"), 'prefix and path must start with "/"');
  if (obj(m["case_sensitive"])?.["value"] === false) c.bad(at(path, "match.case_sensitive"), "case-insensitive matching is not supported");
  if (arr(m["headers"]).length > 0) c.bad(at(path, "match.headers"), "header matching is not supported by dojang's router");
  if (arr(m["query_parameters"]).length > 0) c.bad(at(path, "match.query_parameters"), "query parameter matching is not supported");
  if (m["runtime_fraction"] !== undefined) c.bad(at(path, "match.runtime_fraction"), "is not supported");
  const action = obj(r["route"]);
  if (action === undefined) {
    c.bad(path, "needs a route action (redirect, direct_response and non_forwarding_action are not supported)");
    return undefined;
  }
  const ap = at(path, "route");
  let clusters: { name: string; weight: number }[] = [];
  if (typeof action["cluster"] === "string") clusters = [{ name: action["cluster"], weight: 1 }];
  else if (action["weighted_clusters"] !== undefined) {
    arr(obj(action["weighted_clusters"])!["clusters"]).forEach((w, i) => {
      const weight = u32(w["weight"]) ?? 0;
      if (str(w["name"]) === "") c.bad(at(ap, `weighted_clusters.clusters[${i}].name`), "is required");
      if (weight > 0) clusters.push({ name: str(w["name"]), weight });
    });
    if (clusters.length === 0) c.bad(at(ap, "weighted_clusters.clusters"), "needs a cluster with a weight above 0");
  } else c.bad(ap, "needs cluster or weighted_clusters (cluster_header and cluster_specifier_plugin are not supported)");
  if (arr(action["hash_policy"]).length > 0) c.notes.push(`${ap}.hash_policy skipped (no consistent hashing)`);
  // The deadline: grpc_timeout_header_max lets the client's grpc-timeout stand, capped (0: uncapped);
  // without it Envoy's route timeout applies (15 s when unset; 0 disables it).
  const msd = obj(action["max_stream_duration"]);
  let timeoutMs: number | null;
  const headerMax = duration(c, msd?.["grpc_timeout_header_max"], at(ap, "max_stream_duration.grpc_timeout_header_max"));
  const maxDur = duration(c, msd?.["max_stream_duration"], at(ap, "max_stream_duration.max_stream_duration"));
  const routeTimeout = duration(c, action["timeout"], at(ap, "timeout"));
  if (headerMax !== undefined) timeoutMs = headerMax === 0 ? (maxDur === undefined || maxDur === 0 ? null : maxDur) : Math.min(headerMax, maxDur || Infinity);
  else if (maxDur !== undefined && maxDur > 0) timeoutMs = maxDur;
  else timeoutMs = routeTimeout === undefined ? 15_000 : routeTimeout === 0 ? null : routeTimeout;
  if (msd?.["grpc_timeout_header_offset"] !== undefined) c.notes.push(`${ap}.max_stream_duration.grpc_timeout_header_offset skipped`);
  const retry = action["retry_policy"] === undefined ? null : mapRetry(c, obj(action["retry_policy"])!, at(ap, "retry_policy"));
  const rewriteAuthority = typeof action["host_rewrite_literal"] === "string" && action["host_rewrite_literal"] !== "" ? action["host_rewrite_literal"] : null;
  const rewritePrefix = typeof action["prefix_rewrite"] === "string" && action["prefix_rewrite"] !== "" ? action["prefix_rewrite"] : null;
  if (rewritePrefix !== null && !rewritePrefix.startsWith("/")) c.bad(at(ap, "prefix_rewrite"), 'must start with "/"');
  const headers = mergeHeaders(outer, headerRules(c, r, path));
  return { prefix, path: p, clusters, timeoutMs, retry, headers, rewriteAuthority, rewritePrefix };
}

function mapRetry(c: Ctx, rp: Msg, path: string): RetryConfig | null {
  const codes: number[] = [];
  for (const cond of str(rp["retry_on"]).split(",").map((s) => s.trim()).filter((s) => s !== "")) {
    const code = RETRY_ON_GRPC[cond];
    if (code !== undefined) codes.push(code);
    else if (RETRY_ON_HTTP.has(cond)) c.notes.push(`${path}.retry_on: ${cond} is HTTP-level (dojang retries refused streams and failed connections transparently)`);
    else c.bad(at(path, "retry_on"), `unknown retry condition ${JSON.stringify(cond)} (gRPC: ${Object.keys(RETRY_ON_GRPC).join(", ")})`);
  }
  if (arr(rp["retriable_status_codes"]).length > 0 || Array.isArray(rp["retriable_status_codes"])) c.notes.push(`${path}.retriable_status_codes skipped (HTTP status codes)`);
  const n = u32(rp["num_retries"]) ?? 1;
  if (n + 1 > LIMITS.maxAttempts.max) c.bad(at(path, "num_retries"), `at most ${LIMITS.maxAttempts.max - 1}`);
  const perTry = duration(c, rp["per_try_timeout"], at(path, "per_try_timeout"), 1);
  const bo = obj(rp["retry_back_off"]);
  const base = duration(c, bo?.["base_interval"], at(path, "retry_back_off.base_interval"), 1) ?? DEFAULTS.retry.backoffBaseMs;
  const max = duration(c, bo?.["max_interval"], at(path, "retry_back_off.max_interval"), 1) ?? base * 10;
  if (max < base) c.bad(at(path, "retry_back_off.max_interval"), "must be at least base_interval");
  if (codes.length === 0) return null;
  return {
    retryOn: [...new Set(codes)].sort((a, b) => a - b),
    maxAttempts: Math.min(n + 1, LIMITS.maxAttempts.max),
    perTryTimeoutMs: perTry ?? null,
    backoffBaseMs: base,
    backoffMaxMs: max,
    bufferBytes: DEFAULTS.retry.bufferBytes,
    retryResetAfterRequest: false,
  };
}

// === Cluster ===

const LB: Readonly<Record<string, LbPolicy>> = { ROUND_ROBIN: "round_robin", LEAST_REQUEST: "least_request", RANDOM: "random" };

export function mapCluster(cl: Msg, decode: AnyDecoder): Mapped<XdsCluster> {
  const c = new Ctx(decode);
  const name = str(cl["name"]);
  if (name === "") c.bad("name", "is required");
  else if (name.length > LIMITS.nameLength.max) c.bad("name", `at most ${LIMITS.nameLength.max} characters (names are metric labels)`);
  const type = str(cl["type"]) || (cl["cluster_type"] !== undefined ? "CUSTOM" : "STATIC");
  let eds: string | null = null;
  let staticEndpoints: XdsEndpoints | null = null;
  let dns: ClusterConfig["dns"] = null;
  if (type === "EDS") {
    const e = obj(cl["eds_cluster_config"]) ?? {};
    const cs = obj(e["eds_config"]);
    if (cs !== undefined && cs["ads"] === undefined && cs["self"] === undefined) c.bad("eds_cluster_config.eds_config", "dojang takes EDS over ADS only (eds_config.ads)");
    eds = str(e["service_name"]) || name;
  } else if (type === "STATIC" || type === "STRICT_DNS" || type === "LOGICAL_DNS") {
    const la = obj(cl["load_assignment"]);
    const m = la === undefined ? undefined : mapEndpointsInto(c, { ...la, cluster_name: name }, "load_assignment");
    if (m === undefined || m.endpoints.length === 0) c.bad("load_assignment", "needs endpoints");
    else if (type === "STATIC") staticEndpoints = m;
    else if (m.endpoints.length !== 1) c.bad("load_assignment", `a ${type} cluster takes one name:port`);
    else dns = { host: m.endpoints[0]!.host, port: m.endpoints[0]!.port, refreshIntervalMs: durationMs(cl["dns_refresh_rate"]) ?? DEFAULTS.cluster.dnsRefreshIntervalMs };
  } else c.bad("type", `${type} clusters are not supported (EDS, STATIC, STRICT_DNS, LOGICAL_DNS)`);
  const lbName = str(cl["lb_policy"]) || "ROUND_ROBIN";
  const lb = LB[lbName];
  if (lb === undefined) c.bad("lb_policy", `${lbName} is not supported (ROUND_ROBIN, LEAST_REQUEST, RANDOM)`);
  if (cl["load_balancing_policy"] !== undefined) c.bad("load_balancing_policy", "is not supported: give lb_policy");
  const cb = breakers(c, cl);
  const od = outlier(c, obj(cl["outlier_detection"]));
  const hc = healthCheck(c, arr(cl["health_checks"]));
  const h2 = http2Options(c, cl);
  const connect = duration(c, cl["connect_timeout"], "connect_timeout", 1);
  const tls = upstreamTls(c, obj(cl["transport_socket"]));
  const d = defaultCluster(name);
  const config: ClusterConfig = {
    ...d,
    dns,
    lb: lb ?? "round_robin",
    healthCheck: hc,
    outlierDetection: od,
    circuitBreaker: cb,
    keepalive: h2.keepalive,
    connectTimeoutMs: connect ?? d.connectTimeoutMs,
    maxConcurrentStreamsPerSession: h2.maxConcurrentStreams ?? d.maxConcurrentStreamsPerSession,
    initialWindowSize: h2.initialWindow ?? d.initialWindowSize,
    connectionWindowSize: h2.connectionWindow ?? d.connectionWindowSize,
  };
  return c.done({ name, eds, staticEndpoints, config, tls });
}

function breakers(c: Ctx, cl: Msg): ClusterConfig["circuitBreaker"] {
  const d = DEFAULTS.cluster.circuitBreaker;
  const thresholds = arr(obj(cl["circuit_breakers"])?.["thresholds"]);
  const i = thresholds.findIndex((t) => (str(t["priority"]) || "DEFAULT") === "DEFAULT");
  if (i < 0) return { ...d };
  const th = thresholds[i]!;
  const p = `circuit_breakers.thresholds[${i}]`;
  return {
    maxConnections: inRange(c, u32(th["max_connections"]), at(p, "max_connections"), LIMITS.breaker) ?? d.maxConnections,
    maxPendingCalls: inRange(c, u32(th["max_pending_requests"]), at(p, "max_pending_requests"), LIMITS.breaker) ?? d.maxPendingCalls,
    maxCalls: inRange(c, u32(th["max_requests"]), at(p, "max_requests"), LIMITS.breaker) ?? d.maxCalls,
    maxRetries: inRange(c, u32(th["max_retries"]), at(p, "max_retries"), LIMITS.breaker) ?? d.maxRetries,
  };
}

function outlier(c: Ctx, od: Msg | undefined): ClusterConfig["outlierDetection"] {
  if (od === undefined) return null;
  const d = DEFAULTS.cluster.outlierDetection;
  // dojang counts consecutive failed calls (gRPC UNAVAILABLE and the like) as Envoy's gateway failures
  const n = u32(od["consecutive_gateway_failure"]) ?? u32(od["consecutive_5xx"]) ?? d.consecutiveFailures;
  return {
    consecutiveFailures: inRange(c, n, "outlier_detection.consecutive_5xx", LIMITS.thresholds) ?? d.consecutiveFailures,
    baseEjectionMs: duration(c, od["base_ejection_time"], "outlier_detection.base_ejection_time", 1) ?? d.baseEjectionMs,
    maxEjectionMs: duration(c, od["max_ejection_time"], "outlier_detection.max_ejection_time", 1) ?? d.maxEjectionMs,
    maxEjectionPercent: inRange(c, u32(od["max_ejection_percent"]), "outlier_detection.max_ejection_percent", LIMITS.percent) ?? 10,
  };
}

function healthCheck(c: Ctx, hcs: readonly Msg[]): ClusterConfig["healthCheck"] {
  if (hcs.length === 0) return null;
  if (hcs.length > 1) c.bad("health_checks", "dojang runs one health check per cluster");
  const h = hcs[0]!;
  const g = obj(h["grpc_health_check"]);
  if (g === undefined) {
    c.bad("health_checks[0]", "only grpc_health_check is supported");
    return null;
  }
  const d = DEFAULTS.cluster.healthCheck;
  return {
    service: str(g["service_name"]),
    intervalMs: duration(c, h["interval"], "health_checks[0].interval", 1) ?? d.intervalMs,
    timeoutMs: duration(c, h["timeout"], "health_checks[0].timeout", 1) ?? d.timeoutMs,
    unhealthyThreshold: inRange(c, u32(h["unhealthy_threshold"]), "health_checks[0].unhealthy_threshold", LIMITS.thresholds) ?? d.unhealthyThreshold,
    healthyThreshold: inRange(c, u32(h["healthy_threshold"]), "health_checks[0].healthy_threshold", LIMITS.thresholds) ?? d.healthyThreshold,
  };
}

interface H2 {
  maxConcurrentStreams: number | undefined;
  initialWindow: number | undefined;
  connectionWindow: number | undefined;
  keepalive: ClusterConfig["keepalive"];
}

function http2Options(c: Ctx, cl: Msg): H2 {
  let opts: Msg | undefined;
  let p = "";
  const ext = obj(obj(cl["typed_extension_protocol_options"])?.["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]);
  if (ext !== undefined) {
    const base = 'typed_extension_protocol_options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]';
    const d = safeDecode(c, ext, base);
    const explicit = obj(d?.value["explicit_http_config"]);
    if (d !== undefined && explicit === undefined) c.bad(base, "dojang speaks HTTP/2 upstream: give explicit_http_config.http2_protocol_options");
    if (explicit?.["http_protocol_options"] !== undefined || explicit?.["http3_protocol_options"] !== undefined) c.bad(at(base, "explicit_http_config"), "dojang speaks HTTP/2 upstream only");
    opts = obj(explicit?.["http2_protocol_options"]);
    p = at(base, "explicit_http_config.http2_protocol_options");
  } else if (cl["http2_protocol_options"] !== undefined) {
    opts = obj(cl["http2_protocol_options"]);
    p = "http2_protocol_options";
  } else {
    // Envoy speaks HTTP/1.1 to a cluster that does not say HTTP/2 (envoy/config/cluster/v3/
    // cluster.proto, http2_protocol_options: "Even if default HTTP2 protocol options are desired,
    // this field must be set so that Envoy will assume that the upstream supports HTTP/2"), and a
    // gRPC server does not answer HTTP/1.1: refused, so a control plane that serves Envoy and
    // dojang alike sees one behaviour
    c.bad(
      "typed_extension_protocol_options",
      'gRPC needs HTTP/2 to the upstream, and without it Envoy speaks HTTP/1.1: give typed_extension_protocol_options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"] with explicit_http_config.http2_protocol_options (or the deprecated http2_protocol_options)',
    );
  }
  if (opts === undefined) return { maxConcurrentStreams: undefined, initialWindow: undefined, connectionWindow: undefined, keepalive: null };
  const ka = obj(opts["connection_keepalive"]);
  const kaInterval = duration(c, ka?.["interval"], at(p, "connection_keepalive.interval"), 1);
  const kaTimeout = duration(c, ka?.["timeout"], at(p, "connection_keepalive.timeout"), 1);
  return {
    maxConcurrentStreams: inRange(c, u32(opts["max_concurrent_streams"]), at(p, "max_concurrent_streams"), LIMITS.maxConcurrentStreamsPerSession),
    initialWindow: inRange(c, u32(opts["initial_stream_window_size"]), at(p, "initial_stream_window_size"), LIMITS.initialWindowSize),
    connectionWindow: inRange(c, u32(opts["initial_connection_window_size"]), at(p, "initial_connection_window_size"), LIMITS.connectionWindowSize),
    keepalive: ka === undefined ? null : { intervalMs: kaInterval ?? DEFAULTS.cluster.keepalive.intervalMs, timeoutMs: kaTimeout ?? DEFAULTS.cluster.keepalive.timeoutMs },
  };
}

function dataSource(c: Ctx, v: unknown, path: string): TlsSource | null {
  const d = obj(v);
  if (d === undefined) return null;
  if (typeof d["filename"] === "string") return { file: d["filename"] };
  if (typeof d["inline_string"] === "string") return { inline: d["inline_string"] };
  if (d["inline_bytes"] !== undefined) return { inline: Buffer.from(d["inline_bytes"] as Uint8Array).toString("utf8") };
  c.bad(path, "needs filename, inline_string or inline_bytes (environment variables are not supported)");
  return null;
}

function upstreamTls(c: Ctx, ts: Msg | undefined): XdsTls | null {
  if (ts === undefined) return null;
  const tc = obj(ts["typed_config"]);
  const d = tc === undefined ? undefined : safeDecode(c, tc, "transport_socket.typed_config");
  if (d === undefined) {
    if (tc === undefined) c.bad("transport_socket", "needs typed_config (UpstreamTlsContext)");
    return null;
  }
  if (d.typeName !== FILTER.tls) {
    c.bad("transport_socket.typed_config", `${d.typeName} is not supported (UpstreamTlsContext)`);
    return null;
  }
  const p = "transport_socket.typed_config";
  const common = obj(d.value["common_tls_context"]) ?? {};
  const certs = arr(common["tls_certificates"]);
  if (certs.length > 1) c.bad(at(p, "common_tls_context.tls_certificates"), "one client certificate at most");
  if (arr(common["tls_certificate_sds_secret_configs"]).length > 0) c.bad(at(p, "common_tls_context.tls_certificate_sds_secret_configs"), "SDS is not supported");
  if (common["validation_context_sds_secret_config"] !== undefined) c.bad(at(p, "common_tls_context.validation_context_sds_secret_config"), "SDS is not supported");
  const vc = obj(common["validation_context"]);
  if (vc !== undefined && (arr(vc["match_typed_subject_alt_names"]).length > 0 || arr(vc["match_subject_alt_names"]).length > 0)) {
    c.notes.push("upstream TLS: subject alt name matchers skipped (dojang checks the certificate against sni, or the endpoint's host)");
  }
  const cert = certs[0];
  const out: XdsTls = {
    ca: dataSource(c, vc?.["trusted_ca"], at(p, "common_tls_context.validation_context.trusted_ca")),
    cert: cert === undefined ? null : dataSource(c, cert["certificate_chain"], at(p, "common_tls_context.tls_certificates[0].certificate_chain")),
    key: cert === undefined ? null : dataSource(c, cert["private_key"], at(p, "common_tls_context.tls_certificates[0].private_key")),
    serverName: str(d.value["sni"]) || null,
  };
  if ((out.cert === null) !== (out.key === null)) c.bad(at(p, "common_tls_context.tls_certificates[0]"), "needs certificate_chain and private_key together");
  return out;
}

// === ClusterLoadAssignment ===

export function mapClusterLoadAssignment(cla: Msg, decode: AnyDecoder): Mapped<XdsEndpoints> {
  const c = new Ctx(decode);
  const e = mapEndpointsInto(c, cla, "");
  return c.done(e);
}

const USABLE = new Set(["", "UNKNOWN", "HEALTHY", "DEGRADED"]);

/** One LbEndpoint as mapped: its address and key, whether its health_status puts it in rotation, its load_balancing_weight as sent. */
export interface LbEndpointMapped {
  readonly hp: HostPort;
  /** "host:port", what duplicates are found by */
  readonly key: string;
  readonly usable: boolean;
  readonly weight: number;
}

/** One LbEndpoint (its address issues are added to `c`); undefined when it has no address dojang can use. */
function mapLbEndpoint(c: Ctx, le: Msg, ep: string): LbEndpointMapped | undefined {
  const hp = socketAddress(c, obj(obj(le["endpoint"])?.["address"]), at(ep, "endpoint.address"));
  if (hp === undefined) return undefined;
  return { hp, key: `${hp.host}:${hp.port}`, usable: USABLE.has(str(le["health_status"])), weight: u32(le["load_balancing_weight"]) ?? 1 };
}

/**
 * The endpoints dojang balances over: those of the lowest priority that has a usable one
 * (HEALTHY, UNKNOWN, DEGRADED), each with its load_balancing_weight (locality weights are not
 * multiplied in). Addresses must be unique (gRFC A27) and priorities without gaps.
 */
function mapEndpointsInto(c: Ctx, cla: Msg, path: string): XdsEndpoints {
  const locs = arr(cla["endpoints"]);
  const lbs = locs.map((loc) => arr(loc["lb_endpoints"]));
  return assignEndpoints(
    c,
    str(cla["cluster_name"]),
    path,
    locs.map((loc, li) => ({ priority: Number(loc["priority"] ?? 0), count: lbs[li]!.length })),
    (li, ei) => mapLbEndpoint(c, lbs[li]![ei]!, lbPath(path, li, ei)),
    obj(cla["policy"]),
  ).value;
}

const lbPath = (path: string, li: number, ei: number): string => at(path, `endpoints[${li}].lb_endpoints[${ei}]`);

interface Locality {
  readonly priority: number;
  readonly count: number;
}

/**
 * The assignment from its localities (priority, endpoint count) and each endpoint as mapped,
 * asked for in order (so issues come in the resource's order); also each endpoint as mapped, in
 * order, and the addresses seen. Shared by the decoded form and the byte-level one
 * (mapClusterLoadAssignmentBytes).
 */
function assignEndpoints(
  c: Ctx,
  name: string,
  path: string,
  localities: readonly Locality[],
  endpoint: (li: number, ei: number) => LbEndpointMapped | undefined,
  policy: Msg | undefined,
): { readonly value: XdsEndpoints; readonly entries: (LbEndpointMapped | undefined)[]; readonly keys: Map<string, number> } {
  if (name === "") c.bad(at(path, "cluster_name"), "is required");
  const entries: (LbEndpointMapped | undefined)[] = [];
  /** key → where it was last seen, [locality, endpoint] (its path written only for an issue) */
  const seen = new Map<string, number>();
  localities.forEach((loc, li) => {
    for (let ei = 0; ei < loc.count; ei++) {
      const e = endpoint(li, ei);
      entries.push(e);
      if (e === undefined) continue;
      const prev = seen.get(e.key);
      if (prev !== undefined) c.bad(at(lbPath(path, li, ei), "endpoint.address"), `duplicate address ${e.key} (also at ${lbPath(path, Math.floor(prev / 2 ** 24), prev % 2 ** 24)})`);
      seen.set(e.key, li * 2 ** 24 + ei);
      if (e.usable && e.weight < 1) c.bad(at(lbPath(path, li, ei), "load_balancing_weight"), "must be at least 1");
    }
  });
  checkPriorities(c, path, localities);
  policyNotes(c, name, policy);
  return { value: { name, ...chooseEndpoints(localities, entries) }, entries, keys: seen };
}

/** Priorities run 0, 1, 2 … without gaps (gRFC A27). */
function checkPriorities(c: Ctx, path: string, localities: readonly Locality[]): void {
  const priorities = [...new Set(localities.map((l) => l.priority))].sort((a, b) => a - b);
  priorities.forEach((p, i) => {
    if (p !== i) c.bad(at(path, "endpoints"), `priorities must run 0, 1, 2 … without gaps (found ${priorities.join(", ")})`);
  });
}

function policyNotes(c: Ctx, name: string, policy: Msg | undefined): void {
  if (policy?.["drop_overloads"] !== undefined && arr(policy["drop_overloads"]).length > 0) c.notes.push(`${name}: policy.drop_overloads skipped`);
}

/** The usable endpoints of the lowest priority that has one, in order, with their weights (1 to 1000). */
function chooseEndpoints(localities: readonly Locality[], entries: readonly (LbEndpointMapped | undefined)[]): { endpoints: HostPort[]; weights: number[] } {
  let best = Infinity;
  let k = 0;
  for (const loc of localities) {
    if (loc.priority < best) for (let ei = 0; ei < loc.count; ei++) if (entries[k + ei]?.usable === true) best = loc.priority;
    k += loc.count;
  }
  const endpoints: HostPort[] = [];
  const weights: number[] = [];
  k = 0;
  for (const loc of localities) {
    if (loc.priority === best) {
      for (let ei = 0; ei < loc.count; ei++) {
        const e = entries[k + ei];
        if (e === undefined || !e.usable) continue;
        endpoints.push(e.hp);
        weights.push(Math.min(Math.max(e.weight, 1), LIMITS.weight.max));
      }
    }
    k += loc.count;
  }
  return { endpoints, weights };
}

// === ClusterLoadAssignment from its bytes ===
//
// A control plane sends a cluster's whole ClusterLoadAssignment again when one of its endpoints
// changes (state of the world and delta alike; only LEDS would send less). Decoding 10,000
// endpoints into objects costs tens of milliseconds, and so does even a map lookup per endpoint;
// most of them are byte for byte what came last time. So the assignment's protobuf is walked at
// the wire level (tags and lengths only), and its LbEndpoints are compared, in order, with the
// last assignment of that name (ClaMemo): the common prefix and suffix keep what they mapped to,
// and only the endpoints between are decoded, mapped and checked against the addresses held
// (one map operation each). The result is the same as mapClusterLoadAssignment's
// (test/xds/map.test.ts checks it on random assignments and random changes). Whatever the
// incremental path is not sure of (an issue anywhere) is mapped again whole, as is an assignment
// seen for the first time. Bytes the walk does not expect (a group, a bad length) give undefined:
// the caller decodes the whole message, which reports the error.

/** What the last mapping without an issue of one ClusterLoadAssignment leaves for the next. */
export interface ClaMemo {
  /** a copy of its bytes */
  readonly bytes: Uint8Array;
  /** each LbEndpoint's bytes, [from, to) pairs into `bytes` */
  readonly ranges: readonly number[];
  /** each LbEndpoint as mapped, in the same order */
  readonly entries: readonly LbEndpointMapped[];
  /** the addresses (keys) held: taken over, and changed, by the next mapping */
  readonly keys: Map<string, number>;
}

const LB_ENDPOINT = "type.googleapis.com/envoy.config.endpoint.v3.LbEndpoint";
const CLA_POLICY = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment.Policy";

/** A position in a message's bytes, read forward: one per walk, nothing allocated per field. */
class Wire {
  pos: number;
  /** the last field's payload: [start, stop) */
  start = 0;
  stop = 0;

  constructor(
    readonly b: Uint8Array,
    from: number,
    readonly end: number,
  ) {
    this.pos = from;
  }

  /** The varint at pos (pos moves past it); -1 past the end or beyond 2^53. */
  varint(): number {
    const b = this.b;
    let v = 0;
    let mul = 1;
    for (let i = this.pos; i < this.end && i < this.pos + 8; i++) {
      const x = b[i]!;
      v += (x & 0x7f) * mul;
      if (x < 0x80) {
        this.pos = i + 1;
        return v;
      }
      mul *= 128;
    }
    return -1;
  }

  /**
   * The next field's tag (its field number × 8 + wire type), with start/stop set to its payload
   * (a length-delimited field's bytes; a varint's own bytes) and pos past it; -1 when the bytes
   * are not a well-formed field; 0 at the end.
   */
  field(): number {
    if (this.pos >= this.end) return 0;
    const tag = this.varint();
    if (tag < 8) return -1;
    const wt = tag % 8;
    this.start = this.pos;
    if (wt === 0) {
      if (this.varint() < 0) return -1;
    } else if (wt === 2) {
      const len = this.varint();
      if (len < 0) return -1;
      this.start = this.pos;
      this.pos += len;
    } else if (wt === 1) this.pos += 8;
    else if (wt === 5) this.pos += 4;
    else return -1;
    if (this.pos > this.end) return -1;
    this.stop = this.pos;
    return tag;
  }
}

// tags: field number × 8 + wire type (0 varint, 2 length-delimited)
const CLA_NAME = 1 * 8 + 2;
const CLA_ENDPOINTS = 2 * 8 + 2;
const CLA_POLICY_TAG = 4 * 8 + 2;
const LOC_LB_ENDPOINTS = 2 * 8 + 2;
const LOC_PRIORITY = 5 * 8 + 0;

/** Whether a[af, at) and b[bf, bt) hold the same bytes. */
function sameBytes(a: Uint8Array, af: number, at: number, b: Uint8Array, bf: number, bt: number): boolean {
  if (at - af !== bt - bf) return false;
  for (let i = 0; i < at - af; i++) if (a[af + i] !== b[bf + i]) return false;
  return true;
}

const utf8 = new TextDecoder();

/** The assignment's fields dojang reads, found by the walk; undefined when the bytes are not what it expects. */
function walkAssignment(bytes: Uint8Array): { name: string; localities: Locality[]; ranges: number[]; policy: Uint8Array | undefined } | undefined {
  // ClusterLoadAssignment: 1 cluster_name, 2 endpoints (LocalityLbEndpoints), 4 policy
  let name = "";
  const locs: number[] = [];
  let policy: Uint8Array | undefined;
  const w = new Wire(bytes, 0, bytes.length);
  for (let tag = w.field(); tag !== 0; tag = w.field()) {
    if (tag < 0) return undefined;
    if (tag === CLA_NAME) name = utf8.decode(bytes.subarray(w.start, w.stop));
    else if (tag === CLA_ENDPOINTS) locs.push(w.start, w.stop);
    else if (tag === CLA_POLICY_TAG) policy = bytes.subarray(w.start, w.stop);
  }
  // LocalityLbEndpoints: 2 lb_endpoints (LbEndpoint), 5 priority; every LbEndpoint's bytes in one flat list
  const localities: Locality[] = [];
  const ranges: number[] = [];
  for (let k = 0; k < locs.length; k += 2) {
    let priority = 0;
    let count = 0;
    const lw = new Wire(bytes, locs[k]!, locs[k + 1]!);
    for (let tag = lw.field(); tag !== 0; tag = lw.field()) {
      if (tag < 0) return undefined;
      if (tag === LOC_LB_ENDPOINTS) {
        ranges.push(lw.start, lw.stop);
        count++;
      } else if (tag === LOC_PRIORITY) {
        const end = lw.pos;
        lw.pos = lw.start;
        priority = lw.varint() % 2 ** 32;
        lw.pos = end;
      }
    }
    localities.push({ priority, count });
  }
  return { name, localities, ranges, policy };
}

/**
 * A ClusterLoadAssignment from its serialized bytes, starting from what the last one of its
 * cluster_name left (`memoOf`); with its name and what it leaves for the next (undefined when it
 * has an issue). undefined when the bytes are not what the walk expects (then decode the
 * message: mapClusterLoadAssignment). Fields dojang does not read (a locality's `locality`,
 * weights, metadata) are skipped, not decoded.
 */
export function mapClusterLoadAssignmentBytes(
  bytes: Uint8Array,
  decode: AnyDecoder,
  memoOf: (name: string) => ClaMemo | undefined,
): { readonly name: string; readonly mapped: Mapped<XdsEndpoints>; readonly memo: ClaMemo | undefined } | undefined {
  const walked = walkAssignment(bytes);
  if (walked === undefined) return undefined;
  const { name, localities, ranges } = walked;
  let policy: Msg | undefined;
  if (walked.policy !== undefined) {
    try {
      policy = decode({ type_url: CLA_POLICY, value: walked.policy }).value;
    } catch {
      return undefined;
    }
  }
  /** one LbEndpoint decoded and mapped; undefined with `broken` set when its bytes do not decode */
  let broken = false;
  const decodeAt = (c: Ctx, k: number, li: number, ei: number): LbEndpointMapped | undefined => {
    let le: Msg;
    try {
      le = decode({ type_url: LB_ENDPOINT, value: bytes.subarray(ranges[2 * k]!, ranges[2 * k + 1]!) }).value;
    } catch {
      broken = true;
      return undefined;
    }
    return mapLbEndpoint(c, le, lbPath("", li, ei));
  };
  const memo = memoOf(name);
  if (memo !== undefined) {
    const r = incremental(bytes, name, localities, ranges, policy, memo, decode, decodeAt);
    if (broken) return undefined;
    if (r !== undefined) return r;
  }
  // the whole assignment, each endpoint decoded
  const c = new Ctx(decode);
  const first: number[] = [];
  localities.reduce((k, loc) => (first.push(k), k + loc.count), 0);
  const r = assignEndpoints(c, name, "", localities, (li, ei) => decodeAt(c, first[li]! + ei, li, ei), policy);
  if (broken) return undefined;
  const mapped = c.done(r.value);
  const clean = mapped.ok && r.entries.every((e) => e !== undefined);
  return { name, mapped, memo: clean ? { bytes: new Uint8Array(bytes), ranges, entries: r.entries as LbEndpointMapped[], keys: r.keys } : undefined };
}

/**
 * The assignment from the last one: the LbEndpoints that are byte for byte where they were (the
 * common prefix and suffix) keep what they mapped to; the ones between are decoded and mapped,
 * and their addresses checked against the ones held. undefined when anything has an issue (the
 * caller maps it whole, which reports every issue with its path).
 */
function incremental(
  bytes: Uint8Array,
  name: string,
  localities: readonly Locality[],
  ranges: readonly number[],
  policy: Msg | undefined,
  memo: ClaMemo,
  decode: AnyDecoder,
  decodeAt: (c: Ctx, k: number, li: number, ei: number) => LbEndpointMapped | undefined,
): { name: string; mapped: Mapped<XdsEndpoints>; memo: ClaMemo } | undefined {
  const n = ranges.length / 2;
  const m = memo.entries.length;
  const max = Math.min(n, m);
  const old = memo.bytes;
  const or = memo.ranges;
  let p = 0;
  while (p < max && sameBytes(bytes, ranges[2 * p]!, ranges[2 * p + 1]!, old, or[2 * p]!, or[2 * p + 1]!)) p++;
  let s = 0;
  while (s < max - p && sameBytes(bytes, ranges[2 * (n - 1 - s)]!, ranges[2 * (n - 1 - s) + 1]!, old, or[2 * (m - 1 - s)]!, or[2 * (m - 1 - s) + 1]!)) s++;
  const c = new Ctx(decode);
  if (name === "") return undefined;
  // the changed middle: decoded, mapped, and its addresses unique among those held
  const leaving = new Set<string>();
  for (let k = p; k < m - s; k++) leaving.add(memo.entries[k]!.key);
  const middle: LbEndpointMapped[] = [];
  const coming = new Set<string>();
  for (let k = p, li = 0, base = 0; k < n - s; k++) {
    while (k >= base + localities[li]!.count) base += localities[li++]!.count;
    const e = decodeAt(c, k, li, k - base);
    if (e === undefined || c.issues.length > 0 || (e.usable && e.weight < 1)) return undefined;
    if (coming.has(e.key) || (memo.keys.has(e.key) && !leaving.has(e.key))) return undefined;
    coming.add(e.key);
    middle.push(e);
  }
  checkPriorities(c, "", localities);
  if (c.issues.length > 0) return undefined;
  policyNotes(c, name, policy);
  // from here on the memo is taken over
  const keys = memo.keys;
  for (const k of leaving) if (!coming.has(k)) keys.delete(k);
  for (const k of coming) keys.set(k, 0);
  const entries = p === m - s && middle.length === 0 ? memo.entries : [...memo.entries.slice(0, p), ...middle, ...memo.entries.slice(m - s)];
  const mapped = c.done({ name, ...chooseEndpoints(localities, entries) });
  return { name, mapped, memo: { bytes: new Uint8Array(bytes), ranges, entries, keys } };
}
