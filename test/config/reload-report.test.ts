// What a reload reports (src/config/reload.ts): the new config against the running one, key by
// key, in the file's own key names; listeners and clusters matched by name; each changed key is
// either applied (the swap takes it) or named as needing a restart.
import { describe, expect, it } from "vitest";
import { configFromText } from "../../src/config/index.js";
import { PARTLY_RELOADED_MESSAGE, RELOADED_MESSAGE, reloadReport } from "../../src/config/reload.js";

const BASE = `
admin: { address: 127.0.0.1:9901, mutations: true, token: tok-tok-tok-tok-tok-1 }
listeners:
  - name: main
    address: 127.0.0.1:8080
    faults: []
    routes:
      - { match: { prefix: "/" }, cluster: a, timeout: 5s }
clusters:
  - { name: a, endpoints: ["127.0.0.1:50051"] }
`;
const cfg = (text: string) => configFromText(text, "<test>", {});

describe("reloadReport", () => {
  it("reports nothing when nothing changed", () => {
    expect(reloadReport(cfg(BASE), cfg(BASE))).toEqual({ applied: [], notApplied: [], message: RELOADED_MESSAGE });
  });

  it("names the fault rules of a listener as applied", () => {
    const next = BASE.replace("faults: []", "faults: [{ id: f, action: { kind: abort, code: 14 } }]");
    expect(reloadReport(cfg(BASE), cfg(next))).toEqual({ applied: ["listeners[0].faults"], notApplied: [], message: RELOADED_MESSAGE });
  });

  it("names each changed key by its path in the file (timeout, not timeoutMs; a host:port as one value), applied or not", () => {
    const next = BASE.replace("timeout: 5s", "timeout: 6s")
      .replace("127.0.0.1:50051", "127.0.0.1:50052")
      .replace("127.0.0.1:8080", "127.0.0.1:8081")
      .replace("tok-tok-tok-tok-tok-1", "tok-tok-tok-tok-tok-2")
      .concat("drainTimeout: 3s\nlogLevel: debug\nfaultInjection: { seed: 9 }\nworkers: 2\n");
    const r = reloadReport(cfg(BASE), cfg(next));
    expect(r.applied).toEqual(["listeners[0].address", "listeners[0].routes[0].timeout", "clusters[0].endpoints", "drainTimeout", "logLevel"]);
    expect(r.notApplied).toEqual(["admin.token", "workers", "faultInjection.seed"]);
    expect(r.message).toBe(PARTLY_RELOADED_MESSAGE);
    // Paths only: the new token's value is nowhere in the report.
    expect(JSON.stringify(r)).not.toContain("tok-tok");
  });

  it("matches clusters and listeners by name: a new one by its index, a removed one by its name, a reordered list is no change", () => {
    const added = BASE.replace("clusters:\n", 'clusters:\n  - { name: b, endpoints: ["127.0.0.1:1"] }\n');
    expect(reloadReport(cfg(BASE), cfg(added)).applied).toEqual(["clusters[0]"]);
    expect(reloadReport(cfg(added), cfg(BASE)).applied).toEqual(['clusters["b"]']);
    const reordered = BASE.replace("clusters:\n", "clusters:\n").concat('  - { name: b, endpoints: ["127.0.0.1:1"] }\n');
    expect(reloadReport(cfg(added), cfg(reordered)).applied).toEqual([]);
  });

  it("says which listener keys need a restart (node server options) and which apply", () => {
    const next = BASE.replace("    faults: []\n", "    faults: []\n    maxHeaderListPairs: 100\n    maxSessionMemoryMiB: 32\n    maxConcurrentStreams: 10\n    maxConnectionAge: 1m\n");
    const r = reloadReport(cfg(BASE), cfg(next));
    expect(r.notApplied).toEqual(["listeners[0].maxHeaderListPairs", "listeners[0].maxSessionMemoryMiB"]);
    expect(r.applied).toEqual(["listeners[0].maxConcurrentStreams", "listeners[0].maxConnectionAge"]);
  });

  it("names a route's retry backoff and a cluster's dns and refreshInterval as the file writes them", () => {
    const base = BASE.replace("cluster: a, timeout: 5s }", "cluster: a, timeout: 5s, retry: { backoff: { base: 25ms, max: 250ms } } }").replace(
      '{ name: a, endpoints: ["127.0.0.1:50051"] }',
      '{ name: a, dns: "backend.svc:50051", refreshInterval: 5s }',
    );
    const next = base.replace("base: 25ms", "base: 50ms").replace("backend.svc:50051", "backend.svc:50052").replace("refreshInterval: 5s", "refreshInterval: 9s");
    expect(reloadReport(cfg(base), cfg(next)).applied).toEqual(["listeners[0].routes[0].retry.backoff.base", "clusters[0].dns", "clusters[0].refreshInterval"]);
  });
});
