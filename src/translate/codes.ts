// gRPC status codes: the numeric table, their names (also the metric label values) and grpc-status parsing.

/**
 * The 17 codes, from grpc-go codes/codes.go and grpc/grpc doc/statuscodes.md (spec sheet §7).
 * The numbers are wire values and never change.
 */
export const Code = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;
export type Code = (typeof Code)[keyof typeof Code];

/** Index = code. Upper snake case as in doc/statuscodes.md (grpc-go prints CamelCase; dojang uses these). */
export const CODE_NAMES: readonly string[] = Object.freeze([
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
]);

function isKnownCode(code: number): boolean {
  return Number.isInteger(code) && code >= 0 && code <= 16;
}

/** The code's name, or `CODE_<n>` for a value outside 0..16 (upstreams may send any int32). */
export function codeName(code: number): string {
  return isKnownCode(code) ? (CODE_NAMES[code] as string) : `CODE_${code}`;
}

/** Metric label: the name for 0..16, else "OTHER", so label cardinality stays bounded at 18. */
export function codeLabel(code: number): string {
  return isKnownCode(code) ? (CODE_NAMES[code] as string) : "OTHER";
}

const INT32_MAX = 2147483647;

/**
 * grpc-status value → number, per grpc-go's `strconv.ParseInt(v, 10, 32)` (http2_client.go
 * operateHeaders, spec sheet §4.1): optional `+`/`-` sign, then one or more ASCII digits
 * (leading zeros allowed, no spaces or underscores), within int32. undefined when absent or
 * unparsable (grpc-go then reports `2 transport: malformed grpc-status`).
 */
export function parseGrpcStatus(v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = v.length;
  // Fast path: the usual single digit.
  if (n === 1) {
    const d = v.charCodeAt(0) - 48;
    return d >= 0 && d <= 9 ? d : undefined;
  }
  let i = 0;
  let negative = false;
  const first = v.charCodeAt(0);
  if (first === 0x2b || first === 0x2d) {
    negative = first === 0x2d;
    i = 1;
  }
  if (i >= n) return undefined;
  let value = 0;
  for (; i < n; i++) {
    const d = v.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return undefined;
    value = value * 10 + d;
    // int32 range: [-2^31, 2^31 - 1]. Stop early so long digit strings cannot lose precision.
    if (value > INT32_MAX + 1) return undefined;
  }
  if (negative) return value === 0 ? 0 : -value;
  return value > INT32_MAX ? undefined : value;
}
