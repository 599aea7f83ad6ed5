// The pure part of xDS: Envoy resources (encoded with the real descriptors, decoded as the client
// decodes them) → dojang's config pieces, every refusal naming its field; the bootstrap; the
// composition with the static config.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decodeAny, lookupType } from "../../src/protos/load.js";
import { parseBootstrap, protoDurationMs } from "../../src/xds/bootstrap.js";
import { compose, weightedName, type XdsState } from "../../src/xds/compose.js";
import { endpointsChange, mapCluster, mapClusterLoadAssignment, mapClusterLoadAssignmentBytes, mapListener, mapRouteConfiguration, type ClaMemo, type Msg, type XdsEndpoints } from "../../src/xds/map/index.js";
import { applyEndpointDelta, diffEndpoints, type EndpointDelta } from "../../src/translate/endpoint-set.js";
import { DEFAULT_CONFIG } from "../../src/config/default.js";

const decode = (a: Msg) => decodeAny(a as { type_url?: string; value?: Uint8Array });

function any(typeName: string, o: Record<string, unknown>): { type_url: string; value: Uint8Array } {
  const t = lookupType(typeName)!;
  const err = t.verify(t.fromObject(o));
  if (err !== null) throw new Error(`${typeName}: ${err}`);
  return { type_url: `type.googleapis.com/${typeName}`, value: t.encode(t.fromObject(o)).finish() };
}
const decoded = (typeName: string, o: Record<string, unknown>): Msg => decode(any(typeName, o)).value;

const LISTENER = "envoy.config.listener.v3.Listener";
const ROUTE = "envoy.config.route.v3.RouteConfiguration";
const CLUSTER = "envoy.config.cluster.v3.Cluster";
const CLA = "envoy.config.endpoint.v3.ClusterLoadAssignment";
const HCM = "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
const ROUTER = { name: "envoy.filters.http.router", typed_config: any("envoy.extensions.filters.http.router.v3.Router", {}) };

function listenerMsg(hcm: Record<string, unknown>, extra: Record<string, unknown> = {}): Msg {
  return decoded(LISTENER, {
    name: "in",
    address: { socket_address: { address: "127.0.0.1", port_value: 8443 } },
    filter_chains: [{ filters: [{ name: "hcm", typed_config: any(HCM, { stat_prefix: "in", http_filters: [ROUTER], ...hcm }) }] }],
    ...extra,
  });
}

describe("mapListener()", () => {
  it("takes the address, RDS name, gRPC-Web, CORS, local rate limit and stream idle timeout", () => {
    const r = mapListener(
      listenerMsg({
        rds: { route_config_name: "r1", config_source: { ads: {} } },
        stream_idle_timeout: { seconds: 60 },
        http_filters: [
          { name: "envoy.filters.http.grpc_web", typed_config: any("envoy.extensions.filters.http.grpc_web.v3.GrpcWeb", {}) },
          { name: "envoy.filters.http.cors", typed_config: any("envoy.extensions.filters.http.cors.v3.Cors", {}) },
          {
            name: "envoy.filters.http.local_ratelimit",
            typed_config: any("envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit", {
              stat_prefix: "rl",
              token_bucket: { max_tokens: 20, tokens_per_fill: { value: 5 }, fill_interval: { nanos: 500_000_000 } },
              filter_enabled: { default_value: { numerator: 100, denominator: "HUNDRED" }, runtime_key: "a" },
              filter_enforced: { default_value: { numerator: 100, denominator: "HUNDRED" }, runtime_key: "b" },
            }),
          },
          ROUTER,
        ],
      }),
      decode,
    );
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.value).toMatchObject({ name: "in", address: { host: "127.0.0.1", port: 8443 }, rds: "r1", grpcWeb: true, cors: true, streamIdleTimeoutMs: 60_000 });
    expect(r.value.rateLimit).toEqual({ callsPerSecond: 10, burst: 20, key: "route", responseHeaders: true, global: null });
  });

  it("turns the fault filter's delay and abort into dojang fault rules on the listener", () => {
    const fault = (v: Record<string, unknown>) => ({ name: "envoy.filters.http.fault", typed_config: any("envoy.extensions.filters.http.fault.v3.HTTPFault", v) });
    const r = mapListener(
      listenerMsg({
        rds: { route_config_name: "r" },
        http_filters: [fault({ delay: { fixed_delay: { nanos: 50_000_000 }, percentage: { numerator: 25 } }, abort: { grpc_status: 7, percentage: { numerator: 5000, denominator: "TEN_THOUSAND" } } }), ROUTER],
      }),
      decode,
    );
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.value.faults.map((f) => [f.id, f.fire.percentage, f.action])).toEqual([
      ["xds.in.delay", 25, { kind: "delay", at: "request", message: null, direction: "request", delay: { type: "fixed", ms: 50 }, jitterSeed: 0 }],
      ["xds.in.abort", 50, { kind: "abort", code: 7, message: "fault filter abort", details: null, afterMessages: null }],
    ]);
    expect(r.value.faults[0]!.match.listener).toBe("in");
    const bad = mapListener(listenerMsg({ rds: { route_config_name: "r" }, http_filters: [fault({ abort: { header_abort: {} }, headers: [{ name: "x-canary", present_match: true }] }), ROUTER] }), decode);
    expect(!bad.ok && bad.issues.map((i) => i.path)).toEqual([
      "filter_chains[0].filters[0].typed_config.http_filters[0].typed_config.headers",
      "filter_chains[0].filters[0].typed_config.http_filters[0].typed_config.abort.header_abort",
    ]);
  });

  it("refuses an unknown required filter by its path, skips an optional one with a note", () => {
    const magic = { name: "acme.magic", typed_config: any("google.rpc.Status", {}) };
    const bad = mapListener(listenerMsg({ rds: { route_config_name: "r" }, http_filters: [magic, ROUTER] }), decode);
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.issues).toEqual([{ path: "filter_chains[0].filters[0].typed_config.http_filters[0]", message: 'filter "acme.magic" (google.rpc.Status) is not supported and not is_optional' }]);
    const ok = mapListener(listenerMsg({ rds: { route_config_name: "r" }, http_filters: [{ ...magic, is_optional: true }, ROUTER] }), decode);
    expect(ok.ok).toBe(true);
    if (ok.ok) expect(ok.notes.join()).toContain("optional filter acme.magic skipped");
  });

  it("refuses what dojang cannot serve: no router, HTTP/1 only, downstream TLS, two filter chains", () => {
    const cases: [Msg, string][] = [
      [listenerMsg({ rds: { route_config_name: "r" }, http_filters: [] }), "filter_chains[0].filters[0].typed_config.http_filters"],
      [listenerMsg({ rds: { route_config_name: "r" }, codec_type: "HTTP1" }), "filter_chains[0].filters[0].typed_config.codec_type"],
      [listenerMsg({ rds: { route_config_name: "r" } }, { filter_chains: [{}, {}] }), "filter_chains"],
      [decoded(LISTENER, { name: "x", filter_chains: [] }), "address.socket_address"],
    ];
    for (const [m, path] of cases) {
      const r = mapListener(m, decode);
      expect(r.ok, path).toBe(false);
      if (!r.ok) expect(r.issues.map((i) => i.path)).toContain(path);
    }
  });
});

describe("mapRouteConfiguration()", () => {
  const rc = (routes: Record<string, unknown>[], vh: Record<string, unknown> = {}) =>
    decoded(ROUTE, { name: "r1", virtual_hosts: [{ name: "v", domains: ["*"], routes, ...vh }] });

  it("maps prefix and path, weighted clusters, gRPC timeouts, retries and header rules", () => {
    const r = mapRouteConfiguration(
      rc(
        [
          {
            match: { path: "/pkg.Svc/Get" },
            route: {
              cluster: "a",
              timeout: { seconds: 1 },
              max_stream_duration: { grpc_timeout_header_max: { seconds: 5 } },
              retry_policy: { retry_on: "unavailable,cancelled,5xx", num_retries: { value: 2 }, per_try_timeout: { nanos: 200_000_000 }, retry_back_off: { base_interval: { nanos: 10_000_000 }, max_interval: { nanos: 50_000_000 } } },
            },
            request_headers_to_add: [{ header: { key: "X-Route", value: "get" } }],
          },
          { match: { prefix: "" }, route: { weighted_clusters: { clusters: [{ name: "a", weight: { value: 3 } }, { name: "b", weight: { value: 1 } }] } } },
        ],
        { response_headers_to_remove: ["x-internal"] },
      ),
      decode,
    );
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    const [get, rest] = r.value.virtualHosts[0]!.routes;
    expect(get).toMatchObject({ path: "/pkg.Svc/Get", prefix: null, clusters: [{ name: "a", weight: 1 }], timeoutMs: 5000 });
    expect(get!.retry).toEqual({ retryOn: [1, 14], maxAttempts: 3, perTryTimeoutMs: 200, backoffBaseMs: 10, backoffMaxMs: 50, bufferBytes: 65536, retryResetAfterRequest: false });
    expect(get!.headers).toEqual({ request: { add: { "x-route": "get" }, remove: [] }, response: { add: {}, remove: ["x-internal"] } });
    expect(rest).toMatchObject({ prefix: "/", clusters: [{ name: "a", weight: 3 }, { name: "b", weight: 1 }], timeoutMs: 15_000, retry: null });
    expect(r.notes.join()).toContain("5xx is HTTP-level");
  });

  it("a route timeout of 0 and grpc_timeout_header_max of 0 mean no cap", () => {
    const r = mapRouteConfiguration(rc([{ match: { prefix: "/" }, route: { cluster: "a", timeout: {} } }, { match: { prefix: "/" }, route: { cluster: "a", max_stream_duration: { grpc_timeout_header_max: {} } } }]), decode);
    expect(r.ok && r.value.virtualHosts[0]!.routes.map((x) => x.timeoutMs)).toEqual([null, null]);
  });

  it("refuses header, regex and case-insensitive matches, and unknown retry conditions, naming the field", () => {
    const r = mapRouteConfiguration(
      rc([
        { match: { prefix: "/", headers: [{ name: "x-canary", present_match: true }] }, route: { cluster: "a" } },
        { match: { safe_regex: { regex: ".*" } }, route: { cluster: "a" } },
        { match: { prefix: "/", case_sensitive: { value: false } }, route: { cluster: "a", retry_policy: { retry_on: "sometimes" } } },
      ]),
      decode,
    );
    expect(r.ok).toBe(false);
    if (!r.ok)
      expect(r.issues.map((i) => i.path)).toEqual([
        "virtual_hosts[0].routes[0].match.headers",
        "virtual_hosts[0].routes[1].match",
        "virtual_hosts[0].routes[2].match.case_sensitive",
        "virtual_hosts[0].routes[2].route.retry_policy.retry_on",
      ]);
  });

  it("maps any set of gRPC retry_on conditions to exactly their codes (property)", () => {
    const conds: [string, number][] = [["cancelled", 1], ["deadline-exceeded", 4], ["internal", 13], ["resource-exhausted", 8], ["unavailable", 14]];
    fc.assert(
      fc.property(fc.subarray(conds, { minLength: 1 }), fc.integer({ min: 0, max: 9 }), (picked, n) => {
        const r = mapRouteConfiguration(rc([{ match: { prefix: "/" }, route: { cluster: "a", retry_policy: { retry_on: picked.map((p) => p[0]).join(","), num_retries: { value: n } } } }]), decode);
        if (!r.ok) return false;
        const retry = r.value.virtualHosts[0]!.routes[0]!.retry!;
        return JSON.stringify(retry.retryOn) === JSON.stringify(picked.map((p) => p[1]).sort((a, b) => a - b)) && retry.maxAttempts === n + 1;
      }),
      { numRuns: 100 },
    );
  });
});

describe("mapCluster()", () => {
  const h2 = { "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": any("envoy.extensions.upstreams.http.v3.HttpProtocolOptions", { explicit_http_config: { http2_protocol_options: { max_concurrent_streams: { value: 100 } } } }) };

  it("maps EDS, lb_policy, breakers, outlier detection, the gRPC health check, HTTP/2 options and TLS", () => {
    const r = mapCluster(
      decoded(CLUSTER, {
        name: "svc",
        type: "EDS",
        eds_cluster_config: { eds_config: { ads: {} }, service_name: "svc-eds" },
        lb_policy: "LEAST_REQUEST",
        connect_timeout: { seconds: 2 },
        circuit_breakers: { thresholds: [{ priority: "HIGH", max_requests: { value: 1 } }, { max_connections: { value: 10 }, max_requests: { value: 50 } }] },
        outlier_detection: { consecutive_5xx: { value: 3 }, base_ejection_time: { seconds: 10 } },
        health_checks: [{ timeout: { seconds: 1 }, interval: { seconds: 2 }, unhealthy_threshold: { value: 2 }, healthy_threshold: { value: 1 }, grpc_health_check: { service_name: "pkg.Svc" } }],
        typed_extension_protocol_options: h2,
        transport_socket: {
          name: "envoy.transport_sockets.tls",
          typed_config: any("envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext", { sni: "svc.internal", common_tls_context: { validation_context: { trusted_ca: { filename: "/etc/ca.pem" } } } }),
        },
      }),
      decode,
    );
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.value.eds).toBe("svc-eds");
    expect(r.value.config).toMatchObject({
      lb: "least_request",
      connectTimeoutMs: 2000,
      circuitBreaker: { maxConnections: 10, maxPendingCalls: 1024, maxCalls: 50, maxRetries: 3 },
      outlierDetection: { consecutiveFailures: 3, baseEjectionMs: 10_000, maxEjectionMs: 300_000, maxEjectionPercent: 10 },
      healthCheck: { service: "pkg.Svc", intervalMs: 2000, timeoutMs: 1000, unhealthyThreshold: 2, healthyThreshold: 1 },
      maxConcurrentStreamsPerSession: 100,
    });
    expect(r.value.tls).toEqual({ ca: { file: "/etc/ca.pem" }, cert: null, key: null, serverName: "svc.internal" });
  });

  it("refuses MAGLEV, HTTP/1 upstreams and HTTP health checks by their field", () => {
    const r = mapCluster(
      decoded(CLUSTER, {
        name: "svc",
        type: "EDS",
        lb_policy: "MAGLEV",
        health_checks: [{ http_health_check: { path: "/healthz" } }],
        typed_extension_protocol_options: { "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": any("envoy.extensions.upstreams.http.v3.HttpProtocolOptions", { explicit_http_config: { http_protocol_options: {} } }) },
      }),
      decode,
    );
    expect(r.ok).toBe(false);
    if (!r.ok)
      expect(r.issues.map((i) => i.path)).toEqual([
        "lb_policy",
        "health_checks[0]",
        'typed_extension_protocol_options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].explicit_http_config',
      ]);
  });

  // Envoy speaks HTTP/1.1 to a cluster that does not say HTTP/2, and a gRPC server does not
  // answer HTTP/1.1: dojang refuses such a cluster rather than serve it differently than Envoy
  it("refuses a cluster that does not say it speaks HTTP/2, naming the field Envoy reads; takes the deprecated field too", () => {
    const none = mapCluster(decoded(CLUSTER, { name: "svc", type: "EDS" }), decode);
    expect(none.ok).toBe(false);
    if (!none.ok) {
      expect(none.issues).toEqual([
        {
          path: "typed_extension_protocol_options",
          message:
            'gRPC needs HTTP/2 to the upstream, and without it Envoy speaks HTTP/1.1: give typed_extension_protocol_options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"] with explicit_http_config.http2_protocol_options (or the deprecated http2_protocol_options)',
        },
      ]);
    }
    const http1 = mapCluster(decoded(CLUSTER, { name: "svc", type: "EDS", http_protocol_options: {} }), decode);
    expect(!http1.ok && http1.issues.map((i) => i.path)).toEqual(["typed_extension_protocol_options"]);
    const deprecated = mapCluster(decoded(CLUSTER, { name: "svc", type: "EDS", http2_protocol_options: { max_concurrent_streams: { value: 7 } } }), decode);
    expect(deprecated.ok && deprecated.value.config.maxConcurrentStreamsPerSession).toBe(7);
    const modern = mapCluster(decoded(CLUSTER, { name: "svc", type: "EDS", typed_extension_protocol_options: h2 }), decode);
    expect(modern.ok && modern.value.config.maxConcurrentStreamsPerSession).toBe(100);
  });
});

describe("mapClusterLoadAssignment()", () => {
  const ep = (host: string, port: number, extra: Record<string, unknown> = {}) => ({ endpoint: { address: { socket_address: { address: host, port_value: port } } }, ...extra });

  it("keeps healthy and unknown endpoints of the lowest priority that has one, with their weights", () => {
    const r = mapClusterLoadAssignment(
      decoded(CLA, {
        cluster_name: "svc",
        endpoints: [
          { priority: 0, lb_endpoints: [ep("10.0.0.1", 80, { health_status: "UNHEALTHY" }), ep("10.0.0.2", 80, { load_balancing_weight: { value: 5 } }), ep("10.0.0.3", 80, { health_status: "DRAINING" })] },
          { priority: 1, lb_endpoints: [ep("10.0.1.1", 80)] },
        ],
      }),
      decode,
    );
    expect(r.ok && r.value).toEqual({ name: "svc", endpoints: [{ host: "10.0.0.2", port: 80 }], weights: [5] });
  });

  it("refuses duplicate addresses and priority gaps (gRFC A27)", () => {
    const r = mapClusterLoadAssignment(decoded(CLA, { cluster_name: "svc", endpoints: [{ lb_endpoints: [ep("a", 1), ep("a", 1)] }, { priority: 2, lb_endpoints: [ep("b", 1)] }] }), decode);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.issues.map((i) => i.path)).toEqual(["endpoints[0].lb_endpoints[1].endpoint.address", "endpoints"]);
  });

  it("maps any list of unique endpoints in order, weights kept within dojang's range (property)", () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.integer({ min: 1, max: 65535 }), { minLength: 0, maxLength: 30 }), fc.array(fc.integer({ min: 1, max: 5000 }), { minLength: 30, maxLength: 30 }), (ports, ws) => {
        const r = mapClusterLoadAssignment(decoded(CLA, { cluster_name: "c", endpoints: [{ lb_endpoints: ports.map((p, i) => ep("127.0.0.1", p, { load_balancing_weight: { value: ws[i] } })) }] }), decode);
        return r.ok && r.value.endpoints.map((e) => e.port).join() === ports.join() && r.value.weights.every((w, i) => w === Math.min(1000, ws[i]!));
      }),
      { numRuns: 50 },
    );
  });
});

describe("mapClusterLoadAssignmentBytes() (the wire-level walk, from what the last assignment of its name left)", () => {
  const socket = (host: string, port: number) => ({ address: { socket_address: { address: host, port_value: port } } });
  const NONE = (): ClaMemo | undefined => undefined;
  const encoded = (o: Record<string, unknown>): Uint8Array => any(CLA, o).value;
  const whole = (o: Record<string, unknown>) => mapClusterLoadAssignment(decode(any(CLA, o)).value, decode);

  // random assignments: addresses (some repeated), health statuses, weights (0 among them),
  // priorities (gaps among them), a pipe address now and then, a policy with drop_overloads
  const lbEndpoint = fc.record(
    {
      endpoint: fc.oneof(
        { weight: 9, arbitrary: fc.record({ address: fc.constantFrom("10.0.0.1", "10.0.0.2", "::1", "").chain((h) => fc.integer({ min: 1, max: 6 }).map((p) => socket(h, p).address)) }) },
        { weight: 1, arbitrary: fc.constant({ address: { pipe: { path: "/tmp/s" } } }) },
      ),
      health_status: fc.constantFrom("UNKNOWN", "HEALTHY", "UNHEALTHY", "DRAINING", "DEGRADED"),
      load_balancing_weight: fc.integer({ min: 0, max: 3000 }).map((value) => ({ value })),
    },
    { requiredKeys: ["endpoint"] },
  );
  const locality = fc.record({ priority: fc.integer({ min: 0, max: 3 }), lb_endpoints: fc.array(lbEndpoint, { maxLength: 6 }) }, { requiredKeys: ["lb_endpoints"] });
  const assignment = fc.record(
    {
      cluster_name: fc.constantFrom("svc", ""),
      endpoints: fc.array(locality, { maxLength: 4 }),
      policy: fc.constantFrom({}, { drop_overloads: [{ category: "x", drop_percentage: { numerator: 1 } }] }),
    },
    { requiredKeys: ["endpoints"] },
  );
  // mostly without an issue (a memo is left only then, so the incremental path is taken): one
  // name, priority 0 or 1, weights ≥ 1, addresses from a small pool (so a change can collide)
  const cleanEndpoint = fc.record(
    { endpoint: fc.integer({ min: 1, max: 12 }).map((p) => socket("10.0.0.1", p)), health_status: fc.constantFrom("UNKNOWN", "HEALTHY", "UNHEALTHY"), load_balancing_weight: fc.integer({ min: 1, max: 3 }).map((value) => ({ value })) },
    { requiredKeys: ["endpoint"] },
  );
  const cleanish = fc.record({
    cluster_name: fc.constant("svc"),
    endpoints: fc.array(fc.record({ priority: fc.constantFrom(0, 0, 1), lb_endpoints: fc.uniqueArray(cleanEndpoint, { selector: (e) => e.endpoint.address.socket_address.port_value, maxLength: 6 }) }), { minLength: 1, maxLength: 2 }),
  });
  type Cla = { cluster_name?: string; endpoints: { priority?: number; lb_endpoints: unknown[] }[]; policy?: unknown };
  type Edit = readonly [li: number, ei: number, how: "replace" | "insert" | "remove", le: unknown];
  /** `o` with one endpoint replaced, inserted or removed (what a control plane sends when one endpoint changes) */
  const edit = (o: Cla, [li, ei, how, le]: Edit): Cla => {
    if (o.endpoints.length === 0) return { ...o, endpoints: [{ lb_endpoints: [le] }] };
    const endpoints = o.endpoints.map((l) => ({ ...l, lb_endpoints: [...l.lb_endpoints] }));
    const l = endpoints[li % endpoints.length]!;
    const k = l.lb_endpoints.length === 0 ? 0 : ei % l.lb_endpoints.length;
    if (how === "insert" || l.lb_endpoints.length === 0) l.lb_endpoints.splice(k, 0, le);
    else if (how === "replace") l.lb_endpoints[k] = le;
    else l.lb_endpoints.splice(k, 1);
    return { ...o, endpoints };
  };
  const oneEdit = fc.tuple(fc.nat(), fc.nat(), fc.constantFrom("replace" as const, "insert" as const, "remove" as const), fc.oneof({ weight: 4, arbitrary: cleanEndpoint }, { weight: 1, arbitrary: lbEndpoint }));
  /** a step: a whole new assignment, or one endpoint of the last one changed */
  const step = fc.oneof(fc.oneof(assignment, cleanish).map((o) => ({ o: o as Cla })), { weight: 3, arbitrary: oneEdit.map((e) => ({ e: e as Edit })) });

  it("maps any assignment exactly as the decoded one is mapped (value, issues, notes), seen for the first time and again (property)", () => {
    fc.assert(
      fc.property(assignment, (o) => {
        const first = mapClusterLoadAssignmentBytes(encoded(o), decode, NONE)!;
        expect(first).toBeDefined();
        expect(first.mapped).toEqual(whole(o));
        expect(first.name).toBe(o.cluster_name ?? "");
        // the same bytes again, from the memo (left only by a mapping without an issue)
        const again = mapClusterLoadAssignmentBytes(encoded(o), decode, () => first.memo)!;
        expect(again.mapped).toEqual(whole(o));
      }),
      { numRuns: 200 },
    );
  });

  it("maps a changed assignment from the last one's memo exactly as the decoded one is mapped, one change or any, several in a row (property)", () => {
    fc.assert(
      fc.property(fc.oneof(assignment, { weight: 3, arbitrary: cleanish }), fc.array(step, { minLength: 1, maxLength: 6 }), (o, steps) => {
        let cur = o as Cla;
        let last = mapClusterLoadAssignmentBytes(encoded(cur), decode, NONE)!;
        for (const s of steps) {
          const next = "o" in s ? s.o : edit(cur, s.e);
          const memo = last.memo;
          const r = mapClusterLoadAssignmentBytes(encoded(next), decode, (n) => (n === last.name ? memo : undefined))!;
          expect(r.mapped).toEqual(whole(next));
          last = r;
          cur = next;
        }
      }),
      { numRuns: 200 },
    );
  });

  // The change each incremental mapping carries (endpointsChange) stands in for comparing the
  // lists (xds/client.ts endpointChanges): applied to the endpoints it is from, it must give the
  // ones mapped from scratch, and be the change diffEndpoints finds between the two.
  const asSet = (endpoints: readonly { host: string; port: number }[], weights: readonly number[]) =>
    endpoints.map((e, i) => `${e.host}:${e.port}/${weights[i]}`).sort();
  const sorted = (d: EndpointDelta) => ({ remove: d.remove.map((a) => `${a.host}:${a.port}`).sort(), upsert: d.upsert.map((a) => `${a.host}:${a.port}/${a.weight}`).sort() });
  /** checks `r`'s change from `last` (when it has one); whether it had one */
  const checkChange = (last: XdsEndpoints, r: XdsEndpoints, o: Cla): boolean => {
    const ch = endpointsChange(r);
    if (ch === undefined) return false;
    expect(ch.from).toBe(last);
    const fresh = whole(o);
    expect(fresh.ok).toBe(true);
    if (!fresh.ok) return true;
    const patched = applyEndpointDelta(last.endpoints, last.weights, ch.delta);
    expect(asSet(patched.endpoints, patched.weights)).toEqual(asSet(fresh.value.endpoints, fresh.value.weights));
    expect(sorted(ch.delta)).toEqual(sorted(diffEndpoints(last.endpoints, last.weights, fresh.value.endpoints, fresh.value.weights)));
    return true;
  };

  it("carries the change of the chosen endpoints from the last assignment's: applied to them it gives what the whole mapping gives, as diffEndpoints finds it, for any sequence (property)", () => {
    fc.assert(
      fc.property(fc.oneof(assignment, { weight: 3, arbitrary: cleanish }), fc.array(step, { minLength: 1, maxLength: 8 }), (o, steps) => {
        let cur = o as Cla;
        let last = mapClusterLoadAssignmentBytes(encoded(cur), decode, NONE)!;
        expect(last.mapped.ok ? endpointsChange(last.mapped.value) : undefined).toBeUndefined();
        for (const s of steps) {
          const next = "o" in s ? s.o : edit(cur, s.e);
          const memo = last.memo;
          const r = mapClusterLoadAssignmentBytes(encoded(next), decode, (n) => (n === last.name ? memo : undefined))!;
          if (r.mapped.ok && last.mapped.ok) checkChange(last.mapped.value, r.mapped.value, next);
          last = r;
          cur = next;
        }
      }),
      { numRuns: 300 },
    );
  });

  it("has the change whenever one priority holds usable endpoints before and after: random adds, removes, health and weight changes (property)", () => {
    const one = fc.record({ cluster_name: fc.constant("svc"), endpoints: fc.array(fc.record({ lb_endpoints: fc.uniqueArray(cleanEndpoint, { selector: (e) => e.endpoint.address.socket_address.port_value, maxLength: 6 }) }), { minLength: 1, maxLength: 3 }) });
    const cleanEdit = fc.tuple(fc.nat(), fc.nat(), fc.constantFrom("replace" as const, "insert" as const, "remove" as const), cleanEndpoint);
    let carried = 0;
    fc.assert(
      fc.property(one, fc.array(cleanEdit, { minLength: 1, maxLength: 10 }), (o, edits) => {
        let cur = o as Cla;
        let last = mapClusterLoadAssignmentBytes(encoded(cur), decode, NONE)!;
        for (const e of edits) {
          const next = edit(cur, e as Edit);
          const memo = last.memo;
          const r = mapClusterLoadAssignmentBytes(encoded(next), decode, () => memo)!;
          if (r.mapped.ok && last.mapped.ok && memo !== undefined && last.mapped.value.endpoints.length > 0 && r.mapped.value.endpoints.length > 0 && next.endpoints.length > 0) {
            expect(checkChange(last.mapped.value, r.mapped.value, next)).toBe(true);
            carried++;
          }
          last = r;
          cur = next;
        }
      }),
      { numRuns: 300 },
    );
    // (the property above is not vacuous: about a third of the ~1,650 steps are such (the rest
    // collide on the pool's 12 addresses or leave none usable), and each of them was checked)
    expect(carried).toBeGreaterThan(200);
  });

  it("decodes only the endpoints that changed: one changed in 1,000 costs one LbEndpoint decode, and kept ones are the same objects", () => {
    const addrs = Array.from({ length: 1000 }, (_, i) => ({ endpoint: socket("10.1.0.1", 1000 + i) }));
    let decodes = 0;
    const counting = (a: Msg) => {
      decodes++;
      return decode(a);
    };
    const one = mapClusterLoadAssignmentBytes(encoded({ cluster_name: "big", endpoints: [{ lb_endpoints: addrs }] }), counting, NONE)!;
    expect(decodes).toBe(1000);
    expect(one.memo).toBeDefined();
    addrs[500] = { endpoint: socket("10.1.0.2", 7) };
    decodes = 0;
    const two = mapClusterLoadAssignmentBytes(encoded({ cluster_name: "big", endpoints: [{ lb_endpoints: addrs }] }), counting, (n) => (n === "big" ? one.memo : undefined))!;
    expect(decodes).toBe(1);
    expect(one.mapped.ok && two.mapped.ok).toBe(true);
    if (!one.mapped.ok || !two.mapped.ok) return;
    expect(two.mapped.value.endpoints[500]).toEqual({ host: "10.1.0.2", port: 7 });
    expect(two.mapped.value.endpoints).toHaveLength(1000);
    expect(two.mapped.value.endpoints[499]).toBe(one.mapped.value.endpoints[499]);
  });

  it("refuses a change that duplicates an address held elsewhere in the assignment, naming both places, as the whole mapping does", () => {
    const addrs = Array.from({ length: 10 }, (_, i) => ({ endpoint: socket("10.1.0.1", 1000 + i) }));
    const one = mapClusterLoadAssignmentBytes(encoded({ cluster_name: "big", endpoints: [{ lb_endpoints: addrs }] }), decode, NONE)!;
    addrs[7] = { endpoint: socket("10.1.0.1", 1002) };
    const o = { cluster_name: "big", endpoints: [{ lb_endpoints: addrs }] };
    const two = mapClusterLoadAssignmentBytes(encoded(o), decode, () => one.memo)!;
    expect(two.mapped.ok).toBe(false);
    expect(two.mapped).toEqual(whole(o));
    expect(two.memo).toBeUndefined();
  });

  it("gives undefined for bytes the walk does not expect (the caller decodes the message and reports why)", () => {
    const good = encoded({ cluster_name: "svc", endpoints: [{ lb_endpoints: [{ endpoint: socket("10.0.0.1", 1) }] }] });
    expect(mapClusterLoadAssignmentBytes(good.subarray(0, good.length - 1), decode, NONE)).toBeUndefined();
    expect(mapClusterLoadAssignmentBytes(Uint8Array.from([0x13, 0x00]), decode, NONE)).toBeUndefined();
  });
});

describe("parseBootstrap()", () => {
  it("reads node, the ADS config and the control plane's static cluster", () => {
    const r = parseBootstrap(`
node: { id: n1, cluster: c1, metadata: { A: b } }
dynamic_resources:
  ads_config: { api_type: GRPC, grpc_services: [{ envoy_grpc: { cluster_name: xds } }] }
  lds_config: { ads: {} }
  cds_config: { ads: {} }
static_resources:
  clusters:
    - name: xds
      load_assignment: { endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: 10.1.1.1, port_value: 15010 } } } }] }] }
`);
    expect(r).toEqual({
      ok: true,
      bootstrap: { node: { id: "n1", cluster: "c1", metadata: { A: "b" } }, server: { host: "10.1.1.1", port: 15010 }, serverCluster: "xds", apiType: "GRPC", tls: null, lds: true, cds: true, initialFetchTimeoutMs: 15_000 },
    });
  });

  it("reads initial_fetch_timeout from lds_config and cds_config: Envoy's 15s by default, the longer of the two, 0s (no limit) wins; a bad one is named", () => {
    const boot = (lds: string, cds: string) =>
      parseBootstrap(`
node: { id: n1 }
dynamic_resources:
  ads_config: { api_type: GRPC, grpc_services: [{ envoy_grpc: { cluster_name: xds } }] }
  lds_config: { ads: {}${lds} }
  cds_config: { ads: {}${cds} }
static_resources:
  clusters:
    - name: xds
      load_assignment: { endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: 10.1.1.1, port_value: 15010 } } } }] }] }
`);
    const ms = (lds: string, cds: string) => ((r) => (r.ok ? r.bootstrap.initialFetchTimeoutMs : r.issues))(boot(lds, cds));
    expect(ms("", "")).toBe(15_000);
    expect(ms(", initial_fetch_timeout: 2s", "")).toBe(15_000);
    expect(ms(", initial_fetch_timeout: 20s", ", initial_fetch_timeout: 0.5s")).toBe(20_000);
    expect(ms(", initial_fetch_timeout: 1.5s", ", initial_fetch_timeout: 0.25s")).toBe(1500);
    expect(ms(", initial_fetch_timeout: 0s", ", initial_fetch_timeout: 30s")).toBe(0);
    expect(ms(", initial_fetch_timeout: { seconds: 3, nanos: 500000000 }", ", initial_fetch_timeout: 1s")).toBe(3500);
    expect(ms("", ", initial_fetch_timeout: 5000")).toEqual([{ path: "dynamic_resources.cds_config.initial_fetch_timeout", message: "expected a duration as Envoy writes it, like 15s or 0.5s (0s: wait without limit)" }]);
  });

  it("reads durations in the proto3 JSON form and the { seconds, nanos } form only", () => {
    const cases: [unknown, number | undefined][] = [
      ["15s", 15_000],
      ["0s", 0],
      ["0.5s", 500],
      ["1.000340012s", 1000],
      ["2147483.647s", 2_147_483_647],
      ["2147483.648s", undefined],
      [{ seconds: 1, nanos: 250_000_000 }, 1250],
      [{ seconds: 2 }, 2000],
      ["15", undefined],
      ["15ms", undefined],
      ["-1s", undefined],
      ["1.5 s", undefined],
      [15, undefined],
      [{ seconds: -1 }, undefined],
      [{ seconds: 1, nanos: 1_000_000_000 }, undefined],
      [null, undefined],
    ];
    for (const [v, want] of cases) expect(protoDurationMs(v), JSON.stringify(v)).toBe(want);
  });

  it("names each missing field", () => {
    const r = parseBootstrap(`node: { cluster: c }\ndynamic_resources: { ads_config: { api_type: REST, grpc_services: [{ envoy_grpc: { cluster_name: cp } }] } }\n`);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.issues.map((i) => i.path)).toEqual(["node.id", "dynamic_resources.ads_config.api_type", "static_resources.clusters"]);
  });
});

describe("compose()", () => {
  const l = mapListener(listenerMsg({ rds: { route_config_name: "r1" } }), decode);
  const rt = mapRouteConfiguration(
    decoded(ROUTE, {
      name: "r1",
      virtual_hosts: [
        { name: "any", domains: ["*"], routes: [{ match: { prefix: "/" }, route: { weighted_clusters: { clusters: [{ name: "a", weight: { value: 3 } }, { name: "b", weight: { value: 1 } }] } } }] },
        { name: "api", domains: ["api.example.com"], routes: [{ match: { prefix: "/" }, route: { cluster: "nowhere" } }] },
      ],
    }),
    decode,
  );
  const ca = mapCluster(decoded(CLUSTER, { name: "a", type: "EDS", http2_protocol_options: {} }), decode);
  const cb = mapCluster(decoded(CLUSTER, { name: "b", type: "EDS", http2_protocol_options: {} }), decode);
  if (!l.ok || !rt.ok || !ca.ok || !cb.ok) throw new Error("fixtures do not map");
  const state = (over: Partial<XdsState> = {}): XdsState => ({
    listeners: new Map([["in", l.value]]),
    routes: new Map([["r1", rt.value]]),
    clusters: new Map([
      ["a", { cluster: ca.value, tls: null }],
      ["b", { cluster: cb.value, tls: null }],
    ]),
    endpoints: new Map([
      ["a", { name: "a", endpoints: [{ host: "10.0.0.1", port: 1 }], weights: [1] }],
      ["b", { name: "b", endpoints: [{ host: "10.0.0.2", port: 1 }, { host: "10.0.0.3", port: 1 }], weights: [1, 1] }],
    ]),
    missing: new Set(),
    ...over,
  });

  it("adds the listener and clusters beside the static ones; exact hosts before the catch-all; a weighted split as one cluster", () => {
    const c = compose(DEFAULT_CONFIG, state());
    expect(c.warming).toEqual([]);
    expect(c.config.listeners.map((x) => x.name)).toEqual(["main", "in"]);
    const routes = c.config.listeners[1]!.routes;
    expect(routes.map((r) => [r.match.authority ?? "*", r.cluster])).toEqual([
      ["api.example.com", "nowhere"],
      ["*", weightedName([{ name: "a", weight: 3 }, { name: "b", weight: 1 }])],
    ]);
    const split = c.config.clusters.find((x) => x.name.startsWith("weighted:"))!;
    expect(split.endpointWeights).toEqual([750, 125, 125]);
    // a route to a cluster no one sent: an empty cluster (14 UNAVAILABLE), as Envoy's cluster_not_found
    expect(c.config.clusters.find((x) => x.name === "nowhere")!.endpoints).toEqual([]);
  });

  it("holds a listener until its RDS and a cluster until its EDS (or its missing mark)", () => {
    const c = compose(DEFAULT_CONFIG, state({ routes: new Map(), endpoints: new Map() }));
    expect(c.warming).toEqual(["cluster a", "cluster b", "listener in"]);
    const m = compose(DEFAULT_CONFIG, state({ endpoints: new Map(), missing: new Set(["a", "b"]) }));
    expect(m.config.clusters.filter((x) => x.name === "a" || x.name === "b").map((x) => x.endpoints)).toEqual([[], []]);
  });

  it("refuses a name the static config has", () => {
    const c = compose(DEFAULT_CONFIG, state({ clusters: new Map([["backend", { cluster: ca.value, tls: null }]]) }));
    expect(c.conflicts).toEqual([{ path: "cluster backend", message: "a static cluster has this name" }]);
  });
});
