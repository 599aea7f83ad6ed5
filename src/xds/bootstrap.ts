// The xDS bootstrap in Envoy's own shape (YAML or JSON): `node` (id, cluster, metadata),
// `dynamic_resources.ads_config` naming the control plane's cluster, and that cluster under
// `static_resources.clusters` (one socket address; TLS with files). Parsed once at start; every
// problem is reported with its path in the file. Pure but for reading the file (readBootstrap).
import { readFileSync } from "node:fs";
import { parse } from "yaml";
import { arr, obj, type Issue } from "./map/index.js";

export interface Bootstrap {
  readonly node: { readonly id: string; readonly cluster: string; readonly metadata: Readonly<Record<string, unknown>> };
  /** the control plane: host:port of its static cluster's first endpoint */
  readonly server: { readonly host: string; readonly port: number };
  readonly serverCluster: string;
  /** "GRPC" (state of the world) or "DELTA_GRPC" (incremental) */
  readonly apiType: "GRPC" | "DELTA_GRPC";
  /** TLS to the control plane (files), null for plaintext */
  readonly tls: { readonly caFile: string | null; readonly certFile: string | null; readonly keyFile: string | null } | null;
  /** dynamic_resources.lds_config / cds_config given (wildcard subscriptions over ADS) */
  readonly lds: boolean;
  readonly cds: boolean;
  /**
   * How long /ready waits for the first fetch (Envoy's ConfigSource.initial_fetch_timeout, 15 s
   * by default, 0: no limit): the longest of lds_config's and cds_config's, as dojang fetches
   * both at once.
   */
  readonly initialFetchTimeoutMs: number;
}

/** Envoy's default initial_fetch_timeout (envoy/config/core/v3/config_source.proto: "The default is 15s"). */
export const INITIAL_FETCH_TIMEOUT_MS = 15_000;

export type BootstrapResult = { readonly ok: true; readonly bootstrap: Bootstrap } | { readonly ok: false; readonly issues: readonly Issue[] };


export function readBootstrap(path: string): BootstrapResult {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    return { ok: false, issues: [{ path: "", message: `cannot read the xDS bootstrap ${path}: ${(err as Error).message}` }] };
  }
  return parseBootstrap(text);
}

export function parseBootstrap(text: string): BootstrapResult {
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (err) {
    return { ok: false, issues: [{ path: "", message: `not YAML or JSON: ${(err as Error).message}` }] };
  }
  const issues: Issue[] = [];
  const bad = (path: string, message: string): void => void issues.push({ path, message });
  const d = obj(doc) ?? {};
  const node = obj(d["node"]);
  if (node === undefined) bad("node", "is required (id, cluster): the control plane keys what it serves by it");
  const id = typeof node?.["id"] === "string" ? node["id"] : "";
  if (node !== undefined && id === "") bad("node.id", "is required");
  const dyn = obj(d["dynamic_resources"]);
  const ads = obj(dyn?.["ads_config"]);
  if (ads === undefined) bad("dynamic_resources.ads_config", "is required: dojang speaks ADS");
  const apiType = String(ads?.["api_type"] ?? "GRPC");
  if (ads !== undefined && apiType !== "GRPC" && apiType !== "DELTA_GRPC") bad("dynamic_resources.ads_config.api_type", `${apiType} is not supported (GRPC, DELTA_GRPC)`);
  const services = arr(ads?.["grpc_services"]);
  if (ads !== undefined && services.length !== 1) bad("dynamic_resources.ads_config.grpc_services", "needs exactly one entry");
  const envoyGrpc = obj(services[0]?.["envoy_grpc"]);
  const clusterName = typeof envoyGrpc?.["cluster_name"] === "string" ? envoyGrpc["cluster_name"] : "";
  if (services.length === 1 && clusterName === "") bad("dynamic_resources.ads_config.grpc_services[0].envoy_grpc.cluster_name", "is required (google_grpc is not supported)");
  const fetchTimeouts: number[] = [];
  for (const k of ["lds_config", "cds_config"] as const) {
    const cs = obj(dyn?.[k]);
    if (cs !== undefined && cs["ads"] === undefined) bad(`dynamic_resources.${k}`, "dojang takes it over ADS only: { ads: {} }");
    if (cs === undefined) continue;
    const t = cs["initial_fetch_timeout"];
    if (t === undefined) fetchTimeouts.push(INITIAL_FETCH_TIMEOUT_MS);
    else {
      const ms = protoDurationMs(t);
      if (ms === undefined) bad(`dynamic_resources.${k}.initial_fetch_timeout`, "expected a duration as Envoy writes it, like 15s or 0.5s (0s: wait without limit)");
      else fetchTimeouts.push(ms);
    }
  }
  let server: Bootstrap["server"] | undefined;
  let tls: Bootstrap["tls"] = null;
  if (clusterName !== "") {
    const clusters = arr(obj(d["static_resources"])?.["clusters"]);
    const i = clusters.findIndex((c) => c["name"] === clusterName);
    if (i < 0) bad("static_resources.clusters", `needs the control plane's cluster ${JSON.stringify(clusterName)}`);
    else {
      const p = `static_resources.clusters[${i}]`;
      const c = clusters[i]!;
      const eps = arr(obj(c["load_assignment"])?.["endpoints"]).flatMap((l) => arr(l["lb_endpoints"]));
      const sa = obj(obj(obj(eps[0]?.["endpoint"])?.["address"])?.["socket_address"]);
      const host = typeof sa?.["address"] === "string" ? sa["address"] : "";
      const port = Number(sa?.["port_value"]);
      if (host === "" || !Number.isInteger(port) || port < 1 || port > 65535) bad(`${p}.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address`, "needs address and port_value");
      else server = { host, port };
      const ts = obj(c["transport_socket"]);
      if (ts !== undefined) {
        const common = obj(obj(ts["typed_config"])?.["common_tls_context"]) ?? {};
        const file = (v: unknown, q: string): string | null => {
          const ds = obj(v);
          if (ds === undefined) return null;
          if (typeof ds["filename"] === "string") return ds["filename"];
          bad(q, "give filename (inline certificates are not read from the bootstrap)");
          return null;
        };
        const cert = arr(common["tls_certificates"])[0];
        tls = {
          caFile: file(obj(common["validation_context"])?.["trusted_ca"], `${p}.transport_socket.typed_config.common_tls_context.validation_context.trusted_ca`),
          certFile: file(cert?.["certificate_chain"], `${p}.transport_socket.typed_config.common_tls_context.tls_certificates[0].certificate_chain`),
          keyFile: file(cert?.["private_key"], `${p}.transport_socket.typed_config.common_tls_context.tls_certificates[0].private_key`),
        };
      }
    }
  }
  if (issues.length > 0 || server === undefined) return { ok: false, issues };
  return {
    ok: true,
    bootstrap: {
      node: { id, cluster: typeof node?.["cluster"] === "string" ? node["cluster"] : "", metadata: obj(node?.["metadata"]) ?? {} },
      server,
      serverCluster: clusterName,
      apiType: apiType as "GRPC" | "DELTA_GRPC",
      tls,
      // without lds_config / cds_config Envoy asks for none; a bootstrap that gives neither
      // is asking for both (what a sidecar driven by ADS means)
      lds: dyn?.["lds_config"] !== undefined || dyn?.["cds_config"] === undefined,
      cds: dyn?.["cds_config"] !== undefined || dyn?.["lds_config"] === undefined,
      // 0 (no limit) on either wins: Envoy would wait for that one without limit
      initialFetchTimeoutMs: fetchTimeouts.length === 0 ? INITIAL_FETCH_TIMEOUT_MS : fetchTimeouts.includes(0) ? 0 : Math.max(...fetchTimeouts),
    },
  };
}

/**
 * A google.protobuf.Duration as a bootstrap gives it, in milliseconds: the proto3 JSON string
 * ("15s", "0.5s", "1.000340012s": seconds with up to 9 fractional digits, then "s") or the
 * { seconds, nanos } object; undefined when it is neither, negative or too long for a timer.
 */
export function protoDurationMs(v: unknown): number | undefined {
  let ms: number;
  if (typeof v === "string") {
    const m = /^(\d{1,12})(?:\.(\d{1,9}))?s$/.exec(v);
    if (m === null) return undefined;
    ms = Number(m[1]) * 1000 + Number(`0.${m[2] ?? "0"}`) * 1000;
  } else {
    const o = obj(v);
    if (o === undefined) return undefined;
    const s = o["seconds"] ?? 0;
    const n = o["nanos"] ?? 0;
    if (typeof s !== "number" || typeof n !== "number" || !Number.isInteger(s) || !Number.isInteger(n) || s < 0 || n < 0 || n > 999_999_999) return undefined;
    ms = s * 1000 + n / 1e6;
  }
  // a timer holds at most 2^31-1 ms (about 24.8 days)
  return ms <= 2_147_483_647 ? Math.round(ms) : undefined;
}
