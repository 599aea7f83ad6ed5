// Listener → dojang's listener: its address and its one http_connection_manager (RDS or an
// inline route table, stream idle timeout, and the HTTP filters dojang runs: gRPC-Web, CORS, the
// local rate limit, faults).
import { DEFAULTS, type RateLimitConfig } from "../../config/types.js";
import type { HostPort } from "../../config/units.js";
import type { FaultAction, FaultRule } from "../../config/faults/model.js";
import { Ctx, FILTER, arr, at, duration, obj, safeDecode, socketAddress, str, u32, type AnyDecoder, type Mapped, type Msg } from "./read.js";
import { mapRouteTableInto, type XdsRouteTable } from "./route.js";

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
