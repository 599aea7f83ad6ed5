// Cluster → dojang's cluster config: discovery type (STATIC, DNS, EDS), LB policy, circuit
// breakers, outlier detection, health checks, HTTP/2 options and upstream TLS.
import { DEFAULTS, LIMITS, defaultCluster, type ClusterConfig, type LbPolicy } from "../../config/types.js";
import { Ctx, FILTER, arr, at, duration, durationMs, inRange, obj, safeDecode, str, u32, type AnyDecoder, type Mapped, type Msg } from "./read.js";
import { mapEndpointsInto, type XdsEndpoints } from "./endpoint.js";

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
