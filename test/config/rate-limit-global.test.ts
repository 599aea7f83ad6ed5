// rateLimit.global and extAuthz in the config: what they parse to, and the errors for what they refuse.
import { describe, expect, it } from "vitest";
import { parseConfigText } from "../../src/config/parse.js";

function withRateLimit(rateLimit: unknown): string {
  return JSON.stringify({
    listeners: [{ name: "l", address: "127.0.0.1:0", routes: [{ match: { prefix: "/" }, cluster: "c", rateLimit }] }],
    clusters: [{ name: "c", endpoints: ["127.0.0.1:9"] }],
  });
}
function parse(rateLimit: unknown) {
  return parseConfigText(withRateLimit(rateLimit), {}, { format: "json" });
}
function issues(rateLimit: unknown): string[] {
  const r = parse(rateLimit);
  return r.ok ? [] : r.issues.map((i) => `${i.path}: ${i.message}`);
}

const G = { service: "127.0.0.1:8081", domain: "edge", descriptors: [[{ key: "remote_address", from: "client_address" }]] };

describe("rateLimit.global", () => {
  it("parses to its normalized form, defaults filled in; no local limit without callsPerSecond", () => {
    const r = parse({
      global: {
        ...G,
        descriptors: [
          [{ key: "remote_address", from: "client_address" }],
          [
            { key: "generic_key", value: "edge" },
            { key: "tenant", from: "metadata:x-tenant" },
            { key: "s", from: "service" },
            { key: "m", from: "method" },
          ],
        ],
      },
    });
    if (!r.ok) throw new Error(JSON.stringify(r.issues));
    const rl = r.config.listeners[0]!.routes[0]!.rateLimit!;
    expect(rl.callsPerSecond).toBeNull();
    expect(rl.global).toEqual({
      service: { host: "127.0.0.1", port: 8081 },
      cluster: null,
      domain: "edge",
      timeoutMs: 20,
      failureModeDeny: false,
      descriptors: [
        [{ key: "remote_address", source: { kind: "client_address" } }],
        [
          { key: "generic_key", source: { kind: "literal", value: "edge" } },
          { key: "tenant", source: { kind: "header", name: "x-tenant" } },
          { key: "s", source: { kind: "service" } },
          { key: "m", source: { kind: "method" } },
        ],
      ],
    });
  });

  it("keeps a local limit beside it", () => {
    const r = parse({ callsPerSecond: 5, global: { ...G, timeout: "1s", failureModeDeny: true } });
    if (!r.ok) throw new Error(JSON.stringify(r.issues));
    const rl = r.config.listeners[0]!.routes[0]!.rateLimit!;
    expect([rl.callsPerSecond, rl.burst, rl.global?.timeoutMs, rl.global?.failureModeDeny]).toEqual([5, 5, 1000, true]);
  });

  it("refuses what it cannot use, naming the key", () => {
    const at = "listeners[0].routes[0].rateLimit";
    expect(issues({})).toEqual([`${at}.callsPerSecond: needs callsPerSecond (a local limit), global, or both`]);
    expect(issues({ burst: 3, global: G })).toEqual([`${at}.burst: burst needs callsPerSecond`]);
    expect(issues({ global: { ...G, descriptors: [[{ key: "k" }]] } })).toEqual([`${at}.global.descriptors[0][0]: give exactly one of from and value`]);
    expect(issues({ global: { ...G, descriptors: [[{ key: "k", from: "client_address", value: "v" }]] } })).toEqual([`${at}.global.descriptors[0][0]: give exactly one of from and value`]);
    expect(issues({ global: { ...G, descriptors: [[{ key: "k", from: "metadata:X-Up" }]] } })).toEqual([
      `${at}.global.descriptors[0][0].from: must be "client_address", "service", "method" or "metadata:<lower-case header name>"`,
    ]);
    expect(issues({ global: { ...G, descriptors: [] } })).toEqual([`${at}.global.descriptors: needs at least one descriptor`]);
    expect(issues({ global: { ...G, descriptors: [[]] } })).toEqual([`${at}.global.descriptors[0]: a descriptor needs at least one entry`]);
    expect(issues({ global: { ...G, service: "127.0.0.1:0" } })).toHaveLength(1);
    expect(issues({ global: { ...G, domain: undefined } })).toHaveLength(1);
    expect(issues({ global: { ...G, extra: 1 } })).toHaveLength(1);
  });

  it("names a cluster of clusters: instead of an address (one of the two), and that cluster must exist", () => {
    const at = "listeners[0].routes[0].rateLimit.global";
    const r = parse({ global: { ...G, service: undefined, cluster: "c" } });
    if (!r.ok) throw new Error(JSON.stringify(r.issues));
    expect(r.config.listeners[0]!.routes[0]!.rateLimit!.global).toMatchObject({ service: null, cluster: "c" });
    expect(issues({ global: { ...G, cluster: "c" } })).toEqual([`${at}.cluster: give service or cluster, not both`]);
    expect(issues({ global: { ...G, service: undefined } })).toEqual([`${at}.service: needs service ("host:port") or cluster (a cluster's name)`]);
    expect(issues({ global: { ...G, service: undefined, cluster: "ratelimit" } })).toEqual([`${at}.cluster: unknown cluster "ratelimit"`]);
  });
});

describe("extAuthz", () => {
  function authz(extAuthz: unknown): string[] {
    const r = parseConfigText(
      JSON.stringify({ listeners: [{ name: "l", address: "127.0.0.1:0", routes: [{ match: { prefix: "/" }, cluster: "c", extAuthz }] }], clusters: [{ name: "c", endpoints: ["127.0.0.1:9"] }, { name: "authz", endpoints: ["127.0.0.1:10"] }] }),
      {},
      { format: "json" },
    );
    return r.ok ? [JSON.stringify({ address: r.config.listeners[0]!.routes[0]!.extAuthz!.address, cluster: r.config.listeners[0]!.routes[0]!.extAuthz!.cluster })] : r.issues.map((i) => `${i.path}: ${i.message}`);
  }
  it("takes an address or a cluster of clusters: (one of the two), and that cluster must exist", () => {
    const at = "listeners[0].routes[0].extAuthz";
    expect(authz({ address: "127.0.0.1:9000" })).toEqual([JSON.stringify({ address: { host: "127.0.0.1", port: 9000 }, cluster: null })]);
    expect(authz({ cluster: "authz" })).toEqual([JSON.stringify({ address: null, cluster: "authz" })]);
    expect(authz({ address: "127.0.0.1:9000", cluster: "authz" })).toEqual([`${at}.cluster: give address or cluster, not both`]);
    expect(authz({})).toEqual([`${at}.address: needs address ("host:port") or cluster (a cluster's name)`]);
    expect(authz({ cluster: "authz-typo" })).toEqual([`${at}.cluster: unknown cluster "authz-typo" (did you mean "authz"?)`]);
  });
});
