// RouteConfiguration → dojang's route table: virtual hosts, routes (prefix or path, one cluster
// or a weighted split, timeout, retry policy, header rules, rewrites) and the CORS origins.
import { DEFAULTS, LIMITS, RULE_FORBIDDEN, RULE_HEADER_RE, type HeaderRulesConfig, type RetryConfig } from "../../config/types.js";
import { Ctx, arr, at, duration, obj, safeDecode, str, u32, type AnyDecoder, type Mapped, type Msg } from "./read.js";

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

export function mapRouteTableInto(c: Ctx, rc: Msg, path: string): XdsRouteTable {
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
