// What SIGHUP reports (src/config/reload.ts): the new config against the running one, key by key,
// in the file's own key names; fault rule lists are what a reload applies, so never "not applied".
import { describe, expect, it } from "vitest";
import { configFromText } from "../../src/config/index.js";
import { NOT_RELOADED_MESSAGE, RELOADED_MESSAGE, reloadReport } from "../../src/config/reload.js";

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
  it("reports nothing but the fault rules when only they changed", () => {
    const next = BASE.replace("faults: []", "faults: [{ id: f, action: { kind: abort, code: 14 } }]");
    expect(reloadReport(cfg(BASE), cfg(next))).toEqual({ applied: ["fault rules"], notApplied: [], message: RELOADED_MESSAGE });
  });

  it("names each changed key by its path in the file (timeout, not timeoutMs; a host:port as one value)", () => {
    const next = BASE.replace("timeout: 5s", "timeout: 6s")
      .replace("127.0.0.1:50051", "127.0.0.1:50052")
      .replace("127.0.0.1:8080", "127.0.0.1:8081")
      .replace("tok-tok-tok-tok-tok-1", "tok-tok-tok-tok-tok-2")
      .concat("drainTimeout: 3s\nlogLevel: debug\nfaultInjection: { seed: 9 }\n");
    const r = reloadReport(cfg(BASE), cfg(next));
    expect(r.notApplied).toEqual([
      "admin.token",
      "listeners[0].address",
      "listeners[0].routes[0].timeout",
      "clusters[0].endpoints",
      "drainTimeout",
      "logLevel",
      "faultInjection.seed",
    ]);
    expect(r.message).toBe(NOT_RELOADED_MESSAGE);
    // Paths only: the new token's value is nowhere in the report.
    expect(JSON.stringify(r)).not.toContain("tok-tok");
  });

  it("names a list whose length changed as a whole", () => {
    const next = BASE.replace("clusters:\n", "clusters:\n  - { name: b, endpoints: [\"127.0.0.1:1\"] }\n");
    expect(reloadReport(cfg(BASE), cfg(next)).notApplied).toEqual(["clusters"]);
  });
});
