// Trace context on the wire (W3C Trace Context level 1, and B3 as Zipkin's propagation spec writes
// it), pure: parsing what a client sent, writing what an attempt sends, the sampling decision for
// a call, and the span status a gRPC code means under the OpenTelemetry RPC conventions. No I/O,
// no clock, no randomness (ids and draws are passed in).
import { splitMethodPath } from "./grpc-path.js";

/** A parent's context as the client sent it: lower-case hex ids. */
export interface TraceParent {
  /** 32 hex digits, not all zero */
  readonly traceId: string;
  /** 16 hex digits, not all zero */
  readonly spanId: string;
  /** the sampled flag (trace-flags bit 0) */
  readonly sampled: boolean;
}

const HEX = /^[0-9a-f]+$/;
const ZERO_TRACE = "00000000000000000000000000000000";
const ZERO_SPAN = "0000000000000000";

/**
 * A `traceparent` value, or undefined when it is not one a receiver may use (W3C Trace Context
 * §3.2: version 00 has exactly 55 characters; a higher version has at least that and its first
 * four fields are read the same way; version ff, upper-case hex and all-zero ids are invalid).
 */
export function parseTraceparent(v: string | undefined): TraceParent | undefined {
  if (v === undefined || v.length < 55) return undefined;
  if (v.charCodeAt(2) !== 45 || v.charCodeAt(35) !== 45 || v.charCodeAt(52) !== 45) return undefined; // "-"
  const version = v.slice(0, 2);
  if (!HEX.test(version) || version === "ff") return undefined;
  if (version === "00" ? v.length !== 55 : v.length > 55 && v.charCodeAt(55) !== 45) return undefined;
  const traceId = v.slice(3, 35);
  const spanId = v.slice(36, 52);
  const flags = v.slice(53, 55);
  if (!HEX.test(traceId) || !HEX.test(spanId) || !HEX.test(flags)) return undefined;
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return undefined;
  return { traceId, spanId, sampled: (Number.parseInt(flags, 16) & 1) === 1 };
}

/** The `traceparent` an attempt sends: version 00, the given ids, sampled or not. */
export function formatTraceparent(traceId: string, spanId: string, sampled: boolean): string {
  return `00-${traceId}-${spanId}-${sampled ? "01" : "00"}`;
}

/**
 * `tracestate` as forwarded: kept when it is well-formed enough to pass on (at most 32 list
 * members, 512 characters as W3C §3.3.1.5 lets a vendor cut to), else dropped (undefined).
 * dojang adds no member of its own.
 */
export function checkTracestate(v: string | undefined): string | undefined {
  if (v === undefined || v.length === 0 || v.length > 512) return undefined;
  let members = 0;
  for (const m of v.split(",")) {
    const t = m.trim();
    if (t.length === 0) continue;
    const eq = t.indexOf("=");
    if (eq <= 0 || eq === t.length - 1) return undefined;
    if (++members > 32) return undefined;
  }
  return members === 0 ? undefined : v;
}

/**
 * B3 single-header form `{traceId}-{spanId}[-{sampled}[-{parentSpanId}]]`: a 64-bit trace id is
 * widened to 128 bits with zeros on the left (as an OpenTelemetry B3 propagator does). `d`
 * (debug) counts as sampled; `0` alone (a bare deny) gives no parent.
 */
export function parseB3Single(v: string | undefined): TraceParent | undefined {
  if (v === undefined) return undefined;
  const parts = v.split("-");
  if (parts.length < 2 || parts.length > 4) return undefined;
  return b3Parts(parts[0]!, parts[1]!, parts[2]);
}

/** B3 multi-header form: X-B3-TraceId, X-B3-SpanId and X-B3-Sampled (or X-B3-Flags: 1, debug). */
export function parseB3Multi(traceId: string | undefined, spanId: string | undefined, sampled: string | undefined, flags: string | undefined): TraceParent | undefined {
  if (traceId === undefined || spanId === undefined) return undefined;
  return b3Parts(traceId, spanId, flags === "1" ? "d" : sampled);
}

function b3Parts(tid: string, sid: string, sampled: string | undefined): TraceParent | undefined {
  if ((tid.length !== 16 && tid.length !== 32) || sid.length !== 16) return undefined;
  const traceId = tid.length === 16 ? `0000000000000000${tid}` : tid;
  if (!HEX.test(traceId) || !HEX.test(sid) || traceId === ZERO_TRACE || sid === ZERO_SPAN) return undefined;
  let s: boolean;
  if (sampled === undefined) s = false;
  else if (sampled === "1" || sampled === "d" || sampled === "true") s = true;
  else if (sampled === "0" || sampled === "false") s = false;
  else return undefined;
  return { traceId, spanId: sid, sampled: s };
}

/** The B3 single header an attempt sends (when the client spoke B3). */
export function formatB3Single(traceId: string, spanId: string, sampled: boolean): string {
  return `${traceId}-${spanId}-${sampled ? "1" : "0"}`;
}

/**
 * Parent-based sampling: a parent's sampled flag is followed either way; a call without one
 * starts a trace that is sampled when `draw` (in [0, 1)) is below `ratio`.
 */
export function sampleCall(parent: TraceParent | undefined, ratio: number, draw: number): boolean {
  if (parent !== undefined) return parent.sampled;
  return draw < ratio;
}

/** gRPC codes a SERVER span reports as an error (OpenTelemetry RPC semantic conventions, gRPC). */
const SERVER_ERROR_CODES: ReadonlySet<number> = new Set([2, 4, 12, 13, 14, 15]);

/**
 * The span status for a call that ended with gRPC `code`: "error" or "unset". A CLIENT span
 * (an attempt) is an error for every code but 0 OK; a SERVER span only for UNKNOWN,
 * DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE and DATA_LOSS (the others describe the
 * client's request, not a fault of the server). A call with no status (-1) is an error.
 */
export function spanStatusFor(code: number, kind: "server" | "client"): "error" | "unset" {
  if (code === 0) return "unset";
  if (code < 0 || code > 16) return "error";
  return kind === "client" || SERVER_ERROR_CODES.has(code) ? "error" : "unset";
}

/** `rpc.service` and `rpc.method` from a gRPC :path ("/pkg.Svc/Method"); undefined for another shape. */
export function rpcNames(path: string): { service: string; method: string } | undefined {
  const p = splitMethodPath(path);
  return p === undefined ? undefined : { service: p[0], method: p[1] };
}
