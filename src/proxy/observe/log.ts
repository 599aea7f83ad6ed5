// The process logger and the per-call access log. Logs never block the hot path: pino writes
// through an asynchronous sonic-boom destination, and the access line is one object per call.
import pino, { type Logger, type DestinationStream } from "pino";
import { REDACTED } from "../../translate/index.js";
import type { RedactableField } from "../../config/index.js";

export type LogLevel = "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";

export interface LoggerOptions {
  readonly level: LogLevel;
  /** Where lines go; default: stdout, asynchronously. */
  readonly destination?: DestinationStream;
}

/** The process log (start, stop, warnings): few lines, written synchronously so none is lost at exit. */
export function createLogger(opts: LoggerOptions): Logger {
  const dest = opts.destination ?? pino.destination({ dest: 1, sync: true });
  return pino({ level: opts.level, base: { svc: "dojang" }, timestamp: pino.stdTimeFunctions.isoTime }, dest);
}

/** The access log (one line per call): asynchronous (sonic-boom), so it never blocks the hot path. */
export function createAccessLogger(opts: LoggerOptions): Logger {
  const dest = opts.destination ?? pino.destination({ dest: 1, sync: false });
  return pino({ level: opts.level, base: { svc: "dojang" }, timestamp: pino.stdTimeFunctions.isoTime }, dest);
}

/** Writes out what an asynchronous logger still holds (at exit), waiting for a write in flight. */
export async function flushLogger(log: Logger): Promise<void> {
  const stream = (log as unknown as Record<symbol, { flushSync?: () => void; once?: (e: string, f: () => void) => void; writing?: boolean }>)[
    pino.symbols.streamSym
  ];
  if (stream === undefined || typeof stream.flushSync !== "function") return;
  for (let i = 0; i < 2; i++) {
    try {
      stream.flushSync();
      return;
    } catch {
      // a write in flight: wait for it (bounded), then try again
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 500);
        stream.once?.("drain", () => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }
}

/** Fields of one access-log line (also the shape documented in the README). */
export interface AccessRecord {
  request_id: string;
  /** the call's trace id when tracing is on (the client's, or the one dojang started; sampled or not) */
  trace_id?: string | undefined;
  path: string;
  authority: string | undefined;
  /** the client's address and port (the downstream socket's remote end), as node reports them */
  client_address: string | undefined;
  client_port: number | undefined;
  /** TLS listeners: the verified client certificate's first URI SAN, else its subject (RFC 2253); absent without one */
  tls_identity: string | undefined;
  /** TLS listeners: the server name the client sent (SNI), and the negotiated version ("TLSv1.3") */
  tls_sni: string | undefined;
  tls_version: string | undefined;
  grpc_code: number;
  grpc_status: string;
  decided_by: string;
  grpc_message: string | undefined;
  route: string | undefined;
  upstream: string | undefined;
  budget_in_ms: number | undefined;
  /** the grpc-timeout sent upstream (absent when no attempt was made: the call never went upstream) */
  budget_out_ms: number | undefined;
  duration_ms: number;
  /** messages forwarded to the upstream (one refused at its prefix is not counted) */
  req_messages: number;
  /** request bytes forwarded to the upstream (prefixes included) */
  req_bytes: number;
  /** request bytes read but not forwarded: the chunk that held a refused message's prefix (0 unless a message was refused) */
  req_refused_bytes: number;
  resp_messages: number;
  resp_bytes: number;
  /** response bytes read but not forwarded: the refused chunk from the refused message's prefix on */
  resp_refused_bytes: number;
  /** fault rule ids applied to the call (absent when none) */
  faults: readonly string[] | undefined;
  /** fault kinds applied, in the same order */
  fault_kinds: readonly string[] | undefined;
  /** 1 + the client's grpc-previous-rpc-attempts (A6 retries) */
  attempt: number;
  /** upstream attempts dojang made for this call (0: none reached the upstream stage; >1: retried) */
  attempts: number;
  /** wall-clock start, ms since the epoch (journal ordering; the duration uses a monotonic clock) */
  start_ms: number;
  /** the client side when it is not native gRPC: "grpc-web" or "grpc-web-text" (absent for gRPC) */
  protocol?: string | undefined;
  /** routes with jwt: the verified token's `sub` claim (absent without a verified token or without `sub`) */
  jwt_subject?: string | undefined;
  /** routes with rbac: the rule that decided (its name; "(default)" when no rule matched and the default did) */
  rbac_rule?: string | undefined;
}

/**
 * The fields the operator named (config `accessLogRedact`) replaced with "<redacted>", before the
 * record reaches the access log, the journal, the failed-calls ring or a tap; a field that is absent stays absent.
 */
export function redactRecord(rec: AccessRecord, fields: readonly RedactableField[]): void {
  for (let i = 0; i < fields.length; i++) {
    const f = fields[i]!;
    if (rec[f] !== undefined) rec[f] = REDACTED;
  }
}

/** The records (oldest first) of calls that ended within `withinMs` before `nowMs` (wall clock, ms since the epoch). */
export function endedWithin(records: readonly AccessRecord[], withinMs: number, nowMs: number): AccessRecord[] {
  const from = nowMs - withinMs;
  return records.filter((r) => r.start_ms + r.duration_ms >= from);
}

/**
 * The most recent calls, for GET /calls and the library's `calls`, and the failed calls
 * (`failedCalls`, GET /calls?failed): a fixed-size ring; resize() keeps the newest records.
 */
export class Journal {
  private ring: (AccessRecord | undefined)[];
  private next = 0;
  private count = 0;
  private n: number;
  constructor(size: number) {
    this.n = size;
    this.ring = new Array(size).fill(undefined);
  }
  get size(): number {
    return this.n;
  }
  /** A new size (a reload of `failedCalls`): the newest records that fit are kept. */
  resize(size: number): void {
    if (size === this.n) return;
    const keep = this.last(size);
    this.n = size;
    this.ring = new Array(size).fill(undefined);
    this.next = 0;
    this.count = 0;
    for (const r of keep) this.push(r);
  }
  push(r: AccessRecord): void {
    if (this.n === 0) return;
    this.ring[this.next] = r;
    this.next = (this.next + 1) % this.n;
    if (this.count < this.n) this.count++;
  }
  /** The last `n` calls (all kept when n is omitted), oldest first. */
  last(n = this.count): AccessRecord[] {
    const k = Math.max(0, Math.min(n, this.count));
    const out: AccessRecord[] = [];
    for (let i = k; i > 0; i--) out.push(this.ring[(this.next - i + this.n) % this.n]!);
    return out;
  }
  clear(): void {
    this.ring.fill(undefined);
    this.next = 0;
    this.count = 0;
  }
}
