// Pure parsers for the unit-bearing scalars in a config: durations, byte sizes, host:port.
// Each returns a result value and never throws (connect-es `parseTimeout`, linkerd `env.rs`).
// No filesystem, clock or environment access here; `node:net` is used only for its pure IP tests.

import { isIPv4, isIPv6 } from "node:net";

export type DurationResult = { readonly ok: true; readonly ms: number } | { readonly ok: false; readonly error: string };
export type SizeResult = { readonly ok: true; readonly bytes: number } | { readonly ok: false; readonly error: string };
export interface HostPort {
  /** Hostname (lower-cased), IPv4 literal, or IPv6 literal without brackets ("::1"). */
  readonly host: string;
  /** 0..65535; 0 asks the OS for an ephemeral port (listeners and admin only). */
  readonly port: number;
}

export type HostPortResult =
  | { readonly ok: true; readonly hostPort: HostPort }
  | { readonly ok: false; readonly error: string };

// === durations ===

/**
 * Largest accepted duration: Node clamps timers above 2^31−1 ms to 1 ms (grpc-js `deadline.ts`
 * clamps for the same reason), so a longer value would silently mean "fire now".
 */
export const MAX_DURATION_MS = 2 ** 31 - 1;

// Duration units, largest first (the order a compound duration must use, as in "1m30s").
const DURATION_UNITS = [
  ["h", 3_600_000n],
  ["m", 60_000n],
  ["s", 1_000n],
  ["ms", 1n],
] as const;

const DURATION_HINT = 'expected a number with a unit ms, s, m or h, e.g. "250ms", "1.5s", "1m30s"';

// One "<number><unit>" component. `ms` is listed before `m` so the alternation prefers it.
const DURATION_PART = /(\d+)(?:\.(\d+))?(ms|h|m|s)/y;
const PLAIN_NUMBER = /^(\d+)(?:\.(\d+))?$/;

/**
 * Parses "250ms", "5s", "1.5s", "1m", "1h", compounds in descending order ("1h30m", "1m30.5s"),
 * to whole milliseconds. Exact decimal arithmetic (bigint), so "1.001s" is 1001 ms, not 1000.9999….
 *
 * A number without a unit is refused, as a number (YAML `timeout: 30`) or as text (`${CALL_TIMEOUT}`
 * set to "30"): a reader cannot tell 30 ms from 30 s, and the two differ by a factor of 1000 (a
 * header said "default 30s" while 30 meant 30 ms). The message writes the number with each unit.
 * Only 0 needs none, as in Go's time.ParseDuration: it is the same in every unit.
 */
export function parseDuration(input: string | number): DurationResult {
  if (typeof input === "number") return durationFromNumber(input);
  const s = input.trim();
  if (s === "") return { ok: false, error: `empty duration: ${DURATION_HINT}` };
  if (s.startsWith("-")) return { ok: false, error: `duration "${input}" must not be negative` };
  const plain = PLAIN_NUMBER.exec(s);
  if (plain !== null) return durationFromPlain(input, plain[1] ?? "0", plain[2] ?? "");

  // Sum the components in exact 1/10^k millisecond fractions; reject sub-millisecond totals.
  let totalScaled = 0n; // in units of 10^-FRACTION_DIGITS ms
  const FRACTION_DIGITS = 9;
  let lastUnitIndex = -1;
  let offset = 0;
  while (offset < s.length) {
    DURATION_PART.lastIndex = offset;
    const m = DURATION_PART.exec(s);
    if (m === null) return { ok: false, error: `invalid duration "${input}": ${DURATION_HINT}` };
    const unit = m[3] ?? "";
    const unitIndex = DURATION_UNITS.findIndex(([u]) => u === unit);
    const factor = DURATION_UNITS[unitIndex]?.[1] ?? 1n;
    if (unitIndex <= lastUnitIndex) {
      return { ok: false, error: `invalid duration "${input}": units must go from largest to smallest, each once (e.g. "1m30s")` };
    }
    lastUnitIndex = unitIndex;
    const frac = m[2] ?? "";
    if (frac.length > FRACTION_DIGITS) return { ok: false, error: `invalid duration "${input}": too many decimal places` };
    const scaled = BigInt((m[1] ?? "0") + frac.padEnd(FRACTION_DIGITS, "0"));
    totalScaled += scaled * factor;
    offset = DURATION_PART.lastIndex;
  }
  const unit = 10n ** BigInt(FRACTION_DIGITS);
  if (totalScaled % unit !== 0n) {
    return { ok: false, error: `duration "${input}" must be a whole number of milliseconds` };
  }
  return durationFromMs(input, totalScaled / unit);
}

function durationFromNumber(n: number): DurationResult {
  if (!Number.isFinite(n)) return { ok: false, error: `duration ${n} is not a finite number` };
  if (n < 0) return { ok: false, error: `duration ${n} must not be negative` };
  if (n === 0) return { ok: true, ms: 0 };
  return { ok: false, error: noUnit(String(n), String(n)) };
}

function durationFromPlain(input: string, int: string, frac: string): DurationResult {
  if (/^0*$/.test(int) && /^0*$/.test(frac)) return { ok: true, ms: 0 };
  return { ok: false, error: noUnit(`"${input}"`, frac === "" ? int : `${int}.${frac}`) };
}

/** `30 has no unit: write 30ms, 30s, 30m or 30h` (ms left out when it would be a fraction of one). */
function noUnit(shown: string, n: string): string {
  const units = DURATION_UNITS.map(([u]) => u)
    .reverse()
    .filter((u) => u !== "ms" || /^\d+(?:\.0*)?$/.test(n));
  const forms = units.map((u) => n + u);
  return `${shown} has no unit: write ${forms.slice(0, -1).join(", ")} or ${forms[forms.length - 1]}`;
}

function durationFromMs(input: string | number, ms: bigint): DurationResult {
  if (ms > BigInt(MAX_DURATION_MS)) {
    const shown = typeof input === "string" ? `"${input}"` : String(input);
    return { ok: false, error: `duration ${shown} is too long (at most ${MAX_DURATION_MS}ms, about 24.8 days)` };
  }
  return { ok: true, ms: Number(ms) };
}

/** Formats whole milliseconds with the largest unit that divides exactly ("30s", "1500ms", "2h"). */
export function formatDuration(ms: number): string {
  if (ms !== 0) {
    for (const [unit, factor] of DURATION_UNITS) {
      const f = Number(factor);
      if (ms % f === 0) return `${ms / f}${unit}`;
    }
  }
  return `${ms}ms`;
}

// === sizes ===

// Size units, matched case-insensitively. KB/MB/GB are decimal (SI); KiB/MiB/GiB binary (IEC).
const SIZE_UNITS: Readonly<Record<string, bigint>> = {
  b: 1n,
  kb: 1_000n,
  mb: 1_000_000n,
  gb: 1_000_000_000n,
  kib: 1_024n,
  mib: 1_048_576n,
  gib: 1_073_741_824n,
};

const SIZE_HINT = 'expected a number of bytes or a number with a unit B, KiB, MiB, GiB (binary) or KB, MB, GB (decimal), e.g. "4MiB"';
const SIZE_RE = /^(\d+)(?:\.(\d+))?\s*([A-Za-z]*)$/;

/** Parses 4194304, "4194304", "4MiB", "64KiB", "1GiB", "4MB", "1.5MiB" to whole bytes. */
export function parseSize(input: string | number): SizeResult {
  if (typeof input === "number") {
    if (!Number.isFinite(input)) return { ok: false, error: `size ${input} is not a finite number` };
    if (input < 0) return { ok: false, error: `size ${input} must not be negative` };
    if (!Number.isSafeInteger(input)) return { ok: false, error: `size ${input} must be a whole number of bytes` };
    return { ok: true, bytes: input };
  }
  const s = input.trim();
  if (s === "") return { ok: false, error: `empty size: ${SIZE_HINT}` };
  if (s.startsWith("-")) return { ok: false, error: `size "${input}" must not be negative` };
  const m = SIZE_RE.exec(s);
  if (m === null) return { ok: false, error: `invalid size "${input}": ${SIZE_HINT}` };
  const unitText = m[3] ?? "";
  const factor = unitText === "" ? 1n : SIZE_UNITS[unitText.toLowerCase()];
  if (factor === undefined) return { ok: false, error: `unknown size unit "${unitText}" in "${input}": ${SIZE_HINT}` };
  const frac = m[2] ?? "";
  const scale = 10n ** BigInt(frac.length);
  const scaled = BigInt((m[1] ?? "0") + frac) * factor;
  if (scaled % scale !== 0n) return { ok: false, error: `size "${input}" must be a whole number of bytes` };
  const bytes = scaled / scale;
  if (bytes > BigInt(Number.MAX_SAFE_INTEGER)) return { ok: false, error: `size "${input}" is too large` };
  return { ok: true, bytes: Number(bytes) };
}

/** Formats bytes with the largest binary unit that divides exactly ("4MiB", "64KiB", "1000B"). */
export function formatSize(bytes: number): string {
  for (const unit of ["GiB", "MiB", "KiB"] as const) {
    const f = Number(SIZE_UNITS[unit.toLowerCase()] ?? 1n);
    if (bytes !== 0 && bytes % f === 0) return `${bytes / f}${unit}`;
  }
  return `${bytes}B`;
}

// === host:port ===

// RFC 1123 labels, plus "_" (Docker and Compose service names use it and their DNS resolves it).
const HOST_LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/;

/**
 * Parses "host:port", "1.2.3.4:port" or "[v6]:port" (brackets required for IPv6, as in a URL).
 * The host is required: write 0.0.0.0 (or [::]) to listen on every interface.
 */
export function parseHostPort(input: string): HostPortResult {
  const s = input.trim();
  const hint = `expected "host:port", e.g. "127.0.0.1:8080", "localhost:50051" or "[::1]:8080"`;
  let hostText: string;
  let portText: string;
  if (s.startsWith("[")) {
    const close = s.indexOf("]");
    if (close < 0) return { ok: false, error: `invalid address "${input}": missing "]" after the IPv6 address` };
    hostText = s.slice(1, close);
    const rest = s.slice(close + 1);
    if (!rest.startsWith(":")) return { ok: false, error: `invalid address "${input}": missing ":port" after "]"` };
    portText = rest.slice(1);
    if (!isIPv6(hostText)) return { ok: false, error: `invalid address "${input}": "${hostText}" is not an IPv6 address` };
  } else {
    const colon = s.lastIndexOf(":");
    if (colon < 0) return { ok: false, error: `invalid address "${input}": missing port; ${hint}` };
    hostText = s.slice(0, colon);
    portText = s.slice(colon + 1);
    if (hostText.includes(":")) {
      return { ok: false, error: `invalid address "${input}": put an IPv6 address in brackets, e.g. "[::1]:8080"` };
    }
    if (hostText === "") return { ok: false, error: `invalid address "${input}": missing host (use 0.0.0.0 for every interface)` };
    const hostError = checkHostName(hostText.toLowerCase());
    if (hostError !== null) return { ok: false, error: `invalid address "${input}": ${hostError}` };
  }
  if (!/^\d{1,5}$/.test(portText)) {
    return { ok: false, error: `invalid address "${input}": port "${portText}" must be a number from 0 to 65535` };
  }
  const port = Number(portText);
  if (port > 65535) return { ok: false, error: `invalid address "${input}": port ${port} is out of range (0 to 65535)` };
  return { ok: true, hostPort: { host: hostText.toLowerCase(), port } };
}

function checkHostName(host: string): string | null {
  if (/^[\d.]+$/.test(host)) return isIPv4(host) ? null : `"${host}" is not a valid IPv4 address`;
  const name = host.endsWith(".") ? host.slice(0, -1) : host;
  if (name.length > 253) return `host name "${host}" is longer than 253 characters`;
  for (const label of name.split(".")) {
    if (!HOST_LABEL.test(label)) return `"${host}" is not a valid host name`;
  }
  return null;
}

/** Formats a HostPort back to "host:port", bracketing IPv6 ("[::1]:8080"). */
export function formatHostPort(hp: HostPort): string {
  return hp.host.includes(":") ? `[${hp.host}]:${hp.port}` : `${hp.host}:${hp.port}`;
}
