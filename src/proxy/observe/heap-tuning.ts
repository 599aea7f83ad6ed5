// The process-level memory settings a served dojang applies once: the memory budget's plan (the
// overload manager's buffer budgets, /config and the start-up line) and the heap tuners
// (shrinkHeapWhenIdle, concurrentMarking, the heap-pressure trigger). The CLI and each cluster
// worker call these; the library does not (its host owns the heap and V8's flags). Kept apart
// from heap.ts, which the launcher imports and which must stay free of the overload manager.
import type { Logger } from "pino";
import type { Config } from "../../config/index.js";
import { HeapShrinker, MarkingTuner, exposeGc, processMemoryPlan, type AppliedMemoryPlan } from "./heap.js";
import type { Metrics } from "./metrics.js";
import { heapPressure, responseBuffers } from "./overload.js";

/** What the tuners need of the instance (src/proxy/dojang.ts Dojang). */
export interface HeapHost {
  /** the plan this process runs with, once applied (applyMemoryPlan) */
  memoryPlan: AppliedMemoryPlan | undefined;
  readonly metrics: Metrics;
  /** bytes of messages in flight (concurrentMarking: auto follows them) */
  forwardedBytes(): number;
}

/**
 * The process-level heap settings, `shrinkHeapWhenIdle` and `concurrentMarking` (the CLI and
 * each cluster worker call this once the instance serves; the library does not, its host owns
 * the heap and V8's flags).
 */
export function startHeapTuning(d: HeapHost, config: Config, log: Logger): { shrinker: HeapShrinker; marking: MarkingTuner } {
  applyMemoryPlan(d, config);
  const live = d.metrics.live;
  const marking = new MarkingTuner(config.concurrentMarking, () => d.forwardedBytes(), log, (on) => (live.concurrentMarking = on ? 1 : 0));
  marking.start();
  const shrinker = new HeapShrinker(config.shrinkHeapWhenIdleMs, () => live, log, () => d.metrics.heapShrinks.inc());
  shrinker.start();
  // the overload manager's heap trigger (observe/overload.ts): new streams refused near V8's heap
  // limit; and the buffers of calls it cuts given back at once
  const gc = exposeGc();
  heapPressure.start(gc);
  responseBuffers.releaseWith(gc);
  return { shrinker, marking };
}

/**
 * The memory budget of this process (the launcher's plan, src/cli.ts): the overload manager's
 * buffer budgets follow it, and /config and the start-up line show it. Once per process (the CLI
 * calls it before start(), so the start-up line has it; cluster workers through startHeapTuning).
 */
export function applyMemoryPlan(d: HeapHost, config: Config): AppliedMemoryPlan {
  if (d.memoryPlan !== undefined) return d.memoryPlan;
  const plan = processMemoryPlan(config.memory.limitBytes, config.workers);
  responseBuffers.budgets = plan.buffers;
  d.memoryPlan = plan;
  return plan;
}

const MIB = 1_048_576;

/** The plan in the start-up line: MiB, where the limit came from, whether node got the flags. */
export function memoryLine(p: AppliedMemoryPlan): Record<string, unknown> {
  return {
    limit_mib: p.limitBytes === null ? null : Math.round(p.limitBytes / MIB),
    source: p.source,
    per_process_mib: p.perProcessBytes === null ? null : Math.round(p.perProcessBytes / MIB),
    semi_space_mib: p.semiSpaceMiB,
    old_space_mib: p.oldSpaceMiB,
    heap_limit_mib: Math.round(p.heapSizeLimitBytes / MIB),
    buffers_per_connection_mib: Math.round((p.buffers.perConnectionBytes / MIB) * 10) / 10,
    buffers_process_mib: Math.round((p.buffers.processBytes / MIB) * 10) / 10,
    flags_applied: p.applied,
    ...(p.note === undefined ? {} : { note: p.note }),
  };
}
