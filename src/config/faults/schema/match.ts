// Which calls a fault rule picks: `match` (listener, route, service, method, metadata, direction)
// and `fire` (percentage, call numbers, every, maxTimes, after, for).

import { z } from "zod";
import { describeValue } from "../../issues.js";
import type { FaultFire, MetadataMatch } from "../model.js";
import {
  FAULT_DEFAULTS,
  U32_MAX,
  HEADER_NAME_RE,
  ROUTE_LABEL_RE,
  expected,
  custom,
  whole,
  percentage,
  duration,
  flag,
  direction,
  text,
  nonEmpty,
} from "./scalars.js";

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

export const matchSchema = z.strictObject(
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

export type CallRange = readonly [number, number];

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

export const fireSchema = z
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

export const DEFAULT_FIRE: FaultFire = Object.freeze({ percentage: 100, calls: null, every: null, maxTimes: null, afterMs: 0, forMs: null });
