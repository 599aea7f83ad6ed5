import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  FAULT_KINDS,
  formatFaultRule,
  parseFaultAction,
  parseFaultList,
  parseFaultRule,
  parseFaultSetSettings,
  type FaultAction,
} from "../../../../src/proxy/filters/fault/index.js";
import { rule } from "./helpers.js";

const P = "listeners[0].faults[1]";

/** The single issue of an invalid rule (path and message), or a test failure. */
function issuesOf(value: unknown) {
  const r = parseFaultRule(value, P);
  if (r.ok) expect.fail(`expected issues, got a rule: ${JSON.stringify(r.rule)}`);
  return r.issues;
}

describe("parseFaultRule(): each invalid rule is refused with its key path and a human message", () => {
  const cases: [string, unknown, string, RegExp][] = [
    ["an unknown kind, with a suggestion", { action: { kind: "abrt" } }, `${P}.action.kind`, /unknown fault kind "abrt".*\(did you mean "abort"\?\)/],
    ["a missing kind", { action: {} }, `${P}.action.kind`, /is required: one of abort, http/],
    ["a missing action", { match: { service: "a.B" } }, `${P}.action`, /is required/],
    ["a misspelt gRPC code name", { action: { kind: "abort", code: "UNAVAILBLE" } }, `${P}.action.code`, /unknown gRPC code "UNAVAILBLE" \(did you mean "UNAVAILABLE"\?\)/],
    ["a gRPC code above 16", { action: { kind: "abort", code: 17 } }, `${P}.action.code`, /gRPC code 17 is out of range \(0 to 16/],
    ["a negative gRPC code", { action: { kind: "abort", code: -1 } }, `${P}.action.code`, /out of range/],
    ["a misspelt HTTP/2 error code", { action: { kind: "reset", code: "CANCL" } }, `${P}.action.code`, /unknown HTTP\/2 error code "CANCL" \(did you mean "CANCEL"\?\)/],
    ["an HTTP/2 error code above 2^32-1", { action: { kind: "reset", code: 2 ** 32 } }, `${P}.action.code`, /out of range \(0 to 4294967295\)/],
    ["a bad delay duration", { action: { kind: "delay", delay: "5x" } }, `${P}.action.delay`, /invalid duration "5x"/],
    ["a bad window duration", { fire: { after: "soon" }, action: { kind: "blackhole" } }, `${P}.fire.after`, /invalid duration "soon"/],
    ["a zero-length window", { fire: { for: 0 }, action: { kind: "blackhole" } }, `${P}.fire.for`, /at least 1ms/],
    ["a bad jitter duration", { action: { kind: "delay", jitter: { uniform: ["1s", "-2s"] } } }, `${P}.action.jitter.uniform[1]`, /must not be negative/],
    ["a percentage above 100", { fire: { percentage: 101 }, action: { kind: "blackhole" } }, `${P}.fire.percentage`, /percentage 101 is out of range \(0 to 100\)/],
    ["a negative percentage", { fire: { percentage: -5 }, action: { kind: "blackhole" } }, `${P}.fire.percentage`, /out of range \(0 to 100\)/],
    ["a percentage that is not a number", { fire: { percentage: "half" }, action: { kind: "blackhole" } }, `${P}.fire.percentage`, /expected a percentage/],
    ["an http fault without status", { action: { kind: "http" } }, `${P}.action.status`, /^is required$/],
    ["an abort without code", { action: { kind: "abort" } }, `${P}.action.code`, /^is required$/],
    ["a reset without code", { action: { kind: "reset", at: "after_headers" } }, `${P}.action.code`, /^is required$/],
    ["a reset after_messages without messages", { action: { kind: "reset", code: "CANCEL", at: "after_messages" } }, `${P}.action.messages`, /is required with at: after_messages/],
    ["a reset before_headers with messages", { action: { kind: "reset", code: 8, messages: 2 } }, `${P}.action.messages`, /only applies to at: after_messages or mid_message/],
    ["a bandwidth fault without bytesPerSecond", { action: { kind: "bandwidth" } }, `${P}.action.bytesPerSecond`, /^is required$/],
    ["a shape fault without shape", { action: { kind: "shape" } }, `${P}.action.shape`, /^is required$/],
    ["an unknown shape", { action: { kind: "shape", shape: "no_trailer" } }, `${P}.action.shape`, /unknown shape "no_trailer".*did you mean "no_trailers"/],
    ["a contentType on a shape that sends none", { action: { kind: "shape", shape: "no_trailers", contentType: "x/y" } }, `${P}.action.contentType`, /only applies to shape: wrong_content_type/],
    ["a delay with neither delay nor jitter", { action: { kind: "delay", at: "trailers" } }, `${P}.action.delay`, /needs delay/],
    ["a delay with both delay and jitter", { action: { kind: "delay", delay: "1s", jitter: { uniform: ["1s", "2s"] } } }, `${P}.action.jitter`, /not both/],
    ["a message number on a delay that is not at message", { action: { kind: "delay", delay: "1s", message: 2 } }, `${P}.action.message`, /only applies to at: message/],
    ["an unknown delay point", { action: { kind: "delay", at: "headers", delay: "1s" } }, `${P}.action.at`, /unknown delay point "headers"/],
    ["a deadline shrink without factor or by", { action: { kind: "deadline", mode: "shrink" } }, `${P}.action.factor`, /needs factor/],
    ["a deadline shrink by a factor above 1", { action: { kind: "deadline", mode: "shrink", factor: 2 } }, `${P}.action.factor`, /at most 1 to shrink/],
    ["a deadline drop with a factor", { action: { kind: "deadline", mode: "drop", factor: 0.5 } }, `${P}.action.factor`, /takes neither/],
    ["details that are not base64", { action: { kind: "abort", code: 13, details: "not base64!" } }, `${P}.action.details`, /is not base64/],
    ["an HTTP status outside 200..599", { action: { kind: "http", status: 700 } }, `${P}.action.status`, /out of range \(200 to 599\)/],
    ["an unknown key in the action, with a suggestion", { action: { kind: "abort", code: 14, mesage: "x" } }, `${P}.action.mesage`, /unknown key "mesage" \(did you mean "message"\?\)/],
    ["an unknown key at the rule's top level", { mach: {}, action: { kind: "blackhole" } }, `${P}.mach`, /unknown key "mach" \(did you mean "match"\?\)/],
    ["an unknown key in match", { match: { servce: "a.B" }, action: { kind: "blackhole" } }, `${P}.match.servce`, /did you mean "service"/],
    ["an unknown key in fire", { fire: { percent: 5 }, action: { kind: "blackhole" } }, `${P}.fire.percent`, /did you mean "percentage"/],
    ["a key of another kind", { action: { kind: "blackhole", code: 14 } }, `${P}.action.code`, /unknown key "code"/],
    ["a metadata test with two conditions", { match: { metadata: [{ name: "x", equals: "a", present: true }] }, action: { kind: "blackhole" } }, `${P}.match.metadata[0]`, /give only one of equals, present or regex/],
    ["a metadata test with no condition", { match: { metadata: [{ name: "x" }] }, action: { kind: "blackhole" } }, `${P}.match.metadata[0]`, /needs one of equals, present or regex/],
    ["an invalid regular expression", { match: { metadata: [{ name: "x", regex: "(" }] }, action: { kind: "blackhole" } }, `${P}.match.metadata[0].regex`, /invalid regular expression "\("/],
    ["an invalid header name", { match: { metadata: [{ name: "bad name", present: true }] }, action: { kind: "blackhole" } }, `${P}.match.metadata[0].name`, /not a valid header name/],
    ["a route that is neither a label nor an index", { match: { route: "users" }, action: { kind: "blackhole" } }, `${P}.match.route`, /not a route label/],
    ["a method given with its service", { match: { method: "pkg.Svc/Get" }, action: { kind: "blackhole" } }, `${P}.match.method`, /must not contain "\/"/],
    ["a backwards call range", { fire: { calls: "2-1" }, action: { kind: "blackhole" } }, `${P}.fire.calls`, /ends before it starts/],
    ["call number 0", { fire: { calls: [0] }, action: { kind: "blackhole" } }, `${P}.fire.calls`, /from 1/],
    ["calls and every together", { fire: { calls: "1-2", every: 3 }, action: { kind: "blackhole" } }, `${P}.fire.every`, /give calls or every, not both/],
    ["every 0", { fire: { every: 0 }, action: { kind: "blackhole" } }, `${P}.fire.every`, /out of range \(1 to/],
    ["maxTimes that is not whole", { fire: { maxTimes: 1.5 }, action: { kind: "blackhole" } }, `${P}.fire.maxTimes`, /expected a whole number/],
    ["the reserved id reset", { id: "reset", action: { kind: "blackhole" } }, `${P}.id`, /"reset" cannot be an id/],
    ["an id with spaces", { id: "my fault", action: { kind: "blackhole" } }, `${P}.id`, /invalid id "my fault"/],
    ["match.direction on a kind without direction", { match: { direction: "request" }, action: { kind: "abort", code: 1 } }, `${P}.match.direction`, /only applies to bandwidth, stall and delay/],
    ["match.direction that contradicts the action", { match: { direction: "request" }, action: { kind: "stall", direction: "response" } }, `${P}.match.direction`, /disagrees with the action's direction "response"/],
    ["a direction on a delay whose point fixes it", { action: { kind: "delay", at: "trailers", direction: "request", delay: "1s" } }, `${P}.action.direction`, /on the response side/],
    ["a seed above 2^32-1", { seed: 2 ** 32, action: { kind: "blackhole" } }, `${P}.seed`, /out of range/],
    ["a rule that is not a mapping", 5, P, /expected a fault rule mapping.*got 5/],
    ["a rule that is a list", [], P, /got a list/],
  ];
  for (const [what, value, path, message] of cases) {
    it(`refuses ${what}`, () => {
      const issues = issuesOf(value);
      expect(issues).toHaveLength(1);
      expect(issues[0]?.path).toBe(path);
      expect(issues[0]?.message).toMatch(message);
    });
  }

  it("reports every issue of a rule at once, not only the first", () => {
    const issues = issuesOf({ fire: { percentage: 200 }, extra: 1, action: { kind: "abort", code: "NOPE" } });
    expect(issues.map((i) => i.path).sort()).toEqual([`${P}.action.code`, `${P}.extra`, `${P}.fire.percentage`]);
  });

  it("uses the path as given, with an empty path for an admin API body", () => {
    const r = parseFaultRule({ action: { kind: "abort", code: 99 } }, "");
    expect(r.ok ? [] : r.issues.map((i) => i.path)).toEqual(["action.code"]);
  });
});

describe("parseFaultRule(): every kind's valid form normalizes to its FaultAction", () => {
  const cases: [string, unknown, FaultAction][] = [
    ["abort as Trailers-Only with defaults", { kind: "abort", code: "UNAVAILABLE" }, { kind: "abort", code: 14, message: "injected fault", details: null, afterMessages: null }],
    [
      "abort after messages with details",
      { kind: "abort", code: 13, message: "boom", details: "CAgSBGJvb20", afterMessages: 2 },
      { kind: "abort", code: 13, message: "boom", details: "CAgSBGJvb20", afterMessages: 2 },
    ],
    ["http with defaults", { kind: "http", status: 503 }, { kind: "http", status: 503, body: "", contentType: "text/html" }],
    ["http with a body", { kind: "http", status: 502, body: "<h1>bad</h1>", contentType: "text/plain" }, { kind: "http", status: 502, body: "<h1>bad</h1>", contentType: "text/plain" }],
    ["reset before headers by name", { kind: "reset", code: "CANCEL" }, { kind: "reset", code: 8, at: "before_headers", messages: 0 }],
    ["reset after headers by number", { kind: "reset", code: 2, at: "after_headers" }, { kind: "reset", code: 2, at: "after_headers", messages: 0 }],
    ["reset after messages", { kind: "reset", code: "FLOW_CONTROL_ERROR", at: "after_messages", messages: 3 }, { kind: "reset", code: 3, at: "after_messages", messages: 3 }],
    ["reset mid message with an unknown code", { kind: "reset", code: 4294967295, at: "mid_message", messages: 0 }, { kind: "reset", code: 4294967295, at: "mid_message", messages: 0 }],
    ["goaway with defaults", { kind: "goaway" }, { kind: "goaway", mode: "graceful", code: 0 }],
    ["goaway abrupt", { kind: "goaway", mode: "abrupt", code: "ENHANCE_YOUR_CALM" }, { kind: "goaway", mode: "abrupt", code: 11 }],
    ["close_connection after a size", { kind: "close_connection", afterBytes: "1KiB" }, { kind: "close_connection", afterBytes: 1024 }],
    ["close_connection with defaults", { kind: "close_connection" }, { kind: "close_connection", afterBytes: 0 }],
    ...(["no_trailers", "trailers_without_status", "missing_content_type", "compressed_flag", "truncated_message", "rst_after_trailers"] as const).map(
      (shape): [string, unknown, FaultAction] => [`shape ${shape}`, { kind: "shape", shape }, { kind: "shape", shape, contentType: null }],
    ),
    ["shape wrong_content_type with its default", { kind: "shape", shape: "wrong_content_type" }, { kind: "shape", shape: "wrong_content_type", contentType: "text/plain" }],
    ["shape wrong_content_type with a type", { kind: "shape", shape: "wrong_content_type", contentType: "application/json" }, { kind: "shape", shape: "wrong_content_type", contentType: "application/json" }],
    ["delay before the request", { kind: "delay", delay: "250ms" }, { kind: "delay", at: "request", message: null, direction: "request", delay: { type: "fixed", ms: 250 }, jitterSeed: 0 }],
    [
      "delay at response headers with uniform jitter",
      { kind: "delay", at: "response_headers", jitter: { uniform: ["100ms", "300ms"] } },
      { kind: "delay", at: "response_headers", message: null, direction: "response", delay: { type: "uniform", minMs: 100, maxMs: 300 }, jitterSeed: 0 },
    ],
    [
      "delay before the second message with normal jitter",
      { kind: "delay", at: "message", message: 2, jitter: { normal: { mean: "200ms", stddev: "50ms" } } },
      { kind: "delay", at: "message", message: 2, direction: "response", delay: { type: "normal", meanMs: 200, stddevMs: 50 }, jitterSeed: 0 },
    ],
    [
      "delay before every request message",
      { kind: "delay", at: "message", direction: "request", delay: "1s" },
      { kind: "delay", at: "message", message: null, direction: "request", delay: { type: "fixed", ms: 1000 }, jitterSeed: 0 },
    ],
    ["delay at trailers", { kind: "delay", at: "trailers", delay: "5ms" }, { kind: "delay", at: "trailers", message: null, direction: "response", delay: { type: "fixed", ms: 5 }, jitterSeed: 0 }],
    ["bandwidth with its default direction", { kind: "bandwidth", bytesPerSecond: "64KiB" }, { kind: "bandwidth", bytesPerSecond: 65536, direction: "response" }],
    ["bandwidth on the request", { kind: "bandwidth", bytesPerSecond: 1000, direction: "request" }, { kind: "bandwidth", bytesPerSecond: 1000, direction: "request" }],
    ["blackhole", { kind: "blackhole" }, { kind: "blackhole" }],
    ["stall with its default direction", { kind: "stall" }, { kind: "stall", direction: "request" }],
    ["stall on the response", { kind: "stall", direction: "response" }, { kind: "stall", direction: "response" }],
    ["deadline drop", { kind: "deadline", mode: "drop" }, { kind: "deadline", mode: "drop", factor: null, byMs: null }],
    ["deadline shrink by a factor", { kind: "deadline", mode: "shrink", factor: 0.5 }, { kind: "deadline", mode: "shrink", factor: 0.5, byMs: null }],
    ["deadline grow by a duration", { kind: "deadline", mode: "grow", by: "2s" }, { kind: "deadline", mode: "grow", factor: null, byMs: 2000 }],
    ["unreachable", { kind: "unreachable" }, { kind: "unreachable" }],
    ["upstream_reset with defaults", { kind: "upstream_reset" }, { kind: "upstream_reset", afterRequestMessages: 0, code: 8 }],
    ["upstream_reset after messages", { kind: "upstream_reset", afterRequestMessages: 2, code: "INTERNAL_ERROR" }, { kind: "upstream_reset", afterRequestMessages: 2, code: 2 }],
  ];
  for (const [what, action, expected] of cases) {
    it(`accepts ${what}`, () => {
      expect(rule({ action }).action).toEqual(expected);
    });
    it(`gives ${what} back in a form that parses to the same rule`, () => {
      const r = rule({ id: "x", action });
      expect(rule(formatFaultRule(r))).toEqual(r);
    });
  }

  it("covers every fault kind in the cases above", () => {
    expect(new Set(cases.map(([, , a]) => a.kind))).toEqual(new Set(FAULT_KINDS));
  });

  it("fills the defaults of match, fire and the rule", () => {
    expect(rule({ action: { kind: "blackhole" } })).toEqual({
      id: "",
      description: null,
      enabled: true,
      match: { listener: null, route: null, service: null, method: null, metadata: [], direction: null },
      fire: { percentage: 100, calls: null, every: null, maxTimes: null, afterMs: 0, forMs: null },
      action: { kind: "blackhole" },
      seed: null,
      source: "config",
    });
  });

  it("normalizes match and fire: lower-case header names, call ranges, durations in ms", () => {
    const r = rule({
      id: "users-flaky",
      seed: 7,
      enabled: "false",
      match: { route: "service:pkg.Svc", service: "pkg.Svc", method: "Get", metadata: [{ name: "X-User", regex: "al.*" }, { name: "x-debug", present: false }] },
      fire: { percentage: "12.5%", calls: "1-2,5,9-", maxTimes: 3, after: "5s", for: "1m" },
      action: { kind: "abort", code: 14 },
    });
    expect(r.match).toMatchObject({ route: "service:pkg.Svc", metadata: [{ name: "x-user", regex: "al.*" }, { name: "x-debug", present: false }] });
    expect(r.fire).toEqual({ percentage: 12.5, calls: [[1, 2], [5, 5], [9, Number.POSITIVE_INFINITY]], every: null, maxTimes: 3, afterMs: 5000, forMs: 60000 });
    expect(r.enabled).toBe(false);
    expect(r.seed).toBe(7);
  });

  it("accepts gRPC code names in any case and spelling, and numeric strings", () => {
    for (const code of ["DEADLINE_EXCEEDED", "deadline_exceeded", "DeadlineExceeded", "deadline-exceeded", 4, "4"]) {
      expect(rule({ action: { kind: "abort", code } }).action).toMatchObject({ code: 4 });
    }
    expect(rule({ action: { kind: "abort", code: "Canceled" } }).action).toMatchObject({ code: 1 });
  });

  it("accepts HTTP/2 error codes as names, decimal or hex", () => {
    for (const code of ["ENHANCE_YOUR_CALM", "enhance_your_calm", 11, "11", "0xb"]) {
      expect(rule({ action: { kind: "reset", code } }).action).toMatchObject({ code: 11 });
    }
  });

  it("takes match.direction as the direction of bandwidth, stall and delay-at-message", () => {
    expect(rule({ match: { direction: "request" }, action: { kind: "bandwidth", bytesPerSecond: 10 } }).action).toMatchObject({ direction: "request" });
    expect(rule({ match: { direction: "response" }, action: { kind: "stall" } }).action).toMatchObject({ direction: "response" });
    expect(rule({ match: { direction: "request" }, action: { kind: "delay", at: "message", delay: "1s" } }).action).toMatchObject({ direction: "request" });
  });

  it("returns a frozen rule", () => {
    const r = rule({ match: { metadata: [{ name: "a", equals: "b" }] }, action: { kind: "abort", code: 1 } });
    expect(Object.isFrozen(r)).toBe(true);
    expect(Object.isFrozen(r.match.metadata[0])).toBe(true);
    expect(Object.isFrozen(r.action)).toBe(true);
  });
});

describe("parseFaultList(): a faults: list, every item checked, ids unique, scoped to its listener or route", () => {
  it("treats a missing list as empty", () => {
    expect(parseFaultList(undefined, "faults")).toEqual({ ok: true, rules: [] });
    expect(parseFaultList(null, "faults")).toEqual({ ok: true, rules: [] });
  });

  it("refuses a value that is not a list", () => {
    expect(parseFaultList({ action: {} }, "listeners[0].faults")).toEqual({
      ok: false,
      issues: [{ path: "listeners[0].faults", message: "expected a list of fault rules, got a mapping" }],
    });
  });

  it("collects the issues of every item with the item's index in the path", () => {
    const r = parseFaultList([{ action: { kind: "abort", code: 99 } }, { action: { kind: "blackhole" } }, { action: { kind: "nope" } }], "listeners[0].faults");
    expect(r.ok ? [] : r.issues.map((i) => i.path)).toEqual(["listeners[0].faults[0].action.code", "listeners[0].faults[2].action.kind"]);
  });

  it("refuses a duplicate id and names the first use", () => {
    const r = parseFaultList([{ id: "a", action: { kind: "blackhole" } }, { id: "a", action: { kind: "unreachable" } }], "faults");
    expect(r).toEqual({ ok: false, issues: [{ path: "faults[1].id", message: 'duplicate fault id "a" (first used at faults[0].id)' }] });
  });

  it("fills the listener and route from the scope", () => {
    const r = parseFaultList([{ action: { kind: "blackhole" } }], "listeners[0].routes[2].faults", { scope: { listener: "edge", route: 2 } });
    expect(r.ok ? r.rules[0]?.match : null).toMatchObject({ listener: "edge", route: 2 });
  });

  it("refuses a rule whose own route disagrees with the route it is listed under", () => {
    const r = parseFaultList([{ match: { route: 1 }, action: { kind: "blackhole" } }], "listeners[0].routes[2].faults", { scope: { route: 2 } });
    expect(r.ok ? [] : r.issues).toEqual([{ path: "listeners[0].routes[2].faults[0].match.route", message: "this list belongs to route 2" }]);
  });

  it("marks each rule with the source it was given", () => {
    const r = parseFaultList([{ action: { kind: "blackhole" } }], "x", { source: "api" });
    expect(r.ok ? r.rules[0]?.source : null).toBe("api");
  });
});

describe("parseFaultSetSettings(): the set's seed and maxActiveFaults", () => {
  it("defaults to seed 0 and no cap", () => {
    expect(parseFaultSetSettings(undefined, "faultSettings")).toEqual({ ok: true, settings: { seed: 0, maxActiveFaults: null } });
  });
  it("reads both and refuses a cap of 0", () => {
    expect(parseFaultSetSettings({ seed: 42, maxActiveFaults: 10 }, "x")).toEqual({ ok: true, settings: { seed: 42, maxActiveFaults: 10 } });
    const bad = parseFaultSetSettings({ maxActiveFaults: 0 }, "x");
    expect(bad.ok ? [] : bad.issues.map((i) => i.path)).toEqual(["x.maxActiveFaults"]);
  });
});

describe("parseFaultAction(): an action on its own, as x-dojang-fault uses it", () => {
  it("gives directed kinds their default direction", () => {
    expect(parseFaultAction({ kind: "stall" }, "")).toEqual({ ok: true, action: { kind: "stall", direction: "request" } });
  });
  it("reports issues relative to the given path", () => {
    const r = parseFaultAction({ kind: "abort", code: "x" }, "h");
    expect(r.ok ? [] : r.issues.map((i) => i.path)).toEqual(["h.code"]);
  });
});

describe("parseFaultRule(): never throws", () => {
  it("returns a result for arbitrary JSON", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const r = parseFaultRule(v, "faults[0]");
        expect(typeof r.ok).toBe("boolean");
      }),
      { numRuns: 500 },
    );
  });

  it("returns a result for valid rules with one field replaced by an arbitrary value", () => {
    const anyValue = fc.oneof(fc.jsonValue(), fc.constantFrom("1-2", "5s", "UNAVAILABLE", "CANCEL", "(", "__proto__", -1, 1e308, 0.5, "request"));
    const actions = [
      { kind: "abort", code: 14, afterMessages: 1 },
      { kind: "http", status: 503 },
      { kind: "reset", code: "CANCEL", at: "mid_message", messages: 1 },
      { kind: "goaway", mode: "abrupt" },
      { kind: "close_connection", afterBytes: 10 },
      { kind: "shape", shape: "wrong_content_type" },
      { kind: "delay", at: "message", message: 2, jitter: { uniform: ["1ms", "2ms"] } },
      { kind: "bandwidth", bytesPerSecond: 100 },
      { kind: "blackhole" },
      { kind: "stall", direction: "response" },
      { kind: "deadline", mode: "shrink", factor: 0.5 },
      { kind: "unreachable" },
      { kind: "upstream_reset", afterRequestMessages: 1 },
    ];
    const keys = ["kind", "code", "at", "messages", "message", "delay", "jitter", "direction", "shape", "mode", "factor", "by", "status", "afterBytes", "contentType"];
    const value = fc
      .record({
        action: fc.constantFrom(...actions),
        actionEdit: fc.option(fc.tuple(fc.constantFrom(...keys), anyValue)),
        ruleEdit: fc.option(fc.tuple(fc.constantFrom("id", "seed", "enabled", "match", "fire", "description", "route"), anyValue)),
        fire: fc.option(fc.record({ percentage: fc.integer({ min: 0, max: 100 }), calls: fc.constantFrom("1-2", [1, 3], "4-") }, { requiredKeys: [] })),
        match: fc.option(fc.record({ service: fc.constant("a.B"), metadata: fc.constant([{ name: "x", regex: "a+" }]) }, { requiredKeys: [] })),
      })
      .map(({ action, actionEdit, ruleEdit, fire, match }) => {
        const a: Record<string, unknown> = { ...action };
        if (actionEdit !== null) a[actionEdit[0]] = actionEdit[1];
        const r: Record<string, unknown> = { action: a };
        if (fire !== null) r["fire"] = fire;
        if (match !== null) r["match"] = match;
        if (ruleEdit !== null) r[ruleEdit[0]] = ruleEdit[1];
        return r;
      });
    let valid = 0;
    fc.assert(
      fc.property(value, (v) => {
        const r = parseFaultRule(v, "");
        if (r.ok) {
          valid++;
          expect(rule(formatFaultRule(r.rule))).toEqual(r.rule);
        } else expect(r.issues.length).toBeGreaterThan(0);
      }),
      { numRuns: 1000 },
    );
    // Some generated rules must be valid, or the round trip above was never exercised.
    expect(valid).toBeGreaterThan(0);
  });
});
