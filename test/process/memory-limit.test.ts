// The memory budget in real dojang processes (dist/cli.js): `memory.limit` becomes V8's sizes
// (the launcher re-executes node with them) and the plan shows in /config and the start-up line;
// and, where this machine lets the test make a memory cgroup (root, cgroup v1 or v2 with the
// memory controller), a dojang started inside a 128 MiB cgroup picks that limit up by itself and
// serves 50 connections × 20 streams of unary calls for 5 s without being OOM-killed.
import { readFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { makeCgroup, cgroupEntry } from "../helpers/cgroup.js";
import { assertDistBuilt, childEnv, CLI, configYaml, freePort, httpGet, killSpawned, logLine, logLines, runCli, sleep, spawnDojang, spawnGroup, tempDir, waitFor, waitReady } from "../helpers/process.js";
import { echoClient, startGrpcServer, unary, type EchoClient, type GrpcServer } from "../helpers/peers.js";

const MiB = 1_048_576;
let up: GrpcServer | undefined;
const dirs: { remove(): void }[] = [];
const clients: EchoClient[] = [];
beforeAll(() => assertDistBuilt());
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  await killSpawned();
  await up?.close();
  up = undefined;
  for (const d of dirs.splice(0)) d.remove();
});

async function startUpstream(): Promise<string> {
  up = await startGrpcServer({ Unary: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, c.request) });
  return up.address;
}

interface PlanShown {
  limitBytes: number | null;
  source: string;
  semiSpaceMiB: number;
  oldSpaceMiB: number | null;
  buffers: { perConnectionBytes: number; processBytes: number };
  applied: boolean;
  heapSizeLimitBytes: number;
}

async function planOf(admin: string): Promise<PlanShown> {
  const r = await httpGet(admin, "/config", 2000);
  return (JSON.parse(r.body) as { memory: { plan: PlanShown } }).memory.plan;
}

describe("memory.limit (no cgroup needed)", () => {
  it("128MiB in the config: node runs with the derived V8 sizes, /config and the start-up line say so", async () => {
    const upstream = await startUpstream();
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const dir = tempDir();
    dirs.push(dir);
    const file = dir.write("dojang.yaml", configYaml({ listenPort, adminPort, upstream, extraTop: "memory: { limit: 128MiB }\naccessLog: false" }));
    const p = spawnDojang(["--config", file]);
    const admin = `127.0.0.1:${adminPort}`;
    await waitReady(p, admin);
    const plan = await planOf(admin);
    expect(plan).toMatchObject({ limitBytes: 128 * MiB, source: "config", semiSpaceMiB: 2, oldSpaceMiB: 42, applied: true });
    expect(plan.buffers).toEqual({ perConnectionBytes: 4 * MiB, processBytes: 16 * MiB });
    // V8's own figure, read in the served process: the old space cap plus the young generation
    // (node's default heap limit on this machine is gigabytes)
    expect(plan.heapSizeLimitBytes).toBeGreaterThanOrEqual(42 * MiB);
    expect(plan.heapSizeLimitBytes).toBeLessThanOrEqual((42 + 3 * 2 + 2) * MiB);
    const started = logLines(p).find((l) => l["msg"] === "dojang started");
    expect(started?.["memory"]).toMatchObject({ limit_mib: 128, source: "config", semi_space_mib: 2, old_space_mib: 42, flags_applied: true });
    // and it serves
    const c = echoClient(`127.0.0.1:${listenPort}`);
    clients.push(c);
    expect((await unary(c, Buffer.from("hi"))).err).toBeNull();
  });

  it("workers: 2 — each worker gets (limit − 80 MiB) / 2 and runs with its flags; the primary's /config shows the plan", { timeout: 30_000 }, async () => {
    const upstream = await startUpstream();
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const dir = tempDir();
    dirs.push(dir);
    const file = dir.write("dojang.yaml", configYaml({ listenPort, adminPort, upstream, extraTop: "workers: 2\nmemory: { limit: 512MiB }\naccessLog: false" }));
    const p = spawnDojang(["--config", file]);
    const admin = `127.0.0.1:${adminPort}`;
    await waitReady(p, admin, 20_000);
    const plan = await planOf(admin);
    const share = (512 * MiB - 80 * MiB) / 2;
    expect(plan).toMatchObject({ limitBytes: 512 * MiB, source: "config", semiSpaceMiB: 2, applied: true });
    expect((plan as unknown as { perProcessBytes: number }).perProcessBytes).toBe(share);
    const workers = readFileSync(`/proc/${p.pid}/task/${p.pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean);
    expect(workers.length).toBe(2);
    for (const w of workers) {
      const argv = readFileSync(`/proc/${w}/cmdline`, "utf8").split("\0");
      expect(argv).toContain(`--max-old-space-size=${plan.oldSpaceMiB}`);
      expect(argv).toContain("--max-semi-space-size=2");
    }
  });

  it("node flags given on the command line win over the plan's (they come after)", async () => {
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const dir = tempDir();
    dirs.push(dir);
    const file = dir.write("dojang.yaml", configYaml({ listenPort, adminPort, extraTop: "memory: { limit: 128MiB }" }));
    const proc = spawnGroup(process.execPath, ["--max-old-space-size=200", CLI, "--config", file], { env: childEnv(), stdio: "ignore" });
    try {
      const plan = await waitFor("/config", () => planOf(`127.0.0.1:${adminPort}`), 10_000, 100);
      expect(plan.heapSizeLimitBytes).toBeGreaterThan(150 * MiB);
    } finally {
      proc.kill("SIGKILL");
    }
  });

  it("a limit too small for the workers is refused by name, exit 2, as any config error", async () => {
    const dir = tempDir();
    dirs.push(dir);
    const file = dir.write("dojang.yaml", configYaml({ listenPort: 0, extraTop: "workers: 4\nmemory: { limit: 128MiB }" }));
    const r = await runCli(["--config", file]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/memory\.limit: .*too small for 4 workers/);
  });
});

// === a real memory cgroup ===

describe("under a real 128 MiB memory cgroup", () => {
  it("picks the cgroup's limit up, serves 50 connections × 20 streams for 5 s, is not OOM-killed", { timeout: 60_000 }, async (ctx) => {
    const cg = makeCgroup(128 * MiB);
    if (typeof cg === "string") {
      ctx.skip(`needs a memory cgroup this test can create: ${cg}`);
      return;
    }
    try {
      const upstream = await startUpstream();
      const [listenPort, adminPort] = [await freePort(), await freePort()];
      const dir = tempDir();
      dirs.push(dir);
      const file = dir.write("dojang.yaml", configYaml({ listenPort, adminPort, upstream, extraTop: "accessLog: false" }));
      // the process joins the cgroup before anything else runs (the launcher reads the limit
      // right after): a small entry that writes its pid into cgroup.procs, then loads the CLI
      const entry = cgroupEntry(dir, cg);
      const p = spawnDojang(["--config", file], childEnv(), entry);
      const admin = `127.0.0.1:${adminPort}`;
      await waitReady(p, admin);
      expect(cg.read("cgroup.procs").split("\n")).toContain(String(p.pid));
      const plan = await planOf(admin);
      expect(plan).toMatchObject({ limitBytes: 128 * MiB, source: "cgroup", semiSpaceMiB: 2, oldSpaceMiB: 42, applied: true });
      expect((await logLine(p, (l) => l["msg"] === "dojang started", "dojang started"))["memory"]).toMatchObject({ limit_mib: 128, source: "cgroup" });

      // 50 connections × 20 streams of 100 B unary calls, for 5 s
      const body = Buffer.alloc(100, 1);
      const until = Date.now() + 5000;
      let ok = 0;
      const failures: string[] = [];
      const conns = Array.from({ length: 50 }, () => {
        const c = echoClient(`127.0.0.1:${listenPort}`, { "grpc.use_local_subchannel_pool": 1 });
        clients.push(c);
        return c;
      });
      await Promise.all(
        conns.flatMap((c) =>
          Array.from({ length: 20 }, async () => {
            while (Date.now() < until) {
              const r = await unary(c, body, new grpc.Metadata(), { deadline: Date.now() + 10_000 });
              if (r.err === null) ok++;
              else if (failures.length < 5) failures.push(r.err.message);
            }
          }),
        ),
      );
      expect(failures).toEqual([]);
      expect(ok).toBeGreaterThan(1000);
      await sleep(200);
      expect(p.hasExited).toBe(false);
      const rss = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${p.pid}/status`, "utf8"))?.[1];
      if (cg.version === 1) {
        expect(cg.read("memory.oom_control")).toMatch(/^oom_kill 0$/m);
        const peak = Number(cg.read("memory.max_usage_in_bytes"));
        ctx.annotate(`calls ${ok}; cgroup peak ${(peak / MiB).toFixed(1)} MiB; dojang peak RSS ${(Number(rss) / 1024).toFixed(1)} MiB; failcnt ${cg.read("memory.failcnt").trim()}`);
        expect(peak).toBeLessThan(128 * MiB);
      } else {
        expect(cg.read("memory.events")).toMatch(/^oom_kill 0$/m);
        const peak = Number(cg.read("memory.peak"));
        ctx.annotate(`calls ${ok}; cgroup peak ${(peak / MiB).toFixed(1)} MiB; dojang peak RSS ${(Number(rss) / 1024).toFixed(1)} MiB`);
        expect(peak).toBeLessThan(128 * MiB);
      }
      // (VmHWM, annotated above, also counts node's code pages, file-backed and shared, which the
      // cgroup here did not fault in; the cgroup's own peak is what its limit enforces)
    } finally {
      for (const c of clients.splice(0)) c.close();
      await killSpawned();
      // the cgroup is empty once its process is gone
      await waitFor("the test cgroup to empty", () => (cg.read("cgroup.procs").trim() === "" ? true : undefined), 5000, 50).catch(() => undefined);
      cg.remove();
    }
  });
});
