// The whole-config reload as one transaction (Dojang.reload() runs it, one at a time): decided
// before anything changes (the reload plan, the new snapshot, new listeners bound), then swapped
// in where nothing can fail; and the xDS endpoint update applied in place without a reload. The
// instance it works on is a ReloadHost (src/proxy/dojang.ts builds it over its own state).
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import type { Config, HostPort, ListenerConfig } from "../config/schema.js";
import { reloadReport } from "../config/reload.js";
import { configAsApplied, planReload } from "../config/reload-plan.js";
import { ConfigError, type ConfigIssue } from "../errors.js";
import type { AdminReply } from "./admin/admin.js";
import type { Listener } from "./listener.js";
import type { Journal } from "./observe/log.js";
import type { Metrics } from "./observe/metrics.js";
import { Cluster } from "./upstream/cluster.js";
import { buildSnapshot, type Snapshot, type SnapshotDeps } from "./snapshot.js";
import { compose, type XdsState } from "../xds/compose.js";
import type { ApplyResult, EndpointUpdate, RefusedResources } from "../xds/client.js";
import { applyEndpointDelta } from "../translate/endpoint-set.js";

/** What a reload did (the admin's /reload answers with it; the log line carries it). */
export interface ReloadResult {
  readonly ok: boolean;
  /** the snapshot serving new calls afterwards (unchanged when !ok) */
  readonly version: number;
  /** key paths that changed and took effect (reloadReport) */
  readonly applied: readonly string[];
  /** key paths that changed and need a restart */
  readonly notApplied: readonly string[];
  readonly message: string;
  /** why the new config was refused, each with its key path (only when !ok) */
  readonly issues?: readonly ConfigIssue[];
  /**
   * the listeners and clusters (by name) the refusal is about, when it is about some (a new
   * listener that cannot bind, an xDS resource whose name a static one has): the xDS client
   * refuses those resources alone and applies the rest (gRFC A46)
   */
  readonly refused?: RefusedResources;
}

/** The reload's answer on the admin listener: 200 with the result, or 400 with the issues. */
export function reloadReply(r: ReloadResult): AdminReply {
  return { status: r.ok ? 200 : 400, body: { result: r.ok ? "ok" : "error", ...r } };
}

export interface ReloadOptions {
  readonly file?: string;
  readonly quiet?: boolean;
  /** the xDS resources to serve with the static config (Dojang.applyXds); absent: the ones last applied */
  readonly xds?: XdsState;
}

/** A reload's result as the xDS client takes it: applied, or the issues and the resources they are about. */
export function xdsResult(r: ReloadResult): ApplyResult {
  if (r.ok) return { ok: true };
  return { ok: false, issues: r.issues ?? [], ...(r.refused === undefined ? {} : { refused: r.refused }) };
}

/**
 * Whether `config` parses fault rules at run time (config rules, header faults, the fault API):
 * then start() and a reload load the fault parsers (src/config/parsers.ts) unless the instance has
 * them (DojangOptions.faultParsers; the CLI's served process, handed its config by the launcher,
 * has not).
 */
export function needsConfigParsers(config: Config): boolean {
  if (config.admin !== null && config.admin.mutations) return true;
  return config.listeners.some((l) => l.faultHeaders || l.faults.length > 0 || l.routes.some((r) => r.faults.length > 0));
}

/** config accessLogRedact as the calls read it: null when it names nothing (one test per record). */
export function redactedFields(cfg: Config): Config["accessLogRedact"] | null {
  return cfg.accessLogRedact.length === 0 ? null : cfg.accessLogRedact;
}

export function formatAddress(a: AddressInfo): string {
  return a.family === "IPv6" ? `[${a.address}]:${a.port}` : `${a.address}:${a.port}`;
}

/**
 * The instance a reload works on: its state, read and (in the swap) written, and the steps it
 * shares with start-up. Dojang builds one over its own fields (Dojang.reloadHost).
 */
export interface ReloadHost {
  readonly metrics: Metrics;
  readonly log: Logger;
  readonly access: Logger;
  readonly failed: Journal;
  /** the config each kept cluster now runs (see Dojang.clusterConfigs) */
  readonly clusterConfigs: WeakMap<Cluster, Config["clusters"][number]>;
  /** listeners a reload removed or re-addressed, draining */
  readonly retiringListeners: Set<Listener>;
  draining(): boolean;
  started(): boolean;
  /** whether a reload sets the loggers' level (DojangOptions.reloadLogLevel) */
  reloadLogLevel(): boolean;
  current(): Snapshot;
  snapshotDeps(): SnapshotDeps;
  config(): Config;
  staticConfig(): Config;
  xdsState(): XdsState | null;
  listeners(): readonly Listener[];
  /** the swap's writes, in the order given: the applied config, the static one, the xDS state */
  setConfig(cfg: Config): void;
  setStaticConfig(cfg: Config): void;
  setXdsState(s: XdsState): void;
  setListeners(l: Listener[]): void;
  newListener(l: ListenerConfig, snap: Snapshot): Listener;
  swapSnapshot(next: Snapshot): void;
  loadConfigFaults(config: Config): void;
  useFaultParsers(): Promise<unknown>;
  addressOf(l: Listener): string | undefined;
}

/**
 * The xDS client's update that changed only endpoint sets (Dojang.applyXdsEndpoints runs it in
 * order with reloads): "reload" when a named cluster is not one this instance serves from xDS.
 */
export function applyEndpointUpdates(h: ReloadHost, updates: readonly EndpointUpdate[]): ApplyResult | "reload" {
  if (h.draining()) return { ok: false, issues: [{ path: "", message: "dojang is draining" }] };
  const st = h.xdsState();
  if (st === null) return "reload";
  const staticNames = new Set(h.staticConfig().clusters.map((c) => c.name));
  // decided before anything changes: every cluster each delta feeds, running and from xDS
  const plan: { name: string; list: { readonly endpoints: readonly HostPort[]; readonly weights: readonly number[] }; clusters: Cluster[]; update: EndpointUpdate }[] = [];
  for (const u of updates) {
    const held = st.endpoints.get(u.name);
    if (held === undefined) return "reload";
    const clusters: Cluster[] = [];
    for (const [name, { cluster }] of st.clusters) {
      if (cluster.eds !== u.name) continue;
      const c = h.current().clusters.get(name);
      if (c === undefined || staticNames.has(name)) return "reload";
      clusters.push(c);
    }
    // the client's own assignment when it came with the update (no copy of 10,000 endpoints to
    // patch); a worker's update is the delta alone, applied to a copy of the list it holds
    plan.push({ name: u.name, list: u.value ?? applyEndpointDelta(held.endpoints, held.weights, u.delta), clusters, update: u });
  }
  const endpoints = new Map(st.endpoints);
  const entries = new Map<string, Config["clusters"][number]>();
  for (const p of plan) {
    endpoints.set(p.name, p.update.value ?? { name: p.name, endpoints: p.list.endpoints, weights: p.list.weights });
    for (const c of p.clusters) {
      c.applyEndpointDelta(p.update.delta);
      const running = h.clusterConfigs.get(c) ?? c.cfg;
      const cfg = { ...running, endpoints: p.list.endpoints, endpointWeights: p.list.weights };
      h.clusterConfigs.set(c, cfg);
      entries.set(c.name, cfg);
    }
  }
  h.setXdsState({ ...st, endpoints });
  if (entries.size > 0) {
    const cur = h.config();
    h.setConfig({ ...cur, clusters: cur.clusters.map((c) => entries.get(c.name) ?? c) });
  }
  return { ok: true };
}

/** The whole-config reload (Dojang.reload() documents it), on `h`. */
export async function applyReload(h: ReloadHost, load: Config | (() => Config), trigger: string, o: ReloadOptions): Promise<ReloadResult> {
  const fields = { trigger, ...(o.file === undefined ? {} : { file: o.file }) };
  const refuse = (issues: readonly ConfigIssue[], refused?: RefusedResources): ReloadResult => {
    const r: ReloadResult = { ok: false, version: h.current().version, applied: [], notApplied: [], message: "reload failed; nothing changed", issues, ...(refused === undefined ? {} : { refused }) };
    // an xDS update has its own count (dojang_xds_updates_total, by the client)
    if (o.xds === undefined) h.metrics.configReloads.error.inc();
    if (o.quiet !== true) h.log.error({ ...fields, issues, err: issues.map((i) => (i.path === "" ? i.message : `${i.path}: ${i.message}`)).join("; ") }, r.message);
    return r;
  };
  if (h.draining()) return refuse([{ path: "", message: "dojang is draining" }]);
  let next: Config;
  let staticNext: Config;
  try {
    staticNext = typeof load === "function" ? load() : load;
  } catch (err) {
    if (err instanceof ConfigError) return refuse(err.issues);
    return refuse([{ path: "", message: (err as Error).message }]);
  }
  // with xDS, what a reload serves is the static config and the control plane's resources
  const xdsState = o.xds ?? h.xdsState();
  if (xdsState === null) next = staticNext;
  else {
    const c = compose(staticNext, xdsState);
    if (c.conflicts.length > 0) return refuse(c.conflicts, c.conflicting);
    next = c.config;
  }
  // header faults and fault rules in the new config are read with the fault parsers
  if (needsConfigParsers(next)) await h.useFaultParsers();
  const report = reloadReport(h.config(), next);
  const applied = configAsApplied(h.config(), next);

  // The plan (src/config/reload-plan.ts), decided before anything changes: clusters kept by
  // name where only the endpoints changed, listeners kept by name (or renamed) on their address.
  const prev = h.current();
  const runningClusters = new Map([...prev.clusters].map(([name, c]) => [name, h.clusterConfigs.get(c) ?? c.cfg]));
  const decided = planReload(h.listeners().map((l) => l.cfg), runningClusters, applied);
  const moved: [Cluster, Config["clusters"][number]][] = [];
  const created: Cluster[] = [];
  const snap = buildSnapshot(applied, h.snapshotDeps(), prev.version + 1, (cfg) => {
    const old = prev.clusters.get(cfg.name);
    const step = decided.clusters.get(cfg.name);
    if (old !== undefined && step !== "new") {
      if (step === "move") moved.push([old, cfg]);
      return old;
    }
    const c = new Cluster(cfg, h.metrics, h.log);
    created.push(c);
    return c;
  });

  // Listeners: what is new is bound before anything changes.
  const plan = decided.listeners.map((p) => {
    const keep = p.keep === undefined ? undefined : h.listeners()[p.keep];
    return { cfg: p.cfg, keep, fresh: keep === undefined ? h.newListener(p.cfg, snap) : undefined };
  });
  const retiring = decided.retiring.map((i) => h.listeners()[i]!);
  if (h.started()) {
    const bound: Listener[] = [];
    for (const p of plan) {
      const f = p.fresh;
      if (f === undefined) continue;
      try {
        await f.listen();
        bound.push(f);
      } catch (err) {
        for (const b of bound) await b.retire(0);
        for (const c of created) {
          c.stop();
          c.close(true);
        }
        const e = err as Error & { cause?: Error };
        const at = next.listeners.findIndex((x) => x.name === f.cfg.name);
        return refuse([{ path: `listeners[${at}].address`, message: `${e.message}${e.cause ? ": " + e.cause.message : ""}` }], { listeners: [f.cfg.name], clusters: [] });
      }
    }
  }

  if (h.draining()) {
    // close() began while the new listeners were binding: nothing is swapped in.
    for (const p of plan) if (p.fresh !== undefined) await p.fresh.retire(0);
    for (const c of created) {
      c.stop();
      c.close(true);
    }
    return refuse([{ path: "", message: "dojang is draining" }]);
  }

  // The swap: from here on nothing can fail.
  for (const [c, cfg] of moved) {
    c.setEndpoints(cfg.endpoints, cfg.endpointWeights);
    h.clusterConfigs.set(c, cfg);
  }
  h.setConfig(applied);
  h.setStaticConfig(staticNext);
  if (o.xds !== undefined) h.setXdsState(o.xds);
  const listeners: Listener[] = [];
  for (const p of plan) {
    if (p.keep !== undefined) {
      const l = p.keep;
      if (l.cfg.name !== p.cfg.name) (l.ctx as { listener: string }).listener = p.cfg.name;
      l.reconfigure(p.cfg, applied.accessLog, redactedFields(applied));
      listeners.push(l);
    } else listeners.push(p.fresh!);
  }
  h.setListeners(listeners);
  h.swapSnapshot(snap);
  h.loadConfigFaults(applied);
  h.failed.resize(applied.failedCalls);
  if (h.reloadLogLevel()) {
    if (h.log.level !== applied.logLevel) h.log.level = applied.logLevel;
    if (h.access !== h.log && h.access.level !== applied.logLevel) h.access.level = applied.logLevel;
  }
  // where each new listener is bound, and which ones go, whatever asked (a file reload, xDS,
  // the library): the start line lists the first ones; an xDS update says nothing else
  for (const l of retiring) {
    h.log.info({ trigger, listener: l.cfg.name, address: h.addressOf(l), drainTimeoutMs: applied.drainTimeoutMs }, "listener retiring");
    h.retiringListeners.add(l);
    void l.retire(applied.drainTimeoutMs).then(() => h.retiringListeners.delete(l));
  }
  for (const p of plan) {
    const f = p.fresh;
    if (f === undefined || !h.started()) continue;
    h.log.info(
      { trigger, listener: f.cfg.name, address: h.addressOf(f), sockets: f.sockets().map((k) => ({ address: formatAddress(k.address), protocols: k.protocols, tls: k.tls })) },
      "listener bound",
    );
  }
  if (o.xds === undefined) h.metrics.configReloads.ok.inc();
  const r: ReloadResult = { ok: true, version: snap.version, applied: report.applied, notApplied: report.notApplied, message: report.message };
  if (o.quiet !== true) {
    const line = { ...fields, version: r.version, applied: r.applied, notApplied: r.notApplied };
    if (r.notApplied.length > 0) h.log.warn(line, r.message);
    else h.log.info(line, r.message);
  }
  return r;
}
