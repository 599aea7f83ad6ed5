// Give memory back when the proxy goes quiet (in the spirit of Envoy's overload action
// `shrink_heap`). V8 grows the young generation under load (to 2 × 64 MiB on Node 24) and never
// shrinks it while idle, so a sidecar that served one burst would keep its peak RSS for the
// rest of its life. After `shrinkHeapWhenIdle` with no call started and none in flight, dojang
// runs one memory-reducing major GC (V8's "last resort" flavour: it compacts and shrinks the
// new space back to its minimum), and once right after start-up, when the config parsing's
// garbage is gone. Measured (bench/results, held-10k then idle): see the README's memory section.
//
// The CLI and cluster workers run it; the library (startDojang) does not: a host process owns
// its own heap.
import v8 from "node:v8";
import vm from "node:vm";
import type { Logger } from "pino";

type GcFn = (opts?: { type?: "major" | "minor"; execution?: "sync" | "async"; flavor?: "regular" | "last-resort" }) => void;

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
    this.gc = idleMs > 0 ? exposeGc() : undefined;
    this.st = newIdleState(performance.now(), activity());
    if (idleMs > 0 && this.gc === undefined) log.warn("shrinkHeapWhenIdle: cannot reach node's gc(); the heap is left to V8");
  }

  /** Shrinks once now (after start-up) and then whenever the proxy has been idle for idleMs. */
  start(): void {
    if (this.gc === undefined) return;
    this.shrink("startup");
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
