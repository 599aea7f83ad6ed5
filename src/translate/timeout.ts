// grpc-timeout header codec in bigint nanoseconds (grpc-go decodeTimeout / EncodeDuration, spec sheet §2).

import { goQuote, headerByteLength } from "./go-text.js";

export type TimeoutResult =
  | { readonly ok: true; readonly ns: bigint }
  | { readonly ok: false; readonly error: string };

/** math.MaxInt64 nanoseconds: grpc-go's clamp for an overflowing `H` value (and encodeTimeout's input cap). */
export const MAX_INT64_NS = 9223372036854775807n;

// Unit sizes in ns (Go time package), grpc-go http_util.go timeoutUnitToDuration.
const NS_PER_US = 1_000n;
const NS_PER_MS = 1_000_000n;
const NS_PER_S = 1_000_000_000n;
const NS_PER_M = 60_000_000_000n;
const NS_PER_H = 3_600_000_000_000n;
/** MaxInt64 / time.Hour = 2562047: above this an `H` value is clamped, not an error (grpc-go). */
const MAX_HOURS = 2562047;

function unitNs(c: number): bigint | undefined {
  switch (c) {
    case 0x6e: return 1n; //        'n'
    case 0x75: return NS_PER_US; // 'u'
    case 0x6d: return NS_PER_MS; // 'm'
    case 0x53: return NS_PER_S; //  'S'
    case 0x4d: return NS_PER_M; //  'M'
    case 0x48: return NS_PER_H; //  'H'
    default: return undefined;
  }
}

function fail(error: string): TimeoutResult {
  return { ok: false, error };
}

/**
 * grpc-go internal/transport/http_util.go `decodeTimeout`, rule for rule (spec sheet §2.2):
 * length < 2 or > 9 bytes, an unknown last byte (case-sensitive), or anything but ASCII digits
 * before it (strconv.ParseUint base 10) is an error with grpc-go's exact text. `0` is accepted.
 * An `H` value above 2562047 is clamped to MaxInt64 ns. Never throws.
 */
export function decodeTimeout(s: string): TimeoutResult {
  const size = headerByteLength(s);
  if (size < 2) return fail(`transport: timeout string is too short: ${goQuote(s)}`);
  if (size > 9) return fail(`transport: timeout string is too long: ${goQuote(s)}`);
  // A non-ASCII last char has a last byte >= 0x80, which is never a unit letter.
  const unit = unitNs(s.charCodeAt(s.length - 1));
  if (unit === undefined) return fail(`transport: timeout unit is not recognized: ${goQuote(s)}`);
  const last = s.length - 1;
  let t = 0;
  for (let i = 0; i < last; i++) {
    const d = s.charCodeAt(i) - 48;
    if (d < 0 || d > 9) {
      // grpc-go returns strconv's *NumError unwrapped.
      return fail(`strconv.ParseUint: parsing ${goQuote(s.slice(0, last))}: invalid syntax`);
    }
    t = t * 10 + d; // at most 8 digits: exact in a double
  }
  if (unit === NS_PER_H && t > MAX_HOURS) return { ok: true, ns: MAX_INT64_NS };
  return { ok: true, ns: BigInt(t) * unit };
}

/** Largest TimeoutValue: 8 decimal digits (SPEC; grpc-go encode_duration.go maxTimeoutValue). */
const MAX_TIMEOUT_VALUE = 99_999_999;
const MAX_SAFE_NS = BigInt(Number.MAX_SAFE_INTEGER);
const UNIT_LETTERS = ["n", "u", "m", "S", "M"] as const;
const UNIT_SIZES = [1, 1e3, 1e6, 1e9, 6e10] as const;
const UNIT_SIZES_BIG = [1n, NS_PER_US, NS_PER_MS, NS_PER_S, NS_PER_M] as const;

/**
 * grpc-go internal/grpcutil/encode_duration.go `EncodeDuration` (spec sheet §2.3): t <= 0 → "0n";
 * otherwise the first of n, u, m, S, M whose ceil(t / unit) is <= 99999999, else ceil(t / 1h) H.
 * Rounding is up, so the upstream never gets less time than the budget. Input above MaxInt64 is
 * clamped to MaxInt64 (grpc-go's input is an int64), so the result is at most `2562048H`.
 */
export function encodeTimeout(ns: bigint): string {
  if (ns <= 0n) return "0n";
  if (ns <= MAX_SAFE_NS) {
    // Exact integer arithmetic in doubles: `t % size` is exact, and `t - r` is an exact
    // multiple of size, so the division is exact too. Avoids bigint work for every real budget.
    const t = Number(ns);
    for (let k = 0; k < 5; k++) {
      const size = UNIT_SIZES[k] as number;
      const r = t % size;
      const d = (t - r) / size + (r > 0 ? 1 : 0);
      if (d <= MAX_TIMEOUT_VALUE) return `${d}${UNIT_LETTERS[k] as string}`;
    }
    // Unreachable in practice (2^53 ns fits in `M`); fall through to the bigint path.
  }
  const t = ns > MAX_INT64_NS ? MAX_INT64_NS : ns;
  for (let k = 0; k < 5; k++) {
    const size = UNIT_SIZES_BIG[k] as bigint;
    const d = t / size + (t % size > 0n ? 1n : 0n);
    if (d <= 99_999_999n) return `${d}${UNIT_LETTERS[k] as string}`;
  }
  return `${t / NS_PER_H + (t % NS_PER_H > 0n ? 1n : 0n)}H`;
}
