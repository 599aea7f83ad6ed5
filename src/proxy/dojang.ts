// Assembles one dojang instance from a Config: clusters, listeners, admin, metrics, logger;
// owns start-up and the graceful drain.
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import type { Config } from "../config/index.js";
import { DojangError } from "../errors.js";
import { AdminServer } from "./admin/admin.js";
import type { CallContext } from "./call/call.js";
import { Listener } from "./listener.js";
import { createLogger } from "./observe/log.js";
import { Metrics } from "./observe/metrics.js";
import { compileRoutes } from "./router.js";
import { Cluster } from "./upstream/pool.js";

export interface DojangOptions {
  /** a logger to use instead of the one built from config.logLevel */
  readonly logger?: Logger;
}

function formatAddress(a: AddressInfo): string {
  return a.family === "IPv6" ? `[${a.address}]:${a.port}` : `${a.address}:${a.port}`;
}

export class Dojang {
  readonly config: Config;
  readonly log: Logger;
  readonly metrics = new Metrics();
  readonly clusters = new Map<string, Cluster>();
  readonly listeners: Listener[] = [];
  readonly admin: AdminServer | undefined;
  private draining = false;
  private started = false;
  private idleWaiters: (() => void)[] = [];

  constructor(config: Config, opts: DojangOptions = {}) {
    this.config = config;
    this.log = opts.logger ?? createLogger({ level: config.logLevel });
    for (const c of config.clusters) this.clusters.set(c.name, new Cluster(c, this.metrics, this.log));
    const now = performance.now.bind(performance);
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
        accessLog: config.accessLog,
        now,
        faultsFor: null,
        active: new Set(),
        onCallClosed,
      };
      this.listeners.push(new Listener(l, ctx));
    }
    if (config.admin !== null) {
      this.admin = new AdminServer(config.admin.address, {
        metrics: async () => ({ contentType: this.metrics.registry.contentType, body: await this.metrics.registry.metrics() }),
        ready: () => this.started && !this.draining,
        config: () => this.config,
      });
    }
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
    this.log.flush();
  }
}
