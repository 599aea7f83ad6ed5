// Fault rules: unknown input (config file, admin API JSON, x-dojang-fault) → normalized FaultRule,
// or every issue with its key path (`listeners[0].faults[1].action.code: unknown gRPC code ...`).
// Validation is zod; this file only adds human messages and normalization. Pure: no node:*,
// clock or randomness. Also the reverse: formatFaultRule gives a rule back in its input form.

import { z } from "zod";
import type { ConfigIssue } from "../../errors.js";
import { describeValue, didYouMean, formatPath, invalidTypeMessage, type PathSegment } from "../issues.js";
import { formatDuration, parseDuration, parseSize } from "../units.js";
import { CODE_NAMES } from "../../translate/codes.js";
import { rstCodeName } from "../../translate/rst-code.js";
import { deepFreeze } from "../freeze.js";
import {
  DEADLINE_MODES,
  DELAY_POINTS,
  DIRECTIONS,
  FAULT_KINDS,
  GOAWAY_MODES,
  RESET_POINTS,
  SHAPE_KINDS,
  type BandwidthAction,
  type DelayAction,
  type DelaySpec,
  type Direction,
  type FaultAction,
  type FaultFire,
  type FaultMatch,
  type FaultRule,
  type FaultSource,
  type MetadataMatch,
  type StallAction,
} from "./model.js";

export type FaultIssue = ConfigIssue;

export type FaultRuleResult =
  | { readonly ok: true; readonly rule: FaultRule }
  | { readonly ok: false; readonly issues: readonly FaultIssue[] };

export type FaultListResult =
  | { readonly ok: true; readonly rules: readonly FaultRule[] }
  | { readonly ok: false; readonly issues: readonly FaultIssue[] };

export type FaultActionResult =
  | { readonly ok: true; readonly action: FaultAction }
  | { readonly ok: false; readonly issues: readonly FaultIssue[] };

/** Where a list sits: a listener's `faults:` (scope.listener) or a route's (scope.route too). */
export interface FaultScope {
  readonly listener?: string;
  readonly route?: string | number;
}

export interface ParseFaultOptions {
  /** Default "config". */
  readonly source?: FaultSource;
  /** Fills match.listener / match.route when the rule leaves them out; a different value is an issue. */
  readonly scope?: FaultScope;
}

/** Settings for a whole FaultSet (constructor options). */
export interface FaultSetSettings {
  /** uint32; rules without their own seed derive theirs from it. Default 0, so runs replay by default. */
  readonly seed: number;
  /** At most this many faulted calls at once (Envoy's max_active_faults); null = no cap. */
  readonly maxActiveFaults: number | null;
}

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

const U32_MAX = 2 ** 32 - 1;
const ID_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
// RFC 9110 token characters; a leading ":" allows pseudo-headers (":authority").
const HEADER_NAME_RE = /^:?[!#$%&'*+.^_`|~0-9a-z-]+$/;
// Standard base64, padding optional (gRPC receivers accept both; spec sheet: binary headers).
const BASE64_RE = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}(?:==)?|[A-Za-z0-9+/]{3}=?)?$/;
const ROUTE_LABEL_RE = /^(?:prefix|service|path):./;

// === scalar schemas ===

/** Message for a wrong-typed or missing value; other issues (unknown keys) fall through to messageForIssue. */
const expected = (what: string) => (iss: { readonly code?: string; readonly input?: unknown }) => {
  if (iss.code === "unrecognized_keys") return undefined;
  return iss.input === undefined ? "is required" : `expected ${what}, got ${describeValue(iss.input)}`;
};

const custom = (ctx: z.core.$RefinementCtx, message: string, input: unknown, path?: PathSegment[]) => {
  ctx.issues.push(path === undefined ? { code: "custom", message, input } : { code: "custom", message, input, path });
  return z.NEVER;
};

/** A whole number in min..max; a decimal string is accepted (x-dojang-fault values, `${N:-3}`). */
function whole(min: number, max: number) {
  return z.union([z.number(), z.string()], { error: expected("a whole number") }).transform((v, ctx) => {
    const n = typeof v === "number" ? v : /^\s*\d+\s*$/.test(v) ? Number(v) : NaN;
    if (!Number.isSafeInteger(n)) return custom(ctx, `expected a whole number, got ${describeValue(v)}`, v);
    if (n < min || n > max) return custom(ctx, `${describeValue(v)} is out of range (${min} to ${max})`, v);
    return n;
  });
}

/** A finite number; numeric strings accepted. */
const real = z.union([z.number(), z.string()], { error: expected("a number") }).transform((v, ctx) => {
  const n = typeof v === "number" ? v : /^\s*\d+(?:\.\d+)?\s*$/.test(v) ? Number(v) : NaN;
  if (!Number.isFinite(n)) return custom(ctx, `expected a number, got ${describeValue(v)}`, v);
  return n;
});

/** 0..100, as a number, "12.5" or "12.5%". */
const percentage = z.union([z.number(), z.string()], { error: expected("a percentage from 0 to 100") }).transform((v, ctx) => {
  const n = typeof v === "number" ? v : /^\s*\d+(?:\.\d+)?\s*%?\s*$/.test(v) ? Number(v.trim().replace(/%$/, "")) : NaN;
  if (!Number.isFinite(n)) return custom(ctx, `expected a percentage from 0 to 100, got ${describeValue(v)}`, v);
  if (n < 0 || n > 100) return custom(ctx, `percentage ${describeValue(v)} is out of range (0 to 100)`, v);
  return n;
});

/** A duration ("250ms", "1.5s", plain number = ms) → whole ms, at least `min`. */
function duration(min: number) {
  return z.union([z.string(), z.number()], { error: expected('a duration like "250ms" or "5s"') }).transform((v, ctx) => {
    const r = parseDuration(v);
    if (!r.ok) return custom(ctx, r.error, v);
    if (r.ms < min) return custom(ctx, `duration ${describeValue(v)} must be at least ${min}ms`, v);
    return r.ms;
  });
}

/** A size (bytes, "64KiB", "1MB") → whole bytes in min..max. */
function size(min: number, max: number) {
  return z.union([z.string(), z.number()], { error: expected('a number of bytes or a size like "64KiB"') }).transform((v, ctx) => {
    const r = parseSize(v);
    if (!r.ok) return custom(ctx, r.error, v);
    if (r.bytes < min || r.bytes > max) return custom(ctx, `size ${describeValue(v)} is out of range (${min} to ${max} bytes)`, v);
    return r.bytes;
  });
}

const flag = z
  .union([z.boolean(), z.enum(["true", "false"])], { error: expected("true or false") })
  .transform((v) => v === true || v === "true");

/** One of `values`, case-insensitive, with a "did you mean". */
function oneOf<const T extends string>(values: readonly T[], what: string) {
  const list = values.join(", ");
  return z.string({ error: expected(`a ${what}: one of ${list}`) }).transform((v, ctx): T => {
    const found = values.find((x) => x === v.trim().toLowerCase());
    if (found === undefined) return custom(ctx, `unknown ${what} ${describeValue(v)}: expected one of ${list}${didYouMean(v, values)}`, v);
    return found;
  });
}

const direction = oneOf(DIRECTIONS, "direction");

/** Upper-case with "_" and "-" removed, so "DeadlineExceeded", "deadline-exceeded" and "DEADLINE_EXCEEDED" agree. */
const squash = (s: string) => s.trim().toUpperCase().replace(/[_-]/g, "");

const GRPC_CODE_BY_NAME: ReadonlyMap<string, number> = new Map([
  ...CODE_NAMES.map((n, i) => [squash(n), i] as const),
  ["CANCELED", 1], // grpc-go's spelling (codes.Canceled)
]);

/** A gRPC status code: 0..16 or its name ("UNAVAILABLE", "Unavailable"), numeric strings accepted. */
const grpcCode = z.union([z.number(), z.string()], { error: expected('a gRPC code: 0 to 16 or a name like "UNAVAILABLE"') }).transform((v, ctx) => {
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
const h2Code = z.union([z.number(), z.string()], { error: expected('an HTTP/2 error code: a number or a name like "CANCEL"') }).transform((v, ctx) => {
  const s = typeof v === "string" ? v.trim() : "";
  const n = typeof v === "number" ? v : /^\d+$/.test(s) ? Number(s) : /^0x[0-9a-f]+$/i.test(s) ? Number.parseInt(s.slice(2), 16) : H2_CODE_BY_NAME.get(squash(s));
  if (n === undefined) return custom(ctx, `unknown HTTP/2 error code ${describeValue(v)}${didYouMean(s, H2_ERROR_NAMES)}`, v);
  if (!Number.isInteger(n) || n < 0 || n > U32_MAX) return custom(ctx, `HTTP/2 error code ${describeValue(v)} is out of range (0 to ${U32_MAX})`, v);
  return n;
});

const text = (what: string) => z.string({ error: expected(what) });
const nonEmpty = (what: string) => z.string({ error: expected(what) }).min(1, "must not be empty");

const base64 = z
  .string({ error: expected("a base64 string") })
  .refine((s) => BASE64_RE.test(s), { error: (iss) => `${describeValue(iss.input)} is not base64 (standard alphabet, padding optional)` });

const ruleId = z.string({ error: expected("an id") }).transform((v, ctx) => {
  if (!ID_RE.test(v)) return custom(ctx, `invalid id ${describeValue(v)}: use letters, digits, "_", "." and "-" (at most 64), starting with a letter or digit`, v);
  if (v === "reset") return custom(ctx, `"reset" cannot be an id (POST /faults/reset is the reset endpoint)`, v);
  return v;
});

// === match ===

const metadataEntry = z
  .strictObject(
    {
      name: nonEmpty("a header name").transform((v, ctx) => {
        const n = v.toLowerCase();
        if (!HEADER_NAME_RE.test(n)) return custom(ctx, `${describeValue(v)} is not a valid header name`, v);
        return n;
      }),
      equals: text("a string").optional(),
      present: flag.optional(),
      regex: text("a regular expression").transform((v, ctx) => {
        try {
          new RegExp(v);
        } catch (err: unknown) {
          return custom(ctx, `invalid regular expression ${describeValue(v)}: ${err instanceof Error ? err.message : String(err)}`, v);
        }
        return v;
      }).optional(),
    },
    { error: expected('a mapping like { name: "x-user", equals: "alice" }') },
  )
  .transform((m, ctx): MetadataMatch => {
    const tests = (["equals", "present", "regex"] as const).filter((k) => m[k] !== undefined);
    if (tests.length !== 1) {
      return custom(ctx, tests.length === 0 ? "needs one of equals, present or regex" : `give only one of equals, present or regex (got ${tests.join(" and ")})`, m);
    }
    if (m.equals !== undefined) return { name: m.name, equals: m.equals };
    if (m.present !== undefined) return { name: m.name, present: m.present };
    return { name: m.name, regex: m.regex ?? "" };
  });

const routeRef = z.union([z.string(), z.number()], { error: expected('a route label like "service:pkg.Svc" or a route index') }).transform((v, ctx) => {
  if (typeof v === "number") {
    if (!Number.isSafeInteger(v) || v < 0) return custom(ctx, `route index ${v} must be a whole number from 0`, v);
    return v;
  }
  if (!ROUTE_LABEL_RE.test(v)) {
    return custom(ctx, `route ${describeValue(v)} is not a route label: expected "prefix:/", "service:pkg.Svc" or "path:/pkg.Svc/Method" (as in logs), or the route's index`, v);
  }
  return v;
});

const noSlash = (what: string, hint: string) =>
  nonEmpty(what).refine((s) => !s.includes("/"), { error: (iss) => `${describeValue(iss.input)} must not contain "/" (${hint})` });

const matchSchema = z.strictObject(
  {
    listener: nonEmpty("a listener name").optional(),
    route: routeRef.optional(),
    service: noSlash('a service like "pkg.Svc"', 'give the method in "method"').optional(),
    method: noSlash('a method name like "Get"', 'give the service in "service"').optional(),
    metadata: z.array(metadataEntry, { error: expected("a list of metadata tests") }).optional(),
    direction: direction.optional(),
  },
  { error: expected("a mapping like { service: pkg.Svc }") },
);

// === fire ===

type CallRange = readonly [number, number];

/** "1-2", "1-2,5", "5-" (open-ended), 3, or a list of those → inclusive ranges, 1-based. */
const callsSchema = z
  .union([z.number(), z.string(), z.array(z.union([z.number(), z.string()]))], { error: expected('call numbers like "1-2", [1, 2] or 3') })
  .transform((v, ctx): CallRange[] => {
    const parts = Array.isArray(v) ? v : typeof v === "number" ? [v] : v.split(",");
    const out: CallRange[] = [];
    for (const p of parts) {
      const r = callRange(p);
      if (typeof r === "string") return custom(ctx, r, v);
      out.push(r);
    }
    if (out.length === 0) return custom(ctx, "needs at least one call number", v);
    return out;
  });

function callRange(p: number | string): CallRange | string {
  if (typeof p === "number") return Number.isSafeInteger(p) && p >= 1 ? [p, p] : `call number ${p} must be a whole number from 1`;
  const m = /^\s*(\d+)\s*(?:(-)\s*(\d*)\s*)?$/.exec(p);
  if (m === null) return `invalid call range ${describeValue(p)}: expected N, "N-M" or "N-" (calls count from 1)`;
  const from = Number(m[1]);
  const to = m[2] === undefined ? from : m[3] === "" || m[3] === undefined ? Number.POSITIVE_INFINITY : Number(m[3]);
  if (!Number.isSafeInteger(from) || from < 1) return `call range ${describeValue(p)} must start at 1 or later`;
  if (to < from) return `call range ${describeValue(p)} ends before it starts`;
  return [from, to];
}

const fireSchema = z
  .strictObject(
    {
      percentage: percentage.optional(),
      calls: callsSchema.optional(),
      every: whole(1, U32_MAX).optional(),
      maxTimes: whole(1, Number.MAX_SAFE_INTEGER).optional(),
      after: duration(0).optional(),
      for: duration(1).optional(),
    },
    { error: expected("a mapping like { percentage: 50 }") },
  )
  .transform((f, ctx): FaultFire => {
    if (f.calls !== undefined && f.every !== undefined) return custom(ctx, "give calls or every, not both", f, ["every"]);
    return {
      percentage: f.percentage ?? FAULT_DEFAULTS.percentage,
      calls: f.calls ?? null,
      every: f.every ?? null,
      maxTimes: f.maxTimes ?? null,
      afterMs: f.after ?? 0,
      forMs: f.for ?? null,
    };
  });

const DEFAULT_FIRE: FaultFire = Object.freeze({ percentage: 100, calls: null, every: null, maxTimes: null, afterMs: 0, forMs: null });

// === actions ===

/** Before direction resolution: bandwidth, stall and delay may leave `direction` to match.direction. */
type DraftAction =
  | Exclude<FaultAction, BandwidthAction | StallAction | DelayAction>
  | (Omit<BandwidthAction, "direction"> & { readonly direction: Direction | null })
  | (Omit<StallAction, "direction"> & { readonly direction: Direction | null })
  | (Omit<DelayAction, "direction"> & { readonly direction: Direction | null });

const kindObject = <K extends string, S extends z.core.$ZodLooseShape>(kind: K, shape: S) =>
  z.strictObject({ kind: z.literal(kind), ...shape }, { error: expected(`a mapping for a ${kind} fault`) });

const abortSchema = kindObject("abort", {
  code: grpcCode,
  message: text("a message").optional(),
  details: base64.optional(),
  afterMessages: whole(0, U32_MAX).optional(),
}).transform((a): DraftAction => ({
  kind: "abort",
  code: a.code,
  message: a.message ?? FAULT_DEFAULTS.abortMessage,
  details: a.details ?? null,
  afterMessages: a.afterMessages ?? null,
}));

const httpSchema = kindObject("http", {
  status: whole(200, 599),
  body: text("the response body").optional(),
  contentType: nonEmpty("a content-type").optional(),
}).transform((h): DraftAction => ({
  kind: "http",
  status: h.status,
  body: h.body ?? "",
  contentType: h.contentType ?? FAULT_DEFAULTS.httpContentType,
}));

const resetSchema = kindObject("reset", {
  code: h2Code,
  at: oneOf(RESET_POINTS, "reset point").optional(),
  messages: whole(0, U32_MAX).optional(),
}).transform((r, ctx): DraftAction => {
  const at = r.at ?? FAULT_DEFAULTS.resetAt;
  const counted = at === "after_messages" || at === "mid_message";
  if (counted && r.messages === undefined) return custom(ctx, `is required with at: ${at} (how many whole messages go first)`, r, ["messages"]);
  if (!counted && r.messages !== undefined) return custom(ctx, "only applies to at: after_messages or mid_message", r, ["messages"]);
  return { kind: "reset", code: r.code, at, messages: r.messages ?? 0 };
});

const goawaySchema = kindObject("goaway", {
  mode: oneOf(GOAWAY_MODES, "goaway mode").optional(),
  code: h2Code.optional(),
}).transform((g): DraftAction => ({ kind: "goaway", mode: g.mode ?? FAULT_DEFAULTS.goawayMode, code: g.code ?? FAULT_DEFAULTS.goawayCode }));

const closeSchema = kindObject("close_connection", {
  afterBytes: size(0, Number.MAX_SAFE_INTEGER).optional(),
}).transform((c): DraftAction => ({ kind: "close_connection", afterBytes: c.afterBytes ?? 0 }));

const shapeSchema = kindObject("shape", {
  shape: oneOf(SHAPE_KINDS, "shape"),
  contentType: nonEmpty("a content-type").optional(),
}).transform((s, ctx): DraftAction => {
  if (s.shape !== "wrong_content_type" && s.contentType !== undefined) return custom(ctx, "only applies to shape: wrong_content_type", s, ["contentType"]);
  return { kind: "shape", shape: s.shape, contentType: s.shape === "wrong_content_type" ? (s.contentType ?? FAULT_DEFAULTS.wrongContentType) : null };
});

const jitterSchema = z
  .strictObject(
    {
      uniform: z.tuple([duration(0), duration(0)], { error: expected('a pair like ["100ms", "300ms"]') }).optional(),
      normal: z
        .strictObject({ mean: duration(0), stddev: duration(0) }, { error: expected('a mapping like { mean: "200ms", stddev: "50ms" }') })
        .optional(),
    },
    { error: expected('a mapping like { uniform: ["100ms", "300ms"] }') },
  )
  .transform((j, ctx): DelaySpec => {
    if ((j.uniform === undefined) === (j.normal === undefined)) {
      return custom(ctx, j.uniform === undefined ? "needs uniform or normal" : "give uniform or normal, not both", j);
    }
    if (j.uniform !== undefined) {
      const [minMs, maxMs] = j.uniform;
      if (maxMs < minMs) return custom(ctx, "the upper bound is below the lower bound", j, ["uniform"]);
      return { type: "uniform", minMs, maxMs };
    }
    const n = j.normal ?? { mean: 0, stddev: 0 };
    return { type: "normal", meanMs: n.mean, stddevMs: n.stddev };
  });

const delaySchema = kindObject("delay", {
  at: oneOf(DELAY_POINTS, "delay point").optional(),
  message: whole(1, U32_MAX).optional(),
  direction: direction.optional(),
  delay: duration(0).optional(),
  jitter: jitterSchema.optional(),
}).transform((d, ctx): DraftAction => {
  const at = d.at ?? FAULT_DEFAULTS.delayAt;
  if (d.message !== undefined && at !== "message") return custom(ctx, "only applies to at: message", d, ["message"]);
  if ((d.delay === undefined) === (d.jitter === undefined)) {
    return custom(ctx, d.delay === undefined ? 'needs delay (e.g. "250ms") or jitter' : "give delay or jitter, not both", d, d.delay === undefined ? ["delay"] : ["jitter"]);
  }
  const inherent: Direction | null = at === "message" ? null : at === "request" ? "request" : "response";
  if (inherent !== null && d.direction !== undefined && d.direction !== inherent) {
    return custom(ctx, `a delay at ${at} is on the ${inherent} side; direction only chooses the stream for at: message`, d, ["direction"]);
  }
  const spec: DelaySpec = d.delay !== undefined ? { type: "fixed", ms: d.delay } : (d.jitter as DelaySpec);
  return { kind: "delay", at, message: d.message ?? null, direction: inherent ?? d.direction ?? null, delay: spec, jitterSeed: 0 };
});

const bandwidthSchema = kindObject("bandwidth", {
  bytesPerSecond: size(1, Number.MAX_SAFE_INTEGER),
  direction: direction.optional(),
}).transform((b): DraftAction => ({ kind: "bandwidth", bytesPerSecond: b.bytesPerSecond, direction: b.direction ?? null }));

const blackholeSchema = kindObject("blackhole", {}).transform((): DraftAction => ({ kind: "blackhole" }));

const stallSchema = kindObject("stall", { direction: direction.optional() }).transform(
  (s): DraftAction => ({ kind: "stall", direction: s.direction ?? null }),
);

const deadlineSchema = kindObject("deadline", {
  mode: oneOf(DEADLINE_MODES, "deadline mode"),
  factor: real.optional(),
  by: duration(0).optional(),
}).transform((d, ctx): DraftAction => {
  if (d.mode === "drop") {
    if (d.factor !== undefined || d.by !== undefined) return custom(ctx, "mode drop takes neither factor nor by", d, [d.factor !== undefined ? "factor" : "by"]);
    return { kind: "deadline", mode: "drop", factor: null, byMs: null };
  }
  if ((d.factor === undefined) === (d.by === undefined)) {
    return custom(ctx, d.factor === undefined ? `mode ${d.mode} needs factor (e.g. 0.5) or by (e.g. "1s")` : "give factor or by, not both", d, ["factor"]);
  }
  if (d.factor !== undefined) {
    const ok = d.mode === "shrink" ? d.factor > 0 && d.factor <= 1 : d.factor >= 1 && d.factor <= 1e6;
    if (!ok) return custom(ctx, d.mode === "shrink" ? `factor ${d.factor} must be above 0 and at most 1 to shrink` : `factor ${d.factor} must be from 1 to 1000000 to grow`, d, ["factor"]);
  }
  return { kind: "deadline", mode: d.mode, factor: d.factor ?? null, byMs: d.by ?? null };
});

const unreachableSchema = kindObject("unreachable", {}).transform((): DraftAction => ({ kind: "unreachable" }));

const upstreamResetSchema = kindObject("upstream_reset", {
  afterRequestMessages: whole(0, U32_MAX).optional(),
  code: h2Code.optional(),
}).transform((u): DraftAction => ({
  kind: "upstream_reset",
  afterRequestMessages: u.afterRequestMessages ?? 0,
  code: u.code ?? FAULT_DEFAULTS.upstreamResetCode,
}));

const KIND_LIST = FAULT_KINDS.join(", ");

const actionSchema = z.discriminatedUnion(
  "kind",
  [
    abortSchema,
    httpSchema,
    resetSchema,
    goawaySchema,
    closeSchema,
    shapeSchema,
    delaySchema,
    bandwidthSchema,
    blackholeSchema,
    stallSchema,
    deadlineSchema,
    unreachableSchema,
    upstreamResetSchema,
  ],
  {
    error: (iss) => {
      if (iss.code !== "invalid_union") return expected("a mapping like { kind: abort, code: UNAVAILABLE }")(iss);
      const kind = typeof iss.input === "object" && iss.input !== null ? (iss.input as Record<string, unknown>)["kind"] : undefined;
      if (kind === undefined) return `is required: one of ${KIND_LIST}`;
      const hint = typeof kind === "string" ? didYouMean(kind, FAULT_KINDS) : "";
      return `unknown fault kind ${describeValue(kind)}: expected one of ${KIND_LIST}${hint}`;
    },
  },
);

// === rule ===

const DIRECTED = new Set(["bandwidth", "stall", "delay"]);

/** Resolves `direction` from the action, then match.direction, then the kind's default. */
function finishAction(draft: DraftAction, matchDirection: Direction | null, ctx: z.core.$RefinementCtx): FaultAction {
  if (draft.kind !== "bandwidth" && draft.kind !== "stall" && draft.kind !== "delay") return draft;
  const own = draft.direction;
  if (own !== null && matchDirection !== null && own !== matchDirection) {
    const what = draft.kind === "delay" && draft.at !== "message" ? `a delay at ${draft.at}, which is on the ${own} side` : `the action's direction ${describeValue(own)}`;
    return custom(ctx, `${describeValue(matchDirection)} disagrees with ${what}`, matchDirection, ["match", "direction"]);
  }
  if (draft.kind === "bandwidth") return { ...draft, direction: own ?? matchDirection ?? FAULT_DEFAULTS.bandwidthDirection };
  if (draft.kind === "stall") return { ...draft, direction: own ?? matchDirection ?? FAULT_DEFAULTS.stallDirection };
  return { ...draft, direction: own ?? matchDirection ?? "response" };
}

const ruleSchema = z
  .strictObject(
    {
      id: ruleId.optional(),
      description: text("a description").optional(),
      enabled: flag.optional(),
      seed: whole(0, U32_MAX).optional(),
      match: matchSchema.optional(),
      fire: fireSchema.optional(),
      action: actionSchema,
    },
    { error: expected("a fault rule mapping like { action: { kind: abort, code: UNAVAILABLE } }") },
  )
  .transform((r, ctx) => {
    const m = r.match ?? {};
    const md = m.direction ?? null;
    if (md !== null && !DIRECTED.has(r.action.kind)) {
      return custom(ctx, `direction only applies to bandwidth, stall and delay faults, not ${r.action.kind}`, md, ["match", "direction"]);
    }
    const action = finishAction(r.action, md, ctx);
    const match: FaultMatch = {
      listener: m.listener ?? null,
      route: m.route ?? null,
      service: m.service ?? null,
      method: m.method ?? null,
      metadata: m.metadata ?? [],
      direction: md,
    };
    return {
      id: r.id ?? "",
      description: r.description ?? null,
      enabled: r.enabled ?? true,
      match,
      fire: r.fire ?? DEFAULT_FIRE,
      action,
      seed: r.seed ?? null,
    };
  });

/** An action outside a rule: no match.direction to inherit. */
const soleActionSchema = actionSchema.transform((d, ctx) => finishAction(d, null, ctx));

const setSettingsSchema = z.strictObject(
  {
    seed: whole(0, U32_MAX).optional(),
    maxActiveFaults: z.union([whole(1, U32_MAX), z.null()]).optional(),
  },
  { error: expected("a mapping like { seed: 42, maxActiveFaults: 10 }") },
);

// === issues → human messages ===


/**
 * Per-parse error map. An unknown-keys issue carries one line per key, in order, each with a
 * suggestion from the object's own keys (the issue's `inst` is that object schema); humanIssues
 * splits them back into one issue per key.
 */
function messageForIssue(iss: z.core.$ZodRawIssue): string | undefined {
  if (iss.code === "invalid_type") return invalidTypeMessage(iss.expected, iss.input);
  if (iss.code === "unrecognized_keys") {
    const shape = (iss.inst as { shape?: Record<string, unknown> } | undefined)?.shape;
    const known = shape === undefined ? [] : Object.keys(shape);
    return iss.keys.map((k) => `unknown key ${JSON.stringify(k)}${didYouMean(k, known)}`).join("\n");
  }
  if (iss.code === "too_small" && iss.origin === "string") return "must not be empty";
  if (iss.code === "too_small" && iss.origin === "array") return `needs at least ${String(iss.minimum)} items`;
  if (iss.code === "too_big" && iss.origin === "array") return `takes at most ${String(iss.maximum)} items`;
  return undefined;
}

function joinPath(prefix: string, segments: readonly PathSegment[]): string {
  const rest = formatPath(segments);
  if (prefix === "") return rest;
  if (rest === "") return prefix;
  return rest.startsWith("[") ? prefix + rest : `${prefix}.${rest}`;
}

function humanIssues(prefix: string, error: z.ZodError): FaultIssue[] {
  const out: FaultIssue[] = [];
  for (const iss of error.issues) {
    const segs = iss.path.filter((s): s is PathSegment => typeof s !== "symbol");
    if (iss.code === "unrecognized_keys") {
      const lines = iss.message.split("\n");
      iss.keys.forEach((k, i) => out.push({ path: joinPath(prefix, [...segs, k]), message: lines[i] ?? `unknown key ${JSON.stringify(k)}` }));
    } else {
      out.push({ path: joinPath(prefix, segs), message: iss.message });
    }
  }
  return out;
}

// === public entry points ===

function safeParse<T extends z.ZodType>(schema: T, value: unknown): ReturnType<T["safeParse"]> {
  return schema.safeParse(value, { error: messageForIssue }) as ReturnType<T["safeParse"]>;
}

/** One rule (unknown → FaultRule). `path` prefixes every issue ("" for an admin API body). Never throws. */
export function parseFaultRule(value: unknown, path: string, options: ParseFaultOptions = {}): FaultRuleResult {
  const r = safeParse(ruleSchema, value);
  if (!r.success) return { ok: false, issues: humanIssues(path, r.error) };
  const parsed = r.data;
  let match = parsed.match;
  const scope = options.scope;
  const issues: FaultIssue[] = [];
  if (scope?.listener !== undefined) {
    if (match.listener !== null && match.listener !== scope.listener) {
      issues.push({ path: joinPath(path, ["match", "listener"]), message: `this list belongs to listener ${JSON.stringify(scope.listener)}` });
    }
    match = { ...match, listener: scope.listener };
  }
  if (scope?.route !== undefined) {
    if (match.route !== null && match.route !== scope.route) {
      issues.push({ path: joinPath(path, ["match", "route"]), message: `this list belongs to route ${JSON.stringify(scope.route)}` });
    }
    match = { ...match, route: scope.route };
  }
  if (issues.length > 0) return { ok: false, issues };
  return { ok: true, rule: deepFreeze({ ...parsed, match, source: options.source ?? "config" }) };
}

/** A list of rules (undefined or null = empty). Collects every rule's issues; duplicate ids are issues too. */
export function parseFaultList(value: unknown, path: string, options: ParseFaultOptions = {}): FaultListResult {
  if (value === undefined || value === null) return { ok: true, rules: [] };
  if (!Array.isArray(value)) return { ok: false, issues: [{ path, message: `expected a list of fault rules, got ${describeValue(value)}` }] };
  const rules: FaultRule[] = [];
  const issues: FaultIssue[] = [];
  const seen = new Map<string, number>();
  value.forEach((item: unknown, i) => {
    const itemPath = `${path}[${i}]`;
    const r = parseFaultRule(item, itemPath, options);
    if (!r.ok) {
      issues.push(...r.issues);
      return;
    }
    const id = r.rule.id;
    const first = id === "" ? undefined : seen.get(id);
    if (first !== undefined) issues.push({ path: `${itemPath}.id`, message: `duplicate fault id ${JSON.stringify(id)} (first used at ${path}[${first}].id)` });
    else if (id !== "") seen.set(id, i);
    rules.push(r.rule);
  });
  return issues.length > 0 ? { ok: false, issues } : { ok: true, rules };
}

/** One action on its own (x-dojang-fault uses this); bandwidth/stall/delay get their default direction. */
export function parseFaultAction(value: unknown, path: string): FaultActionResult {
  const r = safeParse(soleActionSchema, value);
  if (!r.success) return { ok: false, issues: humanIssues(path, r.error) };
  return { ok: true, action: deepFreeze(r.data) };
}

/** A percentage on its own (0..100, "12.5", "12.5%"), for header parameters. */
export function parsePercentage(value: unknown, path: string): { ok: true; value: number } | { ok: false; issues: readonly FaultIssue[] } {
  const r = safeParse(percentage, value);
  return r.success ? { ok: true, value: r.data } : { ok: false, issues: humanIssues(path, r.error) };
}

/** `{ seed?, maxActiveFaults? }` → FaultSetSettings with defaults (seed 0, no cap). */
export function parseFaultSetSettings(
  value: unknown,
  path: string,
): { ok: true; settings: FaultSetSettings } | { ok: false; issues: readonly FaultIssue[] } {
  const r = safeParse(setSettingsSchema, value ?? {});
  if (!r.success) return { ok: false, issues: humanIssues(path, r.error) };
  return { ok: true, settings: { seed: r.data.seed ?? FAULT_DEFAULTS.seed, maxActiveFaults: r.data.maxActiveFaults ?? null } };
}

// === rule → input form (GET /faults, PATCH base) ===

type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

const grpcCodeOut = (code: number): Json => CODE_NAMES[code] ?? code;
const h2CodeOut = (code: number): Json => H2_ERROR_NAMES[code] ?? code;

function formatCalls(calls: readonly CallRange[]): string {
  return calls.map(([a, b]) => (a === b ? `${a}` : b === Number.POSITIVE_INFINITY ? `${a}-` : `${a}-${b}`)).join(",");
}

function formatDelay(spec: DelaySpec): Record<string, Json> {
  switch (spec.type) {
    case "fixed":
      return { delay: formatDuration(spec.ms) };
    case "uniform":
      return { jitter: { uniform: [formatDuration(spec.minMs), formatDuration(spec.maxMs)] } };
    case "normal":
      return { jitter: { normal: { mean: formatDuration(spec.meanMs), stddev: formatDuration(spec.stddevMs) } } };
    default:
      return {};
  }
}

/** A FaultAction in its input form (what parseFaultAction accepts back). */
export function formatFaultAction(a: FaultAction): Record<string, Json> {
  switch (a.kind) {
    case "abort": {
      const out: Record<string, Json> = { kind: a.kind, code: grpcCodeOut(a.code), message: a.message };
      if (a.details !== null) out["details"] = a.details;
      if (a.afterMessages !== null) out["afterMessages"] = a.afterMessages;
      return out;
    }
    case "http":
      return { kind: a.kind, status: a.status, body: a.body, contentType: a.contentType };
    case "reset": {
      const out: Record<string, Json> = { kind: a.kind, code: h2CodeOut(a.code), at: a.at };
      if (a.at === "after_messages" || a.at === "mid_message") out["messages"] = a.messages;
      return out;
    }
    case "goaway":
      return { kind: a.kind, mode: a.mode, code: h2CodeOut(a.code) };
    case "close_connection":
      return { kind: a.kind, afterBytes: a.afterBytes };
    case "shape":
      return a.contentType === null ? { kind: a.kind, shape: a.shape } : { kind: a.kind, shape: a.shape, contentType: a.contentType };
    case "delay": {
      const out: Record<string, Json> = { kind: a.kind, at: a.at };
      if (a.at === "message") {
        if (a.message !== null) out["message"] = a.message;
        out["direction"] = a.direction;
      }
      return { ...out, ...formatDelay(a.delay) };
    }
    case "bandwidth":
      return { kind: a.kind, bytesPerSecond: a.bytesPerSecond, direction: a.direction };
    case "stall":
      return { kind: a.kind, direction: a.direction };
    case "deadline": {
      const out: Record<string, Json> = { kind: a.kind, mode: a.mode };
      if (a.factor !== null) out["factor"] = a.factor;
      if (a.byMs !== null) out["by"] = formatDuration(a.byMs);
      return out;
    }
    case "upstream_reset":
      return { kind: a.kind, afterRequestMessages: a.afterRequestMessages, code: h2CodeOut(a.code) };
    case "blackhole":
    case "unreachable":
      return { kind: a.kind };
    default:
      return {};
  }
}

/** A FaultRule in its input form: parseFaultRule(formatFaultRule(r)) gives r back (source aside). */
export function formatFaultRule(rule: FaultRule): Record<string, Json> {
  const out: Record<string, Json> = {};
  if (rule.id !== "") out["id"] = rule.id;
  if (rule.description !== null) out["description"] = rule.description;
  out["enabled"] = rule.enabled;
  if (rule.seed !== null) out["seed"] = rule.seed;
  const m = rule.match;
  const match: Record<string, Json> = {};
  if (m.listener !== null) match["listener"] = m.listener;
  if (m.route !== null) match["route"] = m.route;
  if (m.service !== null) match["service"] = m.service;
  if (m.method !== null) match["method"] = m.method;
  if (m.metadata.length > 0) match["metadata"] = m.metadata.map((t) => ({ ...t }));
  if (m.direction !== null) match["direction"] = m.direction;
  out["match"] = match;
  const f = rule.fire;
  const fire: Record<string, Json> = {};
  if (f.percentage !== 100) fire["percentage"] = f.percentage;
  if (f.calls !== null) fire["calls"] = formatCalls(f.calls);
  if (f.every !== null) fire["every"] = f.every;
  if (f.maxTimes !== null) fire["maxTimes"] = f.maxTimes;
  if (f.afterMs !== 0) fire["after"] = formatDuration(f.afterMs);
  if (f.forMs !== null) fire["for"] = formatDuration(f.forMs);
  out["fire"] = fire;
  out["action"] = formatFaultAction(rule.action);
  return out;
}

/** The input side of a fault rule and of `faultInjection`, for the config's JSON Schema (src/config/json-schema.ts). */
export const FAULT_RULE_INPUT_SCHEMA: z.ZodType = ruleSchema;
export const FAULT_SET_SETTINGS_INPUT_SCHEMA: z.ZodType = setSettingsSchema;
