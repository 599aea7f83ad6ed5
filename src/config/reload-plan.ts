// What a reload does to the running listeners and clusters, decided before anything changes: a
// pure function of the running configs and the new one (Dojang.reload carries the plan out: binds
// the new listeners, builds the snapshot, swaps). Also the config a reload serves (configAsApplied:
// the keys that need a restart keep their running value).
import type { ClusterConfig, Config, ListenerConfig } from "./schema.js";

/** What becomes of one cluster of the new config. */
export type ClusterStep =
  /** the running cluster of that name carries on as it is */
  | "keep"
  /** the running cluster carries on with new endpoints (setEndpoints: those that stay keep their sessions) */
  | "move"
  /** a new cluster (a new name, or a key besides the endpoints changed: the old one is retired once idle) */
  | "new";

export interface ListenerStep {
  readonly cfg: ListenerConfig;
  /**
   * the index (in the running list) of the listener that serves it on, keeping its socket: the
   * one of that name on the same address, or a renamed one on the same address; undefined: a new
   * listener, bound before the swap
   */
  readonly keep: number | undefined;
}

export interface ReloadPlan {
  /** by cluster name, for each cluster of the new config */
  readonly clusters: ReadonlyMap<string, ClusterStep>;
  /** each listener of the new config, in its order */
  readonly listeners: readonly ListenerStep[];
  /** the indices of the running listeners no step keeps: they drain and close */
  readonly retiring: readonly number[];
}

/**
 * The plan for `next` over what runs: `listeners`, the running listeners' configs in order;
 * `clusters`, the config each running cluster runs by name (after earlier reloads' endpoint moves).
 */
export function planReload(listeners: readonly ListenerConfig[], clusters: ReadonlyMap<string, ClusterConfig>, next: Config): ReloadPlan {
  const steps = new Map<string, ClusterStep>();
  for (const cfg of next.clusters) {
    const running = clusters.get(cfg.name);
    if (running === undefined || !sameBesidesEndpoints(running, cfg)) steps.set(cfg.name, "new");
    else steps.set(cfg.name, JSON.stringify([running.endpoints, running.endpointWeights]) === JSON.stringify([cfg.endpoints, cfg.endpointWeights]) ? "keep" : "move");
  }
  const left = new Map(listeners.map((l, i) => [l.name, i]));
  const nextNames = new Set(next.listeners.map((l) => l.name));
  const out: ListenerStep[] = [];
  for (const l of next.listeners) {
    let old = left.get(l.name);
    // a renamed listener on the same address keeps its socket (a new one could not bind it)
    if (old === undefined) {
      const i = listeners.findIndex((x) => !nextNames.has(x.name) && left.has(x.name) && sameAddress(x, l));
      if (i >= 0) old = i;
    }
    if (old !== undefined && sameAddress(listeners[old]!, l)) {
      left.delete(listeners[old]!.name);
      out.push({ cfg: l, keep: old });
    } else out.push({ cfg: l, keep: undefined });
  }
  return { clusters: steps, listeners: out, retiring: [...left.values()] };
}

/** Same host and port (a listener that keeps its socket). */
export function sameAddress(a: ListenerConfig, b: ListenerConfig): boolean {
  // (gRPC-Web: a listener whose HTTP/1.1 socket comes, goes or moves is a new listener)
  const h = a.http1Address;
  const k = b.http1Address;
  const sameH1 = h === null || h === undefined || k === null || k === undefined ? (h ?? null) === (k ?? null) : h.host === k.host && h.port === k.port;
  return a.address.host === b.address.host && a.address.port === b.address.port && sameH1;
}

/** Whether two configs of one cluster differ only in their endpoints (and weights): kept, setEndpoints. */
export function sameBesidesEndpoints(a: ClusterConfig, b: ClusterConfig): boolean {
  const strip = (c: ClusterConfig): unknown => ({ ...c, endpoints: null, endpointWeights: null });
  return JSON.stringify(strip(a)) === JSON.stringify(strip(b));
}

/**
 * What a reload of `next` over `running` serves: `next`, but the keys that need a restart keep
 * their running value (reloadReport names them), so /config shows what really runs.
 */
export function configAsApplied(running: Config, next: Config): Config {
  return {
    ...next,
    workers: running.workers,
    admin: keptAdmin(running, next),
    journal: running.journal,
    faultInjection: running.faultInjection,
    watchConfig: running.watchConfig,
    xds: running.xds,
    shrinkHeapWhenIdleMs: running.shrinkHeapWhenIdleMs,
    concurrentMarking: running.concurrentMarking,
    memory: running.memory,
    tracing: running.tracing,
    stats: running.stats,
  };
}

/**
 * The admin block a reload applies: the listener that answers the reload keeps its address,
 * switch and token (a restart changes those); readyClusters applies. No admin before or after:
 * the running one (none, or the same).
 */
function keptAdmin(running: Config, next: Config): Config["admin"] {
  const a = running.admin;
  if (a === null || next.admin === null) return a;
  return { ...a, readyClusters: next.admin.readyClusters };
}
