// Which faults a call gets: the rule set with its counters and seeded PRNGs, and select().
// Deterministic: time (`nowMs`) and the active-call count are arguments, randomness is each
// rule's own mulberry32 stream. No node:* imports, no clock reads, no timers.
//
// Stacking (documented in FAULT_KINDS_DOC too):
//   1. Rules are evaluated in set order: config rules in the order added (listener lists, then
//      route lists, as the lead adds them), then API rules in the order POSTed.
//   2. Every action has a slot (faultSlot). Terminal kinds (TERMINAL_KINDS) share one slot, so a
//      call gets at most one terminal action; each modifier has its own slot (deadline; stall and
//      bandwidth per direction; delay per point, message N and direction). In each slot the
//      first action wins; later ones are dropped and their rules' `fired` is not incremented.
//   3. Actions already chosen for the call (`preset`, e.g. from request headers) come first and
//      hold their slots before any rule.
//   4. The returned array is in that order (preset, then rules in set order).

import type { FaultIssue, FaultSetSettings } from "../../../config/faults/parse.js";
import type { FaultParsers } from "../../../config/parsers.js";
import type { FaultAction, FaultRule } from "../../../config/faults/model.js";
import { mulberry32, ruleSeed, seedFromDraw } from "./prng.js";

/** What the call knows when it asks for faults (once, after routing, before forwarding). */
export interface CallFacts {
  /** The listener's name; rules scoped to a listener need it. */
  readonly listener?: string;
  /** CompiledRoute.label ("prefix:/", "service:pkg.Svc", "path:/a.B/C", "…@host"). */
  readonly routeLabel: string;
  readonly routeIndex: number;
  /** "pkg.Svc" from "/pkg.Svc/Method". */
  readonly service: string;
  /** "Method" from "/pkg.Svc/Method". */
  readonly method: string;
  /** Request header by lower-case name (several values joined by ", "), undefined when absent. */
  readonly metadata: (name: string) => string | undefined;
  /** Monotonic milliseconds, same clock as the `nowMs` given to add/reset. */
  readonly nowMs: number;
}

export interface FaultRuleStatus {
  readonly rule: FaultRule;
  /** Calls whose facts passed the rule's match (the rule's sequence number is this count). */
  readonly matched: number;
  /** Calls that got this rule's action. */
  readonly fired: number;
  /** When the rule was added, or the set last reset; the time window counts from here. */
  readonly addedAtMs: number;
}

export type AddResult = { readonly ok: true; readonly rule: FaultRule } | { readonly ok: false; readonly message: string };

export type UpdateResult =
  | { readonly ok: true; readonly rule: FaultRule }
  | { readonly ok: false; readonly notFound: true }
  | { readonly ok: false; readonly notFound: false; readonly issues: readonly FaultIssue[] };

interface Entry {
  rule: FaultRule;
  matched: number;
  fired: number;
  addedAtMs: number;
  rand: () => number;
  /** Parallel to rule.match.metadata: the compiled regex for a regex test, else null. */
  regexes: readonly (RegExp | null)[];
  slot: number;
  /** Jitter seed drawn when the rule decided to fire on the current call (delay with jitter only). */
  pendingSeed: number;
}

// === slots ===

const SLOT_TERMINAL = 0;

/**
 * The stacking slot of an action: 0 for every terminal kind; modifiers get one slot per place
 * they act, so two delays at different points both apply and two at the same point do not.
 */
export function faultSlot(a: FaultAction): number {
  switch (a.kind) {
    case "deadline":
      return 1;
    case "stall":
      return a.direction === "request" ? 2 : 3;
    case "bandwidth":
      return a.direction === "request" ? 4 : 5;
    case "delay": {
      const d = a.direction === "request" ? 0 : 1;
      switch (a.at) {
        case "request":
          return 10;
        case "response_headers":
          return 11;
        case "trailers":
          return 12;
        default:
          return a.message === null ? 13 + d : 16 + 2 * a.message + d;
      }
    }
    default:
      return SLOT_TERMINAL;
  }
}

/** Applies the stacking rule to a list in priority order: first action per slot wins. */
export function stackFaults(actions: readonly FaultAction[]): { readonly kept: FaultAction[]; readonly dropped: FaultAction[] } {
  const kept: FaultAction[] = [];
  const dropped: FaultAction[] = [];
  const taken: number[] = [];
  for (const a of actions) {
    const s = faultSlot(a);
    if (taken.includes(s)) dropped.push(a);
    else {
      taken.push(s);
      kept.push(a);
    }
  }
  return { kept, dropped };
}

// === the set ===

const ID_PREFIX = "fault-";

export class FaultSet {
  readonly seed: number;
  readonly maxActiveFaults: number | null;
  #entries: Entry[] = [];
  #byId = new Map<string, Entry>();
  /** Config rules as added (ids assigned), for reset(). */
  #baseline: FaultRule[] = [];
  #nextId = 1;
  #baselineNextId = 1;
  #overflowed = 0;

  constructor(settings: Partial<FaultSetSettings> = {}) {
    this.seed = (settings.seed ?? 0) >>> 0;
    this.maxActiveFaults = settings.maxActiveFaults ?? null;
  }

  /** Number of rules (enabled or not). The call skips select() when this is 0. */
  get size(): number {
    return this.#entries.length;
  }

  /** Calls that matched a firing rule but got no fault because maxActiveFaults was reached. */
  get overflowed(): number {
    return this.#overflowed;
  }

  /**
   * Adds a parsed rule at the end of the order. An empty id gets "fault-<n>". A config rule is
   * remembered so reset() can restore it. `nowMs` starts the rule's time window.
   */
  add(rule: FaultRule, nowMs: number): AddResult {
    let id = rule.id;
    if (id === "") {
      do id = `${ID_PREFIX}${this.#nextId++}`;
      while (this.#byId.has(id));
    } else if (this.#byId.has(id)) {
      return { ok: false, message: `a fault rule with id ${JSON.stringify(id)} already exists` };
    }
    const stored: FaultRule = id === rule.id ? rule : Object.freeze({ ...rule, id });
    const entry = this.#entry(stored, nowMs);
    this.#entries.push(entry);
    this.#byId.set(id, entry);
    if (stored.source === "config") {
      this.#baseline.push(stored);
      this.#baselineNextId = this.#nextId;
    }
    return { ok: true, rule: stored };
  }

  /**
   * Applies a JSON merge patch (RFC 7396) to the rule's input form and re-validates the whole
   * result; on any issue nothing changes. A patch whose action has a different `kind` replaces
   * the action instead of merging into it. The id cannot change. Counters, the time window and
   * the PRNG stream are kept (the PRNG restarts only if `seed` changes).
   */
  update(id: string, patch: unknown, parsers: FaultParsers): UpdateResult {
    const entry = this.#byId.get(id);
    if (entry === undefined) return { ok: false, notFound: true };
    if (!isPlainObject(patch)) {
      return { ok: false, notFound: false, issues: [{ path: "", message: "expected a JSON object (a merge patch of the rule)" }] };
    }
    const base = parsers.formatFaultRule(entry.rule) as Record<string, unknown>;
    const patchAction = patch["action"];
    const baseAction = base["action"] as Record<string, unknown>;
    if (isPlainObject(patchAction) && patchAction["kind"] !== undefined && patchAction["kind"] !== baseAction["kind"]) {
      base["action"] = {};
    }
    const merged = mergePatch(base, patch);
    const r = parsers.parseFaultRule(merged, "", { source: entry.rule.source });
    if (!r.ok) return { ok: false, notFound: false, issues: r.issues };
    if (r.rule.id !== id) {
      return { ok: false, notFound: false, issues: [{ path: "id", message: `cannot be changed (it is ${JSON.stringify(id)}; DELETE and POST to rename)` }] };
    }
    const seedChanged = r.rule.seed !== entry.rule.seed;
    entry.rule = r.rule;
    entry.regexes = compileRegexes(r.rule);
    entry.slot = faultSlot(r.rule.action);
    if (seedChanged) entry.rand = mulberry32(r.rule.seed ?? ruleSeed(this.seed, id));
    return { ok: true, rule: r.rule };
  }

  /**
   * Removes every config rule and forgets them for reset(): a reload (SIGHUP) then adds the new
   * file's rules, and reset() restores those, not the ones the file had before.
   */
  removeConfigRules(): void {
    for (const e of [...this.#entries]) if (e.rule.source === "config") this.remove(e.rule.id);
    this.#baseline = [];
  }

  /** Removes a rule; a config rule comes back on reset(). */
  remove(id: string): boolean {
    const entry = this.#byId.get(id);
    if (entry === undefined) return false;
    this.#byId.delete(id);
    this.#entries.splice(this.#entries.indexOf(entry), 1);
    return true;
  }

  /**
   * Back to the config: API rules are removed, config rules are restored as loaded (undoing
   * PATCH and DELETE), every counter is zeroed, every PRNG restarts from its seed, and every
   * time window restarts at `nowMs`. A seeded run after reset() replays the run before it.
   */
  reset(nowMs: number): void {
    this.#entries = [];
    this.#byId.clear();
    this.#overflowed = 0;
    this.#nextId = this.#baselineNextId;
    for (const rule of this.#baseline) {
      const e = this.#entry(rule, nowMs);
      this.#entries.push(e);
      this.#byId.set(rule.id, e);
    }
  }

  get(id: string): FaultRuleStatus | undefined {
    const e = this.#byId.get(id);
    return e === undefined ? undefined : status(e);
  }

  /** Every rule in stacking order, with its counts. */
  list(): FaultRuleStatus[] {
    return this.#entries.map(status);
  }

  /** select()'s body; see there. */
  pick(facts: CallFacts, active: number, preset: readonly FaultAction[] | undefined, ids?: string[]): readonly FaultAction[] | null {
    const entries = this.#entries;
    let hits: Entry[] | null = null;
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i] as Entry;
      if (!e.rule.enabled || !matches(e, facts)) continue;
      e.matched++;
      if (wouldFire(e, facts.nowMs)) (hits ??= []).push(e);
    }
    const hasPreset = preset !== undefined && preset.length > 0;
    if (hits === null && !hasPreset) return null;
    // The cap is checked last, so the PRNG draws above depend only on the matched-call sequence.
    if (this.maxActiveFaults !== null && active >= this.maxActiveFaults) {
      this.#overflowed++;
      return null;
    }
    if (hits === null) {
      if (ids !== undefined && hasPreset) for (let i = 0; i < preset.length; i++) ids.push("header");
      return preset ?? null;
    }
    const out: FaultAction[] = hasPreset ? preset.slice() : [];
    if (ids !== undefined) for (let i = 0; i < out.length; i++) ids.push("header");
    const taken: number[] = out.map(faultSlot);
    for (const e of hits) {
      if (taken.includes(e.slot)) continue;
      taken.push(e.slot);
      e.fired++;
      if (ids !== undefined) ids.push(e.rule.id);
      const a = e.rule.action;
      out.push(a.kind === "delay" && a.delay.type !== "fixed" ? { ...a, jitterSeed: e.pendingSeed } : a);
    }
    return out;
  }

  #entry(rule: FaultRule, nowMs: number): Entry {
    return {
      rule,
      matched: 0,
      fired: 0,
      addedAtMs: nowMs,
      rand: mulberry32(rule.seed ?? ruleSeed(this.seed, rule.id)),
      regexes: compileRegexes(rule),
      slot: faultSlot(rule.action),
      pendingSeed: 0,
    };
  }
}

/**
 * The faults for one call, or null (nothing allocated) when no rule fires. Call it once per call
 * and only when `set.size > 0`. `active` is the number of calls currently executing a fault
 * (the call tracks it); at `maxActiveFaults` the call gets nothing and `overflowed` counts it.
 * `preset` (optional) are actions already chosen for this call, e.g. faultsFromHeaders().actions;
 * they take their slots first and are subject to the same cap. Mutates the rules' counters.
 */
export function select(
  set: FaultSet,
  facts: CallFacts,
  active: number,
  preset?: readonly FaultAction[],
  /** filled with the id of each returned action's rule ("header" for preset ones), in order */
  ids?: string[],
): readonly FaultAction[] | null {
  return set.pick(facts, active, preset, ids);
}

// === per-rule tests ===

function matches(e: Entry, f: CallFacts): boolean {
  const m = e.rule.match;
  if (m.listener !== null && m.listener !== f.listener) return false;
  if (m.route !== null && (typeof m.route === "number" ? m.route !== f.routeIndex : m.route !== f.routeLabel)) return false;
  if (m.service !== null && m.service !== f.service) return false;
  if (m.method !== null && m.method !== f.method) return false;
  const tests = m.metadata;
  for (let i = 0; i < tests.length; i++) {
    const t = tests[i]!;
    const v = f.metadata(t.name);
    if ("equals" in t) {
      if (v !== t.equals) return false;
    } else if ("present" in t) {
      if ((v !== undefined) !== t.present) return false;
    } else {
      const re = e.regexes[i];
      if (v === undefined || re === undefined || re === null || !re.test(v)) return false;
    }
  }
  return true;
}

/** Gates in order: time window, maxTimes, sequence (calls / every), percentage (one PRNG draw). */
function wouldFire(e: Entry, nowMs: number): boolean {
  const f = e.rule.fire;
  const since = nowMs - e.addedAtMs;
  if (since < f.afterMs) return false;
  if (f.forMs !== null && since >= f.afterMs + f.forMs) return false;
  if (f.maxTimes !== null && e.fired >= f.maxTimes) return false;
  const n = e.matched;
  if (f.calls !== null) {
    let inside = false;
    for (const [from, to] of f.calls) {
      if (n >= from && n <= to) {
        inside = true;
        break;
      }
    }
    if (!inside) return false;
  }
  if (f.every !== null && n % f.every !== 0) return false;
  if (f.percentage < 100) {
    if (f.percentage <= 0) return false;
    if (!(e.rand() * 100 < f.percentage)) return false;
  }
  const a = e.rule.action;
  if (a.kind === "delay" && a.delay.type !== "fixed") e.pendingSeed = seedFromDraw(e.rand());
  return true;
}

function compileRegexes(rule: FaultRule): (RegExp | null)[] {
  // Anchored: the whole value must match, like Envoy's safe_regex header matcher. No flags, so
  // no lastIndex state. The pattern was compiled once already by the parser.
  return rule.match.metadata.map((t) => ("regex" in t ? new RegExp(`^(?:${t.regex})$`) : null));
}

function status(e: Entry): FaultRuleStatus {
  return { rule: e.rule, matched: e.matched, fired: e.fired, addedAtMs: e.addedAtMs };
}

// === JSON merge patch (RFC 7396) ===

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** RFC 7396: objects merge key by key, null deletes, anything else replaces. Own keys only ("__proto__" stays a key). */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return patch;
  const out: Record<string, unknown> = {};
  if (isPlainObject(target)) for (const [k, v] of Object.entries(target)) define(out, k, v);
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else define(out, k, mergePatch(Object.hasOwn(out, k) ? out[k] : undefined, v));
  }
  return out;
}

function define(o: Record<string, unknown>, k: string, v: unknown): void {
  Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
}
