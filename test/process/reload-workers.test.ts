// Whole-config reload with `workers: 2` (issue 11: "works the same with workers: N"): the primary
// reads and validates the file once, every worker swaps its own snapshot, the primary answers
// POST /reload when all have answered, and logs and counts once. Real processes; calls over
// several fresh connections reach both workers.
import * as grpc from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { sample, unary } from "../helpers/peers.js";
import { freePort, httpGet, logLines, ownConnectionClient, processTestKit, spawnDojang, waitFor, waitReady } from "../helpers/process.js";

const { clients, backend, dir: tempDir } = processTestKit();

function config(listenPort: number, adminPort: number, upstream: string, extra = ""): string {
  return [
    "admin:",
    `  address: 127.0.0.1:${adminPort}`,
    "  mutations: true",
    "listeners:",
    "  - name: main",
    `    address: 127.0.0.1:${listenPort}`,
    "    routes:",
    '      - match: { prefix: "/" }',
    "        cluster: backend",
    "clusters:",
    `  - { name: backend, endpoints: ["${upstream}"]${extra} }`,
    "workers: 2",
    "drainTimeout: 5s",
    "logLevel: info",
    "accessLog: false",
    "",
  ].join("\n");
}

/** Upstream names answering `k` calls, each on a fresh connection (the primary hands connections to the workers in turn). */
async function namesOver(listen: string, k: number): Promise<string[]> {
  const rs = await Promise.all(
    Array.from({ length: k }, () => unary(ownConnectionClient(listen, clients), Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 5000 })),
  );
  return rs.map((r) => (r.err === null ? r.res!.toString() : `error ${r.err.code}`));
}

/** `config(…, upstream)` in a fresh directory, started and ready. */
async function startOn(upstream: string) {
  const [listenPort, adminPort] = [await freePort(), await freePort()];
  const dir = tempDir();
  const admin = `127.0.0.1:${adminPort}`;
  const file = dir.write("dojang.yaml", config(listenPort, adminPort, upstream));
  const p = spawnDojang(["--config", file]);
  await waitReady(p, admin, 15_000);
  return { p, dir, admin, listen: `127.0.0.1:${listenPort}`, listenPort, adminPort };
}

describe("workers: 2 reload", () => {
  it("POST /reload and SIGHUP reach every worker (all calls go to the new upstream), answered and logged once; an invalid file is refused once with its key paths", async () => {
    const [a, b, c] = [await backend("a"), await backend("b"), await backend("c")];
    const { p, dir, admin, listen, listenPort, adminPort } = await startOn(a.address);
    expect(await namesOver(listen, 6)).toEqual(Array(6).fill("a"));

    // POST /reload: the same cluster, another endpoint.
    dir.write("dojang.yaml", config(listenPort, adminPort, b.address));
    const res = await fetch(`http://${admin}/reload`, { method: "POST", signal: AbortSignal.timeout(10_000) });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ result: "ok", applied: ["clusters[0].endpoints"], notApplied: [] });
    expect((body["workers"] as number[]).length).toBe(2);
    expect(await namesOver(listen, 8)).toEqual(Array(8).fill("b"));

    // SIGHUP: another key of the cluster (a new Cluster in each worker).
    dir.write("dojang.yaml", config(listenPort, adminPort, c.address, ", lb: random"));
    process.kill(p.pid, "SIGHUP");
    const line = await waitFor("the SIGHUP reload line", () => logLines(p).find((l) => l["trigger"] === "SIGHUP"), 10_000);
    expect(line).toMatchObject({ msg: "config reloaded", applied: ["clusters[0].endpoints", "clusters[0].lb"], missing: [], failed: [] });
    expect(line["workers"]).toHaveLength(2);
    expect(await namesOver(listen, 8)).toEqual(Array(8).fill("c"));

    // Invalid: the primary refuses it before any worker sees it.
    dir.write("dojang.yaml", config(listenPort, adminPort, a.address).replace("cluster: backend", "cluster: bakend"));
    const bad = await fetch(`http://${admin}/reload`, { method: "POST", signal: AbortSignal.timeout(10_000) });
    expect(bad.status).toBe(400);
    const badBody = (await bad.json()) as { result: string; issues: { path: string }[] };
    expect(badBody.result).toBe("error");
    expect(badBody.issues.map((i) => i.path)).toEqual(["listeners[0].routes[0].cluster"]);
    expect(await namesOver(listen, 4)).toEqual(Array(4).fill("c"));
    // one log line per reload, not one per worker
    expect(logLines(p).filter((l) => Array.isArray(l["applied"]))).toHaveLength(2);
    expect(logLines(p).filter((l) => l["msg"] === "reload failed; nothing changed")).toHaveLength(1);

    const m = (await httpGet(admin, "/metrics", 5000)).body;
    expect(sample(m, "dojang_config_reloads_total", { result: "ok" })).toBe(2);
    expect(sample(m, "dojang_config_reloads_total", { result: "error" })).toBe(1);
    // /config shows what the workers now serve
    expect((await httpGet(admin, "/config")).body).toContain(`"port": ${c.port}`);

    p.child.kill("SIGTERM");
    expect(await p.exited(15_000)).toEqual({ code: 0, signal: null });
  });

  it("a worker started after a reload (a replacement) serves the reloaded config", async () => {
    const [a, b] = [await backend("a"), await backend("b")];
    const { p, dir, admin, listen, listenPort, adminPort } = await startOn(a.address);
    dir.write("dojang.yaml", config(listenPort, adminPort, b.address));
    expect((await fetch(`http://${admin}/reload`, { method: "POST", signal: AbortSignal.timeout(10_000) })).status).toBe(200);
    // One worker dies; the primary forks a replacement from the reloaded text.
    const before = logLines(p).filter((l) => l["msg"] === "worker died; starting another").length;
    const worker = Number((await import("node:fs")).readFileSync(`/proc/${p.pid}/task/${p.pid}/children`, "utf8").trim().split(/\s+/)[0]);
    process.kill(worker, "SIGKILL");
    await waitFor("the replacement", () => (logLines(p).filter((l) => l["msg"] === "worker died; starting another").length > before ? true : undefined), 10_000);
    await waitReady(p, admin, 15_000);
    expect(await namesOver(listen, 8)).toEqual(Array(8).fill("b"));
  });
});

describe("workers: 2 and admin.readyClusters", () => {
  it("answers /ready 503 naming the cluster while the workers' health checks find no healthy endpoint, 200 once they do", async () => {
    const a = await backend("a");
    a.serving = false;
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const dir = tempDir();
    const admin = `127.0.0.1:${adminPort}`;
    const text = config(listenPort, adminPort, a.address, ", healthCheck: { interval: 100ms, timeout: 1s, unhealthyThreshold: 1, healthyThreshold: 1 }").replace(
      "  mutations: true\n",
      "  mutations: true\n  readyClusters: [backend]\n",
    );
    const p = spawnDojang(["--config", dir.write("dojang.yaml", text)]);
    const notReady = await waitFor(
      "503 from /ready",
      async () => {
        if (p.hasExited) throw new Error(p.stderr());
        const r = await httpGet(admin, "/ready", 3000).catch(() => undefined);
        return r?.status === 503 && r.body.startsWith("cluster") ? r : undefined;
      },
      15_000,
      100,
    );
    expect(notReady.body).toMatch(/^cluster backend has no healthy endpoint \(worker \d+\)\n$/);
    a.serving = true;
    await waitReady(p, admin, 10_000);
    expect((await httpGet(admin, "/ready")).body).toBe("ready\n");
  });
});
