// FaultRuleInput (what `faults.add()` takes) against the parser it describes, both ways: every
// rule written here as a FaultRuleInput parses, and every rule marked @ts-expect-error (which
// `tsc -p tsconfig.test.json` checks: an unneeded @ts-expect-error is itself an error) is also
// refused at run time. The `good` list doubles as the reference of every kind's `at` values that
// docs/reference/harness.md shows.
import { describe, expect, it } from "vitest";
import type { DojangHandle, FaultRuleInput } from "../../src/index.js";
import { parseFaultRule } from "../../src/proxy/filters/fault/index.js";

const good: FaultRuleInput[] = [
  { action: { kind: "abort", code: "UNAVAILABLE" } },
  { action: { kind: "abort", code: 14, message: "down", details: "CAQ=", afterMessages: 2 } },
  { action: { kind: "http", status: 503, body: "<h1>down</h1>" } },
  { action: { kind: "reset", code: "CANCEL" } },
  { action: { kind: "reset", code: "INTERNAL_ERROR", at: "before_headers" } },
  { action: { kind: "reset", code: 8, at: "after_headers" } },
  { action: { kind: "reset", code: "CANCEL", at: "after_messages", messages: 2 } },
  { action: { kind: "reset", code: "PROTOCOL_ERROR", at: "mid_message", messages: 1 } },
  { action: { kind: "goaway" } },
  { action: { kind: "goaway", mode: "abrupt", code: "ENHANCE_YOUR_CALM" } },
  { action: { kind: "close_connection", afterBytes: "1KiB" } },
  { action: { kind: "shape", shape: "no_trailers" } },
  { action: { kind: "shape", shape: "wrong_content_type", contentType: "text/html" } },
  { action: { kind: "delay", delay: "200ms" } },
  { action: { kind: "delay", at: "request", delay: "250ms" } },
  { action: { kind: "delay", at: "request", delay: 0 } },
  { action: { kind: "delay", at: "response_headers", delay: "1.5s" } },
  { action: { kind: "delay", at: "message", message: 2, direction: "response", delay: "1m30s" } },
  { action: { kind: "delay", at: "message", direction: "request", jitter: { uniform: ["100ms", "300ms"] } } },
  { action: { kind: "delay", at: "trailers", jitter: { normal: { mean: "200ms", stddev: "50ms" } } } },
  { action: { kind: "bandwidth", bytesPerSecond: "64KiB" } },
  { action: { kind: "bandwidth", bytesPerSecond: 1000, direction: "request" } },
  { action: { kind: "blackhole" } },
  { action: { kind: "stall", direction: "response" } },
  { action: { kind: "deadline", mode: "drop" } },
  { action: { kind: "deadline", mode: "shrink", factor: 0.5 } },
  { action: { kind: "deadline", mode: "grow", by: "2s" } },
  { action: { kind: "unreachable" } },
  { action: { kind: "upstream_reset", afterRequestMessages: 1, code: "CANCEL" } },
  {
    id: "slow-alice",
    description: "alice's Get calls, every third one, for 10 s",
    enabled: true,
    seed: 42,
    match: { service: "pkg.Svc", method: "Get", route: "prefix:/", metadata: [{ name: "x-user", equals: "alice" }, { name: "x-trace", present: true }, { name: "x-region", regex: "eu-.*" }] },
    fire: { every: 3, maxTimes: 5, percentage: 50, after: "1s", for: "10s" },
    action: { kind: "delay", delay: "300ms" },
  },
  { fire: { calls: "1-2,5" }, action: { kind: "abort", code: "INTERNAL" } },
  { fire: { calls: [1, "3-"] }, action: { kind: "abort", code: "INTERNAL" } },
  { match: { direction: "request" }, action: { kind: "stall" } },
];

const bad: unknown[] = [
  // @ts-expect-error: no such kind
  { action: { kind: "abrt", code: "UNAVAILABLE" } } satisfies FaultRuleInput,
  // @ts-expect-error: not a gRPC code name
  { action: { kind: "abort", code: "UNAVAIL" } } satisfies FaultRuleInput,
  // @ts-expect-error: reset needs its HTTP/2 code
  { action: { kind: "reset", at: "after_headers" } } satisfies FaultRuleInput,
  // @ts-expect-error: after_messages needs `messages`
  { action: { kind: "reset", code: "CANCEL", at: "after_messages" } } satisfies FaultRuleInput,
  // @ts-expect-error: `messages` only with after_messages / mid_message
  { action: { kind: "reset", code: "CANCEL", at: "after_headers", messages: 1 } } satisfies FaultRuleInput,
  // @ts-expect-error: no such reset point
  { action: { kind: "reset", code: "CANCEL", at: "before_trailers" } } satisfies FaultRuleInput,
  // @ts-expect-error: a delay needs delay or jitter, not both
  { action: { kind: "delay", delay: "1s", jitter: { uniform: ["1ms", "2ms"] } } } satisfies FaultRuleInput,
  // @ts-expect-error: `message` only with at: message
  { action: { kind: "delay", at: "request", message: 2, delay: "1s" } } satisfies FaultRuleInput,
  // @ts-expect-error: metadata tests are { name, equals | present | regex }, not a map
  { match: { metadata: { "x-user": "alice" } }, action: { kind: "blackhole" } } satisfies FaultRuleInput,
  // @ts-expect-error: the percentage lives in `fire`
  { percentage: 50, action: { kind: "blackhole" } } satisfies FaultRuleInput,
  // @ts-expect-error: shrink needs factor or by
  { action: { kind: "deadline", mode: "shrink" } } satisfies FaultRuleInput,
  // @ts-expect-error: a duration has a unit
  { action: { kind: "delay", delay: "5 sec" } } satisfies FaultRuleInput,
  // @ts-expect-error: a number without a unit (250 ms? 250 s?) is refused, but for 0
  { action: { kind: "delay", delay: 250 } } satisfies FaultRuleInput,
  // @ts-expect-error: the same as text
  { action: { kind: "delay", delay: "250" } } satisfies FaultRuleInput,
  // @ts-expect-error: and in a jitter
  { action: { kind: "delay", jitter: { uniform: [100, "300ms"] } } } satisfies FaultRuleInput,
  // @ts-expect-error: and in fire
  { fire: { after: 1000 }, action: { kind: "blackhole" } } satisfies FaultRuleInput,
];

describe("FaultRuleInput matches parseFaultRule", () => {
  it("every rule the type allows here parses", () => {
    for (const rule of good) {
      const r = parseFaultRule(rule, "rule", { source: "api" });
      expect(r.ok ? "ok" : r.issues, JSON.stringify(rule)).toBe("ok");
    }
  });

  it("every rule the type refuses here is refused at run time too", () => {
    for (const rule of bad) expect(parseFaultRule(rule, "rule").ok, JSON.stringify(rule)).toBe(false);
  });

  it("is what DojangHandle.faults.add takes", () => {
    const add = (h: DojangHandle) => h.faults.add({ action: { kind: "blackhole" } });
    expect(typeof add).toBe("function");
    // @ts-expect-error: add() no longer takes any record
    const loose = (h: DojangHandle) => h.faults.add({ action: { kind: "blackhole", speed: 3 } });
    expect(typeof loose).toBe("function");
  });
});
