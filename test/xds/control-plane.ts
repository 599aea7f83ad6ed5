// The test's side of the example control plane (docs/examples/xds-control-plane, built by
// scripts/engines.mjs): the very program the xDS guide tells users to `go run .`, driven the way a
// user drives it, by writing its snapshot file. Start it, set what a node is served (Envoy
// resources in protojson), read back what it logged (-log json): the requests it got (ACKs, NACKs
// with their error), its responses, its streams. Plus builders for the resources the tests push.
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { engineBinary } from "../helpers/engines.js";
import { killGroup, spawnGroup, waitFor } from "../helpers/process.js";

export const T = {
  listener: "type.googleapis.com/envoy.config.listener.v3.Listener",
  route: "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
  cluster: "type.googleapis.com/envoy.config.cluster.v3.Cluster",
  endpoint: "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
} as const;

/** The snapshot file's key for each type (docs/examples/xds-control-plane/main.go). */
const KEY: Readonly<Record<string, string>> = { [T.listener]: "listeners", [T.route]: "routes", [T.cluster]: "clusters", [T.endpoint]: "endpoints" };

/** One line the control plane logged, by its message. */
export interface CpEvent {
  readonly seq: number;
  /** request / delta: a DiscoveryRequest (an ACK, a NACK with errorDetail); open / closed: a stream; serving: a node's snapshot set */
  readonly kind: "request" | "delta" | "response" | "open" | "closed" | "serving" | "log";
  readonly msg: string;
  readonly level: string;
  /** the control plane's clock, ms since the epoch */
  readonly at: number;
  readonly stream?: number;
  readonly node?: string;
  readonly typeUrl?: string;
  readonly version?: string;
  readonly nonce?: string;
  readonly resourceNames?: string[];
  readonly errorDetail?: { code: number; message: string };
  readonly consistent?: boolean;
  readonly line: Readonly<Record<string, unknown>>;
}

export interface ControlPlane {
  /** where it listens (the same across stop() and start()) */
  readonly adsPort: number;
  /** the snapshot file it serves */
  readonly file: string;
  /**
   * Sets what `node` is served, at `version` (the file's other nodes stay), and waits until the
   * control plane serves it; with `consistent`, a snapshot go-control-plane finds inconsistent
   * (a missing RDS or EDS resource) is an error.
   */
  push(node: string, version: string, resources: Partial<Record<string, unknown[]>>, consistent?: boolean): Promise<void>;
  /** what this process logged, from the `since`-th line on */
  events(since?: number): Promise<CpEvent[]>;
  /** kills the process (SIGKILL: a crash); the file and port stay for start() */
  stop(): Promise<void>;
  /** starts it again on the same port and file; resolves once it listens, with its clock's time of that */
  start(): Promise<number>;
  /** stop(), and removes the file */
  close(): Promise<void>;
}

function eventOf(seq: number, line: Record<string, unknown>): CpEvent {
  const msg = String(line["msg"] ?? "");
  const kind: CpEvent["kind"] =
    msg === "request" || msg === "NACK" ? "request"
    : msg === "delta request" || msg === "delta NACK" ? "delta"
    : msg === "response" || msg === "delta response" ? "response"
    : msg === "stream opened" ? "open"
    : msg === "stream closed" ? "closed"
    : msg === "serving" ? "serving"
    : "log";
  const str = (k: string): string | undefined => (typeof line[k] === "string" ? (line[k] as string) : undefined);
  const names = kind === "delta" ? line["subscribe"] : line["names"];
  return {
    seq,
    kind,
    msg,
    level: String(line["level"] ?? ""),
    at: Date.parse(String(line["time"] ?? "")),
    ...(typeof line["stream"] === "number" ? { stream: line["stream"] } : {}),
    ...(str("node") === undefined ? {} : { node: str("node")! }),
    ...(str("type") === undefined ? {} : { typeUrl: str("type")! }),
    ...(str("version") === undefined ? {} : { version: str("version")! }),
    ...(str("nonce") === undefined ? {} : { nonce: str("nonce")! }),
    ...(Array.isArray(names) ? { resourceNames: names as string[] } : {}),
    ...(typeof line["error"] === "string" ? { errorDetail: { code: Number(line["code"]), message: line["error"] } } : {}),
    ...(typeof line["consistent"] === "boolean" ? { consistent: line["consistent"] } : {}),
    line,
  };
}

/**
 * Starts the control plane on `port` (0: a free one) serving `file` (default: a new one with no
 * node; the nodes an existing file has are kept and pushed onto).
 */
export async function startControlPlane(o: { port?: number; file?: string } = {}): Promise<ControlPlane> {
  const own = o.file === undefined ? mkdtempSync(join(tmpdir(), "dojang-xds-cp-")) : undefined;
  const file = o.file ?? join(own!, "snapshot.json");
  const nodes: Record<string, Record<string, unknown>> = o.file === undefined ? {} : (JSON.parse(readFileSync(file, "utf8")) as { nodes: Record<string, Record<string, unknown>> }).nodes;
  const write = (): void => {
    // whole, then renamed into place: the control plane never reads half a file
    writeFileSync(`${file}.tmp`, JSON.stringify({ nodes }, null, 1));
    renameSync(`${file}.tmp`, file);
  };
  if (o.file === undefined) write();
  let port = o.port ?? 0;
  let child: ChildProcess | undefined;
  let events: CpEvent[] = [];
  let stderr = "";
  /** why the running process ended, when it ended by itself */
  let died: string | undefined;

  const start = async (): Promise<number> => {
    events = [];
    stderr = "";
    died = undefined;
    const c = spawnGroup(engineBinary("xds-control-plane"), ["-file", file, "-addr", `127.0.0.1:${port}`, "-log", "json"], { stdio: ["ignore", "ignore", "pipe"] });
    child = c;
    let buf = "";
    c.stderr!.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
      buf += d;
      for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
        const text = buf.slice(0, i);
        buf = buf.slice(i + 1);
        try {
          events.push(eventOf(events.length, JSON.parse(text) as Record<string, unknown>));
        } catch {
          /* not a log line (a Go panic's text): kept in stderr */
        }
      }
    });
    const exited = new Promise<never>((_, reject) =>
      c.once("exit", (code, signal) => {
        if (child === c) died = `the control plane exited (${code ?? signal}): ${stderr.slice(-4000)}`;
        reject(new Error(died ?? `the control plane exited (${code ?? signal})`));
      }),
    );
    exited.catch(() => undefined);
    const listening = await Promise.race([waitFor("the control plane listening", () => events.find((e) => e.msg === "ADS server listening"), 20_000, 10), exited]);
    port = Number(/:(\d+)$/.exec(String(listening.line["addr"]))![1]);
    return listening.at;
  };
  const stop = async (): Promise<void> => {
    const c = child;
    child = undefined;
    if (c?.pid !== undefined) await killGroup(c.pid);
  };
  await start();

  return {
    get adsPort() {
      return port;
    },
    file,
    async push(node, version, resources, consistent = false) {
      const entry: Record<string, unknown> = { version };
      for (const [t, list] of Object.entries(resources)) {
        const key = KEY[t];
        if (key === undefined) throw new Error(`no file key for ${t}`);
        entry[key] = list;
      }
      nodes[node] = entry;
      const since = events.length;
      write();
      const served = await waitFor(
        `the control plane serving ${node} version ${version}`,
        () => {
          if (died !== undefined) throw new Error(died);
          const refused = events.slice(since).find((e) => e.level === "ERROR");
          if (refused !== undefined) throw new Error(`the control plane: ${JSON.stringify(refused.line)}`);
          return events.slice(since).find((e) => e.kind === "serving" && e.node === node && e.version === version);
        },
        20_000,
        10,
      ).catch((err: Error) => {
        throw new Error(`${err.message}\nthe control plane's log since:\n${events.slice(since).map((e) => JSON.stringify(e.line)).join("\n")}\n${stderr.slice(-2000)}`);
      });
      if (consistent && served.consistent !== true) {
        const why = events.slice(since).filter((e) => e.msg === "served anyway").map((e) => String(e.line["problem"]));
        throw new Error(`push ${version}: not consistent: ${why.join("; ")}`);
      }
    },
    events: async (since = 0) => events.slice(since),
    stop,
    start,
    async close() {
      await stop();
      if (own !== undefined) rmSync(own, { recursive: true, force: true });
    },
  };
}

export function bootstrapYaml(node: string, adsPort: number, apiType: "GRPC" | "DELTA_GRPC" = "GRPC", configSource: string = "{ ads: {}, resource_api_version: V3 }"): string {
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
  lds_config: ${configSource}
  cds_config: ${configSource}
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
