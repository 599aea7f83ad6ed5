import { describe, expect, it } from "vitest";
import { ConfigError } from "../../src/errors.js";
import { configFromText, parseConfigText, parseConfigValue } from "../../src/config/parse.js";
import { DEFAULTS, type Config } from "../../src/config/schema.js";

/** Issues as the CLI prints them: `path: message`, or just the message for path "". */
function issues(text: string, env: Record<string, string | undefined> = {}, format?: "yaml" | "json"): string[] {
  const r = parseConfigText(text, env, format === undefined ? {} : { format });
  return r.ok ? [] : r.issues.map((i) => (i.path === "" ? i.message : `${i.path}: ${i.message}`));
}

function parse(text: string): Config {
  const r = parseConfigText(text, {});
  if (!r.ok) throw new Error(r.issues.map((i) => `${i.path}: ${i.message}`).join("\n"));
  return r.config;
}

const MINIMAL = `
listeners:
  - name: main
    address: 127.0.0.1:0
    routes:
      - match: { prefix: "/" }
        cluster: backend
clusters:
  - name: backend
    endpoints: ["127.0.0.1:50051"]
`;

describe("parseConfigText(): a valid config", () => {
  it("fills every default", () => {
    expect(parse(MINIMAL)).toEqual({
      admin: null,
      listeners: [
        {
          name: "main",
          address: { host: "127.0.0.1", port: 0 },
          routes: [
            {
              match: { prefix: "/" },
              cluster: "backend",
              timeoutMs: null,
              maxRequestMessageBytes: 4194304,
              maxResponseMessageBytes: 4194304,
              faults: [],
              streamIdleTimeoutMs: null,
              retry: null,
              rateLimit: null,
              headers: null,
              rewriteAuthority: null,
              rewritePrefix: null,
              jwt: null,
              rbac: null,
              extAuthz: null,
            },
          ],
          maxConcurrentStreams: 1000,
          maxHeaderListPairs: 2000,
          maxHeaderListSize: 65536,
          initialWindowSize: 1048576,
          connectionWindowSize: 16777216,
          maxSessionMemoryMiB: 64,
          faults: [],
          faultHeaders: false,
          faultTrailer: false,
          streamIdleTimeoutMs: 300000,
          maxConnectionAgeMs: null,
          maxConnectionAgeGraceMs: 10000,
          idleTimeoutMs: null,
          maxConnections: 10000,
          requestHeadersTimeoutMs: 10000,
          healthService: false,
          attemptsHeader: false,
          tls: null,
          grpcWeb: false,
          jsonTranscoding: null,
          connect: false,
          cors: null,
          http1Address: null,
        },
      ],
      clusters: [
        {
          name: "backend",
          endpoints: [{ host: "127.0.0.1", port: 50051 }],
          endpointWeights: [1],
          dns: null,
          lb: "round_robin",
          healthCheck: null,
          outlierDetection: null,
          circuitBreaker: { maxConnections: 1024, maxPendingCalls: 1024, maxCalls: 1024, maxRetries: 3 },
          retryBudget: { percent: 20, minRetriesPerSecond: 10 },
          keepalive: null,
          connectTimeoutMs: 5000,
          maxConcurrentStreamsPerSession: 1000,
          maxSessionsPerEndpoint: 8,
          initialWindowSize: 65536,
          connectionWindowSize: 16777216,
          tls: null,
        },
      ],
      drainTimeoutMs: 10000,
      workers: 1,
      logLevel: "info",
      accessLog: true,
      accessLogRedact: [],
      journal: 0,
      shrinkHeapWhenIdleMs: 0,
      concurrentMarking: "auto",
      memory: { limitBytes: null },
      faultInjection: { seed: 0, maxActiveFaults: null },
      watchConfig: false,
      tracing: null,
      xds: null,
      failedCalls: 1000,
      stats: { maxRows: 100 },
    } satisfies Config);
  });

  it("uses the defaults from DEFAULTS", () => {
    const c = parse(MINIMAL);
    expect(c.listeners[0]?.maxHeaderListPairs).toBe(DEFAULTS.listener.maxHeaderListPairs);
    expect(c.clusters[0]?.connectTimeoutMs).toBe(DEFAULTS.cluster.connectTimeoutMs);
    expect(c.drainTimeoutMs).toBe(DEFAULTS.config.drainTimeoutMs);
  });

  it("returns a deep-frozen config", () => {
    const c = parse(MINIMAL);
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.listeners)).toBe(true);
    expect(Object.isFrozen(c.listeners[0]?.routes[0]?.match)).toBe(true);
    expect(Object.isFrozen(c.clusters[0]?.endpoints[0])).toBe(true);
  });

  it("reads every key, with units, and renames the *Ms fields", () => {
    const c = parse(`
admin: { address: "[::1]:9901" }
drainTimeout: 1m30s
workers: 4
logLevel: WARN
accessLog: false
listeners:
  - name: edge-1
    address: 0.0.0.0:8443
    maxConcurrentStreams: 50
    maxHeaderListPairs: 4
    maxHeaderListSize: 16KiB
    initialWindowSize: 65535
    connectionWindowSize: 1MB
    maxSessionMemoryMiB: 10
    routes:
      - match: { path: /pkg.Svc/Method, authority: API.Example.com }
        cluster: a
        timeout: 250ms
        maxRequestMessageBytes: 0
        maxResponseMessageBytes: 1GiB
      - match: { service: pkg.Svc }
        cluster: a
        timeout: none
      - match: { prefix: / }
        cluster: a
        timeout: null
clusters:
  - name: a
    endpoints: [localhost:1, "[::1]:2"]
    connectTimeout: 1500ms
    maxConcurrentStreamsPerSession: 100
    maxSessionsPerEndpoint: 2
    initialWindowSize: 64KiB
    connectionWindowSize: 2MiB
`);
    expect(c.admin).toEqual({ address: { host: "::1", port: 9901 }, mutations: false, token: null, readyClusters: [] });
    expect(c.drainTimeoutMs).toBe(90_000);
    expect(c.workers).toBe(4);
    expect(c.logLevel).toBe("warn");
    expect(c.accessLog).toBe(false);
    const l = c.listeners[0];
    expect(l).toMatchObject({
      name: "edge-1",
      maxConcurrentStreams: 50,
      maxHeaderListPairs: 4,
      maxHeaderListSize: 16384,
      initialWindowSize: 65535,
      connectionWindowSize: 1_000_000,
      maxSessionMemoryMiB: 10,
    });
    expect(l?.routes.map((r) => [r.match, r.timeoutMs])).toEqual([
      [{ path: "/pkg.Svc/Method", authority: "api.example.com" }, 250],
      [{ service: "pkg.Svc" }, null],
      [{ prefix: "/" }, null],
    ]);
    expect(l?.routes[0]?.maxRequestMessageBytes).toBe(0);
    expect(l?.routes[0]?.maxResponseMessageBytes).toBe(1024 ** 3);
    expect(c.clusters[0]).toEqual({
      name: "a",
      endpoints: [
        { host: "localhost", port: 1 },
        { host: "::1", port: 2 },
      ],
      endpointWeights: [1, 1],
      dns: null,
      lb: "round_robin",
      healthCheck: null,
      outlierDetection: null,
      circuitBreaker: { maxConnections: 1024, maxPendingCalls: 1024, maxCalls: 1024, maxRetries: 3 },
      retryBudget: { percent: 20, minRetriesPerSecond: 10 },
      keepalive: null,
      connectTimeoutMs: 1500,
      maxConcurrentStreamsPerSession: 100,
      maxSessionsPerEndpoint: 2,
      initialWindowSize: 65536,
      connectionWindowSize: 2 * 1024 * 1024,
      tls: null,
    });
  });

  it("reads the retry, balancing, health, ejection, breaker, budget, keepalive and connection keys", () => {
    const c = parse(`
admin: { address: "127.0.0.1:0", readyClusters: [a] }
watchConfig: true
listeners:
  - name: l
    address: 127.0.0.1:0
    maxConnectionAge: 5m
    maxConnectionAgeGrace: 30s
    idleTimeout: 1h
    healthService: true
    attemptsHeader: true
    routes:
      - match: { prefix: / }
        cluster: a
        retry: { retryOn: [UNAVAILABLE, resource_exhausted, 13, UNAVAILABLE], maxAttempts: 4, perTryTimeout: 1s, backoff: { base: 10ms, max: 1s }, bufferBytes: 16KiB, retryResetAfterRequest: true }
      - match: { service: x.Y }
        cluster: b
        retry: {}
clusters:
  - name: a
    endpoints: ["127.0.0.1:1", { address: "127.0.0.1:2", weight: 3 }]
    lb: LEAST_REQUEST
    healthCheck: { service: pkg.Svc, interval: 2s, timeout: 500ms, unhealthyThreshold: 2, healthyThreshold: 1 }
    outlierDetection: { consecutiveFailures: 3, baseEjection: 10s, maxEjection: 1m, maxEjectionPercent: 34 }
    circuitBreaker: { maxConnections: 10, maxPendingCalls: 20, maxCalls: 30, maxRetries: 4 }
    retryBudget: { percent: 50, minRetriesPerSecond: 0 }
    keepalive: { interval: 20s, timeout: 2s }
  - name: b
    dns: backend.default.svc:50051
    refreshInterval: 1s
    healthCheck: {}
`);
    expect(c.admin?.readyClusters).toEqual(["a"]);
    expect(c.watchConfig).toBe(true);
    const l = c.listeners[0]!;
    expect([l.maxConnectionAgeMs, l.maxConnectionAgeGraceMs, l.idleTimeoutMs, l.healthService, l.attemptsHeader]).toEqual([300_000, 30_000, 3_600_000, true, true]);
    expect(l.routes[0]?.retry).toEqual({ retryOn: [14, 8, 13], maxAttempts: 4, perTryTimeoutMs: 1000, backoffBaseMs: 10, backoffMaxMs: 1000, bufferBytes: 16384, retryResetAfterRequest: true });
    expect(l.routes[1]?.retry).toEqual({ retryOn: [14], maxAttempts: 3, perTryTimeoutMs: null, backoffBaseMs: 25, backoffMaxMs: 250, bufferBytes: 65536, retryResetAfterRequest: false });
    const [a, b] = c.clusters;
    expect(a).toMatchObject({
      endpoints: [{ host: "127.0.0.1", port: 1 }, { host: "127.0.0.1", port: 2 }],
      endpointWeights: [1, 3],
      dns: null,
      lb: "least_request",
      healthCheck: { service: "pkg.Svc", intervalMs: 2000, timeoutMs: 500, unhealthyThreshold: 2, healthyThreshold: 1 },
      outlierDetection: { consecutiveFailures: 3, baseEjectionMs: 10_000, maxEjectionMs: 60_000, maxEjectionPercent: 34 },
      circuitBreaker: { maxConnections: 10, maxPendingCalls: 20, maxCalls: 30, maxRetries: 4 },
      retryBudget: { percent: 50, minRetriesPerSecond: 0 },
      keepalive: { intervalMs: 20_000, timeoutMs: 2000 },
    });
    expect(b).toMatchObject({ endpoints: [], endpointWeights: [], dns: { host: "backend.default.svc", port: 50051, refreshIntervalMs: 1000 } });
    expect(b?.healthCheck).toEqual({ service: "", intervalMs: 5000, timeoutMs: 1000, unhealthyThreshold: 3, healthyThreshold: 2 });
  });

  it.each([
    ["an unknown code in retryOn", "retry: { retryOn: [UNAVAILBLE] }", 'listeners[0].routes[0].retry.retryOn[0]: unknown gRPC code "UNAVAILBLE": expected a name like UNAVAILABLE or a number 0 to 16 (did you mean "UNAVAILABLE"?)'],
    ["backoff.max below base", "retry: { backoff: { base: 1s, max: 10ms } }", "listeners[0].routes[0].retry.backoff.max: must be at least backoff.base (1000ms)"],
    ["maxAttempts 0", "retry: { maxAttempts: 0 }", "listeners[0].routes[0].retry.maxAttempts: 0 is out of range (1 to 10)"],
  ])("refuses %s", (_n, line, want) => {
    const r = parseConfigText(`listeners:\n  - name: l\n    address: 127.0.0.1:0\n    routes:\n      - match: { prefix: / }\n        cluster: a\n        ${line}\nclusters:\n  - name: a\n    endpoints: ["127.0.0.1:1"]\n`, {});
    expect(r.ok ? [] : r.issues.map((i) => `${i.path}: ${i.message}`)).toEqual([want]);
  });

  it("refuses a cluster with both endpoints and dns, a weight out of range, and an unknown ready cluster", () => {
    const r = parseConfigText(`admin: { address: "127.0.0.1:0", readyClusters: [nope] }\nlisteners:\n  - name: l\n    address: 127.0.0.1:0\n    routes: [{ match: { prefix: / }, cluster: a }]\nclusters:\n  - name: a\n    endpoints: [{ address: "127.0.0.1:1", weight: 0 }]\n    dns: x:1\n`, {});
    expect(r.ok ? [] : r.issues.map((i) => `${i.path}: ${i.message}`)).toEqual([
      'admin.readyClusters[0]: unknown cluster "nope"',
      "clusters[0].endpoints[0].weight: 0 is out of range (1 to 1000)",
    ]);
    const both = parseConfigText(`listeners:\n  - name: l\n    address: 127.0.0.1:0\n    routes: [{ match: { prefix: / }, cluster: a }]\nclusters:\n  - name: a\n    endpoints: ["127.0.0.1:1"]\n    dns: x:1\n`, {});
    expect(both.ok ? [] : both.issues.map((i) => `${i.path}: ${i.message}`)).toEqual(["clusters[0].dns: give endpoints or dns, not both"]);
  });

  it("leaves absent match keys absent (not undefined)", () => {
    const m = parse(MINIMAL).listeners[0]?.routes[0]?.match;
    expect(Object.keys(m ?? {})).toEqual(["prefix"]);
  });

  it("accepts admin: null as no admin listener", () => {
    expect(parse(`admin: null\n${MINIMAL}`).admin).toBeNull();
  });

  it("allows several listeners on port 0 (each gets its own ephemeral port)", () => {
    const c = parse(`
listeners:
  - { name: a, address: "127.0.0.1:0", routes: [{ match: { prefix: / }, cluster: b }] }
  - { name: b, address: "127.0.0.1:0", routes: [{ match: { prefix: / }, cluster: b }] }
admin: { address: "127.0.0.1:0" }
clusters: [{ name: b, endpoints: ["127.0.0.1:1"] }]
`);
    expect(c.listeners).toHaveLength(2);
  });

  it("allows the same port on different specific hosts", () => {
    expect(
      issues(`
listeners:
  - { name: a, address: "127.0.0.1:8080", routes: [{ match: { prefix: / }, cluster: b }] }
  - { name: b, address: "127.0.0.2:8080", routes: [{ match: { prefix: / }, cluster: b }] }
  - { name: c, address: "[::1]:8080", routes: [{ match: { prefix: / }, cluster: b }] }
clusters: [{ name: b, endpoints: ["127.0.0.1:1"] }]
`),
    ).toEqual([]);
  });

  it("allows the same match on different authorities", () => {
    expect(
      issues(`
listeners:
  - name: a
    address: 127.0.0.1:0
    routes:
      - { match: { prefix: /, authority: a.example }, cluster: b }
      - { match: { prefix: /, authority: b.example }, cluster: b }
      - { match: { prefix: / }, cluster: b }
clusters: [{ name: b, endpoints: ["127.0.0.1:1"] }]
`),
    ).toEqual([]);
  });

  it("supports YAML anchors and merge keys", () => {
    const c = parse(`
listeners:
  - name: main
    address: 127.0.0.1:0
    routes:
      - &r { match: { prefix: / }, cluster: backend, timeout: 1s }
      - { <<: *r, match: { service: a.B } }
clusters:
  - name: backend
    endpoints: ["127.0.0.1:50051"]
`);
    expect(c.listeners[0]?.routes[1]).toMatchObject({ match: { service: "a.B" }, cluster: "backend", timeoutMs: 1000 });
  });

  it("accepts JSON text (JSON is YAML), and with format json", () => {
    const json = JSON.stringify({
      listeners: [{ name: "main", address: "127.0.0.1:0", routes: [{ match: { prefix: "/" }, cluster: "backend", timeout: "5s" }] }],
      clusters: [{ name: "backend", endpoints: ["127.0.0.1:50051"] }],
    });
    const a = parseConfigText(json, {});
    const b = parseConfigText(json, {}, { format: "json" });
    expect(a.ok && a.config.listeners[0]?.routes[0]?.timeoutMs).toBe(5000);
    expect(b).toEqual(a);
    expect(parseConfigText(JSON.stringify(JSON.parse(json), null, "\t"), {})).toEqual(a);
  });

  it("ignores a leading byte-order mark", () => {
    expect(parseConfigText(`\uFEFF${MINIMAL}`, {}).ok).toBe(true);
  });
});

// === invalid configs: one case per mistake, with the exact key path ===

/** MINIMAL with listener/route/cluster/top-level lines swapped in. */
function config(parts: { top?: string; listener?: string; route?: string; routes?: string; cluster?: string; clusters?: string }): string {
  const routes =
    parts.routes ??
    `
      - match: { prefix: "/" }
        cluster: backend${parts.route ?? ""}`;
  const clusters =
    parts.clusters ??
    `
  - name: backend
    endpoints: ["127.0.0.1:50051"]${parts.cluster ?? ""}`;
  return `${parts.top ?? ""}
listeners:
  - name: main
    address: 127.0.0.1:8080${parts.listener ?? ""}
    routes:${routes}
clusters:${clusters}
`;
}

describe("parseConfigText(): every issue, with its key path", () => {
  it("names an unknown cluster, the issue's own example", () => {
    const text = config({
      routes: `
      - match: { path: "/pkg.Svc/Get" }
        cluster: backend
      - match: { prefix: "/" }
        cluster: bakend`,
    });
    expect(issues(text)).toEqual(['listeners[0].routes[1].cluster: unknown cluster "bakend" (did you mean "backend"?)']);
    expect(issues(text)[0]).toMatch(/^listeners\[0\]\.routes\[1\]\.cluster: unknown cluster "bakend"/);
  });

  it.each<[string, string, string[]]>([
    // --- units
    ["bad duration", config({ route: "\n        timeout: 5 seconds" }), [
      'listeners[0].routes[0].timeout: invalid duration "5 seconds": expected a number with a unit ms, s, m or h, e.g. "250ms", "1.5s", "1m30s"',
    ]],
    ["negative duration", config({ cluster: "\n    connectTimeout: -1s" }), ['clusters[0].connectTimeout: duration "-1s" must not be negative']],
    ["zero timeout", config({ route: "\n        timeout: 0s" }), [
      'listeners[0].routes[0].timeout: timeout must be greater than 0 (write "none", or leave it out, for no timeout)',
    ]],
    ["zero connect timeout", config({ cluster: "\n    connectTimeout: 0" }), ["clusters[0].connectTimeout: duration 0 must be at least 1ms"]],
    ["too long duration", config({ top: "drainTimeout: 30d" }), ['drainTimeout: invalid duration "30d": expected a number with a unit ms, s, m or h, e.g. "250ms", "1.5s", "1m30s"']],
    ["duration of the wrong type", config({ top: "drainTimeout: [1]" }), ['drainTimeout: expected a duration like "5s" or "250ms", got a list']],
    ["negative size", config({ route: "\n        maxRequestMessageBytes: -1" }), ["listeners[0].routes[0].maxRequestMessageBytes: size -1 must not be negative"]],
    ["size with a bad unit", config({ route: "\n        maxResponseMessageBytes: 4 megs" }), [
      'listeners[0].routes[0].maxResponseMessageBytes: unknown size unit "megs" in "4 megs": expected a number of bytes or a number with a unit B, KiB, MiB, GiB (binary) or KB, MB, GB (decimal), e.g. "4MiB"',
    ]],
    ["message limit above the 32-bit prefix", config({ route: "\n        maxRequestMessageBytes: 4GiB" }), [
      'listeners[0].routes[0].maxRequestMessageBytes: size "4GiB" is out of range (0 bytes to 4294967295 bytes)',
    ]],
    ["window above 2^31-1", config({ listener: "\n    initialWindowSize: 2GiB" }), [
      'listeners[0].initialWindowSize: size "2GiB" is out of range (1 bytes to 2147483647 bytes)',
    ]],
    ["connection window below 65535", config({ cluster: "\n    connectionWindowSize: 1KiB" }), [
      'clusters[0].connectionWindowSize: size "1KiB" is out of range (65535 bytes to 2147483647 bytes)',
    ]],
    ["header pairs below node's minimum", config({ listener: "\n    maxHeaderListPairs: 3" }), ["listeners[0].maxHeaderListPairs: 3 is out of range (4 to 1000000)"]],
    ["fractional count", config({ listener: "\n    maxConcurrentStreams: 1.5" }), ["listeners[0].maxConcurrentStreams: expected a whole number, got 1.5"]],
    ["zero streams", config({ listener: "\n    maxConcurrentStreams: 0" }), ["listeners[0].maxConcurrentStreams: 0 is out of range (1 to 4294967295)"]],
    ["too many workers", config({ top: "workers: 65" }), ["workers: 65 is out of range (1 to 64)"]],
    ["zero workers", config({ top: 'workers: "0"' }), ['workers: "0" is out of range (1 to 64)']],
    ["too many sessions", config({ cluster: "\n    maxSessionsPerEndpoint: 5000" }), ["clusters[0].maxSessionsPerEndpoint: 5000 is out of range (1 to 1024)"]],
    ["not a boolean", config({ top: "accessLog: yes" }), ['accessLog: expected true or false, got "yes"']],
    ["unknown log level", config({ top: "logLevel: warning" }), [
      'logLevel: unknown log level "warning": expected one of fatal, error, warn, info, debug, trace, silent (did you mean "warn"?)',
    ]],
    // --- addresses
    ["address without port", config({ listener: "" }).replace("127.0.0.1:8080", "127.0.0.1"), [
      'listeners[0].address: invalid address "127.0.0.1": missing port; expected "host:port", e.g. "127.0.0.1:8080", "localhost:50051" or "[::1]:8080"',
    ]],
    ["bad port", config({}).replace("127.0.0.1:8080", "127.0.0.1:70000"), ['listeners[0].address: invalid address "127.0.0.1:70000": port 70000 is out of range (0 to 65535)']],
    ["unbracketed IPv6", config({}).replace("127.0.0.1:8080", '"::1:8080"'), [
      'listeners[0].address: invalid address "::1:8080": put an IPv6 address in brackets, e.g. "[::1]:8080"',
    ]],
    ["address as a number", config({}).replace("127.0.0.1:8080", "8080"), ['listeners[0].address: expected an address "host:port", got 8080']],
    ["endpoint on port 0", config({}).replace("127.0.0.1:50051", "127.0.0.1:0"), [
      'clusters[0].endpoints[0]: endpoint "127.0.0.1:0" needs a real port (port 0 is only for listeners)',
    ]],
    ["bad admin address", config({ top: "admin: { address: nowhere }" }), [
      'admin.address: invalid address "nowhere": missing port; expected "host:port", e.g. "127.0.0.1:8080", "localhost:50051" or "[::1]:8080"',
    ]],
    ["admin without address", config({ top: "admin: {}" }), ["admin.address: is required"]],
    // --- required keys, lists, shapes
    ["missing endpoints", config({ clusters: "\n  - name: backend" }), ['clusters[0].endpoints: needs endpoints (a list of "host:port") or dns ("name:port")']],
    ["empty endpoints", config({ clusters: "\n  - { name: backend, endpoints: [] }" }), ["clusters[0].endpoints: needs at least one endpoint"]],
    ["endpoints not a list", config({ clusters: '\n  - { name: backend, endpoints: "127.0.0.1:1" }' }), [
      'clusters[0].endpoints: expected a list of "host:port" endpoints, got "127.0.0.1:1"',
    ]],
    ["no routes", config({ routes: " []" }), ["listeners[0].routes: needs at least one route"]],
    ["missing route cluster", config({ routes: "\n      - match: { prefix: / }" }), ["listeners[0].routes[0].cluster: is required"]],
    ["missing match", config({ routes: "\n      - cluster: backend" }), ["listeners[0].routes[0].match: is required"]],
    ["empty match", config({ routes: "\n      - { match: {}, cluster: backend }" }), ["listeners[0].routes[0].match: needs one of prefix, path or service"]],
    ["two match kinds", config({ routes: "\n      - { match: { prefix: /, service: a.B }, cluster: backend }" }), [
      "listeners[0].routes[0].match: give only one of prefix, path or service (got prefix and service)",
    ]],
    ["authority alone", config({ routes: "\n      - { match: { authority: a.example }, cluster: backend }" }), [
      "listeners[0].routes[0].match: needs one of prefix, path or service",
    ]],
    ["path without leading slash", config({ routes: "\n      - { match: { path: pkg.Svc/M }, cluster: backend }" }), [
      'listeners[0].routes[0].match.path: path "pkg.Svc/M" must start with "/"',
    ]],
    ["prefix without leading slash", config({ routes: "\n      - { match: { prefix: api }, cluster: backend }" }), [
      'listeners[0].routes[0].match.prefix: prefix "api" must start with "/"',
    ]],
    ["service with a slash", config({ routes: "\n      - { match: { service: /pkg.Svc }, cluster: backend }" }), [
      'listeners[0].routes[0].match.service: service "/pkg.Svc" must not contain "/" (use path: "/pkg.Svc/Method" to match one method)',
    ]],
    ["empty prefix", config({ routes: '\n      - { match: { prefix: "" }, cluster: backend }' }), [
      "listeners[0].routes[0].match.prefix: must not be empty",
    ]],
    ["match not a mapping", config({ routes: '\n      - { match: "/", cluster: backend }' }), [
      'listeners[0].routes[0].match: expected a mapping like { prefix: "/" }, got "/"',
    ]],
    ["no listeners", "listeners: []\nclusters: [{ name: b, endpoints: [\"127.0.0.1:1\"] }]", ["listeners: needs at least one listener (or xds, a control plane that sends them)"]],
    ["no clusters", "clusters: []\n" + config({}).split("clusters:")[0], ["clusters: needs at least one cluster (or xds, a control plane that sends them)"]],
    ["listeners missing", "clusters: [{ name: b, endpoints: [\"127.0.0.1:1\"] }]", ["listeners: is required"]],
    ["listener without name", config({}).replace("  - name: main\n    address", "  - address"), ["listeners[0].name: is required"]],
    ["bad name", config({}).replace("name: main", 'name: "my listener"'), [
      'listeners[0].name: invalid name "my listener": use letters, digits, "_", "." and "-", starting with a letter or digit',
    ]],
    ["top level is a list", "- a\n- b\n", ["expected a mapping with listeners and clusters, got a list"]],
    ["empty document", "# nothing here\n", ["the config is empty: it needs at least listeners and clusters"]],
    // --- unknown keys
    ["unknown key with suggestion", config({}).replace("    routes:", "    routs:\n      - {}\n    routes:"), [
      'listeners[0].routs: unknown key "routs" (did you mean "routes"?)',
    ]],
    ["unknown route key", config({ route: "\n        timout: 1s" }), ['listeners[0].routes[0].timout: unknown key "timout" (did you mean "timeout"?)']],
    ["unknown match key", config({ routes: "\n      - { match: { prefx: / }, cluster: backend }" }), [
      "listeners[0].routes[0].match: needs one of prefix, path or service",
      'listeners[0].routes[0].match.prefx: unknown key "prefx" (did you mean "prefix"?)',
    ]],
    ["unknown cluster key", config({ cluster: "\n    endpoint: [x:1]" }), ['clusters[0].endpoint: unknown key "endpoint" (did you mean "endpoints"?)']],
    ["unknown top-level keys", config({ top: "tls: {}\nlog_level: info" }), [
      'log_level: unknown key "log_level" (did you mean "logLevel"?)',
      'tls: unknown key "tls"',
    ]],
    ["unknown key with an odd name", config({ top: '"bad key": 1' }), ['["bad key"]: unknown key "bad key"']],
    ["__proto__ is just an unknown key", config({ top: "__proto__: { workers: 9 }" }), ['__proto__: unknown key "__proto__"']],
    // --- cross-references
    ["duplicate cluster names", config({ clusters: '\n  - { name: backend, endpoints: ["127.0.0.1:1"] }\n  - { name: backend, endpoints: ["127.0.0.1:2"] }' }), [
      'clusters[1].name: duplicate cluster name "backend" (first used at clusters[0].name)',
    ]],
    ["duplicate route match", config({ routes: "\n      - { match: { service: a.B }, cluster: backend }\n      - { match: { prefix: / }, cluster: backend }\n      - { match: { service: a.B }, cluster: backend }" }), [
      "listeners[0].routes[2].match: same match as listeners[0].routes[0].match, so this route could never be chosen",
    ]],
    ["duplicate match with authority case difference", config({ routes: "\n      - { match: { prefix: /, authority: A.example }, cluster: backend }\n      - { match: { prefix: /, authority: a.EXAMPLE }, cluster: backend }" }), [
      "listeners[0].routes[1].match: same match as listeners[0].routes[0].match, so this route could never be chosen",
    ]],
    ["admin on a listener's address", config({ top: "admin: { address: 127.0.0.1:8080 }" }), [
      "listeners[0].address: address 127.0.0.1:8080 is already used by admin.address",
    ]],
    ["unknown cluster without close match", config({ route: "" }).replace("cluster: backend", "cluster: payments"), [
      'listeners[0].routes[0].cluster: unknown cluster "payments"',
    ]],
  ])("%s", (_name, text, expected) => {
    expect(issues(text)).toEqual(expected);
  });

  it("names duplicate listener names and duplicate addresses", () => {
    const text = `
listeners:
  - { name: main, address: "127.0.0.1:8080", routes: [{ match: { prefix: / }, cluster: b }] }
  - { name: main, address: "127.0.0.1:8081", routes: [{ match: { prefix: / }, cluster: b }] }
  - { name: other, address: "127.0.0.1:8080", routes: [{ match: { prefix: / }, cluster: b }] }
  - { name: wild, address: "0.0.0.0:8081", routes: [{ match: { prefix: / }, cluster: b }] }
  - { name: wild6, address: "[::]:8082", routes: [{ match: { prefix: / }, cluster: b }] }
  - { name: v6, address: "[::1]:8082", routes: [{ match: { prefix: / }, cluster: b }] }
  - { name: v6wild4, address: "[::1]:8081", routes: [{ match: { prefix: / }, cluster: b }] }
clusters: [{ name: b, endpoints: ["127.0.0.1:1"] }]
`;
    expect(issues(text)).toEqual([
      'listeners[1].name: duplicate listener name "main" (first used at listeners[0].name)',
      "listeners[2].address: address 127.0.0.1:8080 is already used by listeners[0].address",
      "listeners[3].address: address 0.0.0.0:8081 overlaps listeners[1].address (127.0.0.1:8081): a wildcard host takes the port on every interface",
      "listeners[5].address: address [::1]:8082 overlaps listeners[4].address ([::]:8082): a wildcard host takes the port on every interface",
    ]);
  });

  it("collects every issue at once, sorted by key path", () => {
    const text = `
admin: { address: 127.0.0.1:99999 }
workers: 0
listeners:
  - name: main
    address: 127.0.0.1:8080
    routs: []
    routes:
      - match: { prefix: "/" }
        cluster: backend
      - match: { path: "/a.B/C" }
        cluster: bakend
        timeout: 5x
        maxRequestMessageBytes: -1
  - name: main
    address: 127.0.0.1:8080
    routes: []
clusters:
  - name: backend
    endpoints: []
  - name: backend
    endpoints: ["\${UP}"]
`;
    expect(issues(text)).toEqual([
      'admin.address: invalid address "127.0.0.1:99999": port 99999 is out of range (0 to 65535)',
      "clusters[0].endpoints: needs at least one endpoint",
      'clusters[1].endpoints[0]: environment variable "UP" is not set (write "${UP:-default}" to give a default)',
      'clusters[1].name: duplicate cluster name "backend" (first used at clusters[0].name)',
      'listeners[0].routes[1].cluster: unknown cluster "bakend" (did you mean "backend"?)',
      "listeners[0].routes[1].maxRequestMessageBytes: size -1 must not be negative",
      'listeners[0].routes[1].timeout: invalid duration "5x": expected a number with a unit ms, s, m or h, e.g. "250ms", "1.5s", "1m30s"',
      'listeners[0].routs: unknown key "routs" (did you mean "routes"?)',
      "listeners[1].address: address 127.0.0.1:8080 is already used by listeners[0].address",
      'listeners[1].name: duplicate listener name "main" (first used at listeners[0].name)',
      "listeners[1].routes: needs at least one route",
      "workers: 0 is out of range (1 to 64)",
    ]);
  });

  it("finds cross-reference issues even when the schema fails elsewhere", () => {
    const text = config({ top: "workers: lots", route: "" }).replace("cluster: backend", "cluster: backnd");
    expect(issues(text)).toEqual([
      'listeners[0].routes[0].cluster: unknown cluster "backnd" (did you mean "backend"?)',
      'workers: expected a whole number, got "lots"',
    ]);
  });

  it("gives no messages in zod's raw form", () => {
    const text = config({ top: "admin: 5\nworkers: true\nlogLevel: 3\naccessLog: null", listener: "\n    maxSessionMemoryMiB: {}" });
    const out = issues(text);
    expect(out).toEqual([
      "accessLog: expected true or false, got null",
      'admin: expected a mapping like { address: 127.0.0.1:9901 }, got 5',
      "listeners[0].maxSessionMemoryMiB: expected a whole number, got a mapping",
      "logLevel: expected one of fatal, error, warn, info, debug, trace, silent, got 3",
      "workers: expected a whole number, got true",
    ]);
    for (const line of out) expect(line).not.toMatch(/Invalid input|received|\{"|\[\{/);
  });
});

describe("parseConfigText(): syntax errors", () => {
  it.each<[string, string, string]>([
    ["unclosed flow sequence", "listeners: [\nclusters: []\n", "line 2, column 1: Flow sequence in block collection must be sufficiently indented and end with a ]"],
    ["bad indentation", "admin:\n  address: 127.0.0.1:9901\n    extra: 1\n", "line 2, column 12: Nested mappings are not allowed in compact mappings"],
    ["duplicate key", "workers: 1\nlisteners: []\nworkers: 2\n", "line 3, column 1: Map keys must be unique"],
    ["tab indentation", "admin:\n\taddress: 1\n", "line 2, column 1: Tabs are not allowed as indentation"],
    ["undefined alias", "listeners: *nope\n", "line 1, column 12: alias *nope refers to no anchor &nope defined before it"],
    ["unknown tag", "workers: !int 4\n", "line 1, column 10: Unresolved tag: !int"],
    ["two documents", "workers: 1\n---\nworkers: 2\n", 'line 2, column 1: a config file holds one YAML document; remove the second "---"'],
  ])("reports %s with its line and column, path \"\"", (_name, text, prefix) => {
    const r = parseConfigText(text, {});
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.issues.length).toBeGreaterThan(0);
    expect(r.issues[0]?.path).toBe("");
    expect(r.issues[0]?.message.startsWith(prefix)).toBe(true);
    expect(r.issues[0]?.message).toMatch(/^line \d+, column \d+: \S/);
  });

  it("reports a line number on the line of the mistake in a longer file", () => {
    const text = config({}).replace("    routes:", "    routes: [\n");
    const r = parseConfigText(text, {});
    expect(r.ok ? "" : r.issues[0]?.message).toMatch(/^line \d+, column \d+: /);
  });

  it("reports JSON syntax errors with line and column in json format", () => {
    expect(issues('{\n  "workers": 1,\n}', {}, "json")).toEqual(["line 3, column 1: Expected double-quoted property name"]);
    expect(issues('{\n  "workers": 1\n  "a": 2}', {}, "json")).toEqual([
      "line 3, column 3: Expected ',' or '}' after property value",
    ]);
    expect(issues('{"workers": ', {}, "json")).toEqual(["line 1, column 13: Unexpected end of JSON input"]);
  });

  it("reports a JSON error V8 gives no position for without inventing one", () => {
    const [line] = issues("[1,]", {}, "json");
    expect(line).toMatch(/^invalid JSON: Unexpected token/);
  });

  it("reports JSON syntax errors with a line number when parsed as YAML", () => {
    const [line] = issues('{\n  "workers": 1,\n  "listeners": [\n}', {});
    expect(line).toMatch(/^line \d+, column \d+: /);
  });
});

describe("parseConfigValue()", () => {
  const value = {
    listeners: [{ name: "main", address: "127.0.0.1:0", routes: [{ match: { prefix: "/" }, cluster: "backend", timeout: "1000ms" }] }],
    clusters: [{ name: "backend", endpoints: ["127.0.0.1:50051"] }],
  };

  it("validates an already-parsed value the same way", () => {
    const r = parseConfigValue(value, {});
    expect(r.ok && r.config.listeners[0]?.routes[0]?.timeoutMs).toBe(1000);
    expect(parseConfigValue(value, {})).toEqual(parseConfigText(JSON.stringify(value), {}));
  });

  it("does not freeze or change the caller's value", () => {
    const copy = structuredClone(value);
    parseConfigValue(copy, {});
    expect(Object.isFrozen(copy)).toBe(false);
    expect(copy).toEqual(value);
  });

  it("rejects values that are not plain data", () => {
    const r = parseConfigValue({ ...value, workers: new Date(0) }, {});
    expect(r.ok ? [] : r.issues.map((i) => i.path)).toEqual(["workers"]);
    expect(parseConfigValue(undefined, {}).ok).toBe(false);
    expect(parseConfigValue("listeners: []", {})).toEqual({
      ok: false,
      issues: [{ path: "", message: 'expected a mapping with listeners and clusters, got "listeners: []"' }],
    });
  });
});

describe("configFromText()", () => {
  it("returns the config", () => {
    expect(configFromText(MINIMAL, "inline", {}).listeners[0]?.name).toBe("main");
  });

  it("throws ConfigError naming the source and every issue", () => {
    const text = config({ route: "" }).replace("cluster: backend", "cluster: bakend");
    try {
      configFromText(text, "test.yaml", {});
      expect.unreachable();
    } catch (err: unknown) {
      expect(err).toBeInstanceOf(ConfigError);
      const e = err as ConfigError;
      expect(e.code).toBe("DOJANG_ERR_CONFIG");
      expect(e.issues).toEqual([
        { path: "listeners[0].routes[0].cluster", message: 'unknown cluster "bakend" (did you mean "backend"?)' },
      ]);
      expect(e.message).toBe(
        'invalid config test.yaml:\n  listeners[0].routes[0].cluster: unknown cluster "bakend" (did you mean "backend"?)',
      );
    }
  });
});

describe("fault rules in a config", () => {
  it("takes several rules without an id (the fault set names them) but refuses a repeated id", () => {
    const text = (ids: string[]) => `
listeners:
  - name: main
    address: 127.0.0.1:0
    faults:
${ids.map((id) => `      - { ${id === "" ? "" : `id: ${id}, `}action: { kind: blackhole } }`).join("\n")}
    routes: [{ match: { prefix: "/" }, cluster: backend }]
clusters: [{ name: backend, endpoints: ["127.0.0.1:50051"] }]
`;
    const r = parseConfigText(text(["", "", ""]), {});
    expect(r.ok ? [] : r.issues).toEqual([]);
    const dup = parseConfigText(text(["a", "", "a"]), {});
    expect(dup.ok ? [] : dup.issues).toEqual([{ path: "listeners[0].faults[2].id", message: 'duplicate fault id "a" (first used at listeners[0].faults[0].id)' }]);
    const across = parseConfigText(text(["", "a"]).replace("cluster: backend }", "cluster: backend, faults: [{ action: { kind: blackhole } }, { id: a, action: { kind: blackhole } }] }"), {});
    expect(across.ok ? [] : across.issues).toEqual([
      { path: "listeners[0].routes[0].faults[1].id", message: 'duplicate fault rule id "a" (also at listeners[0].faults[1])' },
    ]);
  });
});

describe("admin.token", () => {
  it("is never echoed in an error, whatever its type", () => {
    const r = parseConfigText(`admin: { address: "127.0.0.1:0", token: 12345678901234567 }\n${MINIMAL}`, {});
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.issues.map((i) => i.path)).toEqual(["admin.token"]);
    expect(JSON.stringify(r.issues)).not.toMatch(/1234567890/);
  });
});

describe("parseConfigText(): tracing", () => {
  it("reads the block with its defaults, and is off (null) without it", () => {
    expect(parse(MINIMAL).tracing).toBeNull();
    const c = parse(`${MINIMAL}\ntracing:\n  endpoint: http://127.0.0.1:4318/v1/traces\n  sampleRatio: "0.25"\n  exportInterval: 1s\n`);
    expect(c.tracing).toEqual({
      endpoint: "http://127.0.0.1:4318/v1/traces",
      serviceName: DEFAULTS.tracing.serviceName,
      sampleRatio: 0.25,
      maxQueueSize: DEFAULTS.tracing.maxQueueSize,
      exportIntervalMs: 1000,
      exportTimeoutMs: DEFAULTS.tracing.exportTimeoutMs,
      protocol: "http/protobuf",
    });
    expect(parse(`${MINIMAL}\ntracing:\n  endpoint: http://127.0.0.1:4318/v1/traces\n  protocol: http/json\n`).tracing?.protocol).toBe("http/json");
    const g = parse(`${MINIMAL}\ntracing:\n  endpoint: https://collector.example:4317\n  protocol: grpc\n`).tracing;
    expect(g?.protocol).toBe("grpc");
    expect(g?.endpoint).toBe("https://collector.example:4317/");
  });

  it.each<[string, string, RegExp]>([
    ["no endpoint", "tracing: { sampleRatio: 1 }", /^tracing\.endpoint: is required/],
    ["a non-http endpoint", "tracing: { endpoint: grpc://127.0.0.1:4317 }", /^tracing\.endpoint: .*http or https, not grpc/],
    ["credentials in the endpoint", "tracing: { endpoint: \"http://u:p@127.0.0.1:4318/v1/traces\" }", /^tracing\.endpoint: the endpoint must not carry credentials/],
    ["a ratio above 1", "tracing: { endpoint: http://127.0.0.1:4318/v1/traces, sampleRatio: 1.5 }", /^tracing\.sampleRatio: expected a number from 0 to 1, got 1\.5/],
    ["an unknown key", "tracing: { endpoint: http://127.0.0.1:4318/v1/traces, ratio: 1 }", /^tracing\.ratio: unknown key "ratio"/],
    ["gRPC with an OTLP/HTTP path (OTLP/gRPC's path is its service's)", "tracing: { endpoint: http://127.0.0.1:4318/v1/traces, protocol: grpc }", /^tracing\.endpoint: "http:\/\/127\.0\.0\.1:4318\/v1\/traces": with protocol grpc the endpoint is the collector's origin, like "http:\/\/127\.0\.0\.1:4317"/],
    ["gRPC with a query", "tracing: { endpoint: \"http://127.0.0.1:4317/?x=1\", protocol: grpc }", /^tracing\.endpoint: .*with protocol grpc the endpoint is the collector's origin/],
    ["a protocol OTLP does not name", "tracing: { endpoint: http://127.0.0.1:4318/v1/traces, protocol: http/grpc }", /^tracing\.protocol: expected "http\/protobuf", "http\/json" or "grpc"/],
  ])("refuses %s", (_why, block, re) => {
    const got = issues(`${MINIMAL}\n${block}\n`);
    expect(got).toHaveLength(1);
    expect(got[0]).toMatch(re);
  });
});
