// A real memory cgroup for process tests (issue 13: "test it by running dojang under a real
// cgroup memory limit if the machine allows it"): cgroup v2 with the memory controller, or v1's
// memory hierarchy, when this process may create one (root). Tests skip with the reason string
// where it cannot. Test-only; imports nothing from src.
import { mkdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { CLI } from "./process.js";

export interface TestCgroup {
  readonly version: 1 | 2;
  readonly dir: string;
  readonly procs: string;
  read(file: string): string;
  remove(): void;
}

/** A fresh memory cgroup limited to `bytes` (swap too), or why not. */
export function makeCgroup(bytes: number): TestCgroup | string {
  const name = `dojang-test-${process.pid}-${Date.now()}`;
  const tryMake = (version: 1 | 2, parent: string, limitFile: string, swapFile: string): TestCgroup | string => {
    const dir = join(parent, name);
    try {
      mkdirSync(dir);
    } catch (err) {
      return `cannot create a cgroup under ${parent}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`;
    }
    const cg: TestCgroup = {
      version,
      dir,
      procs: join(dir, "cgroup.procs"),
      read: (f) => readFileSync(join(dir, f), "utf8"),
      remove: () => {
        try {
          rmdirSync(dir);
        } catch {
          /* still has a process (the afterEach kills it first); nothing else to do */
        }
      },
    };
    try {
      writeFileSync(join(dir, limitFile), String(bytes));
    } catch (err) {
      cg.remove();
      return `cannot set ${limitFile}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`;
    }
    try {
      // without swap accounting there is no such file: the memory limit alone then
      writeFileSync(join(dir, swapFile), version === 1 ? String(bytes) : "0");
    } catch {
      /* no swap limit available */
    }
    return cg;
  };
  let v2Reason = "cgroup v2 without the memory controller";
  try {
    const controllers = readFileSync("/sys/fs/cgroup/cgroup.controllers", "utf8");
    if (controllers.split(/\s+/).includes("memory")) {
      const own = /^0::(\/.*)$/m.exec(readFileSync("/proc/self/cgroup", "utf8"))?.[1] ?? "/";
      const r = tryMake(2, join("/sys/fs/cgroup", own), "memory.max", "memory.swap.max");
      if (typeof r !== "string") return r;
      v2Reason = r;
    }
  } catch {
    /* not v2 */
  }
  try {
    readFileSync("/sys/fs/cgroup/memory/memory.limit_in_bytes", "utf8");
  } catch {
    return `no writable memory cgroup (${v2Reason}; no cgroup v1 memory hierarchy)`;
  }
  // under this process's own memory cgroup where it exists (the test's processes stay inside
  // whatever holds the test runner), else under the hierarchy's root
  const ownV1 = /^\d+:(?:[^:]*,)?memory(?:,[^:]*)?:(\/.*)$/m.exec(readFileSync("/proc/self/cgroup", "utf8"))?.[1] ?? "/";
  let parent = join("/sys/fs/cgroup/memory", ownV1);
  try {
    readFileSync(join(parent, "memory.limit_in_bytes"), "utf8");
  } catch {
    parent = "/sys/fs/cgroup/memory";
  }
  return tryMake(1, parent, "memory.limit_in_bytes", "memory.memsw.limit_in_bytes");
}


/**
 * An entry script for spawnDojang's `cli` argument: the process joins the cgroup before anything
 * else runs (the launcher reads the limit right after), then loads the CLI.
 */
export function cgroupEntry(dir: { write(name: string, text: string): string }, cg: TestCgroup): string {
  return dir.write(
    "in-cgroup.mjs",
    `import { writeFileSync } from "node:fs";\nwriteFileSync(${JSON.stringify(cg.procs)}, String(process.pid));\nawait import(${JSON.stringify(pathToFileURL(CLI).href)});\n`,
  );
}

/** How many OOM kills the cgroup saw (v1 memory.oom_control, v2 memory.events). */
export function oomKills(cg: TestCgroup): number {
  const file = cg.version === 1 ? "memory.oom_control" : "memory.events";
  const m = /^oom_kill (\d+)$/m.exec(cg.read(file));
  // a kernel without the count (v1 before 4.13) must not read as "no OOM kill"
  if (m === null) throw new Error(`${file} has no oom_kill count on this kernel`);
  return Number(m[1]);
}

/**
 * The cgroup's peak memory use in bytes. It is never above the limit (the kernel reclaims or
 * kills first), and it is the limit itself once the kernel had to act: a process allocating past
 * a 64 MiB test cgroup was OOM-killed with the peak at 64.0 MiB. (v1's memory.failcnt stayed 0
 * then, with the memory+swap limit set as here: no use as a check.) So `peak < limit` says the
 * limit was never reached.
 */
export function cgroupPeak(cg: TestCgroup): number {
  return Number(cg.read(cg.version === 1 ? "memory.max_usage_in_bytes" : "memory.peak"));
}
