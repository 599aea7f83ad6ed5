// The reload's plan (src/config/reload-plan.ts), decided before anything changes: which running
// listeners keep their sockets (by name on the same address, or renamed on the same address),
// which are new and which retire; which clusters carry on, carry on with new endpoints, or are new.
import { describe, expect, it } from "vitest";
import { configFromText } from "../../src/config/index.js";
import { configAsApplied, planReload } from "../../src/config/reload-plan.js";
import type { ClusterConfig, Config } from "../../src/config/schema.js";

const cfg = (text: string): Config => configFromText(text, "<test>", {});
const yaml = (listeners: string, clusters: string): string => `
listeners:
${listeners}
clusters:
${clusters}
`;
const L = (name: string, port: number, cluster = "a") => `  - { name: ${name}, address: "127.0.0.1:${port}", routes: [{ match: { prefix: "/" }, cluster: ${cluster} }] }`;
const C = (name: string, endpoints: string, extra = "") => `  - { name: ${name}, endpoints: [${endpoints}]${extra} }`;
const running = (c: Config): [Config["listeners"], Map<string, ClusterConfig>] => [c.listeners, new Map(c.clusters.map((x) => [x.name, x]))];

describe("planReload(): listeners", () => {
  const before = cfg(yaml([L("main", 8080), L("side", 8081)].join("\n"), C("a", '"127.0.0.1:1"')));

  it("keeps a listener of the same name on the same address, in the new order", () => {
    const p = planReload(...running(before), cfg(yaml([L("side", 8081), L("main", 8080)].join("\n"), C("a", '"127.0.0.1:1"'))));
    expect(p.listeners.map((s) => [s.cfg.name, s.keep])).toEqual([["side", 1], ["main", 0]]);
    expect(p.retiring).toEqual([]);
  });

  it("a re-addressed listener is new, and the running one retires", () => {
    const p = planReload(...running(before), cfg(yaml([L("main", 9090), L("side", 8081)].join("\n"), C("a", '"127.0.0.1:1"'))));
    expect(p.listeners.map((s) => [s.cfg.name, s.keep])).toEqual([["main", undefined], ["side", 1]]);
    expect(p.retiring).toEqual([0]);
  });

  it("a renamed listener on the same address keeps its socket; a removed one retires; an added one is new", () => {
    const p = planReload(...running(before), cfg(yaml([L("renamed", 8080), L("added", 8082)].join("\n"), C("a", '"127.0.0.1:1"'))));
    expect(p.listeners.map((s) => [s.cfg.name, s.keep])).toEqual([["renamed", 0], ["added", undefined]]);
    expect(p.retiring).toEqual([1]);
  });

  it("a rename does not take the socket of a listener the new config still names", () => {
    const p = planReload(...running(before), cfg(yaml([L("main", 9090), L("other", 8080)].join("\n"), C("a", '"127.0.0.1:1"'))));
    // "main" moves to 9090 (new); 8080 is still "main"'s in the running set, so "other" is new too
    expect(p.listeners.map((s) => [s.cfg.name, s.keep])).toEqual([["main", undefined], ["other", undefined]]);
    expect([...p.retiring].sort()).toEqual([0, 1]);
  });
});

describe("planReload(): clusters", () => {
  const before = cfg(yaml(L("main", 8080), [C("a", '"127.0.0.1:1"'), C("b", '"127.0.0.1:2"')].join("\n")));

  it("keep (unchanged), move (only endpoints changed), new (another key changed, or a new name)", () => {
    const next = cfg(
      yaml(
        [L("main", 8080), L("x", 8081, "b"), L("y", 8082, "c"), L("z", 8083, "d")].join("\n"),
        [C("a", '"127.0.0.1:1"'), C("b", '"127.0.0.1:2", "127.0.0.1:3"'), C("c", '"127.0.0.1:4"'), C("d", '"127.0.0.1:5"')].join("\n"),
      ),
    );
    const p = planReload(...running(before), next);
    expect(Object.fromEntries(p.clusters)).toEqual({ a: "keep", b: "move", c: "new", d: "new" });
    const changed = cfg(yaml(L("main", 8080), [C("a", '"127.0.0.1:1"', ", connectTimeout: 3s"), C("b", '"127.0.0.1:2"')].join("\n")));
    expect(Object.fromEntries(planReload(...running(before), changed).clusters)).toEqual({ a: "new", b: "keep" });
  });

  it("compares with the config a cluster runs now (after an earlier move), not the one it was built with", () => {
    const moved = new Map(running(before)[1]);
    moved.set("a", { ...moved.get("a")!, endpoints: [{ host: "127.0.0.1", port: 9 }] } as ClusterConfig);
    const p = planReload(before.listeners, moved, before);
    expect(p.clusters.get("a")).toBe("move");
    expect(p.clusters.get("b")).toBe("keep");
  });
});

describe("configAsApplied()", () => {
  it("keeps the running value of keys that need a restart, takes the rest", () => {
    const a = cfg(`workers: 1\ndrainTimeout: 5s\n${yaml(L("main", 8080), C("a", '"127.0.0.1:1"'))}`);
    const b = cfg(`workers: 2\ndrainTimeout: 9s\n${yaml(L("main", 8080), C("a", '"127.0.0.1:1"'))}`);
    const applied = configAsApplied(a, b);
    expect(applied.workers).toBe(1);
    expect(applied.drainTimeoutMs).toBe(9000);
  });
});
