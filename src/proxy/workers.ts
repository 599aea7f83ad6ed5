// `workers: N`: one primary process and N workers (node:cluster). Every worker serves every
// listener on the shared sockets (the primary hands connections out round-robin; a connection,
// and so every call multiplexed on it, stays on one worker). The primary owns the admin
// listener, sums the workers' metrics (prom-client AggregatorRegistry), forwards SIGTERM/SIGINT
// as a drain, and replaces a worker that dies while not stopping.
//
// From the outside `workers: N` behaves like one process: the primary answers the fault API and
// GET /calls by asking every worker over the IPC channel (admin/fanout.ts merges the answers),
// and a reload (SIGHUP, POST /reload, watchConfig) is read and validated once by the primary,
// sent to every worker (each swaps its own snapshot: Dojang.reload), answered when all have
// answered, and logged and counted once. A worker started later (a replacement) runs the config
// text of the last reload, then asks the primary for the mutation log and applies it before it
// listens, so API-added rules reach it too.
//
// xDS (`xds`): the primary holds the one ADS stream (one per process, not per worker: the control
// plane sees one client). Each update it accepts goes to every worker (the whole state to compose
// and reload, or, for an update of endpoint sets only, each set's delta, applied in place), and is
// ACKed only when every worker has applied it; a worker's refusal is the NACK's reason. A worker
// started later gets the state every other worker serves before it listens. /config, /ready,
// /clusters and the xDS metrics answer for the one stream.
import cluster, { type Worker } from "node:cluster";
import { readFileSync } from "node:fs";
import client, { AggregatorRegistry } from "prom-client";
import type { Logger } from "pino";
import type { Config } from "../config/schema.js";
import { formatHostPort } from "../config/units.js";
import { loadConfigParsers, loadFaultParsers } from "../config/parsers.js";
import { reloadReport } from "../config/reload.js";
import { ConfigError, type ConfigIssue } from "../errors.js";
import { AdminServer, type AdminReply } from "./admin/admin.js";
import { MutationLog, isType, mergeCalls, mergeClusters, mergeFaultReplies, mergeStats, type OpMessage, type ReplyMessage, type SyncMessage, type SyncRequest, type TapMessage, type WorkerOp, type WorkerReply } from "./admin/fanout.js";
import type { HttpTapSink } from "./admin/admin.js";
import type { AccessRecord } from "./observe/log.js";
import { parseTapFilter, type TapSink } from "./observe/tap.js";
import { Dojang, reloadReply, xdsResult } from "./dojang.js";
import { compose, stateFromJson, stateToJson, type XdsState, type XdsStateJson } from "../xds/compose.js";
import type { ApplyResult, XdsClient, XdsHost } from "../xds/client.js";
import { configAsApplied } from "../config/reload-plan.js";
import { watchConfigFile } from "../config/watch.js";
import { startHeapTuning } from "./observe/heap-tuning.js";
import { processMemoryPlan } from "./observe/heap.js";
import { createAccessLogger } from "./observe/log.js";
import { configReloadsCounter } from "./observe/metrics.js";
import { InheritedSockets, PrimarySockets, boundOf, closeHandle, fdOf, handleOf, socketKey, type ListenOn, type SocketRecord } from "./upgrade-sockets.js";

const READY = "dojang:ready";
/** How long the primary waits for every worker's answer to an admin request or a reload. */
const OP_TIMEOUT_MS = 5000;
/** How long a starting worker waits for the mutation log before it serves without it. */
const SYNC_TIMEOUT_MS = 5000;
/**
 * How long the primary waits for every worker to apply an xDS update before it NACKs it (a
 * whole-config reload of a large state on a busy machine takes longer than an admin answer).
 */
const XDS_OP_TIMEOUT_MS = 30_000;

/** The config parser, loaded by runPrimary / runWorker (src/config/parsers.ts: the single-process CLI does without it). */
let configFromText: Awaited<ReturnType<typeof loadConfigParsers>>["configFromText"] = () => {
  throw new Error("dojang: workers: the config parser is not loaded");
};

/**
 * Whether every worker the primary still lists has exited. Not "the list is empty": node removes
 * a worker from cluster.workers only once it has both exited and disconnected, in whichever order
 * those two come, and the cluster's 'exit' for the last worker can come before its 'disconnect'
 * (seen under load: the primary never resolved its wait and did not exit on SIGTERM). At that
 * 'exit' the worker is still listed, but dead.
 */
export function allWorkersDead(workers: readonly ({ isDead(): boolean } | undefined)[]): boolean {
  for (const w of workers) if (w !== undefined && !w.isDead()) return false;
  return true;
}

export function isWorkerProcess(): boolean {
  return cluster.isWorker;
}

/** The environment variable that carries the primary's config text to the workers it forks. */
const CONFIG_TEXT_ENV = "DOJANG_WORKER_CONFIG";
/**
 * `dojang upgrade`: the descriptors (the primary's) of the sockets the previous process handed
 * over, by "role:name" (JSON); a worker's listen({ fd }) makes the primary accept on them.
 */
const SOCKETS_ENV = "DOJANG_WORKER_SOCKETS";
/**
 * After an upgrade's new process is ready, the old primary stops accepting, then waits this long
 * before its workers drain: node:cluster's primary accepts a connection before a worker takes it,
 * and a worker that stops listening while one is on its way to it would see it closed.
 */
const HANDOVER_GRACE_MS = 1000;

/** In a worker: the sockets its primary took over for it (`dojang upgrade`), or undefined. */
function socketsFromPrimary(): InheritedSockets | undefined {
  const text = process.env[SOCKETS_ENV];
  if (text === undefined || text === "") return undefined;
  try {
    return InheritedSockets.fromDescriptors(JSON.parse(text) as Record<string, number>);
  } catch {
    return undefined;
  }
}

/** What the primary offers `dojang upgrade` once every worker is ready (src/upgrade.ts). */
export interface PrimaryHandover {
  /** the listening sockets (the ones node:cluster accepts on for the workers, and the admin's) */
  sockets(): { record: SocketRecord; handle: object }[];
  /** stop accepting now, then drain the workers; runPrimary resolves when they have exited */
  handOver(): void;
}

/**
 * In a worker: the config text the primary started with (unexpanded: `${VAR}` stays a reference,
 * expanded in the worker with the same environment). undefined in the primary and a single process.
 */
export function configTextFromPrimary(): string | undefined {
  return cluster.isWorker ? process.env[CONFIG_TEXT_ENV] : undefined;
}

function orNotFound(r: AdminReply | null): AdminReply {
  return r ?? { status: 404, body: { error: "not found" } };
}

/**
 * A worker runs one op from the primary (live, or replayed from the log) against its instance.
 * A live reload swaps the whole config (the primary validated it and logs the result); a
 * replayed one, before the worker listens, only re-applies that file's fault rules, in order
 * with the API changes around it: the worker already runs the config text of the last reload.
 */
function runOp(d: Dojang, op: WorkerOp, replay = false): AdminReply | Promise<AdminReply> {
  switch (op.op) {
    case "faults": {
      // synchronous here: the worker has the fault parsers (runWorker), and a replay runs in order
      const r = d.faultsApi(op.method, op.path, op.body);
      return r instanceof Promise ? r.then(orNotFound) : orNotFound(r);
    }
    case "calls":
      return { status: 200, body: d.calls({ last: op.last, failed: op.failed, sinceMs: op.sinceMs }) };
    case "stats":
      return { status: 200, body: { raw: d.statsPart(op.window), ...(op.state ? { state: d.viewState() } : {}) } };
    case "tap": {
      const f = parseTapFilter(new URLSearchParams(op.query));
      if (typeof f === "string") return { status: 400, body: { error: f } };
      const sink = new WorkerTapSink(op.id);
      const off = d.tap.subscribe(f, sink);
      workerTaps.set(op.id, () => {
        off();
        sink.close();
      });
      return { status: 200, body: null };
    }
    case "untap":
      workerTaps.get(op.id)?.();
      workerTaps.delete(op.id);
      return { status: 200, body: null };
    case "clusters":
      return { status: 200, body: [...d.clusters.values()].map((c) => c.describe()) };
    case "ready":
      return { status: 200, body: d.clusterNotReady(op.clusters) };
    case "xds":
      return d.applyXds(stateFromJson(op.state as XdsStateJson)).then((r) => ({ status: r.ok ? 200 : 400, body: xdsResult(r) }));
    case "endpoints":
      return d.applyXdsEndpoints(op.updates).then((r) => (r === "reload" ? { status: 409, body: "reload" } : { status: r.ok ? 200 : 400, body: r }));
    case "reload":
      // The admin listener is the primary's, and so is the xDS client: a worker runs without
      // either, before and after (its xDS state comes from the primary).
      if (!replay) return d.reload(() => ({ ...configFromText(op.text, op.source), admin: null, xds: null }), "primary", { quiet: true }).then(reloadReply);
      try {
        d.loadConfigFaults(configFromText(op.text, op.source));
        return { status: 200, body: { rules: d.faults.size } };
      } catch (err) {
        return { status: 400, body: { error: (err as Error).message } };
      }
  }
}

/** In a worker: the tap subscriptions the primary holds (by its id), each with its unsubscribe. */
const workerTaps = new Map<number, () => void>();

/** Records a worker batches for the primary per batch at most; past it (a primary that does not keep up) they are dropped and counted. */
const TAP_BATCH = 500;
/** How long a record waits for its batch. */
const TAP_FLUSH_MS = 50;
/** Batches sent and not yet handed to the IPC channel; past it the worker drops (and counts) instead of queueing. */
const TAP_IN_FLIGHT = 4;

/**
 * A tap subscription in a worker: records go to the primary in batches over the IPC channel,
 * bounded so that a primary (or a reader behind it) that does not keep up costs the worker at
 * most one batch: the rest are dropped and counted, and the count travels with the next batch.
 */
class WorkerTapSink implements TapSink {
  private lines: string[] = [];
  private dropped = 0;
  private inFlight = 0;
  private timer: NodeJS.Timeout | undefined = undefined;
  private closed = false;
  private readonly worker = cluster.worker?.id;
  constructor(private readonly id: number) {}

  push(rec: AccessRecord): void {
    if (this.closed) return;
    if (this.lines.length >= TAP_BATCH) {
      this.dropped++;
      return;
    }
    this.lines.push(JSON.stringify({ ...rec, worker: this.worker }));
    if (this.timer === undefined) this.timer = setTimeout(flushTap, TAP_FLUSH_MS, this);
  }

  flush(): void {
    this.timer = undefined;
    if (this.closed || (this.lines.length === 0 && this.dropped === 0)) return;
    if (this.inFlight >= TAP_IN_FLIGHT) {
      // (the channel is backed up: keep the batch, bounded, and try again)
      this.timer = setTimeout(flushTap, TAP_FLUSH_MS, this);
      return;
    }
    const m: TapMessage = { type: "dojang:tap", id: this.id, lines: this.lines, dropped: this.dropped };
    this.lines = [];
    this.dropped = 0;
    this.inFlight++;
    process.send?.(m, undefined, undefined, () => this.inFlight--);
  }

  close(): void {
    this.closed = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
  }
}

function flushTap(s: WorkerTapSink): void {
  s.flush();
}

/** In a worker: the proxy without its own admin listener; metrics and admin requests go through the primary. */
export async function runWorker(config: Config, log: Logger, logLevelFixed = false): Promise<Dojang> {
  configFromText = (await loadConfigParsers()).configFromText;
  const wlog = log.child({ worker: cluster.worker?.id });
  // (the config module above brought the fault parsers in: the worker takes them at once)
  const faultParsers = await loadFaultParsers();
  const inherited = socketsFromPrimary();
  const d = new Dojang(
    { ...config, admin: null, xds: null },
    { logger: wlog, accessLogger: createAccessLogger({ level: config.logLevel }), reloadLogLevel: !logLevelFixed, faultParsers, ...(inherited === undefined ? {} : { inherited }) },
  );
  // Constructing one registers prom-client's worker-side listener that answers the primary.
  new AggregatorRegistry();
  AggregatorRegistry.setRegistries([d.metrics.registry]);
  const stop = (): void => {
    void d.close().then(() => process.exit(0));
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  // The primary reads the file on SIGHUP and sends it here; a SIGHUP to the whole process group
  // (a closing terminal) must not end the worker (the default action) nor apply twice.
  process.on("SIGHUP", () => wlog.debug("SIGHUP in a worker: ignored, the primary reloads and forwards"));
  // the same for `dojang upgrade`'s SIGUSR2 (its default action ends a process): the primary upgrades
  process.on("SIGUSR2", () => wlog.debug("SIGUSR2 in a worker: ignored, the primary upgrades"));
  // The primary disconnecting the IPC channel is a stop too (it died or is stopping).
  process.on("disconnect", stop);
  // An op that swaps the config (a reload, an xDS update) waits until start() has bound the
  // listeners: one run while start() is binding (the primary sends it as soon as this worker has
  // its sync) would build listeners that start() never binds, and the worker would answer 200
  // for a listener it does not serve.
  let started!: () => void;
  const listening = new Promise<void>((r) => (started = r));
  process.on("message", (m: unknown) => {
    if (!isType<OpMessage>(m, "dojang:op")) return;
    const swaps = m.req.op === "reload" || m.req.op === "xds" || m.req.op === "endpoints";
    void (swaps ? listening.then(() => runOp(d, m.req)) : Promise.resolve(runOp(d, m.req))).then((r) => {
      if (m.req.op === "reload") wlog.debug({ status: r.status, body: r.body }, "config reloaded from the primary");
      const reply: ReplyMessage = { type: "dojang:reply", id: m.id, status: r.status, body: r.body };
      // With a callback a closed channel (the primary is gone) is an error passed here, not an
      // 'error' event that would end the worker before its drain.
      process.send?.(reply, undefined, undefined, ignoreSendError);
    });
  });
  // with xDS the primary answers between two updates, one of which may take a while
  await syncFromPrimary(d, wlog, config.xds === null ? SYNC_TIMEOUT_MS : SYNC_TIMEOUT_MS + XDS_OP_TIMEOUT_MS);
  try {
    await d.start();
  } finally {
    started();
  }
  startHeapTuning(d, config, log);
  // which socket is which (the primary hands them on at an upgrade)
  process.send?.({ type: READY, sockets: d.socketRecords() });
  return d;
}

function ignoreSendError(): void {
  /* the primary is gone: the 'disconnect' handler stops this worker */
}

/** Applies the primary's mutation log before listening (bounded wait; an old primary never answers). */
function syncFromPrimary(d: Dojang, log: Logger, timeoutMs: number): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(t);
      process.off("message", onMessage);
      resolve();
    };
    const onMessage = (m: unknown): void => {
      if (!isType<SyncMessage>(m, "dojang:sync")) return;
      for (const op of m.ops) {
        const r = runOp(d, op, true) as AdminReply;
        // The log keeps refused changes too (they are refused again here, as they were then).
        if (r.status >= 300) log.debug({ op: op.op, status: r.status, body: r.body }, "replayed admin change refused, as it was");
      }
      if (m.xds === undefined) return done();
      // what the control plane sent, as every other worker serves it, before this one listens
      process.off("message", onMessage);
      clearTimeout(t);
      void d.applyXds(stateFromJson(m.xds as XdsStateJson)).then((r) => {
        if (!r.ok) log.error({ issues: r.issues }, "xds: the state the other workers serve was refused here");
        done();
      });
    };
    const t = setTimeout(() => {
      log.warn("no mutation log from the primary; serving with the config file's fault rules only");
      done();
    }, timeoutMs);
    process.on("message", onMessage);
    const req: SyncRequest = { type: "dojang:sync-request" };
    process.send?.(req, undefined, undefined, ignoreSendError);
  });
}

/** The primary's side of the IPC requests: one id per request, every worker's reply, bounded. */
class Fanout {
  private seq = 0;
  private readonly pending = new Map<number, { replies: WorkerReply[]; waiting: Set<number>; finish: () => void }>();

  /** Sends `req` to `workers`; resolves with their replies and the ids of those that did not answer in time. */
  ask(workers: readonly Worker[], req: WorkerOp, timeoutMs = OP_TIMEOUT_MS): Promise<{ replies: WorkerReply[]; missing: number[] }> {
    const id = ++this.seq;
    return new Promise((resolve) => {
      const replies: WorkerReply[] = [];
      const waiting = new Set(workers.map((w) => w.id));
      const finish = (): void => {
        clearTimeout(t);
        this.pending.delete(id);
        replies.sort((a, b) => a.worker - b.worker);
        resolve({ replies, missing: [...waiting].sort((a, b) => a - b) });
      };
      const t = setTimeout(finish, timeoutMs);
      this.pending.set(id, { replies, waiting, finish });
      const msg: OpMessage = { type: "dojang:op", id, req };
      for (const w of workers) w.send(msg);
      if (waiting.size === 0) finish();
    });
  }

  onReply(w: Worker, m: ReplyMessage): void {
    const p = this.pending.get(m.id);
    if (p === undefined || !p.waiting.delete(w.id)) return;
    p.replies.push({ worker: w.id, status: m.status, body: m.body });
    if (p.waiting.size === 0) p.finish();
  }

  /** A worker that exits answers nothing: stop waiting for it. */
  onExit(w: Worker): void {
    for (const p of [...this.pending.values()]) if (p.waiting.delete(w.id) && p.waiting.size === 0) p.finish();
  }
}

/** In the primary: fork, supervise, aggregate, answer the admin, reload, drain. Resolves when all workers have exited. */
export async function runPrimary(
  startConfig: Config,
  log: Logger,
  file?: string,
  logLevelFixed = false,
  // the CLI's: a config read at reload as the command line changed it (--admin-mutations), and a
  // call once the admin listens (the pid file)
  // and, for `dojang upgrade`, the sockets handed over by the previous process, and a call once
  // every worker is ready
  cli: {
    readonly adjustConfig?: (c: Config) => Config;
    readonly onStarted?: () => void;
    readonly inherited?: InheritedSockets;
    readonly onReady?: (h: PrimaryHandover) => void;
  } = {},
): Promise<number> {
  // first: every socket the workers make node:cluster open here is seen (upgrade-sockets.ts)
  const opened = new PrimarySockets();
  configFromText = (await loadConfigParsers()).configFromText;
  let config = startConfig;
  const n = config.workers;
  // The primary counts each reload once (the workers' counters are left out of the sum).
  const own = new client.Registry();
  const reloads = configReloadsCounter(own);
  const ready = new Set<number>();
  /** workers that have the mutation log; only these get (and answer) admin requests */
  const synced = new Map<number, Worker>();
  let stopping = false;
  const aggregator = new AggregatorRegistry();
  const fanout = new Fanout();
  const mutations = new MutationLog();
  // The file as the primary last applied it (at start, then each successful reload): every
  // worker, a replacement forked after the file was edited too, runs this text, then the
  // mutation log (API fault changes, and each reload's fault rules in their order).
  let configText: string | undefined;
  if (file !== undefined) {
    try {
      configText = readFileSync(file, "utf8");
    } catch {
      /* read by main a moment ago; the workers then read the file themselves */
    }
  }
  const serving = (): Worker[] => [...synced.values()].filter((w) => w.isConnected());
  // GET /tap subscriptions, by the id the workers know them by
  const taps = new Map<number, HttpTapSink>();
  let tapSeq = 0;

  // xDS: the one ADS stream (started below, once the workers are forked). Its updates and a
  // starting worker's sync take turns, so a worker never syncs between an update sent to the
  // others and their answers (it would miss it).
  let xds: XdsClient | undefined;
  /** the state every worker serves (the last update they all applied) */
  let xdsServed: XdsState | null = null;
  let xdsTurn: Promise<unknown> = Promise.resolve();
  const inXdsTurn = <T>(f: () => Promise<T> | T): Promise<T> => {
    const run = xdsTurn.then(f);
    xdsTurn = run.catch(() => undefined);
    return run;
  };
  const xdsHost: XdsHost = {
    log,
    registry: own,
    apply: (state) =>
      inXdsTurn(async () => {
        const { replies, missing } = await fanout.ask(serving(), { op: "xds", state: stateToJson(state) }, XDS_OP_TIMEOUT_MS);
        const r = xdsReply(replies, missing, log);
        if (r.ok) xdsServed = state;
        return r;
      }),
    applyEndpoints: (state, updates) =>
      inXdsTurn(async () => {
        if (xdsServed === null) return "reload" as const;
        // (each set's change only: a worker patches its own lists)
        const { replies, missing } = await fanout.ask(serving(), { op: "endpoints", updates: updates.map(({ name, delta }) => ({ name, delta })) }, XDS_OP_TIMEOUT_MS);
        // a worker that cannot apply it in place: every worker gets the whole state instead
        if (missing.length === 0 && replies.some((r) => r.status === 409)) return "reload" as const;
        const r = xdsReply(replies, missing, log);
        if (r.ok) xdsServed = state;
        return r;
      }),
  };

  // `dojang upgrade`: each handed-over socket a listener takes goes to the workers by its
  // descriptor (node:cluster then accepts on it here, and the handle below shares it: it is
  // never closed, only kept); the admin listener's is this process's own.
  const socketFds: Record<string, number> = {};
  const inh = cli.inherited;
  let adminOn: ListenOn | undefined;
  if (inh !== undefined) {
    for (const l of config.listeners) {
      const main = inh.take("listener", l.name, l.address);
      const fd = main === undefined ? undefined : fdOf(main);
      if (fd !== undefined) socketFds[socketKey("listener", l.name)] = fd;
      const h1 = l.http1Address === null ? undefined : inh.take("http1", l.name, l.http1Address);
      const fd1 = h1 === undefined ? undefined : fdOf(h1);
      if (fd1 !== undefined) socketFds[socketKey("http1", l.name)] = fd1;
    }
    if (config.admin !== null) adminOn = inh.take("admin", "", config.admin.address);
    for (const h of inh.untaken()) closeHandle(h);
  }
  /** the workers' listening sockets, as the first ready worker reported them */
  let workerSockets: readonly SocketRecord[] = [];

  const faults = async (method: string, path: string, body: string): Promise<AdminReply> => {
    const op: WorkerOp = { op: "faults", method, path, body };
    const m = method.toUpperCase();
    const mutation = m !== "GET" && m !== "HEAD";
    // Recorded as it is sent, whatever the answers: replayed in the same order a refused change is
    // refused again, and a worker that syncs while this one is in flight (it is not asked) still
    // gets it from the log.
    if (mutation) mutations.record(op);
    const { replies, missing } = await fanout.ask(serving(), op);
    const r = mergeFaultReplies(replies, missing);
    if (mutation && r.status >= 500) log.error({ method, path, status: r.status, body: r.body }, "fault API: the workers did not all apply the change");
    return r;
  };
  const admin =
    config.admin === null
      ? undefined
      : new AdminServer(config.admin, {
          metrics: async () => ({ contentType: aggregator.contentType, body: (await aggregator.clusterMetrics()) + "\n" + (await own.metrics()) }),
          ready: () => !stopping && ready.size === n,
          // admin.readyClusters: every worker is asked (health and ejections are per process)
          notReady: async () => {
            if (stopping) return "draining";
            if (ready.size !== n) return "starting";
            // with xDS, not before the first fetch (or its initial_fetch_timeout), as a single process
            if (config.xds !== null) {
              if (xds === undefined) return "starting: the xDS client";
              const why = xds.notReady();
              if (why !== null) return why;
            }
            const names = config.admin?.readyClusters ?? [];
            if (names.length === 0) return null;
            const { replies, missing } = await fanout.ask(serving(), { op: "ready", clusters: names });
            if (missing.length > 0) return `worker ${missing[0]} did not answer`;
            for (const r of replies) if (typeof r.body === "string") return `${r.body} (worker ${r.worker})`;
            return null;
          },
          // the memory plan the launcher gave every process (the workers inherit its flags)
          config: () => {
            const base = { ...config, memory: { ...config.memory, plan: processMemoryPlan(config.memory.limitBytes, config.workers) } };
            // with xDS: the config the workers serve (the file's and the control plane's), and the stream's status
            const x = xds;
            if (x === undefined || config.xds === null) return base;
            const c = xdsServed === null ? base : compose(base, xdsServed).config;
            return {
              ...c,
              xds: { ...config.xds, ...x.status(), listeners: c.listeners.filter((l) => x.hasListener(l.name)).map((l) => l.name), clusters: c.clusters.filter((k) => x.clusterVersion(k.name) !== undefined).map((k) => k.name) },
            };
          },
          faults,
          calls: async (q) => mergeCalls((await fanout.ask(serving(), { op: "calls", last: q.last, failed: q.failed, sinceMs: q.sinceMs })).replies, q.last),
          ...(config.stats === null
            ? {}
            : {
                stats: async (window: string, withState: boolean) =>
                  mergeStats((await fanout.ask(serving(), { op: "stats", window, state: withState })).replies, withState) ?? { error: "no worker answered" },
              }),
          tap: async (query, _f, sink) => {
            const id = ++tapSeq;
            taps.set(id, sink);
            await fanout.ask(serving(), { op: "tap", id, query });
            return () => {
              taps.delete(id);
              void fanout.ask(serving(), { op: "untap", id });
            };
          },
          clusters: async () =>
            mergeClusters((await fanout.ask(serving(), { op: "clusters" })).replies).map((c) => {
              const v = xds?.clusterVersion(c.name);
              return v === undefined ? c : { ...c, source: "xds", xdsVersion: v.version, xdsEndpointsVersion: v.endpointsVersion };
            }),
          ...(file === undefined ? {} : { reload: () => reloadAll("POST /reload") }),
          drain: () => {
            stop("POST /drain");
            return { status: 202, body: { draining: true, drainTimeoutMs: config.drainTimeoutMs } };
          },
        });
  const fork = (): Worker => {
    const env: Record<string, string> = {};
    if (configText !== undefined) env[CONFIG_TEXT_ENV] = configText;
    if (Object.keys(socketFds).length > 0) env[SOCKETS_ENV] = JSON.stringify(socketFds);
    const w = cluster.fork(Object.keys(env).length === 0 ? undefined : env);
    // A send to a worker whose channel just closed is an 'error' event: unhandled, it would end the
    // primary. The worker's 'exit' follows and settles whatever waited for it.
    w.on("error", (err: Error) => log.warn({ worker: w.id, err: err.message }, "worker IPC error"));
    w.on("message", (m: unknown) => {
      if (isType<{ type: typeof READY; sockets?: SocketRecord[] }>(m, READY)) {
        ready.add(w.id);
        if (workerSockets.length === 0 && Array.isArray(m.sockets)) workerSockets = m.sockets;
        if (ready.size === n && !announced && !stopping) {
          announced = true;
          cli.onReady?.(handover);
        }
      }
      else if (isType<ReplyMessage>(m, "dojang:reply")) fanout.onReply(w, m);
      else if (isType<TapMessage>(m, "dojang:tap")) taps.get(m.id)?.pushAll(m.lines, m.dropped);
      else if (isType<SyncRequest>(m, "dojang:sync-request")) {
        void inXdsTurn(() => {
          if (!mutations.complete) log.warn({ worker: w.id, max: MutationLog.MAX_LOG }, "mutation log overflowed: this worker misses the oldest admin changes");
          const sync: SyncMessage = { type: "dojang:sync", ops: mutations.ops, ...(xdsServed === null ? {} : { xds: stateToJson(xdsServed) }) };
          w.send(sync);
          synced.set(w.id, w);
        });
      }
    });
    return w;
  };
  let exitCode = 0;
  const allExited = new Promise<void>((resolve) => {
    cluster.on("exit", (w, code, signal) => {
      const wasReady = ready.delete(w.id);
      synced.delete(w.id);
      fanout.onExit(w);
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
      if (stopping && allWorkersDead(Object.values(cluster.workers ?? {}))) resolve();
    });
  });
  // A reload (SIGHUP, POST /reload, watchConfig): the primary reads and checks the file once,
  // sends it to every worker (each swaps its snapshot), answers when all have answered, and logs
  // once what applied and what needs a restart. One at a time. The SIGHUP handler is installed
  // before the first fork: SIGHUP's default action ends the process, and with it every worker.
  let reloading: Promise<unknown> = Promise.resolve();
  const reloadAll = (trigger: string): Promise<AdminReply> => {
    const run = reloading.then(async () => {
      const r = await reload(file, config, log, serving, fanout, mutations, trigger, cli.adjustConfig);
      reloads[r.reply.status === 200 ? "ok" : "error"].inc();
      if (r.next !== undefined) {
        config = configAsApplied(config, r.next.config);
        configText = r.next.text;
        // the primary's own lines follow logLevel too (unless --log-level was given)
        if (!logLevelFixed && log.level !== config.logLevel) log.level = config.logLevel;
      }
      return r.reply;
    });
    reloading = run.catch(() => undefined);
    return run;
  };
  const onHup = (): void => void reloadAll("SIGHUP");
  process.on("SIGHUP", onHup);
  const watcher = config.watchConfig && file !== undefined ? watchConfigFile(
          file,
          (text) => {
            if (text !== configText) void reloadAll("watchConfig");
          },
          log,
        ) : undefined;
  let announced = false;
  const handover: PrimaryHandover = {
    sockets: () => {
      const out: { record: SocketRecord; handle: object }[] = [];
      for (const record of workerSockets) {
        const handle = opened.find(record.bound);
        if (handle !== undefined) out.push({ record, handle });
        else log.warn({ socket: record }, "upgrade: this listening socket is not found; the new process binds it afresh");
      }
      const ah = admin === undefined ? undefined : handleOf(admin.server);
      const ab = admin?.boundAddress;
      if (admin !== undefined && ah !== undefined && ab !== undefined) {
        out.push({ record: { role: "admin", name: "", configured: formatHostPort(admin.address), bound: boundOf(ab) }, handle: ah });
      }
      return out;
    },
    handOver: () => {
      // no new connections here from now on (node:cluster's queued ones still reach the workers)
      for (const record of workerSockets) {
        const h = opened.find(record.bound);
        if (h !== undefined) closeHandle(h);
      }
      admin?.stopAccepting();
      setTimeout(() => stop("upgrade"), HANDOVER_GRACE_MS);
    },
  };
  // The admin listener first: a port in use fails the start before any worker accepts a connection.
  if (admin !== undefined) await admin.listen(adminOn);
  for (let i = 0; i < n; i++) fork();
  if (config.xds !== null) {
    // loaded only with xDS; the bootstrap was checked by main (a bad one stops the start here too)
    const { startXdsClient } = await import("../xds/index.js");
    xds = startXdsClient(config.xds.bootstrap, xdsHost);
  }
  log.info({ pid: process.pid, workers: n, admin: admin?.boundAddress }, "dojang primary started");
  cli.onStarted?.();

  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    watcher?.close();
    xds?.close();
    log.info({ signal }, "signal received, draining workers");
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill("SIGTERM");
    // A worker that does not finish in time is ended (drain timeout plus a grace period).
    setTimeout(() => {
      for (const w of Object.values(cluster.workers ?? {})) w?.process.kill("SIGKILL");
    }, config.drainTimeoutMs + 5000).unref();
  };
  const onTerm = (): void => stop("SIGTERM");
  const onInt = (): void => stop("SIGINT");
  process.on("SIGTERM", onTerm);
  process.on("SIGINT", onInt);
  await allExited;
  await admin?.close();
  // (a primary that stays as an upgrade's supervisor passes these on from here: src/upgrade.ts)
  process.off("SIGHUP", onHup);
  process.off("SIGTERM", onTerm);
  process.off("SIGINT", onInt);
  return exitCode;
}

/**
 * The workers' answers to an xDS update as the client takes them: applied when every worker
 * applied it; else the first refusal's issues (and the resources they are about), or the workers
 * that did not answer. Each refusal is logged with its worker.
 */
function xdsReply(replies: readonly WorkerReply[], missing: readonly number[], log: Logger): ApplyResult {
  const refused = replies.filter((r) => r.status !== 200);
  if (refused.length > 0 || missing.length > 0) log.error({ missing, replies: refused }, "xds: not every worker applied the update");
  if (missing.length > 0) return { ok: false, issues: [{ path: "", message: `worker(s) ${missing.join(", ")} did not apply the update within ${XDS_OP_TIMEOUT_MS / 1000}s` }] };
  const first = refused[0];
  if (first === undefined) return { ok: true };
  const body = first.body as ApplyResult | null;
  if (body !== null && typeof body === "object" && body.ok === false) return body;
  return { ok: false, issues: [{ path: "", message: `worker ${first.worker} answered ${first.status}` }] };
}

/**
 * One reload in the primary. The file is read and validated here, once: an invalid one never
 * reaches a worker (400 with the issues). A valid one goes to every worker; the answer is 200
 * when every worker swapped (the first worker's result, with the worker ids), else the workers'
 * answers (500; 400 when every worker refused, e.g. a new listener's address in use).
 * `next` is what the primary serves from now on (its /config, the text a replacement starts with).
 */
async function reload(
  file: string | undefined,
  running: Config,
  log: Logger,
  serving: () => Worker[],
  fanout: Fanout,
  mutations: MutationLog,
  trigger: string,
  adjust: (c: Config) => Config = (c) => c,
): Promise<{ reply: AdminReply; next?: { config: Config; text: string } }> {
  if (file === undefined) {
    log.warn({ trigger }, "reload: no config file to reload (embedded default)");
    return { reply: { status: 400, body: { result: "error", message: "no config file to reload (embedded default)", issues: [] } } };
  }
  let op: WorkerOp & { op: "reload" };
  let next: Config;
  try {
    op = { op: "reload", text: readFileSync(file, "utf8"), source: file };
    next = adjust(configFromText(op.text, file));
  } catch (err) {
    const issues: readonly ConfigIssue[] = err instanceof ConfigError ? err.issues : [{ path: "", message: (err as Error).message }];
    log.error({ trigger, file, issues, err: (err as Error).message }, "reload failed; nothing changed");
    return { reply: { status: 400, body: { result: "error", message: "reload failed; nothing changed", issues } } };
  }
  mutations.record(op);
  const { replies, missing } = await fanout.ask(serving(), op);
  const report = reloadReport(running, next);
  const failed = replies.filter((r) => r.status !== 200).map((r) => r.worker);
  const workers = replies.map((r) => r.worker);
  const fields = { trigger, file, applied: report.applied, notApplied: report.notApplied, workers, missing, failed };
  if (missing.length > 0 || failed.length > 0 || replies.length === 0) {
    log.error({ ...fields, replies }, "reload: not every worker applied the new config");
    const all400 = replies.length > 0 && missing.length === 0 && replies.every((r) => r.status === 400);
    return {
      reply: { status: all400 ? 400 : 500, body: { result: "error", message: "not every worker applied the new config", missing, replies } },
      ...(failed.length < replies.length ? { next: { config: next, text: op.text } } : {}),
    };
  }
  if (report.notApplied.length > 0) log.warn(fields, report.message);
  else log.info(fields, report.message);
  const first = replies[0]!.body as Record<string, unknown>;
  // what applied is the primary's comparison (a worker has no admin block of its own)
  const body = { ...first, applied: report.applied, notApplied: report.notApplied, message: report.message, workers };
  return { reply: { status: 200, body }, next: { config: next, text: op.text } };
}
