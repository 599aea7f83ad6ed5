// Assembles one dojang instance from a Config: clusters, listeners, admin, metrics, logger;
// owns start-up and the graceful drain.
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import type { Config } from "../config/index.js";
import { DojangError } from "../errors.js";
import { AdminServer } from "./admin/admin.js";
import type { CallContext } from "./call/call.js";
import { Listener } from "./listener.js";
import { createAccessLogger, createLogger, flushLogger } from "./observe/log.js";
import { Metrics } from "./observe/metrics.js";
import { HeapShrinker, MarkingTuner } from "./observe/heap.js";
import { compileRoutes } from "./router.js";
import { Cluster } from "./upstream/cluster.js";
import { compileFilterChain } from "./call/filter.js";
import { FaultSet, handleFaultsApi, parseFaultRule, type FaultRule, type FaultRuleStatus } from "./filters/fault/index.js";
import { faultFilterFactory, type FaultCounter } from "./filters/fault-exec/filter.js";
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
  readonly clusters = new Map<string, Cluster>();
  readonly listeners: Listener[] = [];
  readonly admin: AdminServer | undefined;
  /** every fault rule (config, API), one set for all listeners (rules carry their scope) */
  readonly faults: FaultSet;
  readonly journal: Journal;
  /** calls currently running a fault (maxActiveFaults) */
  private readonly faultCounter: FaultCounter = { active: 0 };
  private draining = false;
  private started = false;
  private idleWaiters: (() => void)[] = [];

  constructor(config: Config, opts: DojangOptions = {}) {
    this.config = config;
    this.log = opts.logger ?? createLogger({ level: config.logLevel });
    this.access = opts.accessLogger ?? opts.logger ?? createAccessLogger({ level: config.logLevel });
    for (const c of config.clusters) this.clusters.set(c.name, new Cluster(c, this.metrics, this.log));
    const now = performance.now.bind(performance);
    this.faults = new FaultSet(config.faultInjection);
    this.journal = new Journal(config.journal);
    this.loadConfigFaults(config);
    const onCallClosed = (): void => {
      if (this.metrics.live.activeCalls === 0 && this.idleWaiters.length > 0) {
        const w = this.idleWaiters;
        this.idleWaiters = [];
        for (const f of w) f();
      }
    };
    for (const l of config.listeners) {
      const router = compileRoutes(l.routes, (name) => {
        const c = this.clusters.get(name);
        // The config parser rejects unknown clusters; reaching this is a bug.
        if (c === undefined) throw new DojangError("DOJANG_ERR_INTERNAL", `route names unknown cluster ${name}`);
        return c;
      });
      const ctx: CallContext = {
        listener: l.name,
        router,
        metrics: this.metrics,
        log: this.log,
        access: this.access,
        accessLog: config.accessLog,
        now,
        filters: compileFilterChain([
          faultFilterFactory({
            listener: l.name,
            headers: l.faultHeaders,
            trailer: l.faultTrailer,
            seed: config.faultInjection.seed,
            set: this.faults,
            counter: this.faultCounter,
            metrics: this.metrics,
            log: this.log,
            now,
          }),
        ]),
        journal: this.journal,
        active: new Set(),
        onCallClosed,
      };
      this.listeners.push(new Listener(l, ctx));
    }
    if (config.admin !== null) {
      this.admin = new AdminServer(config.admin.address, {
        faults: (method, path, body) => {
          const r = handleFaultsApi(method, path, body, this.faults, performance.now());
          return r === null ? null : { status: r.status, body: r.body };
        },
        calls: (last) => this.journal.last(last),
        metrics: async () => ({ contentType: this.metrics.registry.contentType, body: await this.metrics.registry.metrics() }),
        ready: () => this.started && !this.draining,
        config: () => this.config,
      });
    }
  }

  /** Config rules (listener and route lists) into the set; a reload replaces only these. */
  loadConfigFaults(config: Config): void {
    for (const st of this.faults.list()) if (st.rule.source === "config") this.faults.remove(st.rule.id);
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
    this.log.info(
      { listeners: this.listeners.map((l) => ({ name: l.cfg.name, address: this.addressOf(l) })), admin: this.adminAddress },
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
