// `workers: N` behind one admin: the primary sends each fault API request, GET /calls and a
// reload (SIGHUP, POST /reload, watchConfig) to every worker over the cluster IPC channel, and
// answers with one reply built from theirs. The merging rules are pure functions here (tested without processes); workers.ts
// owns the processes. Nothing here runs per proxied call.
import type { AdminReply } from "./admin.js";
import type { EndpointDelta } from "../../translate/endpoint-set.js";

/** What the primary asks a worker to do (the same ops replay the mutation log into a new worker). */
export type WorkerOp =
  | { readonly op: "faults"; readonly method: string; readonly path: string; readonly body: string }
  | { readonly op: "calls"; readonly last: number | undefined }
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
    if (op.op === "calls" || op.op === "clusters" || op.op === "ready" || op.op === "xds" || op.op === "endpoints") return;
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
