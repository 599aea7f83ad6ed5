import { describe, expect, it } from "vitest";
import { FaultSet, drawDelayMs, mulberry32, select, stackFaults, type FaultAction } from "../../../../src/proxy/filters/fault/index.js";
import { facts, parsers, rule } from "./helpers.js";

const ABORT = { kind: "abort", code: "UNAVAILABLE" };

function setWith(...rules: unknown[]): FaultSet {
  const set = new FaultSet();
  for (const r of rules) {
    const added = set.add(rule(r), 0);
    if (!added.ok) expect.fail(added.message);
  }
  return set;
}

/** Which of `n` calls (1-based, at `nowMs`) got any fault. */
function pattern(set: FaultSet, n: number, nowMs = 0): boolean[] {
  return Array.from({ length: n }, () => select(set, facts({ nowMs }), 0) !== null);
}

describe("select(): sequences count the rule's matched calls, from 1", () => {
  it('fails calls 1-2, then passes ("1-2")', () => {
    expect(pattern(setWith({ fire: { calls: "1-2" }, action: ABORT }), 5)).toEqual([true, true, false, false, false]);
  });

  it("fails the listed calls ([1, 3])", () => {
    expect(pattern(setWith({ fire: { calls: [1, 3] }, action: ABORT }), 4)).toEqual([true, false, true, false]);
  });

  it('passes calls 1-2, then fails every call ("3-")', () => {
    expect(pattern(setWith({ fire: { calls: "3-" }, action: ABORT }), 5)).toEqual([false, false, true, true, true]);
  });

  it("fails every 3rd call", () => {
    expect(pattern(setWith({ fire: { every: 3 }, action: ABORT }), 9)).toEqual([false, false, true, false, false, true, false, false, true]);
  });

  it("counts only calls that pass the match, so other calls do not advance the sequence", () => {
    const set = setWith({ match: { method: "Get" }, fire: { calls: "2" }, action: ABORT });
    expect(select(set, facts({ method: "Get" }), 0)).toBeNull();
    expect(select(set, facts({ method: "List" }), 0)).toBeNull();
    expect(select(set, facts({ method: "Get" }), 0)).not.toBeNull();
    expect(set.list()[0]).toMatchObject({ matched: 2, fired: 1 });
  });
});

describe("select(): maxTimes and the time window", () => {
  it("stops firing after maxTimes", () => {
    expect(pattern(setWith({ fire: { maxTimes: 2 }, action: ABORT }), 4)).toEqual([true, true, false, false]);
  });

  it("fires only inside [after, after + for) counted from when the rule was added", () => {
    const set = new FaultSet();
    set.add(rule({ fire: { after: "5s", for: "10s" }, action: ABORT }), 1000);
    const at = (nowMs: number) => select(set, facts({ nowMs }), 0) !== null;
    expect([at(1000), at(5999), at(6000), at(15999), at(16000), at(99999)]).toEqual([false, false, true, true, false, false]);
  });

  it("keeps firing after the window opens when for is not given", () => {
    const set = new FaultSet();
    set.add(rule({ fire: { after: "1s" }, action: ABORT }), 0);
    expect([999, 1000, 10 ** 9].map((nowMs) => select(set, facts({ nowMs }), 0) !== null)).toEqual([false, true, true]);
  });

  it("restarts the window at reset()", () => {
    const set = new FaultSet();
    set.add(rule({ fire: { for: "1s" }, action: ABORT }), 0);
    expect(select(set, facts({ nowMs: 5000 }), 0)).toBeNull();
    set.reset(5000);
    expect(select(set, facts({ nowMs: 5500 }), 0)).not.toBeNull();
  });
});

describe("select(): percentages are drawn from seeded PRNGs, so runs replay", () => {
  const thirty = { id: "p", fire: { percentage: 30 }, action: ABORT };

  it("gives the same fire pattern over 1000 calls for the same seed", () => {
    const a = new FaultSet({ seed: 42 });
    const b = new FaultSet({ seed: 42 });
    a.add(rule(thirty), 0);
    b.add(rule(thirty), 0);
    const pa = pattern(a, 1000);
    expect(pattern(b, 1000)).toEqual(pa);
    const fired = pa.filter(Boolean).length;
    expect(fired).toBeGreaterThan(250);
    expect(fired).toBeLessThan(350);
  });

  it("gives a different pattern for a different set seed", () => {
    const a = new FaultSet({ seed: 1 });
    const b = new FaultSet({ seed: 2 });
    a.add(rule(thirty), 0);
    b.add(rule(thirty), 0);
    expect(pattern(b, 1000)).not.toEqual(pattern(a, 1000));
  });

  it("uses a rule's own seed regardless of the set's seed", () => {
    const a = new FaultSet({ seed: 1 });
    const b = new FaultSet({ seed: 2 });
    a.add(rule({ ...thirty, seed: 9 }), 0);
    b.add(rule({ ...thirty, seed: 9 }), 0);
    expect(pattern(b, 1000)).toEqual(pattern(a, 1000));
  });

  it("replays the same pattern after reset()", () => {
    const set = new FaultSet({ seed: 5 });
    set.add(rule(thirty), 0);
    const first = pattern(set, 200);
    set.reset(0);
    expect(pattern(set, 200)).toEqual(first);
  });

  it("never fires at 0 % and always fires at 100 %", () => {
    expect(pattern(setWith({ fire: { percentage: 0 }, action: ABORT }), 100).some(Boolean)).toBe(false);
    expect(pattern(setWith({ fire: { percentage: 100 }, action: ABORT }), 100).every(Boolean)).toBe(true);
  });

  it("seeds jittered delays from the rule's stream, the same on every run", () => {
    const jittered = { fire: { percentage: 50 }, action: { kind: "delay", jitter: { uniform: ["100ms", "300ms"] } } };
    const run = () => {
      const set = new FaultSet({ seed: 3 });
      set.add(rule(jittered), 0);
      return Array.from({ length: 50 }, () => {
        const a = select(set, facts(), 0)?.[0];
        return a?.kind === "delay" ? drawDelayMs(a.delay, mulberry32(a.jitterSeed)) : null;
      });
    };
    const first = run();
    expect(run()).toEqual(first);
    const drawn = first.filter((v): v is number => v !== null);
    expect(new Set(drawn).size).toBeGreaterThan(5);
    expect(drawn.every((ms) => ms >= 100 && ms <= 300)).toBe(true);
  });
});

describe("select(): maxActiveFaults caps concurrently faulted calls", () => {
  it("gives no fault while `active` is at the cap, and counts the overflow", () => {
    const set = new FaultSet({ maxActiveFaults: 2 });
    set.add(rule({ action: ABORT }), 0);
    expect(select(set, facts(), 1)).not.toBeNull();
    expect(select(set, facts(), 2)).toBeNull();
    expect(select(set, facts(), 3)).toBeNull();
    expect(set.overflowed).toBe(2);
    expect(set.list()[0]).toMatchObject({ matched: 3, fired: 1 });
  });

  it("does not count a call that no rule fires on as an overflow", () => {
    const set = new FaultSet({ maxActiveFaults: 1 });
    set.add(rule({ match: { service: "other.Svc" }, action: ABORT }), 0);
    expect(select(set, facts(), 5)).toBeNull();
    expect(set.overflowed).toBe(0);
  });
});

describe("select(): match on route, service, method, listener and metadata", () => {
  const hit = (m: unknown, f = facts()) => select(setWith({ match: m, action: ABORT }), f, 0) !== null;

  it("matches a route by label or by index", () => {
    expect(hit({ route: "service:pkg.Svc" }, facts({ routeLabel: "service:pkg.Svc" }))).toBe(true);
    expect(hit({ route: "service:pkg.Svc" }, facts({ routeLabel: "prefix:/" }))).toBe(false);
    expect(hit({ route: 2 }, facts({ routeIndex: 2 }))).toBe(true);
    expect(hit({ route: 2 }, facts({ routeIndex: 0 }))).toBe(false);
  });

  it("matches service and method exactly", () => {
    expect(hit({ service: "pkg.Svc", method: "Get" })).toBe(true);
    expect(hit({ service: "pkg.Svc", method: "List" })).toBe(false);
    expect(hit({ service: "pkg.Sv" })).toBe(false);
  });

  it("matches a listener only when the call names it", () => {
    expect(hit({ listener: "edge" }, facts({ listener: "edge" }))).toBe(true);
    expect(hit({ listener: "edge" }, facts({ listener: "internal" }))).toBe(false);
    expect(hit({ listener: "edge" })).toBe(false);
  });

  it("matches metadata by equals", () => {
    expect(hit({ metadata: [{ name: "x-user", equals: "alice" }] }, facts({ headers: { "x-user": "alice" } }))).toBe(true);
    expect(hit({ metadata: [{ name: "x-user", equals: "alice" }] }, facts({ headers: { "x-user": "bob" } }))).toBe(false);
    expect(hit({ metadata: [{ name: "x-user", equals: "alice" }] })).toBe(false);
  });

  it("matches metadata by presence and by absence", () => {
    expect(hit({ metadata: [{ name: "x-debug", present: true }] }, facts({ headers: { "x-debug": "" } }))).toBe(true);
    expect(hit({ metadata: [{ name: "x-debug", present: true }] })).toBe(false);
    expect(hit({ metadata: [{ name: "x-debug", present: false }] })).toBe(true);
    expect(hit({ metadata: [{ name: "x-debug", present: false }] }, facts({ headers: { "x-debug": "1" } }))).toBe(false);
  });

  it("matches metadata by a regex against the whole value", () => {
    const m = { metadata: [{ name: "x-user", regex: "al[a-z]+" }] };
    expect(hit(m, facts({ headers: { "x-user": "alice" } }))).toBe(true);
    expect(hit(m, facts({ headers: { "x-user": "xalice" } }))).toBe(false);
    expect(hit({ metadata: [{ name: "x-user", regex: "al" }] }, facts({ headers: { "x-user": "alice" } }))).toBe(false);
  });

  it("requires every metadata test to hold", () => {
    const m = { metadata: [{ name: "a", equals: "1" }, { name: "b", present: true }] };
    expect(hit(m, facts({ headers: { a: "1", b: "x" } }))).toBe(true);
    expect(hit(m, facts({ headers: { a: "1" } }))).toBe(false);
  });

  it("returns null when no rule matches, and leaves a disabled rule uncounted", () => {
    const set = setWith({ enabled: false, action: ABORT });
    expect(select(set, facts(), 0)).toBeNull();
    expect(set.list()[0]).toMatchObject({ matched: 0, fired: 0 });
  });
});

describe("select(): stacking, in rule order, one terminal action per call", () => {
  const kinds = (actions: readonly FaultAction[] | null) => (actions ?? []).map((a) => a.kind);

  it("lets the first terminal rule win and does not count the second as fired", () => {
    const set = setWith({ id: "a", action: ABORT }, { id: "b", action: { kind: "reset", code: "CANCEL" } });
    expect(kinds(select(set, facts(), 0))).toEqual(["abort"]);
    expect(set.list().map((s) => [s.rule.id, s.matched, s.fired])).toEqual([
      ["a", 1, 1],
      ["b", 1, 0],
    ]);
  });

  it("composes modifiers with the terminal action, in rule order", () => {
    const set = setWith(
      { action: { kind: "delay", delay: "100ms" } },
      { action: ABORT },
      { action: { kind: "deadline", mode: "drop" } },
      { action: { kind: "bandwidth", bytesPerSecond: 1000 } },
      { action: { kind: "stall", direction: "request" } },
      { action: { kind: "delay", at: "trailers", delay: "1s" } },
    );
    expect(kinds(select(set, facts(), 0))).toEqual(["delay", "abort", "deadline", "bandwidth", "stall", "delay"]);
  });

  it("keeps only the first of two modifiers acting at the same point", () => {
    const set = setWith({ action: { kind: "delay", delay: "100ms" } }, { action: { kind: "delay", delay: "900ms" } });
    const out = select(set, facts(), 0);
    expect(out).toHaveLength(1);
    expect(out?.[0]).toMatchObject({ delay: { type: "fixed", ms: 100 } });
  });

  it("keeps delays at different messages and directions apart", () => {
    const set = setWith(
      { action: { kind: "delay", at: "message", message: 1, delay: "1ms" } },
      { action: { kind: "delay", at: "message", message: 2, delay: "2ms" } },
      { action: { kind: "delay", at: "message", direction: "request", delay: "3ms" } },
      { action: { kind: "delay", at: "message", delay: "4ms" } },
    );
    expect(select(set, facts(), 0)).toHaveLength(4);
  });

  it("puts preset actions (from headers) first, holding their slots against the rules", () => {
    const set = setWith({ action: ABORT }, { action: { kind: "deadline", mode: "drop" } });
    const preset = [rule({ action: { kind: "blackhole" } }).action];
    expect(kinds(select(set, facts(), 0, preset))).toEqual(["blackhole", "deadline"]);
    expect(set.list().map((s) => s.fired)).toEqual([0, 1]);
  });

  it("returns the preset alone when no rule fires, and nothing at the cap", () => {
    const set = new FaultSet({ maxActiveFaults: 1 });
    set.add(rule({ match: { service: "x.Y" }, action: ABORT }), 0);
    const preset = [rule({ action: { kind: "unreachable" } }).action];
    expect(select(set, facts(), 0, preset)).toBe(preset);
    expect(select(set, facts(), 1, preset)).toBeNull();
  });

  it("applies the same rule to a plain list with stackFaults()", () => {
    const a = rule({ action: ABORT }).action;
    const r = rule({ action: { kind: "reset", code: 8 } }).action;
    const d = rule({ action: { kind: "delay", delay: "1s" } }).action;
    expect(stackFaults([d, a, r])).toEqual({ kept: [d, a], dropped: [r] });
  });
});

describe("FaultSet: add, update, remove, reset, list", () => {
  it("assigns fault-<n> ids to rules without one and refuses a duplicate id", () => {
    const set = new FaultSet();
    expect(set.add(rule({ action: ABORT }), 0)).toMatchObject({ ok: true, rule: { id: "fault-1" } });
    expect(set.add(rule({ id: "fault-2", action: ABORT }), 0).ok).toBe(true);
    expect(set.add(rule({ action: ABORT }), 0)).toMatchObject({ ok: true, rule: { id: "fault-3" } });
    expect(set.add(rule({ id: "fault-1", action: ABORT }), 0)).toEqual({ ok: false, message: 'a fault rule with id "fault-1" already exists' });
    expect(set.size).toBe(3);
  });

  it("merges a patch, re-validates it whole and keeps the counters", () => {
    const set = setWith({ id: "a", fire: { percentage: 100 }, action: { kind: "abort", code: 14, message: "down" } });
    select(set, facts(), 0);
    const r = set.update("a", { action: { code: "INTERNAL" } }, parsers);
    expect(r).toMatchObject({ ok: true, rule: { action: { kind: "abort", code: 13, message: "down" } } });
    expect(set.get("a")).toMatchObject({ matched: 1, fired: 1 });
  });

  it("leaves the rule unchanged when the patched rule is invalid", () => {
    const set = setWith({ id: "a", action: ABORT });
    const before = set.get("a")?.rule;
    const r = set.update("a", { action: { code: "NOPE" }, fire: { percentage: 500 } }, parsers);
    expect(r.ok ? [] : "issues" in r ? r.issues.map((i) => i.path).sort() : []).toEqual(["action.code", "fire.percentage"]);
    expect(set.get("a")?.rule).toBe(before);
  });

  it("replaces the action when a patch changes its kind, and deletes keys set to null", () => {
    const set = setWith({ id: "a", description: "x", action: { kind: "abort", code: 14, message: "m" } });
    expect(set.update("a", { description: null, action: { kind: "reset", code: "CANCEL" } }, parsers)).toMatchObject({
      ok: true,
      rule: { description: null, action: { kind: "reset", code: 8 } },
    });
  });

  it("refuses to change the id and reports an unknown id", () => {
    const set = setWith({ id: "a", action: ABORT });
    expect(set.update("a", { id: "b" }, parsers)).toMatchObject({ ok: false, notFound: false, issues: [{ path: "id" }] });
    expect(set.update("zz", {}, parsers)).toEqual({ ok: false, notFound: true });
  });

  it("removes a rule by id", () => {
    const set = setWith({ id: "a", action: ABORT });
    expect(set.remove("a")).toBe(true);
    expect(set.remove("a")).toBe(false);
    expect(select(set, facts(), 0)).toBeNull();
  });

  it("restores config rules, drops API rules and zeroes counters on reset()", () => {
    const set = new FaultSet();
    set.add(rule({ id: "cfg", action: ABORT }), 0);
    set.add(rule({ action: { kind: "deadline", mode: "drop" } }, "api"), 0);
    select(set, facts(), 0);
    set.update("cfg", { action: { code: 13 } }, parsers);
    set.reset(0);
    expect(set.list().map((s) => [s.rule.id, s.rule.action, s.matched, s.fired])).toEqual([["cfg", { kind: "abort", code: 14, message: "injected fault", details: null, afterMessages: null }, 0, 0]]);
    set.remove("cfg");
    set.reset(0);
    expect(set.list().map((s) => s.rule.id)).toEqual(["cfg"]);
  });

  it("lists rules in stacking order with their counts", () => {
    const set = setWith({ id: "x", action: ABORT }, { id: "y", match: { service: "none.N" }, action: ABORT });
    select(set, facts(), 0);
    expect(set.list().map((s) => ({ id: s.rule.id, matched: s.matched, fired: s.fired }))).toEqual([
      { id: "x", matched: 1, fired: 1 },
      { id: "y", matched: 0, fired: 0 },
    ]);
  });
});
