// `workers: N` behind one admin: the primary sends each fault API request, GET /calls, GET
// /stats, GET /tap's subscription and a reload (SIGHUP, POST /reload, watchConfig) to every
// worker over the cluster IPC channel, and answers with one reply built from theirs. The merging
// rules are pure functions here (tested without processes); workers.ts owns the processes.
// Nothing here runs per proxied call.
import type { AdminReply } from "./admin.js";
import { finishStats, mergeRawStats, type RawStats, type StatsView } from "../observe/stats.js";
import type { EndpointDelta } from "../../translate/endpoint-set.js";

/** What the primary asks a worker to do (the same ops replay the mutation log into a new worker). */
export type WorkerOp =
  | { readonly op: "faults"; readonly method: string; readonly path: string; readonly body: string }
  | { readonly op: "calls"; readonly last: number | undefined; readonly failed: boolean; readonly sinceMs: number | undefined }
  /** GET /stats: the worker's raw rows over the window (and with `state` its view state) */
  | { readonly op: "stats"; readonly window: string; readonly state: boolean }
  /** GET /tap: subscribe `id` with the filter in `query`; its records come back as TapMessages */
  | { readonly op: "tap"; readonly id: number; readonly query: string }
  | { readonly op: "untap"; readonly id: number }
  /** GET /clusters: the worker's clusters as it sees them (each worker has its own sessions, health and ejections) */
  | { readonly op: "clusters" }
  /** /ready with admin.readyClusters: the first of these clusters with no healthy endpoint in the worker, or null */
  | { readonly op: "ready"; readonly clusters: readonly string[] }
  /** a reload: this config text (validated by the primary), swapped in by each worker; replayed
   * into a worker started later, only its fault rules (that worker runs the last reloaded text) */
  | { readonly op: "reload"; readonly text: string; readonly source: string }
  /**
   * xDS (the primary holds the one ADS stream): the state the control plane's resources add to
   * the config, to compose and swap in (the whole-config reload), as plain JSON (xds/compose.ts
   * stateToJson); the primary ACKs only when every worker has answered 200
   */
  | { readonly op: "xds"; readonly state: unknown }
  /** xDS, an update of endpoint sets only: each ClusterLoadAssignment's delta, applied in place (409: the worker needs the whole state) */
  | { readonly op: "endpoints"; readonly updates: readonly { readonly name: string; readonly delta: EndpointDelta }[] };

/** primary → worker */
export interface OpMessage {
  readonly type: "dojang:op";
  readonly id: number;
  readonly req: WorkerOp;
}
/** worker → primary */
export interface ReplyMessage extends AdminReply {
  readonly type: "dojang:reply";
  readonly id: number;
}
/** worker → primary, before it listens: "what happened before I started?" */
export interface SyncRequest {
  readonly type: "dojang:sync-request";
}
/** worker → primary: records for the tap subscription `id` (JSON lines), and how many the worker dropped since its last batch */
export interface TapMessage {
  readonly type: "dojang:tap";
  readonly id: number;
  readonly lines: readonly string[];
  readonly dropped: number;
}
/** primary → worker: the mutation log, to apply in order before listening, and the xDS state every other worker serves */
export interface SyncMessage {
  readonly type: "dojang:sync";
  readonly ops: readonly WorkerOp[];
  /** the xDS state last applied (stateToJson), absent without xDS or before anything was accepted */
  readonly xds?: unknown;
}

export function isType<T extends { type: string }>(m: unknown, type: T["type"]): m is T {
  return typeof m === "object" && m !== null && (m as { type?: unknown }).type === type;
}

export interface WorkerReply extends AdminReply {
  readonly worker: number;
}

/** Per-worker counters in fault API bodies: summed over the workers, never compared. */
const COUNTERS: ReadonlySet<string> = new Set(["matched", "fired", "overflowed"]);

function withoutCounters(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(withoutCounters);
  if (typeof v !== "object" || v === null) return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) if (!COUNTERS.has(k)) out[k] = withoutCounters(x);
  return out;
}

/** `bodies` have one shape (checked by the caller); the first with every counter summed. */
function sumCounters(bodies: readonly unknown[]): unknown {
  const first = bodies[0];
  if (Array.isArray(first)) return first.map((_, i) => sumCounters(bodies.map((b) => (b as unknown[])[i])));
  if (typeof first !== "object" || first === null) return first;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(first)) {
    out[k] =
      COUNTERS.has(k) && typeof x === "number"
        ? bodies.reduce<number>((s, b) => s + Number((b as Record<string, unknown>)[k] ?? 0), 0)
        : sumCounters(bodies.map((b) => (b as Record<string, unknown>)[k]));
  }
  return out;
}

/**
 * One answer from every worker's answer to the same fault API request: when they agree (same
 * status, same body but for the per-worker counters), that answer with the counters summed;
 * else 500 with every worker's answer. No answers at all: 503.
 */
export function mergeFaultReplies(replies: readonly WorkerReply[], missing: readonly number[] = []): AdminReply {
  if (missing.length > 0) {
    return { status: 500, body: { error: `worker(s) ${missing.join(", ")} did not answer; the fault rules may now differ between workers`, replies } };
  }
  if (replies.length === 0) return { status: 503, body: { error: "no worker is serving yet" } };
  const key = (r: WorkerReply): string => JSON.stringify([r.status, withoutCounters(r.body)]);
  const k0 = key(replies[0]!);
  if (replies.some((r) => key(r) !== k0)) {
    return { status: 500, body: { error: "the workers disagree; each worker's answer is in `replies`", replies } };
  }
  const first = replies[0]!;
  return { status: first.status, body: first.body === null ? null : sumCounters(replies.map((r) => r.body)) };
}

/** GET /calls over workers: every worker's journal, each record with its worker id, sorted by start, the last `last`. */
export function mergeCalls(replies: readonly WorkerReply[], last: number | undefined): unknown[] {
  const all: { worker: number; start_ms: number }[] = [];
  for (const r of replies) {
    if (r.status !== 200 || !Array.isArray(r.body)) continue;
    for (const rec of r.body as Record<string, unknown>[]) all.push({ ...rec, worker: r.worker, start_ms: Number(rec["start_ms"]) });
  }
  all.sort((a, b) => a.start_ms - b.start_ms);
  return last === undefined ? all : last === 0 ? [] : all.slice(-last);
}

/** A worker's answer to the "stats" op. */
export interface WorkerStats {
  readonly raw: RawStats | null;
  readonly state?: WorkerViewState;
}

/** The part of a worker's view state the primary merges (Dojang.viewState). */
export interface WorkerViewState {
  readonly active_calls: number;
  readonly taps: number;
  readonly overload: { readonly overloaded: boolean; readonly cuts: number; readonly refused: number };
  readonly faults: readonly { readonly id: string; readonly matched: number; readonly fired: number }[];
  readonly clusters: readonly unknown[];
  readonly xds: unknown;
}

/**
 * GET /stats over workers: each worker's rows summed row by row (rates too: each worker's over
 * its own age), then finished once (quantiles from the summed bins); with `state`, calls in
 * flight and overload cuts summed (overloaded when any worker is), fault rules by id with their
 * counters summed, clusters as mergeClusters shows them. null: no worker has stats.
 */
export function mergeStats(replies: readonly WorkerReply[], withState: boolean): (StatsView & { workers: number; state?: unknown }) | null {
  const ok = replies.filter((r) => r.status === 200 && typeof r.body === "object" && r.body !== null) as (WorkerReply & { body: WorkerStats })[];
  const raw = mergeRawStats(ok.map((r) => r.body.raw).filter((x): x is RawStats => x !== null));
  if (raw === undefined) return null;
  const view = { ...finishStats(raw), workers: ok.length };
  if (!withState) return view;
  const states = ok.map((r) => ({ worker: r.worker, s: r.body.state })).filter((x): x is { worker: number; s: WorkerViewState } => x.s !== undefined);
  const faults = new Map<string, Record<string, unknown> & { matched: number; fired: number }>();
  for (const { s } of states) {
    for (const f of s.faults) {
      const m = faults.get(f.id);
      if (m === undefined) faults.set(f.id, { ...f });
      else {
        m.matched += f.matched;
        m.fired += f.fired;
      }
    }
  }
  return {
    ...view,
    state: {
      active_calls: states.reduce((a, x) => a + x.s.active_calls, 0),
      // (each reader is subscribed in every worker)
      taps: states.reduce((a, x) => Math.max(a, x.s.taps), 0),
      overload: {
        overloaded: states.some((x) => x.s.overload.overloaded),
        cuts: states.reduce((a, x) => a + x.s.overload.cuts, 0),
        refused: states.reduce((a, x) => a + x.s.overload.refused, 0),
      },
      faults: [...faults.values()],
      clusters: mergeClusters(states.map((x) => ({ worker: x.worker, status: 200, body: x.s.clusters }))),
      xds: null,
    },
  };
}

/**
 * GET /clusters over workers: one entry per cluster (in the first answer's order), its name and
 * lb policy, and under `workers` what each worker sees (its own sessions, health checks,
 * ejections and breaker counters: these are per process), with the worker id.
 */
export function mergeClusters(replies: readonly WorkerReply[]): { name: string; lb: unknown; workers: Record<string, unknown>[] }[] {
  const out = new Map<string, { name: string; lb: unknown; workers: Record<string, unknown>[] }>();
  for (const r of [...replies].sort((a, b) => a.worker - b.worker)) {
    if (r.status !== 200 || !Array.isArray(r.body)) continue;
    for (const c of r.body as Record<string, unknown>[]) {
      const name = String(c["name"]);
      let e = out.get(name);
      if (e === undefined) out.set(name, (e = { name, lb: c["lb"], workers: [] }));
      const { name: _n, lb: _l, ...rest } = c;
      e.workers.push({ worker: r.worker, ...rest });
    }
  }
  return [...out.values()];
}

/**
 * What a worker started later (a replacement after a crash) must apply to match the others:
 * every fault mutation (a refused one is refused again) and reload, in the order the primary
 * sent them. POST /faults/reset brings every worker
 * back to its last loaded config file, so the log shrinks to that reload. Bounded: past
 * MAX_LOG ops a new worker would start without the oldest ones, and `complete` says so.
 */
export class MutationLog {
  static readonly MAX_LOG = 10_000;
  private log: WorkerOp[] = [];
  private lastReload: WorkerOp | undefined;
  private dropped = 0;

  record(op: WorkerOp): void {
    // (xDS is not replayed: a worker that starts later is given the state every worker serves)
    if (op.op === "calls" || op.op === "clusters" || op.op === "ready" || op.op === "stats" || op.op === "tap" || op.op === "untap" || op.op === "xds" || op.op === "endpoints") return;
    if (op.op === "reload") this.lastReload = op;
    if (op.op === "faults" && op.method.toUpperCase() === "POST" && /^\/faults\/reset\/?(\?.*)?$/.test(op.path)) {
      this.log = this.lastReload === undefined ? [] : [this.lastReload];
      this.dropped = 0;
      return;
    }
    this.log.push(op);
    if (this.log.length > MutationLog.MAX_LOG) {
      this.log.shift();
      this.dropped++;
    }
  }

  get ops(): readonly WorkerOp[] {
    return this.log;
  }

  get complete(): boolean {
    return this.dropped === 0;
  }
}
