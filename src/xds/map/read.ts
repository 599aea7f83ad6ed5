// What the xDS mappers share (src/xds/map/: listener, route, cluster, endpoint, one file per
// resource type as Envoy's API is): the result shape, the decoded-message readers, the issue
// collector, and the typed_config names the mappers recognise.
//
// xDS resources (decoded into plain objects: snake_case fields, longs and enums as strings, as
// src/protos/load.ts decodes them) → dojang's own config pieces. Pure: no I/O, no clock. Each
// mapper returns the piece or every issue it found, each naming the field by its path in the
// resource (`virtual_hosts[0].routes[1].match.headers`), which the client sends back in a NACK's
// error_detail. What dojang cannot do faithfully is refused (a NACK), never silently widened; what
// is only advice (an optional filter, an HTTP-level retry condition) is skipped with a note the
// client logs.
import { MAX_DURATION_MS, type HostPort } from "../../config/units.js";
import type { ConfigIssue } from "../../errors.js";

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


// === small readers ===

export class Ctx {
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
export const str = (v: unknown): string => (typeof v === "string" ? v : "");
export const at = (base: string, key: string): string => (base === "" ? key : `${base}.${key}`);

/** google.protobuf.Duration → ms; undefined when absent. */
export function durationMs(v: unknown): number | undefined {
  const d = obj(v);
  if (d === undefined) return undefined;
  const s = Number(d["seconds"] ?? 0);
  const n = Number(d["nanos"] ?? 0);
  return Math.round(s * 1000 + n / 1e6);
}

/** google.protobuf.UInt32Value → number; undefined when absent. */
export function u32(v: unknown): number | undefined {
  const d = obj(v);
  if (d === undefined) return undefined;
  return Number(d["value"] ?? 0);
}

export function duration(c: Ctx, v: unknown, path: string, min = 0): number | undefined {
  const ms = durationMs(v);
  if (ms === undefined) return undefined;
  if (!Number.isFinite(ms) || ms < min || ms > MAX_DURATION_MS) {
    c.bad(path, `duration out of range (${ms}ms)`);
    return undefined;
  }
  return ms;
}

export function inRange(c: Ctx, n: number | undefined, path: string, lim: { readonly min: number; readonly max: number }): number | undefined {
  if (n === undefined) return undefined;
  if (!Number.isInteger(n) || n < lim.min || n > lim.max) {
    c.bad(path, `must be ${lim.min} to ${lim.max} (got ${n})`);
    return undefined;
  }
  return n;
}

export function socketAddress(c: Ctx, v: unknown, path: string): HostPort | undefined {
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


/** The typed_config messages the mappers recognise, by type name. */
export const FILTER = {
  hcm: "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
  router: "envoy.extensions.filters.http.router.v3.Router",
  grpcWeb: "envoy.extensions.filters.http.grpc_web.v3.GrpcWeb",
  cors: "envoy.extensions.filters.http.cors.v3.Cors",
  fault: "envoy.extensions.filters.http.fault.v3.HTTPFault",
  localRateLimit: "envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit",
  tls: "envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
  httpOptions: "envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
} as const;

export function safeDecode(c: Ctx, any: Msg, path: string): { readonly typeName: string; readonly value: Msg } | undefined {
  try {
    return c.decode(any);
  } catch (err) {
    c.bad(path, (err as Error).message);
    return undefined;
  }
}
