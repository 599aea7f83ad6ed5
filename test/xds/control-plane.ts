// The test's side of the go-control-plane fixture (test/engines/xds-control-plane): start it,
// post snapshots (Envoy resources in protojson, keyed by type URL), read the DiscoveryRequests it
// saw (ACKs, NACKs with error_detail). Plus builders for the resources the tests push.
import type { ChildProcess } from "node:child_process";
import { engineBinary } from "../helpers/engines.js";
import { killGroup, spawnGroup } from "../helpers/process.js";

export const T = {
  listener: "type.googleapis.com/envoy.config.listener.v3.Listener",
  route: "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
  cluster: "type.googleapis.com/envoy.config.cluster.v3.Cluster",
  endpoint: "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
} as const;

export interface CpEvent {
  readonly seq: number;
  readonly kind: "request" | "delta" | "open" | "closed";
  readonly stream: number;
  readonly node?: string;
  readonly typeUrl?: string;
  readonly version?: string;
  readonly nonce?: string;
  readonly resourceNames?: string[];
  readonly errorDetail?: { code: number; message: string };
}

export interface ControlPlane {
  readonly adsPort: number;
  readonly child: ChildProcess;
  push(node: string, version: string, resources: Partial<Record<string, unknown[]>>, consistent?: boolean): Promise<void>;
  events(since?: number): Promise<CpEvent[]>;
  stop(): Promise<void>;
}

export async function startControlPlane(adsPort = 0): Promise<ControlPlane> {
  const child = spawnGroup(engineBinary("xds-control-plane"), ["-ads-port", String(adsPort)], { stdio: ["ignore", "pipe", "pipe"] });
  const ports = await new Promise<{ ads: number; http: number }>((resolve, reject) => {
    let out = "";
    let err = "";
    const t = setTimeout(() => reject(new Error(`control plane did not start: ${err}`)), 20_000);
    child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
    child.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /ads=(\d+) http=(\d+)/.exec(out);
      if (m !== null) {
        clearTimeout(t);
        resolve({ ads: Number(m[1]), http: Number(m[2]) });
      }
    });
    child.once("exit", (code) => {
      clearTimeout(t);
      reject(new Error(`control plane exited ${code}: ${err}`));
    });
  });
  const base = `http://127.0.0.1:${ports.http}`;
  return {
    adsPort: ports.ads,
    child,
    async push(node, version, resources, consistent = false) {
      const res = await fetch(`${base}/snapshot`, { method: "POST", body: JSON.stringify({ node, version, consistent, resources }) });
      if (res.status !== 204) throw new Error(`push ${version}: ${res.status} ${await res.text()}`);
    },
    async events(since = 0) {
      const res = await fetch(`${base}/events?since=${since}`);
      return (await res.json()) as CpEvent[];
    },
    stop: () => killGroup(child.pid!),
  };
}

export function bootstrapYaml(node: string, adsPort: number, apiType: "GRPC" | "DELTA_GRPC" = "GRPC"): string {
  return `node:
  id: ${node}
  cluster: test
  metadata: { GENERATOR: dojang-test, NAMESPACE: default }
dynamic_resources:
  ads_config:
    api_type: ${apiType}
    transport_api_version: V3
    grpc_services:
      - envoy_grpc: { cluster_name: xds_cluster }
  lds_config: { ads: {}, resource_api_version: V3 }
  cds_config: { ads: {}, resource_api_version: V3 }
static_resources:
  clusters:
    - name: xds_cluster
      type: STATIC
      load_assignment:
        cluster_name: xds_cluster
        endpoints:
          - lb_endpoints:
              - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: ${adsPort} } } }
`;
}

// === resources, protojson ===

const H2 = {
  "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
    "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
    explicit_http_config: { http2_protocol_options: {} },
  },
};

export function edsCluster(name: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { name, type: "EDS", eds_cluster_config: { eds_config: { ads: {} } }, connect_timeout: "2s", lb_policy: "ROUND_ROBIN", typed_extension_protocol_options: H2, ...extra };
}

export function cla(name: string, addresses: readonly string[], extra: Record<string, unknown>[] = []): Record<string, unknown> {
  return {
    cluster_name: name,
    endpoints: [
      {
        lb_endpoints: addresses.map((a, i) => {
          const [host, port] = a.split(":");
          return { endpoint: { address: { socket_address: { address: host, port_value: Number(port) } } }, ...(extra[i] ?? {}) };
        }),
      },
    ],
  };
}

export function routeConfig(name: string, routes: readonly Record<string, unknown>[], domains: readonly string[] = ["*"]): Record<string, unknown> {
  return { name, virtual_hosts: [{ name: "all", domains, routes }] };
}

export const route = (prefix: string, cluster: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ match: { prefix }, route: { cluster, ...extra } });

export function listener(name: string, port: number, rds: string, filters: readonly Record<string, unknown>[] = []): Record<string, unknown> {
  return {
    name,
    address: { socket_address: { address: "127.0.0.1", port_value: port } },
    filter_chains: [
      {
        filters: [
          {
            name: "envoy.filters.network.http_connection_manager",
            typed_config: {
              "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
              stat_prefix: name,
              codec_type: "AUTO",
              rds: { route_config_name: rds, config_source: { ads: {}, resource_api_version: "V3" } },
              http_filters: [...filters, { name: "envoy.filters.http.router", typed_config: { "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router" } }],
            },
          },
        ],
      },
    ],
  };
}
