import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { FAULT_HEADERS, faultsFromHeaders, parseDojangFaultHeader, type FaultAction } from "../../../../src/proxy/filters/fault/index.js";
import { parsers } from "./helpers.js";

/** faultsFromHeaders over a plain map; `draws` are returned in order by rand(), and counted. */
function fromHeaders(h: Record<string, string>, draws: number[] = []) {
  let n = 0;
  const rand = () => {
    const d = draws[n] ?? 0.5;
    n++;
    return d;
  };
  const r = faultsFromHeaders((name) => h[name], rand, parsers);
  return { ...r, draws: n };
}

const ENVOY_ABORT = (code: number): FaultAction => ({ kind: "abort", code, message: "fault filter abort", details: null, afterMessages: null });

describe("faultsFromHeaders(): Envoy's x-envoy-fault-* headers", () => {
  it("turns x-envoy-fault-abort-request into an abort with the gRPC code mapped from the HTTP status, as Envoy's gRPC local reply does", () => {
    expect(fromHeaders({ "x-envoy-fault-abort-request": "503" }).actions).toEqual([ENVOY_ABORT(14)]);
    expect(fromHeaders({ "x-envoy-fault-abort-request": "404" }).actions).toEqual([ENVOY_ABORT(12)]);
    expect(fromHeaders({ "x-envoy-fault-abort-request": "418" }).actions).toEqual([ENVOY_ABORT(2)]);
  });

  it("ignores an HTTP abort status outside 200..599 or not a number, with a reason", () => {
    for (const v of ["199", "600", "abc", "-1", "5 03"]) {
      const r = fromHeaders({ "x-envoy-fault-abort-request": v });
      expect(r.actions).toEqual([]);
      expect(r.errors).toEqual([`x-envoy-fault-abort-request ${JSON.stringify(v)} ignored: expected an HTTP status from 200 to 599`]);
    }
  });

  it("turns x-envoy-fault-abort-grpc-request into an abort with that code, any uint32 as in Envoy", () => {
    expect(fromHeaders({ "x-envoy-fault-abort-grpc-request": "14" }).actions).toEqual([ENVOY_ABORT(14)]);
    expect(fromHeaders({ "x-envoy-fault-abort-grpc-request": "4294967295" }).actions).toEqual([ENVOY_ABORT(4294967295)]);
    const bad = fromHeaders({ "x-envoy-fault-abort-grpc-request": "UNAVAILABLE" });
    expect(bad.actions).toEqual([]);
    expect(bad.errors[0]).toMatch(/^x-envoy-fault-abort-grpc-request "UNAVAILABLE" ignored: expected a gRPC status code/);
  });

  it("prefers the HTTP abort header when both are set, and says the gRPC one was ignored", () => {
    const r = fromHeaders({ "x-envoy-fault-abort-request": "503", "x-envoy-fault-abort-grpc-request": "13" });
    expect(r.actions).toEqual([ENVOY_ABORT(14)]);
    expect(r.errors).toEqual(['x-envoy-fault-abort-grpc-request "13" ignored: x-envoy-fault-abort-request is also set and wins (Envoy\'s rule)']);
  });

  it("falls back to the gRPC abort header when the HTTP one is invalid", () => {
    const r = fromHeaders({ "x-envoy-fault-abort-request": "999", "x-envoy-fault-abort-grpc-request": "13" });
    expect(r.actions).toEqual([ENVOY_ABORT(13)]);
    expect(r.errors).toHaveLength(1);
  });

  it("applies x-envoy-fault-abort-request-percentage to either abort header", () => {
    const pct = FAULT_HEADERS.abortPercentage;
    expect(fromHeaders({ "x-envoy-fault-abort-grpc-request": "14", [pct]: "0" }).actions).toEqual([]);
    expect(fromHeaders({ "x-envoy-fault-abort-grpc-request": "14", [pct]: "100" }).actions).toHaveLength(1);
    expect(fromHeaders({ "x-envoy-fault-abort-request": "503", [pct]: "50" }, [0.2]).actions).toHaveLength(1);
    expect(fromHeaders({ "x-envoy-fault-abort-request": "503", [pct]: "50" }, [0.7]).actions).toHaveLength(0);
    expect(fromHeaders({ "x-envoy-fault-abort-request": "503", [pct]: "12.5" }, [0.12]).actions).toHaveLength(1);
  });

  it("drops the fault when its percentage header is invalid, with a reason", () => {
    const r = fromHeaders({ "x-envoy-fault-abort-request": "503", "x-envoy-fault-abort-request-percentage": "lots" });
    expect(r.actions).toEqual([]);
    expect(r.errors[0]).toMatch(/^x-envoy-fault-abort-request-percentage "lots" ignored: expected a percentage.*not applied$/);
    expect(fromHeaders({ "x-envoy-fault-delay-request": "5", "x-envoy-fault-delay-request-percentage": "101" }).actions).toEqual([]);
  });

  it("turns x-envoy-fault-delay-request (ms) into a delay before the request, with its percentage", () => {
    const delay: FaultAction = { kind: "delay", at: "request", message: null, direction: "request", delay: { type: "fixed", ms: 250 }, jitterSeed: 0 };
    expect(fromHeaders({ "x-envoy-fault-delay-request": "250" }).actions).toEqual([delay]);
    expect(fromHeaders({ "x-envoy-fault-delay-request": "250", "x-envoy-fault-delay-request-percentage": "30" }, [0.29]).actions).toEqual([delay]);
    expect(fromHeaders({ "x-envoy-fault-delay-request": "250", "x-envoy-fault-delay-request-percentage": "30" }, [0.3]).actions).toEqual([]);
    expect(fromHeaders({ "x-envoy-fault-delay-request": "1.5" }).errors[0]).toMatch(/ignored: expected whole milliseconds/);
  });

  it("turns x-envoy-fault-throughput-response (KiB/s) into response bandwidth, with its percentage", () => {
    const bw: FaultAction = { kind: "bandwidth", bytesPerSecond: 64 * 1024, direction: "response" };
    expect(fromHeaders({ "x-envoy-fault-throughput-response": "64" }).actions).toEqual([bw]);
    expect(fromHeaders({ "x-envoy-fault-throughput-response": "64", "x-envoy-fault-throughput-response-percentage": "10" }, [0.05]).actions).toEqual([bw]);
    expect(fromHeaders({ "x-envoy-fault-throughput-response": "64", "x-envoy-fault-throughput-response-percentage": "10" }, [0.5]).actions).toEqual([]);
    expect(fromHeaders({ "x-envoy-fault-throughput-response": "0" }).errors[0]).toMatch(/ignored: expected KiB per second, a whole number above 0/);
  });

  it("reports a percentage header without the header it controls", () => {
    for (const h of [FAULT_HEADERS.abortPercentage, FAULT_HEADERS.delayPercentage, FAULT_HEADERS.throughputPercentage]) {
      const r = fromHeaders({ [h]: "50" });
      expect(r.actions).toEqual([]);
      expect(r.errors[0]).toMatch(new RegExp(`^${h} "50" ignored: it only applies together with`));
    }
  });

  it("draws only for percentages strictly between 0 and 100", () => {
    expect(fromHeaders({ "x-envoy-fault-abort-request": "503" }).draws).toBe(0);
    expect(fromHeaders({ "x-envoy-fault-abort-request": "503", "x-envoy-fault-abort-request-percentage": "0" }).draws).toBe(0);
    expect(fromHeaders({ "x-envoy-fault-abort-request": "503", "x-envoy-fault-abort-request-percentage": "100" }).draws).toBe(0);
    expect(fromHeaders({ "x-envoy-fault-abort-request": "503", "x-envoy-fault-abort-request-percentage": "50" }).draws).toBe(1);
  });

  it("combines delay, abort and throughput on one call", () => {
    const r = fromHeaders({ "x-envoy-fault-delay-request": "10", "x-envoy-fault-abort-grpc-request": "8", "x-envoy-fault-throughput-response": "1" });
    expect(r.actions.map((a) => a.kind)).toEqual(["delay", "abort", "bandwidth"]);
    expect(r.errors).toEqual([]);
  });

  it("returns nothing for a request without fault headers", () => {
    expect(fromHeaders({ "content-type": "application/grpc" })).toEqual({ actions: [], errors: [], draws: 0 });
  });
});

describe("faultsFromHeaders(): x-dojang-fault, kind[=arg][@point[:N]][;key=value]... separated by commas", () => {
  const one = (value: string): FaultAction => {
    const r = fromHeaders({ "x-dojang-fault": value });
    expect(r.errors).toEqual([]);
    expect(r.actions).toHaveLength(1);
    return r.actions[0] as FaultAction;
  };

  const cases: [string, FaultAction][] = [
    ["abort=14;msg=down", { kind: "abort", code: 14, message: "down", details: null, afterMessages: null }],
    ["abort=UNAVAILABLE", { kind: "abort", code: 14, message: "injected fault", details: null, afterMessages: null }],
    ["abort=13@after_messages:2;details=CAgSBGJvb20", { kind: "abort", code: 13, message: "injected fault", details: "CAgSBGJvb20", afterMessages: 2 }],
    ["abort=2;msg=a%2Cb%3Bc%20d", { kind: "abort", code: 2, message: "a,b;c d", details: null, afterMessages: null }],
    ["http=503;body=%3Ch1%3Edown%3C%2Fh1%3E", { kind: "http", status: 503, body: "<h1>down</h1>", contentType: "text/html" }],
    ["http=200;type=text/plain", { kind: "http", status: 200, body: "", contentType: "text/plain" }],
    ["reset=CANCEL@after_headers", { kind: "reset", code: 8, at: "after_headers", messages: 0 }],
    ["reset=CANCEL", { kind: "reset", code: 8, at: "before_headers", messages: 0 }],
    ["reset=INTERNAL_ERROR@mid_message:1", { kind: "reset", code: 2, at: "mid_message", messages: 1 }],
    ["reset=7@after_messages:3", { kind: "reset", code: 7, at: "after_messages", messages: 3 }],
    ["goaway=abrupt", { kind: "goaway", mode: "abrupt", code: 0 }],
    ["goaway", { kind: "goaway", mode: "graceful", code: 0 }],
    ["goaway=graceful;code=ENHANCE_YOUR_CALM", { kind: "goaway", mode: "graceful", code: 11 }],
    ["close=1024", { kind: "close_connection", afterBytes: 1024 }],
    ["close_connection=4KiB", { kind: "close_connection", afterBytes: 4096 }],
    ["shape=no_trailers", { kind: "shape", shape: "no_trailers", contentType: null }],
    ["shape=wrong_content_type;type=text/html", { kind: "shape", shape: "wrong_content_type", contentType: "text/html" }],
    ["shape=rst_after_trailers", { kind: "shape", shape: "rst_after_trailers", contentType: null }],
    ["delay=200ms", { kind: "delay", at: "request", message: null, direction: "request", delay: { type: "fixed", ms: 200 }, jitterSeed: 0 }],
    ["delay=200ms@message:2", { kind: "delay", at: "message", message: 2, direction: "response", delay: { type: "fixed", ms: 200 }, jitterSeed: 0 }],
    ["delay=5ms@message;dir=request", { kind: "delay", at: "message", message: null, direction: "request", delay: { type: "fixed", ms: 5 }, jitterSeed: 0 }],
    ["delay=1s@trailers", { kind: "delay", at: "trailers", message: null, direction: "response", delay: { type: "fixed", ms: 1000 }, jitterSeed: 0 }],
    ["bandwidth=64KiB@response", { kind: "bandwidth", bytesPerSecond: 65536, direction: "response" }],
    ["bandwidth=100@request", { kind: "bandwidth", bytesPerSecond: 100, direction: "request" }],
    ["blackhole", { kind: "blackhole" }],
    ["stall=response", { kind: "stall", direction: "response" }],
    ["stall", { kind: "stall", direction: "request" }],
    ["deadline=drop", { kind: "deadline", mode: "drop", factor: null, byMs: null }],
    ["deadline=shrink;factor=0.5", { kind: "deadline", mode: "shrink", factor: 0.5, byMs: null }],
    ["deadline=grow;by=2s", { kind: "deadline", mode: "grow", factor: null, byMs: 2000 }],
    ["unreachable", { kind: "unreachable" }],
    ["upstream_reset=CANCEL@after_messages:1", { kind: "upstream_reset", afterRequestMessages: 1, code: 8 }],
    ["upstream_reset", { kind: "upstream_reset", afterRequestMessages: 0, code: 8 }],
    [" ABORT = 14 ", { kind: "abort", code: 14, message: "injected fault", details: null, afterMessages: null }],
  ];
  for (const [value, expected] of cases) {
    it(`reads ${JSON.stringify(value)}`, () => {
      expect(one(value)).toEqual(expected);
    });
  }

  it("reads jittered delays (a..b uniform, m~s normal) and seeds each from one draw", () => {
    const r = fromHeaders({ "x-dojang-fault": "delay=100ms..300ms@response_headers" }, [0.25]);
    expect(r.actions).toEqual([
      { kind: "delay", at: "response_headers", message: null, direction: "response", delay: { type: "uniform", minMs: 100, maxMs: 300 }, jitterSeed: 2 ** 30 },
    ]);
    expect(r.draws).toBe(1);
    expect(one("delay=200ms~50ms@trailers")).toMatchObject({ delay: { type: "normal", meanMs: 200, stddevMs: 50 } });
  });

  it("ignores a delay without a unit (250 ms or 250 s?), naming the units, in every place a duration goes", () => {
    const cases: [string, string][] = [
      ["delay=250", 'x-dojang-fault "delay=250" ignored: delay: "250" has no unit: write 250ms, 250s, 250m or 250h'],
      ["delay=100..300ms", 'x-dojang-fault "delay=100..300ms" ignored: jitter.uniform[0]: "100" has no unit: write 100ms, 100s, 100m or 100h'],
      ["delay=200ms~50", 'x-dojang-fault "delay=200ms~50" ignored: jitter.normal.stddev: "50" has no unit: write 50ms, 50s, 50m or 50h'],
      ["deadline=grow;by=2", 'x-dojang-fault "deadline=grow;by=2" ignored: by: "2" has no unit: write 2ms, 2s, 2m or 2h'],
    ];
    for (const [value, error] of cases) expect(fromHeaders({ "x-dojang-fault": value })).toEqual({ actions: [], errors: [error], draws: 0 });
    // Envoy's own header is milliseconds by its definition (Envoy's fault filter docs): it stays so
    expect(fromHeaders({ "x-envoy-fault-delay-request": "250" }).actions).toHaveLength(1);
  });

  it("reads several faults, stacked as the rules stack: modifiers compose, the first terminal wins", () => {
    const r = fromHeaders({ "x-dojang-fault": "delay=10ms, abort=14, deadline=drop, reset=CANCEL" });
    expect(r.actions.map((a) => a.kind)).toEqual(["delay", "abort", "deadline"]);
    expect(r.errors).toEqual(['x-dojang-fault "reset=CANCEL" ignored: the call already has a terminal fault']);
  });

  it("puts Envoy header faults before x-dojang-fault", () => {
    const r = fromHeaders({ "x-dojang-fault": "reset=CANCEL", "x-envoy-fault-abort-grpc-request": "4" });
    expect(r.actions).toEqual([ENVOY_ABORT(4)]);
    expect(r.errors).toHaveLength(1);
  });

  it("draws for a pct parameter and skips the fault when the draw misses", () => {
    expect(fromHeaders({ "x-dojang-fault": "abort=13;pct=25" }, [0.2]).actions).toHaveLength(1);
    expect(fromHeaders({ "x-dojang-fault": "abort=13;pct=25" }, [0.3]).actions).toHaveLength(0);
    expect(fromHeaders({ "x-dojang-fault": "abort=13;pct=0" }).draws).toBe(0);
  });

  it("ignores trailing and doubled commas", () => {
    expect(fromHeaders({ "x-dojang-fault": "blackhole,, ," }).actions).toEqual([{ kind: "blackhole" }]);
  });

  const bad: [string, RegExp][] = [
    ["abrt=14", /unknown fault kind "abrt".*\(did you mean "abort"\?\)/],
    ["reset=CANCL@after_headers", /code: unknown HTTP\/2 error code "CANCL" \(did you mean "CANCEL"\?\)/],
    ["abort=99", /code: gRPC code "99" is out of range/],
    ["abort", /code: is required/],
    ["abort=14@before_headers", /abort takes only "@after_messages:N"/],
    ["reset=CANCEL@sometime", /at: unknown reset point "sometime"/],
    ["reset=CANCEL@after_messages", /messages: is required with at: after_messages/],
    ["reset=CANCEL@after-headers", /invalid "@" part "after-headers"/],
    ["delay=soon", /delay: invalid duration "soon"/],
    ["delay=1s@message:0", /message: "0" is out of range/],
    ["http=503@after_headers", /http takes no "@" part/],
    ["blackhole=1", /blackhole takes no arguments/],
    ["stall=sideways", /direction: unknown direction "sideways"/],
    ["deadline=shrink", /needs factor/],
    ["abort=14;msg=a;msg=b", /"message" is given twice/],
    ["abort=14;code=13", /"code" is given twice/],
    ["abort=14;msg", /parameter "msg" needs the form key=value/],
    ["abort=14;mesage=x", /unknown key "mesage" \(did you mean "message"\?\)/],
    ["abort=14;msg=%E0%A4%A", /bad percent-encoding in parameter "msg"/],
    ["abort=14;pct=150", /percentage "150" is out of range/],
    ["shape=no_trailers;type=text/html", /contentType: only applies to shape: wrong_content_type/],
  ];
  for (const [value, reason] of bad) {
    it(`ignores ${JSON.stringify(value)} and says why`, () => {
      const r = fromHeaders({ "x-dojang-fault": value });
      expect(r.actions).toEqual([]);
      expect(r.errors).toHaveLength(1);
      expect(r.errors[0]).toMatch(new RegExp(`^x-dojang-fault ${JSON.stringify(value).replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} ignored: `));
      expect(r.errors[0]).toMatch(reason);
    });
  }

  it("keeps the valid faults of a header when another one is invalid", () => {
    const r = fromHeaders({ "x-dojang-fault": "bogus, deadline=drop" });
    expect(r.actions).toEqual([{ kind: "deadline", mode: "drop", factor: null, byMs: null }]);
    expect(r.errors).toHaveLength(1);
  });

  it("refuses a value longer than 4096 characters and more than 16 faults", () => {
    expect(fromHeaders({ "x-dojang-fault": "blackhole,".repeat(500) }).errors[0]).toMatch(/longer than 4096 characters/);
    const many = parseDojangFaultHeader(Array.from({ length: 17 }, () => "deadline=drop").join(","), parsers);
    expect(many.filter((i) => !i.ok)).toEqual([{ ok: false, token: "deadline=drop", error: "at most 16 faults per header" }]);
  });

  it("never throws on arbitrary header values", () => {
    const names = Object.values(FAULT_HEADERS);
    const value = fc.oneof(
      fc.string({ maxLength: 200 }),
      fc.array(fc.constantFrom("abort", "reset", "delay", "=", "@", ":", ";", ",", "%", "%2", "14", "CANCEL", "message", "1s", "..", "~", "pct=", "x"), { maxLength: 30 }).map((p) => p.join("")),
    );
    fc.assert(
      fc.property(fc.dictionary(fc.constantFrom(...names), value), fc.double({ min: 0, max: 0.999999, noNaN: true }), (h, d) => {
        const r = faultsFromHeaders((n) => h[n], () => d, parsers);
        expect(Array.isArray(r.actions) && Array.isArray(r.errors)).toBe(true);
      }),
      { numRuns: 1000 },
    );
  });
});
