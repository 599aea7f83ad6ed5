// Assembles one dojang instance from a Config: clusters, listeners, admin, metrics, logger;
// owns start-up and the graceful drain.
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import { formatHostPort, type Config } from "../config/index.js";
import { DojangError } from "../errors.js";
import { AdminServer } from "./admin/admin.js";
import type { CallContext } from "./call/call.js";
import { Listener } from "./listener.js";
import { createAccessLogger, createLogger, flushLogger } from "./observe/log.js";
import { Metrics } from "./observe/metrics.js";
import { HeapShrinker, MarkingTuner } from "./observe/heap.js";
import type { Cluster } from "./upstream/cluster.js";
import { FaultSet, handleFaultsApi, parseFaultRule, type FaultRule, type FaultRuleStatus } from "./filters/fault/index.js";
import type { FaultCounter } from "./filters/fault-exec/filter.js";
import { buildSnapshot, type Snapshot, type SnapshotDeps } from "./snapshot.js";
import { Journal } from "./observe/log.js";

export interface DojangOptions {
  /** a logger to use instead of the one built from config.logLevel (also for the access log) */
  readonly logger?: Logger;
  /** the access log's own logger (asynchronous); default: `logger` if given, else a new one */
  readonly accessLogger?: Logger;
}

function formatAddress(a: AddressInfo): string {
  return a.family === "IPv6" ? `[${a.address}]:${a.port}` : `${a.address}:${a.port}`;
}

export class Dojang {
  readonly config: Config;
  readonly log: Logger;
  /** the access log: the process log itself when a logger was given, else an asynchronous one */
  readonly access: Logger;
  readonly metrics = new Metrics();
  readonly listeners: Listener[] = [];
  readonly admin: AdminServer | undefined;
  /** every fault rule (config, API), one set for all listeners (rules carry their scope) */
  readonly faults: FaultSet;
  readonly journal: Journal;
  /** calls currently running a fault (maxActiveFaults) */
  private readonly faultCounter: FaultCounter = { active: 0 };
  /** the config snapshot new calls start with (each call keeps the one it started with) */
  private current: Snapshot;
  /** what every snapshot is built with */
  private readonly snapshotDeps: SnapshotDeps;
  /** clusters of earlier snapshots that the current one dropped (calls in flight may still use them) */
  private readonly retired = new Set<Cluster>();
  private draining = false;
  private started = false;
  private idleWaiters: (() => void)[] = [];

  constructor(config: Config, opts: DojangOptions = {}) {
    this.config = config;
    this.log = opts.logger ?? createLogger({ level: config.logLevel });
    this.access = opts.accessLogger ?? opts.logger ?? createAccessLogger({ level: config.logLevel });
    const now = performance.now.bind(performance);
    this.faults = new FaultSet(config.faultInjection);
    this.journal = new Journal(config.journal);
    this.loadConfigFaults(config);
    this.snapshotDeps = { metrics: this.metrics, log: this.log, faults: this.faults, faultCounter: this.faultCounter, now };
    this.current = buildSnapshot(config, this.snapshotDeps, 1);
    const onCallClosed = (): void => {
      if (this.metrics.live.activeCalls === 0 && this.idleWaiters.length > 0) {
        const w = this.idleWaiters;
        this.idleWaiters = [];
        for (const f of w) f();
      }
    };
    for (const l of config.listeners) {
      const ctx: CallContext = {
        listener: l.name,
        routes: { current: this.current.listeners.get(l.name)! },
        metrics: this.metrics,
        log: this.log,
        access: this.access,
        accessLog: config.accessLog,
        now,
        journal: this.journal,
        active: new Set(),
        onCallClosed,
      };
      this.listeners.push(new Listener(l, ctx));
    }
    if (config.admin !== null) {
      this.admin = new AdminServer(config.admin, {
        faults: (method, path, body) => {
          const r = handleFaultsApi(method, path, body, this.faults, performance.now());
          return r === null ? null : { status: r.status, body: r.body };
        },
        calls: (last) => this.journal.last(last),
        clusters: () => [...this.clusters.values()].map((c) => c.describe()),
        metrics: async () => ({ contentType: this.metrics.registry.contentType, body: await this.metrics.registry.metrics() }),
        ready: () => this.started && !this.draining,
        config: () => this.config,
      });
    }
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
    for (const c of prev.clusters.values()) {
      if (kept.has(c)) continue;
      // Out of rotation gracefully (GOAWAY; streams on it finish). A call of the old snapshot
      // that has not picked an endpoint yet still may: close() stops whatever is left.
      this.retired.add(c);
      c.close(false);
    }
    for (const l of this.listeners) {
      const routes = next.listeners.get(l.cfg.name);
      if (routes !== undefined) l.ctx.routes.current = routes;
    }
  }

  /** Config rules (listener and route lists) into the set; a reload replaces only these. */
  loadConfigFaults(config: Config): void {
    this.faults.removeConfigRules();
    const now = performance.now();
    for (const l of config.listeners) {
      for (const r of l.faults) this.faults.add(r, now);
      for (const rt of l.routes) for (const r of rt.faults) this.faults.add(r, now);
    }
  }

  /** Library: add a rule given in the config/API shape; throws with the reasons when invalid. */
  addFault(value: unknown): FaultRule {
    const r = parseFaultRule(value, "fault", { source: "api" });
    if (!r.ok) throw new DojangError("DOJANG_ERR_FAULT", r.issues.map((i) => `${i.path}: ${i.message}`).join("; "));
    const a = this.faults.add(r.rule, performance.now());
    if (!a.ok) throw new DojangError("DOJANG_ERR_FAULT", a.message);
    return a.rule;
  }

  listFaults(): FaultRuleStatus[] {
    return this.faults.list();
  }

  async start(): Promise<void> {
    try {
      for (const l of this.listeners) await l.listen();
      if (this.admin !== undefined) await this.admin.listen();
    } catch (err) {
      await this.close(0);
      throw err;
    }
    this.started = true;
    // Each cluster's endpoints, so a wrong UPSTREAM is visible here, before the first call fails.
    this.log.info(
      {
        listeners: this.listeners.map((l) => ({ name: l.cfg.name, address: this.addressOf(l) })),
        clusters: this.config.clusters.map((c) => ({ name: c.name, endpoints: c.endpoints.map(formatHostPort) })),
        admin: this.adminAddress,
      },
      "dojang started",
    );
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

  get adminAddress(): string | undefined {
    const a = this.admin?.boundAddress;
    return a === undefined ? undefined : formatAddress(a);
  }

  get isDraining(): boolean {
    return this.draining;
  }

  /**
   * Graceful shutdown: /ready turns 503, clients get GOAWAY, in-flight calls run until they end
   * or `drainTimeoutMs` passes; what is left is then cut off. Resolves when everything is closed.
   */
  async close(drainTimeoutMs: number = this.config.drainTimeoutMs): Promise<void> {
    if (this.draining) return;
    this.draining = true;
    this.log.info({ activeCalls: this.metrics.live.activeCalls, drainTimeoutMs }, "draining");
    for (const l of this.listeners) l.drain();
    if (this.metrics.live.activeCalls > 0 && drainTimeoutMs > 0) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, drainTimeoutMs);
        this.idleWaiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    await Promise.all(this.listeners.map((l) => l.destroy()));
    for (const c of this.clusters.values()) c.close(true);
    for (const c of this.retired) c.close(true);
    await Promise.all(this.listeners.map((l) => new Promise<void>((r) => (l.server.listening ? l.server.close(() => r()) : r()))));
    if (this.admin !== undefined) await this.admin.close();
    this.log.info("stopped");
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
    return n;
  }
}

/**
 * The process-level heap settings, `shrinkHeapWhenIdle` and `concurrentMarking` (the CLI and
 * each cluster worker call this once the instance serves; the library does not, its host owns
 * the heap and V8's flags).
 */
export function startHeapTuning(d: Dojang, config: Config, log: Logger): { shrinker: HeapShrinker; marking: MarkingTuner } {
  const live = d.metrics.live;
  const marking = new MarkingTuner(config.concurrentMarking, () => d.forwardedBytes(), log, (on) => (live.concurrentMarking = on ? 1 : 0));
  marking.start();
  const shrinker = new HeapShrinker(config.shrinkHeapWhenIdleMs, () => live, log, () => d.metrics.heapShrinks.inc());
  shrinker.start();
  return { shrinker, marking };
}
