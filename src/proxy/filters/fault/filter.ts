// The fault filter's factory (the wire side, beside exec.ts): built once per listener, it picks
// the faults for each call (rules from the config and the admin API, and request headers when
// the listener allows them) and returns the per-call executor (exec.ts), or null. Null-cheap when no rule exists: one size test
// per call and no allocation, since rules may be added through the admin API at any time.
import type { Logger } from "pino";
import type { FaultParsers } from "../../../config/parsers.js";
import type { CallFilter, FilterCall, FilterFactory } from "../../call/filter.js";
import { rawGet } from "../../call/headers.js";
import type { Metrics } from "../../observe/metrics.js";
import type { CompiledRoute } from "../../router.js";
import type { Cluster } from "../../upstream/cluster.js";
import { FaultExec } from "./exec.js";
import { faultsFromHeaders } from "./headers.js";
import { mulberry32 } from "./prng.js";
import { select, type FaultSet } from "./select.js";

/** How many calls run a fault right now (maxActiveFaults), shared by every listener of a process. */
export interface FaultCounter {
  active: number;
}

export interface FaultFilterOptions {
  readonly listener: string;
  /**
   * x-dojang-fault and Envoy's x-envoy-fault-* request headers are honoured, read with these
   * parsers (the config's, loaded on demand: src/config/parsers.ts); null: not read
   */
  readonly headers: FaultParsers | null;
  /** every faulted status carries x-dojang-fault: <rule ids> */
  readonly trailer: boolean;
  readonly seed: number;
  readonly set: FaultSet;
  readonly counter: FaultCounter;
  readonly metrics: Metrics;
  readonly log: Logger;
  /** monotonic milliseconds */
  readonly now: () => number;
}

export function faultFilterFactory(o: FaultFilterOptions): FilterFactory {
  const rand = mulberry32(o.seed ^ 0x5eed);
  const { set, log, counter, metrics, listener, seed, trailer, headers } = o;
  const release = (): void => {
    counter.active--;
  };
  return {
    forCall(call: FilterCall, route: CompiledRoute<Cluster>, raw: readonly string[]): CallFilter | null {
      let hActions: ReturnType<typeof faultsFromHeaders>["actions"] | undefined;
      if (headers !== null) {
        const h = faultsFromHeaders((n) => rawGet(raw, n), rand, headers);
        if (h.errors.length > 0) log.info({ request_id: call.requestId, errors: h.errors }, "fault headers ignored");
        if (h.actions.length > 0) hActions = h.actions;
      }
      if (set.size === 0 && hActions === undefined) return null;
      const ids: string[] = [];
      const actions = select(
        set,
        {
          listener,
          routeLabel: route.label,
          routeIndex: route.index,
          service: call.series.service,
          method: call.series.method,
          metadata: (n) => rawGet(raw, n),
          nowMs: o.now(),
        },
        counter.active,
        hActions,
        ids,
      );
      if (actions === null || actions.length === 0) return null;
      for (let i = 0; i < actions.length; i++) metrics.faultsInjected.labels(ids[i] ?? "header", actions[i]!.kind).inc();
      counter.active++;
      return new FaultExec(call, actions, ids, seed, trailer, release);
    },
  };
}
