// Assembles one dojang instance from a Config: clusters, listeners, admin, metrics, logger;
// owns start-up, the snapshot swap and the graceful drain. The whole-config reload (reload(): a
// new snapshot swapped in, listeners added, removed and re-addressed, clusters kept by name) is
// the transaction in reload.ts, run on this instance's state; the fault rules, their parsers and
// the /faults API are filters/fault/control.ts.
import { readFileSync } from "node:fs";
import type { AddressInfo, Server as NetServer } from "node:net";
import type { Logger } from "pino";
import type { Config, ListenerConfig } from "../config/schema.js";
import { formatHostPort } from "../config/units.js";
import { loadConfigParsers, type FaultParsers } from "../config/parsers.js";
import { DojangError } from "../errors.js";
import { AdminServer } from "./admin/admin.js";
import { ActiveCalls } from "./call/active.js";
import type { CallContext } from "./call/context.js";
import type { Tracing } from "./observe/tracing.js";
import { Listener, type HealthTargets, type ListenerOwner } from "./listener.js";
import { createAccessLogger, createLogger, flushLogger } from "./observe/log.js";
import { Metrics } from "./observe/metrics.js";
import type { AppliedMemoryPlan } from "./observe/heap.js";
import { memoryLine } from "./observe/heap-tuning.js";
import { Cluster } from "./upstream/cluster.js";
import { SideClusters } from "./upstream/side-clusters.js";
import type { FaultRuleStatus, FaultSet } from "./filters/fault/select.js";
import type { FaultsApiResponse } from "./filters/fault/admin-api.js";
import { FaultControl } from "./filters/fault/control.js";
import type { FaultRule } from "../config/faults/model.js";
import type { FaultCounter } from "./filters/fault/filter.js";
import { buildSnapshot, type Snapshot, type SnapshotDeps } from "./snapshot.js";
import { Journal, endedWithin, type AccessRecord } from "./observe/log.js";
import { finishStats, type RawStats } from "./observe/stats.js";
import { TapHub } from "./observe/tap.js";
import { Stats } from "./observe/windows.js";
import { responseBuffers } from "./observe/overload.js";
import type { CallsQuery } from "./admin/admin.js";
import type { XdsState } from "../xds/compose.js";
import type { ApplyResult, EndpointUpdate, XdsClient } from "../xds/client.js";
import { applyEndpointUpdates, applyReload, formatAddress, needsConfigParsers, redactedFields, reloadReply, xdsResult, type ReloadHost, type ReloadOptions, type ReloadResult } from "./reload.js";
import { boundOf, closeHandle, handleOf, type InheritedSockets, type ListenOn, type SocketRecord } from "./upgrade-sockets.js";

// moved out of this file (issue 19, issue 30); the CLI and the cluster primary import them from here
export { reloadReply, xdsResult, type ReloadOptions, type ReloadResult } from "./reload.js";

export interface DojangOptions {
  /** a logger to use instead of the one built from config.logLevel (also for the access log) */
  readonly logger?: Logger;
  /** the access log's own logger (asynchronous); default: `logger` if given, else a new one */
  readonly accessLogger?: Logger;
  /** the config file: admin POST /reload re-reads it (without one, /reload is not served) */
  readonly configFile?: string;
  /**
   * whether a reload sets the loggers' level from the new config's `logLevel`. Default: when
   * dojang built its loggers itself; a logger handed in keeps the level its owner gave it (the
   * CLI passes true, unless --log-level was given)
   */
  readonly reloadLogLevel?: boolean;
  /** admin POST /drain: what SIGTERM does (the CLI drains and exits); default: close() */
  readonly onDrainRequest?: () => void;
  /** reloadFile(): the file's config as the command line changes it (the CLI's --admin-mutations) */
  readonly adjustConfig?: (c: Config) => Config;
  /**
   * the config's fault parsers, when the caller has them already (the library entry imports the
   * config module statically); without them they are loaded when first needed (start(), a
   * reload, the /faults API), so a served process whose config has no fault rules never loads zod
   */
  readonly faultParsers?: FaultParsers;
  /**
   * `dojang upgrade`: the listening sockets the previous process handed over; each listener (and
   * the admin listener) whose address matches one listens on it instead of binding
   * (src/proxy/upgrade-sockets.ts). The ones no listener takes are closed at start().
   */
  readonly inherited?: InheritedSockets;
}

/** GET /stats?state=1's `state` (Dojang.viewState). */
export interface ViewState {
  readonly active_calls: number;
  /** GET /tap readers now */
  readonly taps: number;
  readonly overload: { readonly overloaded: boolean; readonly cuts: number; readonly refused: number };
  readonly faults: readonly { readonly id: string; readonly kind: string; readonly enabled: boolean; readonly source: unknown; readonly matched: number; readonly fired: number }[];
  readonly clusters: readonly unknown[];
  readonly xds: unknown;
}

/** How often a cluster a reload dropped is checked for its last call (then closed). */
const RETIRE_POLL_MS = 250;

export class Dojang {
  private cfg: Config;
  readonly log: Logger;
  /** the access log: the process log itself when a logger was given, else an asynchronous one */
  readonly access: Logger;
  readonly metrics = new Metrics();
  /** the listeners of the current config, in its order */
  listeners: Listener[] = [];
  /** listeners a reload removed or re-addressed, draining (closed when their calls end or at drainTimeout) */
  private readonly retiringListeners = new Set<Listener>();
  readonly admin: AdminServer | undefined;
  /** every fault rule (config, API), one set for all listeners (rules carry their scope) */
  readonly faults: FaultSet;
  /** the fault set's owner: config rules, the fault parsers, the /faults API (filters/fault/control.ts) */
  private readonly faultControl: FaultControl;
  readonly journal: Journal;
  /** the last failed calls (`failedCalls`, GET /calls?failed; a reload resizes it) */
  readonly failed: Journal;
  /** the windowed stats (`stats`, GET /stats); null when off */
  readonly stats: Stats | null;
  /** GET /tap's subscribers */
  readonly tap = new TapHub();
  /** calls currently running a fault (maxActiveFaults) */
  private readonly faultCounter: FaultCounter = { active: 0 };
  /** the config snapshot new calls start with (each call keeps the one it started with) */
  private current: Snapshot;
  /** what every snapshot is built with (its faultParsers set once they are loaded) */
  private snapshotDeps: SnapshotDeps;
  /** clusters of earlier snapshots that the current one dropped (calls in flight may still use them) */
  private readonly retired = new Set<Cluster>();
  private draining = false;
  private started = false;
  private idleWaiters: (() => void)[] = [];
  private readonly opts: DojangOptions;
  private readonly now: () => number;
  /** each listener's cell for the health service's targets (swapped with the snapshot) */
  private readonly healthCells = new WeakMap<Listener, { current: HealthTargets }>();
  /**
   * The config each kept cluster now runs (a Cluster's own `cfg` is the one it was built with;
   * a reload that only moved its endpoints keeps the object and records the new config here,
   * so the next reload compares with what is really in use).
   */
  private readonly clusterConfigs = new WeakMap<Cluster, Config["clusters"][number]>();
  /**
   * What the reload transaction (src/proxy/reload.ts) reads and, in its swap, writes: this
   * instance's own state, by reference.
   */
  private readonly reloadHost: ReloadHost;
  /** reloads run one at a time, in the order they were asked for */
  private reloadChain: Promise<unknown> = Promise.resolve();
  private retireTimer: NodeJS.Timeout | undefined = undefined;
  /**
   * OpenTelemetry traces (config `tracing`): loaded by start() (the SDK is imported only when
   * tracing is on), then handed to every listener's calls; null when off.
   */
  private tracing: Tracing | null = null;
  /** the config without what xDS added (the file's, or the library's): a file reload replaces it */
  private staticCfg: Config;
  /** the xDS resources the last reload applied (null: no xDS, or nothing accepted yet) */
  private xdsState: XdsState | null = null;
  /** the xDS client (config.xds), started by start() */
  xds: XdsClient | undefined = undefined;

  constructor(config: Config, opts: DojangOptions = {}) {
    this.cfg = config;
    this.staticCfg = config;
    this.opts = opts;
    this.log = opts.logger ?? createLogger({ level: config.logLevel });
    this.access = opts.accessLogger ?? opts.logger ?? createAccessLogger({ level: config.logLevel });
    const now = performance.now.bind(performance);
    this.now = now;
    this.faultControl = new FaultControl(
      config,
      opts.faultParsers ?? null,
      (p) => {
        this.snapshotDeps = { ...this.snapshotDeps, faultParsers: p };
      },
      now,
    );
    this.faults = this.faultControl.set;
    this.journal = new Journal(config.journal);
    this.failed = new Journal(config.failedCalls);
    this.stats = config.stats === null ? null : new Stats(config.stats.maxRows, now);
    this.snapshotDeps = { metrics: this.metrics, log: this.log, faults: this.faults, faultCounter: this.faultCounter, now, faultParsers: this.faultControl.parsers, side: new SideClusters(this.metrics, this.log) };
    this.current = buildSnapshot(config, this.snapshotDeps, 1);
    for (const l of config.listeners) this.listeners.push(this.newListener(l, this.current));
    this.reloadHost = {
      metrics: this.metrics,
      log: this.log,
      access: this.access,
      failed: this.failed,
      clusterConfigs: this.clusterConfigs,
      retiringListeners: this.retiringListeners,
      draining: () => this.draining,
      started: () => this.started,
      reloadLogLevel: () => opts.reloadLogLevel ?? opts.logger === undefined,
      current: () => this.current,
      snapshotDeps: () => this.snapshotDeps,
      config: () => this.cfg,
      staticConfig: () => this.staticCfg,
      xdsState: () => this.xdsState,
      listeners: () => this.listeners,
      setConfig: (c) => (this.cfg = c),
      setStaticConfig: (c) => (this.staticCfg = c),
      setXdsState: (s) => (this.xdsState = s),
      setListeners: (l) => (this.listeners = l),
      newListener: (l, snap) => this.newListener(l, snap),
      swapSnapshot: (next) => this.swapSnapshot(next),
      loadConfigFaults: (c) => this.loadConfigFaults(c),
      useFaultParsers: () => this.faultControl.load(),
      addressOf: (l) => this.addressOf(l),
    };
    if (config.admin !== null) {
      const file = opts.configFile;
      this.admin = new AdminServer(config.admin, {
        faults: async (method, path, body) => {
          const r = await this.faultsApi(method, path, body);
          return r === null ? null : { status: r.status, body: r.body };
        },
        calls: (q) => this.calls(q),
        ...(this.stats === null ? {} : { stats: (w: string, withState: boolean) => ({ ...finishStats(this.stats!.read(w)), ...(withState ? { state: this.viewState() } : {}) }) }),
        tap: (_q, f, sink) => this.tap.subscribe(f, sink),
        clusters: () =>
          [...this.clusters.values()].map((c) => {
            const v = this.xds?.clusterVersion(c.name);
            return v === undefined ? c.describe() : { ...c.describe(), source: "xds", xdsVersion: v.version, xdsEndpointsVersion: v.endpointsVersion };
          }),
        metrics: async () => ({ contentType: this.metrics.registry.contentType, body: await this.metrics.registry.metrics() }),
        ready: () => this.notReadyReason() === null,
        notReady: () => this.notReadyReason(),
        config: () => {
          const c = this.memoryPlan === undefined ? this.cfg : { ...this.cfg, memory: { ...this.cfg.memory, plan: this.memoryPlan } };
          // what came from the control plane: its versions and names (listeners and clusters are in the lists above)
          const x = this.xds;
          if (x === undefined || c.xds === null) return c;
          return {
            ...c,
            xds: { ...c.xds, ...x.status(), listeners: c.listeners.filter((l) => x.hasListener(l.name)).map((l) => l.name), clusters: c.clusters.filter((k) => x.clusterVersion(k.name) !== undefined).map((k) => k.name) },
          };
        },
        ...(file === undefined ? {} : { reload: async () => reloadReply(await this.reloadFile(file, "POST /reload")) }),
        drain: () => {
          if (!this.draining) {
            this.log.info("admin POST /drain: draining");
            if (opts.onDrainRequest !== undefined) opts.onDrainRequest();
            else void this.close();
          }
          return { status: 202, body: { draining: true, drainTimeoutMs: this.cfg.drainTimeoutMs } };
        },
      });
    }
  }

  /**
   * The memory budget's plan this process runs with (src/config/memory.ts), shown in /config and
   * the start-up line; set by the CLI and cluster workers (applyMemoryPlan), not by the library.
   */
  memoryPlan: AppliedMemoryPlan | undefined = undefined;

  /** The config the instance serves (the last one a reload applied). */
  get config(): Config {
    return this.cfg;
  }

  private readonly onCallClosed = (): void => {
    if (this.metrics.live.activeCalls === 0 && this.idleWaiters.length > 0) {
      const w = this.idleWaiters;
      this.idleWaiters = [];
      for (const f of w) f();
    }
  };

  /** A listener serving `snap`'s routes for it (not listening yet). */
  private newListener(l: ListenerConfig, snap: Snapshot): Listener {
    const ctx: CallContext = {
      listener: l.name,
      routes: { current: snap.listeners.get(l.name)! },
      metrics: this.metrics,
      log: this.log,
      access: this.access,
      accessLog: this.cfg.accessLog,
      accessLogRedact: redactedFields(this.cfg),
      now: this.now,
      rand: Math.random,
      journal: this.journal,
      failed: this.failed,
      stats: this.stats,
      tap: this.tap,
      tracing: this.tracing,
      active: new ActiveCalls(),
      onCallClosed: this.onCallClosed,
    };
    const health = { current: snap.health.get(l.name)! };
    const owner: ListenerOwner = { health, draining: () => this.draining };
    const listener = new Listener(l, ctx, owner);
    this.healthCells.set(listener, health);
    return listener;
  }

  /**
   * Why /ready answers 503, or null when ready: starting, draining, the xDS client's first fetch
   * (until it completes or the bootstrap's initial_fetch_timeout passes), or (admin.readyClusters)
   * a named cluster with no healthy endpoint, so a pod is not Ready before its app answers.
   */
  notReadyReason(): string | null {
    if (!this.started) return "starting";
    if (this.draining) return "draining";
    // with xDS, not before the first fetch (or its initial_fetch_timeout), as Envoy's initialization
    if (this.cfg.xds !== null) {
      if (this.xds === undefined) return "starting: the xDS client";
      const x = this.xds.notReady();
      if (x !== null) return x;
    }
    return this.clusterNotReady(this.cfg.admin?.readyClusters ?? []);
  }

  /** The first of `names` with no healthy endpoint, as /ready says it; null when each has one. */
  clusterNotReady(names: readonly string[]): string | null {
    for (const n of names) {
      const c = this.current.clusters.get(n);
      if (c === undefined || !c.hasHealthyEndpoint()) return `cluster ${n} has no healthy endpoint`;
    }
    return null;
  }

  /** GET /calls: the journal, or with `failed` the failed-calls ring; `sinceMs`: ended that recently; the last `last`. */
  calls(q: CallsQuery): AccessRecord[] {
    const all = (q.failed ? this.failed : this.journal).last();
    const recent = q.sinceMs === undefined ? all : endedWithin(all, q.sinceMs, Date.now());
    return q.last === undefined ? recent : q.last === 0 ? [] : recent.slice(-q.last);
  }

  /** This process's stats over `window`, uncooked (a worker's part of the primary's GET /stats). */
  statsPart(window: string): RawStats | null {
    return this.stats === null ? null : this.stats.read(window);
  }

  /**
   * What the /ui page shows beside the stats: calls in flight, the overload manager's state, the
   * fault rules with their counters, the clusters' endpoints (health, ejection, breakers), and
   * the xDS client's versions and last NACKs. Read only when asked (GET /stats?state=1).
   */
  viewState(): ViewState {
    return {
      active_calls: this.metrics.live.activeCalls,
      taps: this.tap.size,
      overload: { overloaded: responseBuffers.overloaded, cuts: responseBuffers.cuts, refused: responseBuffers.refused },
      faults: this.faults.list().map((f) => ({ id: f.rule.id, kind: f.rule.action.kind, enabled: f.rule.enabled, source: f.rule.source, matched: f.matched, fired: f.fired })),
      clusters: [...this.clusters.values()].map((c) => c.describe()),
      xds: this.xds === undefined ? null : this.xds.status(),
    };
  }

  /** The config snapshot new calls start with. */
  get snapshot(): Snapshot {
    return this.current;
  }

  /** The current snapshot's clusters. */
  get clusters(): ReadonlyMap<string, Cluster> {
    return this.current.clusters;
  }

  /**
   * A snapshot of `config` built with this instance's metrics, log and fault set, numbered after
   * the current one; not in use until swapSnapshot(). Its clusters are new (a reload that keeps
   * the sessions of clusters that remain passes them to buildSnapshot).
   */
  compileSnapshot(config: Config): Snapshot {
    return buildSnapshot(config, this.snapshotDeps, this.current.version + 1);
  }

  /**
   * The swap point: new calls start with `next`; calls in flight keep the snapshot they started
   * with (their ListenerRoutes), to their end. A listener that `next` does not name keeps its
   * routes (adding and removing listeners is the reload's work, not the swap's).
   */
  swapSnapshot(next: Snapshot): void {
    const prev = this.current;
    this.current = next;
    const kept = new Set(next.clusters.values());
    for (const c of prev.clusters.values()) if (!kept.has(c)) this.retireCluster(c);
    for (const l of this.listeners) {
      const routes = next.listeners.get(l.cfg.name);
      if (routes !== undefined) l.ctx.routes.current = routes;
      const health = next.health.get(l.cfg.name);
      const cell = this.healthCells.get(l);
      if (health !== undefined && cell !== undefined) cell.current = health;
    }
  }

  /**
   * A cluster the current snapshot no longer has: out of rotation gracefully now (GOAWAY; the
   * streams on its sessions finish), closed for good (stop(): health checks, DNS, keepalive)
   * once no call is on it. A call of an older snapshot that has not picked its endpoint yet (a
   * fault's delay, a retry's back-off) still may, so the check waits for the cluster's calls
   * (breaker.activeCalls) as well as its streams.
   */
  private retireCluster(c: Cluster): void {
    if (this.retired.has(c)) return;
    this.retired.add(c);
    c.close(false);
    this.retireTimer ??= setInterval(() => this.closeIdleRetired(), RETIRE_POLL_MS).unref();
  }

  private closeIdleRetired(): void {
    for (const c of this.retired) {
      if (!c.isIdle()) continue;
      this.retired.delete(c);
      c.stop();
      c.close(true);
      this.log.debug({ cluster: c.name }, "reload: a dropped cluster's last call ended; closed");
    }
    if (this.retired.size === 0 && this.retireTimer !== undefined) {
      clearInterval(this.retireTimer);
      this.retireTimer = undefined;
    }
  }

  /** Reloads from `file` (SIGHUP, POST /reload, a watched change): reload() with the file's config. */
  reloadFile(file: string, trigger: string): Promise<ReloadResult> {
    let text: string | undefined;
    const r = loadConfigParsers().then(({ configFromText, loadConfigFile }) =>
      this.reload(
        () => {
          try {
            text = readFileSync(file, "utf8");
          } catch {
            return loadConfigFile(file); // throws the ConfigError that names the errno
          }
          const c = configFromText(text, file);
          return this.opts.adjustConfig === undefined ? c : this.opts.adjustConfig(c);
        },
        trigger,
        { file },
      ),
    );
    return r.then((x) => {
      if (x.ok && text !== undefined) this.loadedText = text;
      return x;
    });
  }

  /** The config file text the last successful reloadFile() applied (watchConfig skips a change to it). */
  loadedText: string | undefined = undefined;

  /**
   * The whole-config reload. `next` (or what `load` returns; a ConfigError is a refusal with its
   * issues) is compared with the running config; then, all or nothing:
   * - clusters are matched by name: one whose config is the same but for its endpoints is KEPT
   *   (the same object: its sessions, health, ejections and retry budget carry on) and given the
   *   new endpoints (setEndpoints: endpoints that stay keep their sessions); one with any other
   *   key changed is built anew and the old one retired once idle; a name that is gone is
   *   retired the same way; a new name is a new cluster;
   * - listeners are matched by name (or, for a renamed one, by address): a new one and a
   *   re-addressed one are bound first, and if any cannot bind the reload is refused with
   *   nothing changed; then the new snapshot is swapped in (calls in flight keep theirs), kept
   *   listeners are reconfigured, and removed or re-addressed ones drain (GOAWAY; their calls
   *   have drainTimeout to finish);
   * - the file's fault rules replace the previous file's (API rules stay); logLevel applies.
   * Keys that need a restart (reloadReport) keep their running value and are named.
   * Logged once (unless `quiet`), counted in dojang_config_reloads_total{result}.
   */
  reload(next: Config | (() => Config), trigger = "reload", o: ReloadOptions = {}): Promise<ReloadResult> {
    const run = this.reloadChain.then(() => applyReload(this.reloadHost, next, trigger, o));
    this.reloadChain = run.catch(() => undefined);
    return run;
  }

  /**
   * The xDS client's update: the static config with `state`'s listeners and clusters, applied by
   * the same whole-config reload (so an EDS change that only moves endpoints keeps its cluster).
   */
  applyXds(state: XdsState): Promise<ReloadResult> {
    return this.reload(() => this.staticCfg, "xds", { quiet: true, xds: state });
  }

  /**
   * The xDS client's update that changed only endpoint sets (EDS): each ClusterLoadAssignment's
   * delta goes to the clusters it feeds in place (Cluster.applyEndpointDelta: kept endpoints keep
   * their sessions, in-flight counts, health and ejections), with no reload: the snapshot,
   * listeners, routes and filters stay as they are. In order with reloads (the same chain). What
   * /config shows and what a later reload composes with (the xDS state) take the new endpoint
   * lists. "reload" when a named cluster is not one this instance serves from xDS (then the
   * client applies the whole state).
   */
  applyXdsEndpoints(updates: readonly EndpointUpdate[]): Promise<ApplyResult | "reload"> {
    const run = this.reloadChain.then(() => applyEndpointUpdates(this.reloadHost, updates));
    this.reloadChain = run.catch(() => undefined);
    return run;
  }

  /** Config rules (listener and route lists) into the set; a reload replaces only these. */
  loadConfigFaults(config: Config): void {
    this.faultControl.loadConfigRules(config);
  }

  /** The /faults admin API (FaultControl.api); null for a path not under /faults. */
  faultsApi(method: string, path: string, body: string): FaultsApiResponse | null | Promise<FaultsApiResponse | null> {
    return this.faultControl.api(method, path, body);
  }

  /** Library: add a rule given in the config/API shape (FaultControl.add: throws with the reasons). */
  addFault(value: unknown): FaultRule {
    return this.faultControl.add(value);
  }

  listFaults(): FaultRuleStatus[] {
    return this.faultControl.list();
  }

  async start(): Promise<void> {
    if (this.cfg.tracing !== null && this.tracing === null) {
      const { Tracing } = await import("./observe/tracing.js");
      // OTLP/gRPC rides a cluster of its own (upstream/otlp-grpc.ts); OTLP/HTTP is the exporter's default
      const transport = this.cfg.tracing.protocol === "grpc" ? new (await import("./upstream/otlp-grpc.js")).GrpcTransport(this.cfg.tracing, this.metrics, this.log) : undefined;
      const t = new Tracing(this.cfg.tracing, this.metrics.registry, this.log, Math.random, transport);
      this.tracing = t;
      // (before any listener listens: no call has started)
      for (const l of this.listeners) (l.ctx as { tracing: Tracing | null }).tracing = t;
    }
    if (this.faultControl.parsers === null && needsConfigParsers(this.cfg)) {
      await this.faultControl.load();
      // the snapshot the constructor built could not read header faults: the same config again,
      // the same clusters and version, with the parsers (no call has started yet)
      const built = this.current;
      this.swapSnapshot(buildSnapshot(this.cfg, this.snapshotDeps, built.version, (c) => built.clusters.get(c.name)!));
    }
    // `dojang upgrade`: the sockets the previous process handed over. What binds afresh binds
    // first: a port in use then fails the start before any handed-over socket has accepted a
    // connection (one this process would drop as it exits), and the old process keeps serving.
    const inh = this.opts.inherited;
    const on = this.listeners.map((l) => ({
      main: inh?.take("listener", l.cfg.name, l.cfg.address),
      http1: l.http1 === null || l.cfg.http1Address === null ? undefined : inh?.take("http1", l.cfg.name, l.cfg.http1Address),
    }));
    const adminOn: ListenOn | undefined = this.admin === undefined ? undefined : inh?.take("admin", "", this.admin.address);
    if (inh !== undefined) for (const h of inh.untaken()) closeHandle(h);
    const handed = (i: number): boolean => on[i]!.main !== undefined || on[i]!.http1 !== undefined;
    try {
      for (const [i, l] of this.listeners.entries()) if (!handed(i)) await l.listen(on[i]);
      if (this.admin !== undefined && adminOn === undefined) await this.admin.listen();
      for (const [i, l] of this.listeners.entries()) if (handed(i)) await l.listen(on[i]);
      if (this.admin !== undefined && adminOn !== undefined) await this.admin.listen(adminOn);
    } catch (err) {
      await this.close(0);
      throw err;
    }
    this.started = true;
    if (this.cfg.xds !== null) {
      try {
        await this.startXds(this.cfg.xds.bootstrap);
      } catch (err) {
        await this.close(0);
        throw err;
      }
    }
    // Each cluster's endpoints, so a wrong UPSTREAM is visible here, before the first call fails.
    this.log.info(
      {
        pid: process.pid,
        // every socket each listener opened, with its protocols and TLS mode (plaintext, tls,
        // mtls-required, mtls-optional): an http1Address is as visible as the main port
        listeners: this.listeners.map((l) => ({
          name: l.cfg.name,
          address: this.addressOf(l),
          sockets: l.sockets().map((k) => ({ address: formatAddress(k.address), protocols: k.protocols, tls: k.tls })),
        })),
        clusters: this.config.clusters.map((c) => ({ name: c.name, endpoints: c.endpoints.map(formatHostPort) })),
        admin: this.adminAddress,
        ...(this.memoryPlan === undefined ? {} : { memory: memoryLine(this.memoryPlan) }),
        // "on first use": the config came from the launcher and nothing needs the parsers yet
        config_parsers: this.faultControl.parsers !== null ? "loaded" : "on first use",
      },
      "dojang started",
    );
  }

  /**
   * The xDS client (loaded only when the config has `xds`): its bootstrap is read now (a bad one
   * fails the start, naming the field); the control plane is not waited for (the static config
   * serves meanwhile, and keeps serving while it is away).
   */
  private async startXds(bootstrap: string): Promise<void> {
    const { startXdsClient } = await import("../xds/index.js");
    this.xds = startXdsClient(bootstrap, {
      log: this.log,
      registry: this.metrics.registry,
      apply: async (state) => xdsResult(await this.applyXds(state)),
      applyEndpoints: (_state, updates) => this.applyXdsEndpoints(updates),
    });
  }

  private addressOf(l: Listener): string | undefined {
    return l.address === undefined ? undefined : formatAddress(l.address);
  }

  /** "host:port" of the first (or named) listener, after start(). */
  address(name?: string): string {
    const l = name === undefined ? this.listeners[0] : this.listeners.find((x) => x.cfg.name === name);
    const a = l === undefined ? undefined : this.addressOf(l);
    if (a === undefined) throw new DojangError("DOJANG_ERR_NOT_STARTED", `listener ${name ?? "#0"} is not listening`);
    return a;
  }

  /** "host:port" of the first (or named) listener's HTTP/1.1 gRPC-Web socket (http1Address), after start(). */
  http1Address(name?: string): string {
    const l = name === undefined ? this.listeners[0] : this.listeners.find((x) => x.cfg.name === name);
    const a = l?.http1Address;
    if (a === undefined) throw new DojangError("DOJANG_ERR_NOT_STARTED", `listener ${name ?? "#0"} has no http1Address socket listening`);
    return formatAddress(a);
  }

  get adminAddress(): string | undefined {
    const a = this.admin?.boundAddress;
    return a === undefined ? undefined : formatAddress(a);
  }

  get isDraining(): boolean {
    return this.draining;
  }

  /**
   * What `dojang upgrade` hands to the next process: every listening socket of the current
   * listeners (their own port, their http1Address) and the admin listener's, each with its
   * handle. A listener a reload is retiring is not among them.
   */
  listeningSockets(): { record: SocketRecord; handle: object }[] {
    const out: { record: SocketRecord; handle: object }[] = [];
    const add = (role: SocketRecord["role"], name: string, configured: string, server: NetServer, bound: AddressInfo | undefined): void => {
      const handle = handleOf(server);
      if (handle !== undefined && bound !== undefined) out.push({ record: { role, name, configured, bound: boundOf(bound) }, handle });
    };
    for (const l of this.listeners) {
      add("listener", l.cfg.name, formatHostPort(l.cfg.address), l.server, l.address);
      if (l.http1 !== null && l.cfg.http1Address !== null) add("http1", l.cfg.name, formatHostPort(l.cfg.http1Address), l.http1, l.http1Address);
    }
    if (this.admin !== undefined) add("admin", "", formatHostPort(this.admin.address), this.admin.server, this.admin.boundAddress);
    return out;
  }

  /** The records of listeningSockets() (a cluster worker tells its primary which socket is which). */
  socketRecords(): SocketRecord[] {
    return this.listeningSockets().map((s) => s.record);
  }

  /**
   * `dojang upgrade`: the next process serves on the same sockets. This one stops accepting at
   * once (before this returns: the listeners' and the admin's handles are closed, the new process
   * keeps its own), then drains as close() does (GOAWAY; calls have drainTimeout to end).
   */
  handOver(): Promise<void> {
    this.admin?.stopAccepting();
    return this.close();
  }

  /**
   * Graceful shutdown: /ready turns 503, clients get GOAWAY, in-flight calls run until they end
   * or `drainTimeoutMs` passes; what is left is then cut off. Resolves when everything is closed.
   */
  async close(drainTimeoutMs: number = this.config.drainTimeoutMs): Promise<void> {
    if (this.draining) return;
    this.draining = true;
    this.xds?.close();
    this.log.info({ activeCalls: this.metrics.live.activeCalls, drainTimeoutMs }, "draining");
    for (const l of this.listeners) l.drain();
    for (const l of this.retiringListeners) l.drain();
    const until = performance.now() + drainTimeoutMs;
    if (this.metrics.live.activeCalls > 0 && drainTimeoutMs > 0) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, drainTimeoutMs);
        this.idleWaiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    const all = [...this.listeners, ...this.retiringListeners];
    // Then the connections themselves, within the same drainTimeout: a client closes its own once
    // the GOAWAY has reached it and its calls are done (and a TLS handshake still under way ends
    // in a session told GOAWAY at once). Exiting with one still open would reset it: whatever
    // its client sent since the last read is unread when the kernel closes the socket (a reset:
    // RFC 1122 §4.2.2.13). After `dojang upgrade` those clients are on the new process by then.
    while (performance.now() < until && (await Promise.all(all.map((l) => l.openConnections()))).some((n) => n > 0)) await new Promise((r) => setTimeout(r, 50));
    await Promise.all(all.map((l) => l.destroy()));
    for (const c of this.clusters.values()) {
      c.stop();
      c.close(true);
    }
    for (const c of this.retired) {
      c.stop();
      c.close(true);
    }
    this.retired.clear();
    this.snapshotDeps.side.close();
    if (this.retireTimer !== undefined) clearInterval(this.retireTimer);
    await Promise.all(all.map((l) => new Promise<void>((r) => (l.server.listening ? l.server.close(() => r()) : r()))));
    if (this.admin !== undefined) await this.admin.close();
    this.log.info("stopped");
    // The last spans go to the collector, waiting at most 2 s (a collector that is gone costs no more).
    if (this.tracing !== null) await this.tracing.shutdown(2000);
    // The access log is asynchronous: its last lines go out before the process may exit.
    if (this.access !== this.log) await flushLogger(this.access);
  }

  /**
   * Payload bytes forwarded so far, both ways: finished calls' totals plus what the calls in
   * flight have scanned (their prefix scanners count every chunk already, so the hot path
   * keeps no second counter). Read a few times a second by concurrentMarking: auto.
   */
  forwardedBytes(): number {
    let n = this.metrics.live.forwardedBytes;
    for (const l of this.listeners) for (const c of l.ctx.active) n += c.reqScan.bytes + c.respScan.bytes;
    for (const l of this.retiringListeners) for (const c of l.ctx.active) n += c.reqScan.bytes + c.respScan.bytes;
    return n;
  }
}
