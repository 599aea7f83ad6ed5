// What a fault rule does: one schema per action kind and the discriminated union of them.

import { z } from "zod";
import { describeValue, didYouMean } from "../../issues.js";
import {
  DEADLINE_MODES,
  DELAY_POINTS,
  FAULT_KINDS,
  GOAWAY_MODES,
  RESET_POINTS,
  SHAPE_KINDS,
  type BandwidthAction,
  type DelayAction,
  type DelaySpec,
  type Direction,
  type FaultAction,
  type StallAction,
} from "../model.js";
import {
  FAULT_DEFAULTS,
  U32_MAX,
  expected,
  custom,
  whole,
  real,
  duration,
  size,
  oneOf,
  direction,
  grpcCode,
  h2Code,
  text,
  nonEmpty,
  base64,
} from "./scalars.js";

// === actions ===

/** Before direction resolution: bandwidth, stall and delay may leave `direction` to match.direction. */
export type DraftAction =
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

export const actionSchema = z.discriminatedUnion(
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
