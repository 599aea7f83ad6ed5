// Give memory back when the proxy goes quiet (in the spirit of Envoy's overload action
// `shrink_heap`). V8 grows the young generation under load (to 2 × 64 MiB on Node 24) and never
// shrinks it while idle, so a sidecar that served one burst would keep its peak RSS for the
// rest of its life. Once right after start-up, when the config parsing's garbage is gone, and
// (opt-in) after `shrinkHeapWhenIdle` with no call started and none in flight, dojang runs one
// memory-reducing major GC (V8's "last resort" flavour: it compacts and shrinks the new space
// back to its minimum).
//
// The idle shrink is off by default because it has a price, measured A/B on one pinned CPU
// (10 conns × 10 streams): for many seconds after a shrink that followed load, dojang spends
// 1.6-1.8x the CPU per call (about 110 µs against 66 µs; still ~100 µs 8 s into the next load),
// with 2.3x the scavenges and 3x the mark-compact time: the heap limits V8 derives from the
// shrunken heap keep it collecting. A regular (not last-resort) major GC costs the same and
// gives nothing back. The start-up shrink costs nothing measurable (the heap is small then).
//
// The CLI and cluster workers run it; the library (startDojang) does not: a host process owns
// its own heap.
import { readFileSync } from "node:fs";
import { availableParallelism, totalmem } from "node:os";
import v8 from "node:v8";
import vm from "node:vm";
import type { Logger } from "pino";
import type { ConcurrentMarkingMode } from "../../config/index.js";
// memory.ts itself, not the config barrel: the launcher (src/launch.ts) imports this file and must
// not load the config schema unless it needs it
import { MEMORY_PLAN_ENV, cgroupMemoryLimit, memoryPlan, planFromEnv, type MemoryPlan } from "../../config/memory.js";

/** node's gc(), as exposeGc gives it (observe/overload.ts's guards take it too) */
export type GcFn = (opts?: { type?: "major" | "minor"; execution?: "sync" | "async"; flavor?: "regular" | "last-resort" }) => void;

/**
 * node's gc(), exposed on demand: a `--expose-gc` flag set at run time applies to contexts made
 * afterwards, so a fresh vm context hands it over. undefined when that is not possible.
 */
export function exposeGc(): GcFn | undefined {
  const g = (globalThis as { gc?: unknown }).gc;
  if (typeof g === "function") return g as GcFn;
  try {
    v8.setFlagsFromString("--expose-gc");
    const fn: unknown = vm.runInNewContext("gc");
    return typeof fn === "function" ? (fn as GcFn) : undefined;
  } catch {
    return undefined;
  }
}

/** What the shrinker watches: a counter of calls started and the calls in flight. */
export interface Activity {
  readonly startedCalls: number;
  readonly activeCalls: number;
}

/** The decision, pure: idle since when, and whether a shrink is due now. */
export interface IdleState {
  lastStarted: number;
  idleSinceMs: number;
  /** calls ran since the last shrink (nothing to give back otherwise) */
  dirty: boolean;
}

export function newIdleState(nowMs: number, a: Activity): IdleState {
  return { lastStarted: a.startedCalls, idleSinceMs: nowMs, dirty: false };
}

/** Updates `st` with a sample; true when the heap should be shrunk now (then `dirty` is cleared). */
export function idleTick(st: IdleState, nowMs: number, a: Activity, idleMs: number): boolean {
  if (a.startedCalls !== st.lastStarted || a.activeCalls > 0) {
    st.lastStarted = a.startedCalls;
    st.idleSinceMs = nowMs;
    st.dirty = true;
    return false;
  }
  if (!st.dirty || nowMs - st.idleSinceMs < idleMs) return false;
  st.dirty = false;
  return true;
}

export interface ShrinkResult {
  readonly rssBeforeBytes: number;
  readonly rssAfterBytes: number;
  readonly ms: number;
}

export class HeapShrinker {
  private readonly gc: GcFn | undefined;
  private readonly st: IdleState;
  private timer: NodeJS.Timeout | undefined;
  shrinks = 0;

  constructor(
    private readonly idleMs: number,
    private readonly activity: () => Activity,
    private readonly log: Logger,
    private readonly onShrink: (r: ShrinkResult) => void = () => {},
  ) {
    this.gc = exposeGc();
    this.st = newIdleState(performance.now(), activity());
    if (this.gc === undefined) log.warn("shrinkHeapWhenIdle: cannot reach node's gc(); the heap is left to V8");
  }

  /** Shrinks once now (after start-up) and then, with idleMs > 0, whenever the proxy has been
   * idle for idleMs. */
  start(): void {
    if (this.gc === undefined) return;
    this.shrink("startup");
    if (this.idleMs <= 0) return;
    // Sample four times per idle period: a shrink is at most a quarter period late.
    const every = Math.max(50, Math.floor(this.idleMs / 4));
    this.timer = setInterval(() => {
      if (idleTick(this.st, performance.now(), this.activity(), this.idleMs)) this.shrink("idle");
    }, every);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  private shrink(why: "startup" | "idle"): void {
    const before = process.memoryUsage.rss();
    const t0 = performance.now();
    this.gc!({ type: "major", execution: "sync", flavor: "last-resort" });
    const r: ShrinkResult = { rssBeforeBytes: before, rssAfterBytes: process.memoryUsage.rss(), ms: performance.now() - t0 };
    this.shrinks++;
    this.onShrink(r);
    this.log[why === "idle" ? "info" : "debug"]({ why, rss_before_mib: mib(r.rssBeforeBytes), rss_after_mib: mib(r.rssAfterBytes), ms: Math.round(r.ms * 10) / 10 }, "heap shrunk");
  }
}

function mib(b: number): number {
  return Math.round((b / 1_048_576) * 10) / 10;
}

// === concurrent marking ===
//
// V8 marks the old generation on a helper thread while JavaScript runs ("concurrent marking"),
// with a write barrier on the main thread for as long as marking lasts. With a core to spare
// that is a gain. On one CPU (a pinned process, or a container limited to one core, the usual
// sidecar) the helper competes with the proxy for that CPU, and under a high byte rate marking
// never stops: each socket read of a streaming call is a 64 KiB ArrayBuffer, and that external
// memory keeps starting new marking cycles. Measured on one pinned CPU (bench/results, A/B in
// one run): server streaming 64 KiB messages 1.7-2.0x MB/s and unary 1 MiB 1.5x calls/s with
// concurrent marking off, but unary 100 B about 10% more CPU per call. So `concurrentMarking:
// auto` turns it off only while dojang forwards bytes fast, and only when it has one CPU.

/** auto: off above this many forwarded bytes per second, on again below the lower figure. */
export const MARKING_OFF_ABOVE_BYTES_PER_SEC = 32 * 1_048_576;
export const MARKING_ON_BELOW_BYTES_PER_SEC = 8 * 1_048_576;

/** The byte-rate decision, pure: the current choice, the rate, the next choice (with hysteresis). */
export function wantConcurrentMarking(current: boolean, bytesPerSec: number): boolean {
  if (current) return bytesPerSec <= MARKING_OFF_ABOVE_BYTES_PER_SEC;
  return bytesPerSec < MARKING_ON_BELOW_BYTES_PER_SEC;
}

/**
 * CPUs this process may use: the affinity mask (taskset, cpusets) and a cgroup v2 CPU quota
 * (`cpu.max`, what a Kubernetes CPU limit becomes), whichever is lower, rounded up.
 */
export function usableCpus(cpuMax: string | undefined = readCgroupCpuMax()): number {
  let n = availableParallelism();
  const q = parseCpuMax(cpuMax);
  if (q !== undefined && q < n) n = q;
  return n;
}

/** "200000 100000" → 2; "50000 100000" → 1; "max 100000", garbage or nothing → undefined. */
export function parseCpuMax(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const [quota, period] = text.trim().split(/\s+/);
  const q = Number(quota);
  const p = Number(period ?? "100000");
  if (!Number.isFinite(q) || !Number.isFinite(p) || q <= 0 || p <= 0) return undefined;
  return Math.max(1, Math.ceil(q / p));
}

function readCgroupCpuMax(): string | undefined {
  try {
    return readFileSync("/sys/fs/cgroup/cpu.max", "utf8");
  } catch {
    return undefined;
  }
}

/** Applies `concurrentMarking` and, in auto mode on one CPU, follows the byte rate. */
export class MarkingTuner {
  /** V8's setting as dojang last set it (true = V8's default, concurrent marking on) */
  on = true;
  /** how many times auto mode switched it */
  switches = 0;
  private timer: NodeJS.Timeout | undefined;
  private lastBytes = 0;
  private lastMs = 0;

  constructor(
    readonly mode: ConcurrentMarkingMode,
    private readonly bytes: () => number,
    private readonly log: Logger,
    private readonly onChange: (on: boolean) => void = () => {},
    private readonly cpus: number = usableCpus(),
  ) {}

  /** true when auto mode follows the byte rate (one CPU); off/on are fixed at start. */
  get adaptive(): boolean {
    return this.mode === "auto" && this.cpus <= 1;
  }

  start(everyMs = 250): void {
    if (this.mode === "off") this.set(false);
    if (!this.adaptive) return;
    this.lastBytes = this.bytes();
    this.lastMs = performance.now();
    this.timer = setInterval(() => this.tick(), everyMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  private tick(): void {
    const now = performance.now();
    const b = this.bytes();
    const rate = ((b - this.lastBytes) * 1000) / Math.max(1, now - this.lastMs);
    this.lastBytes = b;
    this.lastMs = now;
    const want = wantConcurrentMarking(this.on, rate);
    if (want !== this.on) {
      this.set(want);
      this.switches++;
      this.log.debug({ concurrent_marking: want, mib_per_s: Math.round(rate / 1048576) }, "concurrent marking switched");
    }
  }

  private set(on: boolean): void {
    v8.setFlagsFromString(on ? "--concurrent-marking" : "--no-concurrent-marking");
    this.on = on;
    this.onChange(on);
  }
}

// === the memory budget ===

function readText(file: string): string | undefined {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
}

/**
 * The memory limit of this process's cgroup (v2 memory.max, v1 memory.limit_in_bytes, the
 * lowest from its own cgroup up), or undefined: none, not Linux, or above the machine's memory
 * (a limit the machine cannot reach limits nothing).
 */
export function readCgroupMemoryLimit(): { bytes: number; file: string } | undefined {
  const r = cgroupMemoryLimit(readText("/proc/self/cgroup"), readText);
  return r === undefined || r.bytes >= totalmem() ? undefined : r;
}

/** The plan for `limitBytes` from the config, else the cgroup's limit, else none. */
export function planForConfig(limitBytes: number | null, workers: number): MemoryPlan {
  if (limitBytes !== null) return memoryPlan(limitBytes, "config", workers);
  const cg = readCgroupMemoryLimit();
  return cg === undefined ? memoryPlan(null, "none", workers) : memoryPlan(cg.bytes, "cgroup", workers);
}

/** What the process runs with: the launcher's plan and whether V8 got its flags. */
export interface AppliedMemoryPlan extends MemoryPlan {
  /** true when node was started with the plan's flags (the launcher re-executed it) */
  readonly applied: boolean;
  /** V8's heap limit as it stands (v8.getHeapStatistics().heap_size_limit) */
  readonly heapSizeLimitBytes: number;
}

/**
 * The plan of the running process: the one the launcher passed (DOJANG_MEMORY_PLAN, with the
 * flags node started with), else derived here from the config (applied: false; node's sizes
 * are V8's own then, e.g. where process.execve does not exist).
 */
export function processMemoryPlan(limitBytes: number | null, workers: number, env: NodeJS.ProcessEnv = process.env): AppliedMemoryPlan {
  const passed = planFromEnv(env[MEMORY_PLAN_ENV]);
  // without a limit the launcher may not have read the config (src/launch.ts): workers from here
  const plan = passed === undefined ? planForConfig(limitBytes, workers) : passed.limitBytes === null ? { ...passed, workers } : passed;
  const applied = plan.nodeFlags.every((f) => process.execArgv.includes(f));
  return { ...plan, applied, heapSizeLimitBytes: v8.getHeapStatistics().heap_size_limit };
}
