// A config snapshot: everything the data plane reads from the config, compiled once and immutable
// — the clusters, and per listener its route table and filter chain. Calls read their listener's
// part once, at their start (RoutesCell), and keep it to their end; a reload builds a new
// snapshot and Dojang swaps it in. Imports run one way: nothing below src/proxy/dojang.ts
// imports this file.
import type { Logger } from "pino";
import type { Config } from "../config/index.js";
import { DojangError } from "../errors.js";
import type { ListenerRoutes } from "./call/call.js";
import { compileFilterChain } from "./call/filter.js";
import { faultFilterFactory, type FaultCounter } from "./filters/fault-exec/filter.js";
import type { FaultSet } from "./filters/fault/index.js";
import type { Metrics } from "./observe/metrics.js";
import { compileRoutes } from "./router.js";
import { Cluster } from "./upstream/cluster.js";

/** What a snapshot is built with that outlives it (process-wide state, reused by every snapshot). */
export interface SnapshotDeps {
  readonly metrics: Metrics;
  readonly log: Logger;
  /** every fault rule (config and API); the set outlives snapshots, the API edits it in place */
  readonly faults: FaultSet;
  readonly faultCounter: FaultCounter;
  /** monotonic milliseconds */
  readonly now: () => number;
}

export interface Snapshot {
  /** 1 for the config dojang started with, +1 per swap */
  readonly version: number;
  readonly config: Config;
  readonly clusters: ReadonlyMap<string, Cluster>;
  /** by listener name */
  readonly listeners: ReadonlyMap<string, ListenerRoutes>;
}

/**
 * Builds a snapshot. `clusterFor` may hand back a cluster to keep (a reload keeps the sessions of
 * clusters that remain); by default every cluster is new.
 */
export function buildSnapshot(
  config: Config,
  deps: SnapshotDeps,
  version: number,
  clusterFor: (cfg: Config["clusters"][number]) => Cluster = (c) => new Cluster(c, deps.metrics, deps.log),
): Snapshot {
  const clusters = new Map<string, Cluster>();
  for (const c of config.clusters) clusters.set(c.name, clusterFor(c));
  const listeners = new Map<string, ListenerRoutes>();
  for (const l of config.listeners) {
    const router = compileRoutes(l.routes, (name) => {
      const c = clusters.get(name);
      // The config parser rejects unknown clusters; reaching this is a bug.
      if (c === undefined) throw new DojangError("DOJANG_ERR_INTERNAL", `route names unknown cluster ${name}`);
      return c;
    });
    const filters = compileFilterChain([
      faultFilterFactory({
        listener: l.name,
        headers: l.faultHeaders,
        trailer: l.faultTrailer,
        seed: config.faultInjection.seed,
        set: deps.faults,
        counter: deps.faultCounter,
        metrics: deps.metrics,
        log: deps.log,
        now: deps.now,
      }),
    ]);
    listeners.set(l.name, Object.freeze({ router, filters }));
  }
  return Object.freeze({ version, config, clusters, listeners });
}
