import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import {
  DEFAULT_BUFFERS,
  DEFAULT_SEMI_SPACE_MIB,
  MIN_PROCESS_BYTES,
  NATIVE_RESERVE_BYTES,
  PRIMARY_RESERVE_BYTES,
  cgroupMemoryLimit,
  memoryPlan,
  minimumLimitBytes,
  parseCgroupMemoryLimit,
  planFromEnv,
} from "../../src/config/memory.js";
import { parseConfigText } from "../../src/config/parse.js";
import { launch } from "../../src/launch.js";
import { readCgroupMemoryLimit } from "../../src/proxy/observe/heap.js";

/** The memory plan launch() derives for a command line (src/cli.ts uses it with the handover). */
const launchPlan = async (argv: readonly string[], env: NodeJS.ProcessEnv) => (await launch(argv, env))?.plan;
const MiB = 1_048_576;
/** What a plan reserves in one process: node itself, the young generation (3 × semi), the old generation, the buffers. */
const planned = (p: ReturnType<typeof memoryPlan>): number => NATIVE_RESERVE_BYTES + 3 * p.semiSpaceMiB * MiB + (p.oldSpaceMiB ?? 0) * MiB + p.buffers.processBytes;

const workersArb = fc.integer({ min: 1, max: 64 });
/** a limit the config accepts for `workers` (minimumLimitBytes up to 64 GiB) */
const validLimit = (w: number) => fc.integer({ min: minimumLimitBytes(w), max: 64 * 1024 * MiB });

describe("memoryPlan()", () => {
  it("128 MiB, one process: 2 MiB semi-space, 42 MiB old space, 16 MiB of buffers (4 MiB per connection)", () => {
    const p = memoryPlan(128 * MiB, "config", 1);
    expect(p).toMatchObject({ limitBytes: 128 * MiB, source: "config", perProcessBytes: 128 * MiB, semiSpaceMiB: 2, oldSpaceMiB: 42 });
    expect(p.buffers).toEqual({ processBytes: 16 * MiB, perConnectionBytes: 4 * MiB });
    expect(p.nodeFlags).toEqual(["--max-semi-space-size=2", "--max-old-space-size=42"]);
    expect(p.note).toBeUndefined();
  });

  it("no limit: only the default semi-space size, V8's old space, the default buffer budgets", () => {
    const p = memoryPlan(null, "none", 1);
    expect(p).toMatchObject({ limitBytes: null, source: "none", perProcessBytes: null, semiSpaceMiB: DEFAULT_SEMI_SPACE_MIB, oldSpaceMiB: null });
    expect(p.buffers).toEqual(DEFAULT_BUFFERS);
    expect(p.nodeFlags).toEqual([`--max-semi-space-size=${DEFAULT_SEMI_SPACE_MIB}`]);
  });

  it("workers: N splits what the primary leaves: (limit − 80 MiB) / N each", () => {
    const p = memoryPlan(512 * MiB, "cgroup", 4);
    expect(p.perProcessBytes).toBe((512 * MiB - PRIMARY_RESERVE_BYTES) / 4);
    expect(p.source).toBe("cgroup");
    expect(planned(p)).toBeLessThanOrEqual(p.perProcessBytes!);
  });

  it("around the semi-space step (127 → 128 MiB) the old space does not shrink", () => {
    const below = memoryPlan(127 * MiB, "config", 1);
    const at = memoryPlan(128 * MiB, "config", 1);
    expect(below.semiSpaceMiB).toBe(1);
    expect(at.semiSpaceMiB).toBe(2);
    expect(at.oldSpaceMiB!).toBeGreaterThanOrEqual(below.oldSpaceMiB!);
  });

  it("never plans more than the limit: each process within its share, all of them within the limit", () => {
    fc.assert(
      fc.property(
        workersArb.chain((w) => fc.tuple(fc.constant(w), validLimit(w))),
        ([w, limit]) => {
          const p = memoryPlan(limit, "config", w);
          expect(p.note).toBeUndefined();
          expect(planned(p)).toBeLessThanOrEqual(p.perProcessBytes!);
          const all = (w === 1 ? 0 : PRIMARY_RESERVE_BYTES) + w * p.perProcessBytes!;
          expect(all).toBeLessThanOrEqual(limit);
        },
      ),
      { numRuns: 500 },
    );
  });

  it("is monotone in the limit: a larger limit never gives a smaller semi-space, old space or buffer budget", () => {
    // the semi-space doubles at 64 MiB × 2^k per process: limits near those steps, to the byte
    const nearStep = fc.tuple(fc.integer({ min: 0, max: 8 }), fc.integer({ min: -4 * MiB, max: 4 * MiB })).map(([k, d]) => 64 * MiB * 2 ** k + d);
    const anyLimit = fc.integer({ min: 0, max: 64 * 1024 * MiB });
    fc.assert(
      fc.property(workersArb, fc.oneof(nearStep, anyLimit), fc.integer({ min: 0, max: 8 * MiB }), (w, a, delta) => {
        const lo = Math.max(minimumLimitBytes(w), a);
        const hi = lo + delta;
        const p = memoryPlan(lo, "config", w);
        const q = memoryPlan(hi, "config", w);
        expect(q.semiSpaceMiB).toBeGreaterThanOrEqual(p.semiSpaceMiB);
        expect(q.oldSpaceMiB!).toBeGreaterThanOrEqual(p.oldSpaceMiB!);
        expect(q.buffers.processBytes).toBeGreaterThanOrEqual(p.buffers.processBytes);
        expect(q.buffers.perConnectionBytes).toBeGreaterThanOrEqual(p.buffers.perConnectionBytes);
      }),
      { numRuns: 500 },
    );
  });

  it("keeps sane floors and caps for any limit, even one below the floors (a cgroup's; the plan says so)", () => {
    fc.assert(
      fc.property(workersArb, fc.integer({ min: 1, max: 2 ** 50 - 1 }), (w, limit) => {
        const p = memoryPlan(limit, "cgroup", w);
        expect(p.semiSpaceMiB).toBeGreaterThanOrEqual(1);
        expect(p.semiSpaceMiB).toBeLessThanOrEqual(DEFAULT_SEMI_SPACE_MIB);
        expect(Number.isInteger(Math.log2(p.semiSpaceMiB))).toBe(true);
        expect(p.oldSpaceMiB!).toBeGreaterThanOrEqual(8);
        expect(Number.isInteger(p.oldSpaceMiB)).toBe(true);
        expect(p.buffers.processBytes).toBeGreaterThanOrEqual(2 * MiB);
        expect(p.buffers.processBytes).toBeLessThanOrEqual(DEFAULT_BUFFERS.processBytes);
        expect(p.buffers.perConnectionBytes).toBeGreaterThanOrEqual(1 * MiB);
        expect(p.buffers.perConnectionBytes).toBeLessThanOrEqual(Math.min(DEFAULT_BUFFERS.perConnectionBytes, p.buffers.processBytes));
        expect(p.note !== undefined).toBe(p.perProcessBytes! < MIN_PROCESS_BYTES);
      }),
      { numRuns: 500 },
    );
  });

  it("round-trips through the launcher's environment variable; anything else is no plan", () => {
    const p = memoryPlan(256 * MiB, "cgroup", 2);
    expect(planFromEnv(JSON.stringify(p))).toEqual(p);
    for (const bad of [undefined, "", "{", "null", "{}", '{"limitBytes":1}', JSON.stringify({ ...p, source: "x" }), JSON.stringify({ ...p, nodeFlags: [1] })]) {
      expect(planFromEnv(bad)).toBeUndefined();
    }
  });
});

describe("the cgroup's limit", () => {
  it.each([
    ["134217728\n", 134217728],
    ["max\n", undefined],
    ["9223372036854771712\n", undefined],
    ["0", undefined],
    ["-1", undefined],
    ["garbage", undefined],
    [undefined, undefined],
  ])("parseCgroupMemoryLimit(%j) = %s", (text, want) => {
    expect(parseCgroupMemoryLimit(text)).toBe(want);
  });

  it("v2: the process's own cgroup, then its parents; the lowest limit wins", () => {
    const files: Record<string, string> = {
      "/sys/fs/cgroup/pod/app/memory.max": "max\n",
      "/sys/fs/cgroup/pod/memory.max": "268435456\n",
      "/sys/fs/cgroup/memory.max": "max\n",
    };
    expect(cgroupMemoryLimit("0::/pod/app\n", (f) => files[f])).toEqual({ bytes: 268435456, file: "/sys/fs/cgroup/pod/memory.max" });
  });

  it("v1: the memory controller's line, memory.limit_in_bytes; the unlimited value is none", () => {
    const files: Record<string, string> = {
      "/sys/fs/cgroup/memory/t1/memory.limit_in_bytes": "134217728\n",
      "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
    };
    const procSelf = "12:cpu,cpuacct:/\n7:memory:/t1\n1:name=systemd:/init.scope\n";
    expect(cgroupMemoryLimit(procSelf, (f) => files[f])).toEqual({ bytes: 134217728, file: "/sys/fs/cgroup/memory/t1/memory.limit_in_bytes" });
  });

  it("a container that mounts its own cgroup as the root: the root file answers", () => {
    const files: Record<string, string> = { "/sys/fs/cgroup/memory.max": "134217728\n" };
    expect(cgroupMemoryLimit("0::/kubepods/burstable/pod1/abc\n", (f) => files[f])).toEqual({ bytes: 134217728, file: "/sys/fs/cgroup/memory.max" });
    expect(cgroupMemoryLimit(undefined, () => undefined)).toBeUndefined();
  });
});

describe("memory.limit in the config", () => {
  const doc = (extra: string) => `listeners: [{ name: a, address: "127.0.0.1:0", routes: [{ match: { prefix: "/" }, cluster: b }] }]\nclusters: [{ name: b, endpoints: ["127.0.0.1:1"] }]\n${extra}`;

  it("takes a size; null and absent are no limit", () => {
    const r = parseConfigText(doc("memory: { limit: 128MiB }"), {});
    expect(r.ok && r.config.memory).toEqual({ limitBytes: 128 * MiB });
    const n = parseConfigText(doc("memory: { limit: null }"), {});
    expect(n.ok && n.config.memory).toEqual({ limitBytes: null });
  });

  it.each([
    ["memory: { limit: 64MiB }", "memory.limit"],
    ["memory: { limit: lots }", "memory.limit"],
    ["memory: { limt: 128MiB }", "memory.limt"],
    ["workers: 4\nmemory: { limit: 128MiB }", "memory.limit"],
  ])("refuses %j, naming %s", (extra, path) => {
    const r = parseConfigText(doc(extra), {});
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.issues.map((i) => i.path)).toContain(path);
  });
});

describe("the launcher's plan (src/launch.ts)", () => {
  const yaml = (extra: string) => `listeners: [{ name: a, address: "127.0.0.1:0", routes: [{ match: { prefix: "/" }, cluster: b }] }]\nclusters: [{ name: b, endpoints: ["127.0.0.1:1"] }]\n${extra}`;
  const dir = mkdtempSync(join(tmpdir(), "dojang-launch-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string, text: string): string => {
    const p = join(dir, name);
    writeFileSync(p, text);
    return p;
  };
  const cgroup = readCgroupMemoryLimit();

  it("a memory key: the config is loaded and its limit and workers sized", async () => {
    const p = await launchPlan(["--config", file("a.yaml", yaml("workers: 2\nmemory: { limit: \"${LIMIT}\" }"))], { LIMIT: "512MiB" });
    expect(p).toMatchObject({ source: "config", limitBytes: 512 * MiB, workers: 2, perProcessBytes: (512 - 80) * 2 ** 19 });
  });

  it("no memory key: the cgroup's limit, else the no-limit plan", async () => {
    const p = await launchPlan(["--config", file("b.yaml", yaml("workers: 1"))], {});
    if (cgroup === undefined) expect(p).toEqual(memoryPlan(null, "none", 1));
    else expect(p).toMatchObject({ source: "cgroup", limitBytes: cgroup.bytes });
  });

  it("no plan where main.ts will report the error: invalid config, unreadable file, bad arguments, health", async () => {
    expect(await launchPlan(["--config", file("c.yaml", yaml("memory: { limit: 1MiB }"))], {})).toBeUndefined();
    expect(await launchPlan(["--config", join(dir, "missing.yaml")], {})).toBeUndefined();
    expect(await launchPlan(["--bogus"], {})).toBeUndefined();
    expect(await launchPlan(["health"], {})).toBeUndefined();
  });
});
