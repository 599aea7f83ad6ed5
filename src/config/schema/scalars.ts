// The config schema's scalar pieces: durations, sizes, counts, flags, addresses, names, words and
// gRPC codes, each with the message a wrong value gets. Used by the object schemas beside it.

import { z } from "zod";
import { describeValue, didYouMean } from "../issues.js";
import { parseDuration, parseHostPort, parseSize, type HostPort } from "../units.js";
import { CODE_NAMES } from "../../translate/codes.js";
import { CONCURRENT_MARKING_MODES, LOG_LEVELS, LIMITS } from "../types.js";

type Range = { readonly min: number; readonly max: number };

/** Message for a wrong-typed (or missing) value of a unit-bearing field. */
export const expected = (what: string) => (iss: { readonly input?: unknown }) =>
  iss.input === undefined ? "is required" : `expected ${what}, got ${describeValue(iss.input)}`;

const stringOrNumber = (what: string) => z.union([z.string(), z.number()], { error: expected(what) });

const outOfRange = (shown: string, r: Range, unit = "") =>
  `${shown} is out of range (${r.min}${unit} to ${r.max}${unit})`;

/** A duration ("5s", "250ms", plain number = ms) → whole ms within `min`..MAX_DURATION_MS. */
export function durationMs(min: number) {
  return stringOrNumber('a duration like "5s" or "250ms"').transform((v, ctx) => {
    const r = parseDuration(v);
    if (!r.ok) {
      ctx.issues.push({ code: "custom", message: r.error, input: v });
      return z.NEVER;
    }
    if (r.ms < min) {
      ctx.issues.push({ code: "custom", message: `duration ${describeValue(v)} must be at least ${min}ms`, input: v });
      return z.NEVER;
    }
    return r.ms;
  });
}

/** A size (bytes, "4MiB", "64KiB", "4MB") → whole bytes within `range`. */
export function sizeBytes(range: Range) {
  return stringOrNumber('a size like 4194304 or "4MiB"').transform((v, ctx) => {
    const r = parseSize(v);
    if (!r.ok) {
      ctx.issues.push({ code: "custom", message: r.error, input: v });
      return z.NEVER;
    }
    if (r.bytes < range.min || r.bytes > range.max) {
      ctx.issues.push({ code: "custom", message: outOfRange(`size ${describeValue(v)}`, range, " bytes"), input: v });
      return z.NEVER;
    }
    return r.bytes;
  });
}

/** A whole number within `range`; a decimal string is accepted so `${WORKERS:-4}` works. */
export function count(range: Range) {
  return stringOrNumber("a whole number").transform((v, ctx) => {
    const n = typeof v === "number" ? v : /^\s*\d+\s*$/.test(v) ? Number(v) : NaN;
    if (!Number.isSafeInteger(n)) {
      ctx.issues.push({ code: "custom", message: `expected a whole number, got ${describeValue(v)}`, input: v });
      return z.NEVER;
    }
    if (n < range.min || n > range.max) {
      ctx.issues.push({ code: "custom", message: outOfRange(describeValue(v), range), input: v });
      return z.NEVER;
    }
    return n;
  });
}

/** true/false; the strings "true"/"false" are accepted so `${ACCESS_LOG:-true}` works. */
export const flag = z
  .union([z.boolean(), z.enum(["true", "false"])], { error: expected("true or false") })
  .transform((v) => v === true || v === "true");

/** "host:port" → HostPort. `allowPortZero` for listeners (ephemeral port); never for endpoints. */
export function hostPort(allowPortZero: boolean) {
  return z.string({ error: expected('an address "host:port"') }).transform((v, ctx): HostPort => {
    const r = parseHostPort(v);
    if (!r.ok) {
      ctx.issues.push({ code: "custom", message: r.error, input: v });
      return z.NEVER;
    }
    if (!allowPortZero && r.hostPort.port === 0) {
      ctx.issues.push({ code: "custom", message: `endpoint "${v}" needs a real port (port 0 is only for listeners)`, input: v });
      return z.NEVER;
    }
    return r.hostPort;
  });
}

const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;
export const name = z
  .string({ error: expected("a name") })
  .max(LIMITS.nameLength.max, `names are at most ${LIMITS.nameLength.max} characters`)
  .refine((s) => NAME_RE.test(s), {
    error: (iss) =>
      `invalid name ${describeValue(iss.input)}: use letters, digits, "_", "." and "-", starting with a letter or digit`,
  });

/** One of a fixed set of words (case-insensitive); `what` names the key in the message. */
export function oneOf<T extends string>(values: readonly T[], what: string) {
  return z.string({ error: expected(`one of ${values.join(", ")}`) }).transform((v, ctx): T => {
    const found = values.find((l) => l === v.toLowerCase());
    if (found === undefined) {
      ctx.issues.push({
        code: "custom",
        message: `unknown ${what} ${describeValue(v)}: expected one of ${values.join(", ")}${didYouMean(v, values)}`,
        input: v,
      });
      return z.NEVER;
    }
    return found;
  });
}

export const logLevel = oneOf(LOG_LEVELS, "log level");
export const concurrentMarking = oneOf(CONCURRENT_MARKING_MODES, "concurrentMarking value");

/** `timeout`: a positive duration, or null / "none" for no cap. */
export const routeTimeout = z
  .union([z.string(), z.number(), z.null()], { error: expected('a duration like "30s", or "none"') })
  .transform((v, ctx): number | null => {
    if (v === null || (typeof v === "string" && v.trim().toLowerCase() === "none")) return null;
    const r = parseDuration(v);
    if (!r.ok) {
      ctx.issues.push({ code: "custom", message: r.error, input: v });
      return z.NEVER;
    }
    if (r.ms === 0) {
      ctx.issues.push({ code: "custom", message: 'timeout must be greater than 0 (write "none", or leave it out, for no timeout)', input: v });
      return z.NEVER;
    }
    return r.ms;
  });

export const nonEmptyText = (what: string) =>
  z
    .string({ error: expected(what) })
    .min(1, "must not be empty")
    .refine((s) => !/\s/.test(s), { error: (iss) => `${describeValue(iss.input)} must not contain whitespace` });

/** A gRPC status code: its name (case-insensitive, as in doc/statuscodes.md) or number 0..16. */
export const grpcCode = z
  .union([z.string(), z.number()], { error: expected('a gRPC code like "UNAVAILABLE" or 14') })
  .transform((v, ctx): number => {
    if (typeof v === "number" ? Number.isInteger(v) && v >= 0 && v <= 16 : false) return v as number;
    const i = typeof v === "string" ? CODE_NAMES.indexOf(v.trim().toUpperCase()) : -1;
    if (i >= 0 && i <= 16) return i;
    if (typeof v === "string" && /^\s*\d+\s*$/.test(v) && Number(v) <= 16) return Number(v);
    ctx.issues.push({ code: "custom", message: `unknown gRPC code ${describeValue(v)}: expected a name like UNAVAILABLE or a number 0 to 16${typeof v === "string" ? didYouMean(v.toUpperCase(), CODE_NAMES.slice(0, 17)) : ""}`, input: v });
    return z.NEVER;
  });
