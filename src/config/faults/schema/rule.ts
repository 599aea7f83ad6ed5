// A whole fault rule (id, match, fire, action: the action's direction resolved against
// match.direction), an action on its own, and the fault set's settings.

import { z } from "zod";
import { describeValue } from "../../issues.js";
import type { Direction, FaultAction, FaultMatch } from "../model.js";
import { FAULT_DEFAULTS, U32_MAX, expected, custom, whole, flag, text, ruleId } from "./scalars.js";
import { DEFAULT_FIRE, fireSchema, matchSchema } from "./match.js";
import { actionSchema, type DraftAction } from "./action.js";

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

export const ruleSchema = z
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
export const soleActionSchema = actionSchema.transform((d, ctx) => finishAction(d, null, ctx));

export const setSettingsSchema = z.strictObject(
  {
    seed: whole(0, U32_MAX).optional(),
    maxActiveFaults: z.union([whole(1, U32_MAX), z.null()]).optional(),
  },
  { error: expected("a mapping like { seed: 42, maxActiveFaults: 10 }") },
);
