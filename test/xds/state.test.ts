// The xDS state between processes and between updates: stateToJson/stateFromJson (how the
// `workers: N` primary hands the state to its workers over IPC: JSON) keep every mapped field of
// real resources (encoded with the real descriptors, mapped as the client maps them), and
// endpointChanges tells an update of endpoint sets alone (applied in place) from one that
// changes anything else (the whole-config reload).
import { describe, expect, it } from "vitest";
import { decodeAny, lookupType } from "../../src/protos/load.js";
import { endpointChanges } from "../../src/xds/client.js";
import { stateFromJson, stateToJson, type XdsState } from "../../src/xds/compose.js";
import { mapCluster, mapClusterLoadAssignment, mapListener, type Msg } from "../../src/xds/map/index.js";

const decode = (a: Msg) => decodeAny(a as { type_url?: string; value?: Uint8Array });

function any(typeName: string, o: Record<string, unknown>): { type_url: string; value: Uint8Array } {
  const t = lookupType(typeName)!;
  const err = t.verify(t.fromObject(o));
  if (err !== null) throw new Error(`${typeName}: ${err}`);
  return { type_url: `type.googleapis.com/${typeName}`, value: t.encode(t.fromObject(o)).finish() };
}
const decoded = (typeName: string, o: Record<string, unknown>): Msg => decode(any(typeName, o)).value;
function ok<T>(r: { ok: true; value: T } | { ok: false; issues: readonly unknown[] }): T {
  if (!r.ok) throw new Error(JSON.stringify(r.issues));
  return r.value;
}

const pct = { default_value: { numerator: 100, denominator: "HUNDRED" }, runtime_key: "k" };
const listenerMsg = decoded("envoy.config.listener.v3.Listener", {
  name: "in",
  address: { socket_address: { address: "127.0.0.1", port_value: 8443 } },
  filter_chains: [
    {
      filters: [
        {
          name: "hcm",
          typed_config: any("envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager", {
            stat_prefix: "in",
            route_config: {
              name: "inline",
              virtual_hosts: [
                {
                  name: "vh",
                  domains: ["*"],
                  routes: [
                    {
                      match: { prefix: "/pkg.Svc/" },
                      route: {
                        weighted_clusters: { clusters: [{ name: "svc", weight: { value: 3 } }, { name: "svc2", weight: { value: 1 } }] },
                        timeout: { seconds: 2 },
                        retry_policy: { retry_on: "unavailable,cancelled", num_retries: { value: 2 }, per_try_timeout: { nanos: 500_000_000 } },
                      },
                      request_headers_to_add: [{ header: { key: "x-team", value: "blue" } }],
                    },
                  ],
                },
              ],
            },
            http_filters: [
              { name: "envoy.filters.http.fault", typed_config: any("envoy.extensions.filters.http.fault.v3.HTTPFault", { delay: { fixed_delay: { nanos: 5_000_000 }, percentage: { numerator: 10 } }, abort: { grpc_status: 14, percentage: { numerator: 1 } } }) },
              { name: "envoy.filters.http.local_ratelimit", typed_config: any("envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit", { stat_prefix: "rl", token_bucket: { max_tokens: 20, tokens_per_fill: { value: 5 }, fill_interval: { seconds: 1 } }, filter_enabled: pct, filter_enforced: pct }) },
              { name: "envoy.filters.http.router", typed_config: any("envoy.extensions.filters.http.router.v3.Router", {}) },
            ],
          }),
        },
      ],
    },
  ],
});

const h2 = { "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": any("envoy.extensions.upstreams.http.v3.HttpProtocolOptions", { explicit_http_config: { http2_protocol_options: { max_concurrent_streams: { value: 50 } } } }) };
const clusterMsg = decoded("envoy.config.cluster.v3.Cluster", {
  name: "svc",
  type: "EDS",
  eds_cluster_config: { eds_config: { ads: {} } },
  lb_policy: "LEAST_REQUEST",
  connect_timeout: { seconds: 3 },
  typed_extension_protocol_options: h2,
  outlier_detection: { consecutive_gateway_failure: { value: 4 }, base_ejection_time: { seconds: 10 }, max_ejection_percent: { value: 30 } },
  circuit_breakers: { thresholds: [{ max_connections: { value: 10 }, max_requests: { value: 99 } }] },
});
const claMsg = (ports: readonly number[], weights: readonly number[] = []): Msg =>
  decoded("envoy.config.endpoint.v3.ClusterLoadAssignment", {
    cluster_name: "svc",
    endpoints: [{ lb_endpoints: ports.map((p, i) => ({ endpoint: { address: { socket_address: { address: "10.0.0.1", port_value: p } } }, ...(weights[i] === undefined ? {} : { load_balancing_weight: { value: weights[i] } }) })) }],
  });

function state(cla = ok(mapClusterLoadAssignment(claMsg([1, 2, 3], [1, 5, 1]), decode))): XdsState {
  const l = ok(mapListener(listenerMsg, decode));
  const c = ok(mapCluster(clusterMsg, decode));
  return {
    listeners: new Map([["in", l]]),
    routes: new Map(),
    clusters: new Map([["svc", { cluster: c, tls: { caFile: "/etc/ca.pem", certFile: null, keyFile: null, serverName: "svc.local" } }]]),
    endpoints: new Map([["svc", cla]]),
    missing: new Set(["gone"]),
  };
}

describe("stateToJson / stateFromJson (the state over IPC)", () => {
  it("keeps every field of mapped resources through JSON", () => {
    const s = state();
    const back = stateFromJson(JSON.parse(JSON.stringify(stateToJson(s))));
    expect(back).toEqual(s);
    // (a sanity check that the state above carries what a worker needs: faults, a rate limit, retries, weights)
    const l = back.listeners.get("in")!;
    expect(l.faults.map((f) => f.action.kind)).toEqual(["delay", "abort"]);
    expect(l.rateLimit).toMatchObject({ burst: 20, callsPerSecond: 5 });
    expect(l.inline!.virtualHosts[0]!.routes[0]!.retry).not.toBeNull();
    expect(back.endpoints.get("svc")!.weights).toEqual([1, 5, 1]);
  });
});

describe("endpointChanges()", () => {
  it("is [] for the same resources, the endpoint deltas when only assignments changed, null when anything else did", () => {
    const s = state();
    expect(endpointChanges(s, { ...s, listeners: new Map(s.listeners), endpoints: new Map(s.endpoints) })).toEqual([]);
    const moved = { ...s, endpoints: new Map([["svc", ok(mapClusterLoadAssignment(claMsg([1, 2, 4], [1, 5, 1]), decode))]]) };
    // (with the assignment as the client now holds it, which the host keeps instead of patching a copy)
    expect(endpointChanges(s, moved)).toEqual([{ name: "svc", delta: { remove: [{ host: "10.0.0.1", port: 3 }], upsert: [{ host: "10.0.0.1", port: 4, weight: 1 }] }, value: moved.endpoints.get("svc") }]);
    // the same endpoints mapped again (a new object, the same content): no change
    expect(endpointChanges(s, { ...s, endpoints: new Map([["svc", ok(mapClusterLoadAssignment(claMsg([1, 2, 3], [1, 5, 1]), decode))]]) })).toEqual([]);
    // a listener re-mapped is another object: not only endpoints
    expect(endpointChanges(s, { ...moved, listeners: new Map([["in", ok(mapListener(listenerMsg, decode))]]) })).toBeNull();
    // an assignment that comes or goes changes whether a cluster is warming
    expect(endpointChanges(s, { ...s, endpoints: new Map() })).toBeNull();
    expect(endpointChanges(s, { ...s, missing: new Set() })).toBeNull();
  });
});
