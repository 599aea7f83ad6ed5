// The fault rule schema's scalar pieces: defaults and limits, whole numbers, percentages,
// durations, sizes, flags, words, gRPC and HTTP/2 codes, ids; each with the message a wrong value gets.

import { z } from "zod";
import { describeValue, didYouMean, type PathSegment } from "../../issues.js";
import { parseDuration, parseSize } from "../../units.js";
import { CODE_NAMES } from "../../../translate/codes.js";
import { rstCodeName } from "../../../translate/rst-code.js";
import { DIRECTIONS } from "../model.js";

// === defaults and limits ===

export const FAULT_DEFAULTS = Object.freeze({
  abortMessage: "injected fault",
  httpContentType: "text/html",
  wrongContentType: "text/plain",
  resetAt: "before_headers" as const,
  goawayMode: "graceful" as const,
  goawayCode: 0, //                   NO_ERROR
  upstreamResetCode: 8, //             CANCEL: what a client-side cancel sends
  delayAt: "request" as const,
  bandwidthDirection: "response" as const,
  stallDirection: "request" as const,
  percentage: 100,
  seed: 0,
});

export const U32_MAX = 2 ** 32 - 1;
const ID_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
// RFC 9110 token characters; a leading ":" allows pseudo-headers (":authority").
export const HEADER_NAME_RE = /^:?[!#$%&'*+.^_`|~0-9a-z-]+$/;
// Standard base64, padding optional (gRPC receivers accept both; spec sheet: binary headers).
const BASE64_RE = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}(?:==)?|[A-Za-z0-9+/]{3}=?)?$/;
export const ROUTE_LABEL_RE = /^(?:prefix|service|path):./;

// === scalar schemas ===

/** Message for a wrong-typed or missing value; other issues (unknown keys) fall through to messageForIssue. */
export const expected = (what: string) => (iss: { readonly code?: string; readonly input?: unknown }) => {
  if (iss.code === "unrecognized_keys") return undefined;
  return iss.input === undefined ? "is required" : `expected ${what}, got ${describeValue(iss.input)}`;
};

export const custom = (ctx: z.core.$RefinementCtx, message: string, input: unknown, path?: PathSegment[]) => {
  ctx.issues.push(path === undefined ? { code: "custom", message, input } : { code: "custom", message, input, path });
  return z.NEVER;
};

/** A whole number in min..max; a decimal string is accepted (x-dojang-fault values, `${N:-3}`). */
export function whole(min: number, max: number) {
  return z.union([z.number(), z.string()], { error: expected("a whole number") }).transform((v, ctx) => {
    const n = typeof v === "number" ? v : /^\s*\d+\s*$/.test(v) ? Number(v) : NaN;
    if (!Number.isSafeInteger(n)) return custom(ctx, `expected a whole number, got ${describeValue(v)}`, v);
    if (n < min || n > max) return custom(ctx, `${describeValue(v)} is out of range (${min} to ${max})`, v);
    return n;
  });
}

/** A finite number; numeric strings accepted. */
export const real = z.union([z.number(), z.string()], { error: expected("a number") }).transform((v, ctx) => {
  const n = typeof v === "number" ? v : /^\s*\d+(?:\.\d+)?\s*$/.test(v) ? Number(v) : NaN;
  if (!Number.isFinite(n)) return custom(ctx, `expected a number, got ${describeValue(v)}`, v);
  return n;
});

/** 0..100, as a number, "12.5" or "12.5%". */
export const percentage = z.union([z.number(), z.string()], { error: expected("a percentage from 0 to 100") }).transform((v, ctx) => {
  const n = typeof v === "number" ? v : /^\s*\d+(?:\.\d+)?\s*%?\s*$/.test(v) ? Number(v.trim().replace(/%$/, "")) : NaN;
  if (!Number.isFinite(n)) return custom(ctx, `expected a percentage from 0 to 100, got ${describeValue(v)}`, v);
  if (n < 0 || n > 100) return custom(ctx, `percentage ${describeValue(v)} is out of range (0 to 100)`, v);
  return n;
});

/** A duration ("250ms", "1.5s", plain number = ms) → whole ms, at least `min`. */
export function duration(min: number) {
  return z.union([z.string(), z.number()], { error: expected('a duration like "250ms" or "5s"') }).transform((v, ctx) => {
    const r = parseDuration(v);
    if (!r.ok) return custom(ctx, r.error, v);
    if (r.ms < min) return custom(ctx, `duration ${describeValue(v)} must be at least ${min}ms`, v);
    return r.ms;
  });
}

/** A size (bytes, "64KiB", "1MB") → whole bytes in min..max. */
export function size(min: number, max: number) {
  return z.union([z.string(), z.number()], { error: expected('a number of bytes or a size like "64KiB"') }).transform((v, ctx) => {
    const r = parseSize(v);
    if (!r.ok) return custom(ctx, r.error, v);
    if (r.bytes < min || r.bytes > max) return custom(ctx, `size ${describeValue(v)} is out of range (${min} to ${max} bytes)`, v);
    return r.bytes;
  });
}

export const flag = z
  .union([z.boolean(), z.enum(["true", "false"])], { error: expected("true or false") })
  .transform((v) => v === true || v === "true");

/** One of `values`, case-insensitive, with a "did you mean". */
export function oneOf<const T extends string>(values: readonly T[], what: string) {
  const list = values.join(", ");
  return z.string({ error: expected(`a ${what}: one of ${list}`) }).transform((v, ctx): T => {
    const found = values.find((x) => x === v.trim().toLowerCase());
    if (found === undefined) return custom(ctx, `unknown ${what} ${describeValue(v)}: expected one of ${list}${didYouMean(v, values)}`, v);
    return found;
  });
}

export const direction = oneOf(DIRECTIONS, "direction");

/** Upper-case with "_" and "-" removed, so "DeadlineExceeded", "deadline-exceeded" and "DEADLINE_EXCEEDED" agree. */
const squash = (s: string) => s.trim().toUpperCase().replace(/[_-]/g, "");

const GRPC_CODE_BY_NAME: ReadonlyMap<string, number> = new Map([
  ...CODE_NAMES.map((n, i) => [squash(n), i] as const),
  ["CANCELED", 1], // grpc-go's spelling (codes.Canceled)
]);

/** A gRPC status code: 0..16 or its name ("UNAVAILABLE", "Unavailable"), numeric strings accepted. */
export const grpcCode = z.union([z.number(), z.string()], { error: expected('a gRPC code: 0 to 16 or a name like "UNAVAILABLE"') }).transform((v, ctx) => {
  const s = typeof v === "string" ? v.trim() : "";
  const n = typeof v === "number" ? v : /^\d+$/.test(s) ? Number(s) : GRPC_CODE_BY_NAME.get(squash(s));
  if (n === undefined) return custom(ctx, `unknown gRPC code ${describeValue(v)}${didYouMean(s, CODE_NAMES)}`, v);
  if (!Number.isInteger(n) || n < 0 || n > 16) return custom(ctx, `gRPC code ${describeValue(v)} is out of range (0 to 16, or a name like "UNAVAILABLE")`, v);
  return n;
});

/** RFC 9113 §7 names, index = code (rst-code.ts's table). */
export const H2_ERROR_NAMES: readonly string[] = Object.freeze(Array.from({ length: 14 }, (_, i) => rstCodeName(i)));
const H2_CODE_BY_NAME: ReadonlyMap<string, number> = new Map(H2_ERROR_NAMES.map((n, i) => [squash(n), i] as const));

/** An HTTP/2 error code: 0..2^32−1 or a name ("CANCEL", "FLOW_CONTROL_ERROR"), numeric strings (also 0x..) accepted. */
export const h2Code = z.union([z.number(), z.string()], { error: expected('an HTTP/2 error code: a number or a name like "CANCEL"') }).transform((v, ctx) => {
  const s = typeof v === "string" ? v.trim() : "";
  const n = typeof v === "number" ? v : /^\d+$/.test(s) ? Number(s) : /^0x[0-9a-f]+$/i.test(s) ? Number.parseInt(s.slice(2), 16) : H2_CODE_BY_NAME.get(squash(s));
  if (n === undefined) return custom(ctx, `unknown HTTP/2 error code ${describeValue(v)}${didYouMean(s, H2_ERROR_NAMES)}`, v);
  if (!Number.isInteger(n) || n < 0 || n > U32_MAX) return custom(ctx, `HTTP/2 error code ${describeValue(v)} is out of range (0 to ${U32_MAX})`, v);
  return n;
});

export const text = (what: string) => z.string({ error: expected(what) });
export const nonEmpty = (what: string) => z.string({ error: expected(what) }).min(1, "must not be empty");

export const base64 = z
  .string({ error: expected("a base64 string") })
  .refine((s) => BASE64_RE.test(s), { error: (iss) => `${describeValue(iss.input)} is not base64 (standard alphabet, padding optional)` });

export const ruleId = z.string({ error: expected("an id") }).transform((v, ctx) => {
  if (!ID_RE.test(v)) return custom(ctx, `invalid id ${describeValue(v)}: use letters, digits, "_", "." and "-" (at most 64), starting with a letter or digit`, v);
  if (v === "reset") return custom(ctx, `"reset" cannot be an id (POST /faults/reset is the reset endpoint)`, v);
  return v;
});
