// The process logger and the per-call access log. Logs never block the hot path: pino writes
// through an asynchronous sonic-boom destination, and the access line is one object per call.
import pino, { type Logger, type DestinationStream } from "pino";

export type LogLevel = "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";

export interface LoggerOptions {
  readonly level: LogLevel;
  /** Where lines go; default: stdout, asynchronously. */
  readonly destination?: DestinationStream;
}

export function createLogger(opts: LoggerOptions): Logger {
  const dest = opts.destination ?? pino.destination({ dest: 1, sync: false, minLength: 4096 });
  return pino({ level: opts.level, base: { svc: "dojang" }, timestamp: pino.stdTimeFunctions.isoTime }, dest);
}

/** Fields of one access-log line (also the shape documented in the README). */
export interface AccessRecord {
  request_id: string;
  path: string;
  authority: string | undefined;
  grpc_code: number;
  grpc_status: string;
  decided_by: string;
  grpc_message: string | undefined;
  route: string | undefined;
  upstream: string | undefined;
  budget_in_ms: number | undefined;
  budget_out_ms: number | undefined;
  duration_ms: number;
  req_messages: number;
  req_bytes: number;
  resp_messages: number;
  resp_bytes: number;
}
