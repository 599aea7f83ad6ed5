// `workers: N`: one primary process and N workers (node:cluster). Every worker serves every
// listener on the shared sockets (the primary hands connections out round-robin; a connection,
// and so every call multiplexed on it, stays on one worker). The primary owns the admin
// listener, sums the workers' metrics (prom-client AggregatorRegistry), forwards SIGTERM/SIGINT
// as a drain, and replaces a worker that dies while not stopping.
import cluster, { type Worker } from "node:cluster";
import { AggregatorRegistry } from "prom-client";
import type { Logger } from "pino";
import type { Config } from "../config/index.js";
import { AdminServer } from "./admin/admin.js";
import { Dojang, startHeapTuning } from "./dojang.js";
import { createAccessLogger } from "./observe/log.js";

const READY = "dojang:ready";

export function isWorkerProcess(): boolean {
  return cluster.isWorker;
}

/** In a worker: the proxy without its own admin listener; metrics go to the primary. */
export async function runWorker(config: Config, log: Logger): Promise<Dojang> {
  const d = new Dojang(
    { ...config, admin: null },
    { logger: log.child({ worker: cluster.worker?.id }), accessLogger: createAccessLogger({ level: config.logLevel }) },
  );
  // Constructing one registers prom-client's worker-side listener that answers the primary.
  new AggregatorRegistry();
  AggregatorRegistry.setRegistries([d.metrics.registry]);
  const stop = (): void => {
    void d.close().then(() => process.exit(0));
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  // The primary disconnecting the IPC channel is a stop too (it died or is stopping).
  process.on("disconnect", stop);
  await d.start();
  startHeapTuning(d, config, log);
  process.send?.({ type: READY });
  return d;
}

/** In the primary: fork, supervise, aggregate, drain. Resolves when all workers have exited. */
export async function runPrimary(config: Config, log: Logger): Promise<number> {
  const n = config.workers;
  const ready = new Set<number>();
  let stopping = false;
  const aggregator = new AggregatorRegistry();
  const admin =
    config.admin === null
      ? undefined
      : new AdminServer(config.admin.address, {
          metrics: async () => ({ contentType: aggregator.contentType, body: await aggregator.clusterMetrics() }),
          ready: () => !stopping && ready.size === n,
          config: () => config,
        });
  const fork = (): Worker => {
    const w = cluster.fork();
    w.on("message", (m: { type?: string }) => {
      if (m?.type === READY) ready.add(w.id);
    });
    return w;
  };
  let exitCode = 0;
  const allExited = new Promise<void>((resolve) => {
    cluster.on("exit", (w, code, signal) => {
      const wasReady = ready.delete(w.id);
      if (!stopping && !wasReady) {
        // Died before it could serve (cannot listen, bad environment): restarting would loop.
        log.error({ worker: w.id, code, signal }, "worker failed to start; stopping");
        exitCode = 1;
        stop("worker-failure");
      } else if (!stopping) {
        log.error({ worker: w.id, code, signal }, "worker died; starting another");
        fork();
        return;
      } else if (code !== 0 && code !== null) {
        exitCode = 1;
      }
      if (stopping && Object.keys(cluster.workers ?? {}).length === 0) resolve();
    });
  });
  for (let i = 0; i < n; i++) fork();
  if (admin !== undefined) await admin.listen();
  log.info({ workers: n, admin: admin?.boundAddress }, "dojang primary started");

  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, "signal received, draining workers");
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill("SIGTERM");
    // A worker that does not finish in time is ended (drain timeout plus a grace period).
    setTimeout(() => {
      for (const w of Object.values(cluster.workers ?? {})) w?.process.kill("SIGKILL");
    }, config.drainTimeoutMs + 5000).unref();
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  await allExited;
  await admin?.close();
  return exitCode;
}
