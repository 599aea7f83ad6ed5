// config/kubernetes.yaml is what operators copy: its structure (a native sidecar), its numbers
// (memory against dojang's own bench figures, CPU against workers, the stop-time arithmetic
// against terminationGracePeriodSeconds) and the dojang config it embeds are checked here.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import { describe, expect, it } from "vitest";
import { parseConfigText, type Config } from "../../src/config/index.js";

const text = readFileSync(new URL("../../config/kubernetes.yaml", import.meta.url), "utf8");
const docs = parseAllDocuments(text).map((d) => {
  expect(d.errors).toEqual([]);
  return d.toJS() as Record<string, any>;
});
const byKind = (kind: string) => {
  const found = docs.filter((d) => d["kind"] === kind);
  expect(found, kind).toHaveLength(1);
  return found[0]!;
};
const configMap = byKind("ConfigMap");
const deployment = byKind("Deployment");
const service = byKind("Service");
const pod = deployment["spec"]["template"]["spec"];
const dojang = (pod["initContainers"] ?? []).find((c: any) => c.name === "dojang");
const app = pod["containers"].find((c: any) => c.name === "app");
const envOf = (c: any): Record<string, string> => Object.fromEntries((c.env ?? []).map((e: any) => [e.name, e.value]));

/** The embedded dojang.yaml, parsed by dojang's own parser with the container's environment. */
function embeddedConfig(): Config {
  const r = parseConfigText(configMap["data"]["dojang.yaml"], envOf(dojang));
  expect(r.ok ? [] : r.issues).toEqual([]);
  if (!r.ok) throw new Error("invalid embedded config");
  return r.config;
}

/** "128Mi" → bytes (Kubernetes binary suffixes). */
function k8sBytes(q: string): number {
  const m = /^(\d+)(Ki|Mi|Gi)$/.exec(q);
  expect(m, `quantity ${q}`).not.toBeNull();
  return Number(m![1]) * { Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3 }[m![2] as "Ki" | "Mi" | "Gi"];
}
function cores(q: string): number {
  return q.endsWith("m") ? Number(q.slice(0, -1)) / 1000 : Number(q);
}

/**
 * The bench's RSS for dojang sized by the manifest's memory limit: the run the manifest's comment
 * cites, dojang-alt = dojang with `memory: { limit: <the limit> }` (what the cgroup limit gives it).
 */
function benchRssUnderPlan(limitMiB: number): { idleBytes: number; maxBytes: number } {
  const file = new URL(`../../bench/results/perf2-plan${limitMiB}/latest.json`, import.meta.url);
  const bench = JSON.parse(readFileSync(file, "utf8")) as {
    summary: { cells: { peer: string; stats: Record<string, { max: number } | undefined> }[] };
  };
  const cells = bench.summary.cells.filter((c) => c.peer === "dojang-alt");
  const max = (k: string) => Math.max(...cells.map((c) => c.stats[k]?.max ?? 0)) * 1024;
  return { idleBytes: max("rssBaseKiB"), maxBytes: Math.max(max("rssKiB"), max("rssAfterKiB")) };
}

describe("config/kubernetes.yaml", () => {
  it("runs dojang as a native sidecar: an init container with restartPolicy Always, not a regular container", () => {
    expect(dojang, "initContainers has dojang").toBeDefined();
    expect(dojang.restartPolicy).toBe("Always");
    expect(pod["containers"].map((c: any) => c.name)).toEqual(["app"]);
  });

  it("embeds a dojang config that dojang's parser accepts, mounted where --config points", () => {
    const c = embeddedConfig();
    const mount = dojang.volumeMounts.find((v: any) => v.name === "config");
    expect(dojang.args).toEqual(["--config", `${mount.mountPath}/dojang.yaml`]);
    expect(pod["volumes"].find((v: any) => v.name === "config").configMap.name).toBe(configMap["metadata"]["name"]);
    expect(c.admin?.mutations).toBe(false);
    expect(c.clusters[0]?.endpoints).toEqual([{ host: "127.0.0.1", port: 50051 }]);
  });

  it("probes dojang's admin /ready and /live on the config's admin port, and the app by gRPC health through dojang's listener", () => {
    const c = embeddedConfig();
    const ports = Object.fromEntries(dojang.ports.map((p: any) => [p.name, p.containerPort]));
    expect(ports["admin"]).toBe(c.admin?.address.port);
    expect(ports["grpc"]).toBe(c.listeners[0]?.address.port);
    expect(dojang.readinessProbe.httpGet).toEqual({ path: "/ready", port: "admin" });
    expect(dojang.livenessProbe.httpGet).toEqual({ path: "/live", port: "admin" });
    expect(dojang.startupProbe.httpGet).toEqual({ path: "/ready", port: "admin" });
    expect(app.readinessProbe.grpc.port).toBe(c.listeners[0]?.address.port);
    expect(service["spec"]["ports"][0].targetPort).toBe("grpc");
  });

  it("requests one core per worker", () => {
    const c = embeddedConfig();
    expect(cores(dojang.resources.requests.cpu)).toBe(c.workers);
    expect(dojang.resources.limits?.cpu).toBeUndefined();
  });

  it("requests at least dojang's measured idle RSS and limits above the highest RSS its bench measured under that limit's memory plan, with 10 % to spare", () => {
    const c = embeddedConfig();
    expect(c.workers, "the plan's bench ran one process").toBe(1);
    const limit = k8sBytes(dojang.resources.limits.memory);
    const rss = benchRssUnderPlan(limit / 1024 ** 2);
    expect(rss.idleBytes).toBeGreaterThan(0);
    const request = k8sBytes(dojang.resources.requests.memory);
    expect(request).toBeGreaterThanOrEqual(Math.max(rss.idleBytes, 96 * 1024 ** 2));
    expect(limit).toBeGreaterThanOrEqual(rss.maxBytes * 1.1);
    // the config leaves memory.limit to the cgroup (the manifest's limit is the budget)
    expect(c.memory?.limitBytes ?? null).toBeNull();
  });

  it("fits the stop sequence in terminationGracePeriodSeconds, and its comment's arithmetic is the manifest's numbers", () => {
    const c = embeddedConfig();
    const grace = pod["terminationGracePeriodSeconds"] as number;
    const preStop = app.lifecycle.preStop.sleep.seconds as number;
    const m = /#\s+(\d+) \+ (\d+) \+ (\d+) \+ (\d+) = (\d+) = terminationGracePeriodSeconds/.exec(text);
    expect(m, "the arithmetic comment").not.toBeNull();
    const [sleep, appStop, drain, margin, total] = m!.slice(1).map(Number) as [number, number, number, number, number];
    expect(sleep).toBe(preStop);
    expect(drain * 1000).toBe(c.drainTimeoutMs);
    expect(sleep + appStop + drain + margin).toBe(total);
    expect(total).toBe(grace);
    expect(margin).toBeGreaterThanOrEqual(2);
  });
});
