// Fault rules: unknown input (config file, admin API JSON, x-dojang-fault) → normalized FaultRule,
// or every issue with its key path (`listeners[0].faults[1].action.code: unknown gRPC code ...`).
// Validation is zod; this file only adds human messages and normalization. Pure: no node:*,
// clock or randomness. Also the reverse: formatFaultRule gives a rule back in its input form.
// The schemas are in schema/ (scalars, match and fire, actions, the rule), the reverse in format.ts;
// this file keeps the entry points and the human messages, and re-exports the rest.

import { z } from "zod";
import type { ConfigIssue } from "../../errors.js";
import { describeValue, didYouMean, formatPath, invalidTypeMessage, type PathSegment } from "../issues.js";
import { deepFreeze } from "../freeze.js";
import type { FaultAction, FaultRule, FaultSource } from "./model.js";
import { FAULT_DEFAULTS, percentage } from "./schema/scalars.js";
import { ruleSchema, setSettingsSchema, soleActionSchema } from "./schema/rule.js";

export { FAULT_DEFAULTS, H2_ERROR_NAMES } from "./schema/scalars.js";
export { formatFaultAction, formatFaultRule } from "./format.js";

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

/** The input side of a fault rule and of `faultInjection`, for the config's JSON Schema (src/config/json-schema.ts). */
export const FAULT_RULE_INPUT_SCHEMA: z.ZodType = ruleSchema;
export const FAULT_SET_SETTINGS_INPUT_SCHEMA: z.ZodType = setSettingsSchema;
