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
}

/**
 * The fields the operator named (config `accessLogRedact`) replaced with "<redacted>", before the
 * record reaches the access log or the journal; a field that is absent stays absent.
 */
export function redactRecord(rec: AccessRecord, fields: readonly RedactableField[]): void {
  for (let i = 0; i < fields.length; i++) {
    const f = fields[i]!;
    if (rec[f] !== undefined) rec[f] = REDACTED;
  }
}

/** The most recent calls, for GET /calls and the library's `calls`: a fixed-size ring. */
export class Journal {
  private readonly ring: (AccessRecord | undefined)[];
  private next = 0;
  private count = 0;
  constructor(readonly size: number) {
    this.ring = new Array(size).fill(undefined);
  }
  push(r: AccessRecord): void {
    if (this.size === 0) return;
    this.ring[this.next] = r;
    this.next = (this.next + 1) % this.size;
    if (this.count < this.size) this.count++;
  }
  /** The last `n` calls (all kept when n is omitted), oldest first. */
  last(n = this.count): AccessRecord[] {
    const k = Math.max(0, Math.min(n, this.count));
    const out: AccessRecord[] = [];
    for (let i = k; i > 0; i--) out.push(this.ring[(this.next - i + this.size) % this.size]!);
    return out;
  }
  clear(): void {
    this.ring.fill(undefined);
    this.next = 0;
    this.count = 0;
  }
}
