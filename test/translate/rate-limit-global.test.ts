// The pure half of rateLimit.global: descriptors from a call's facts, and what a RateLimitService
// answer means (admit, or refuse with Envoy's DRAFT_VERSION_03 x-ratelimit-* headers).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  buildDescriptors,
  globalVerdict,
  rateLimitHeaders,
  UNIT_SECONDS,
  type EntrySpec,
  type RlsDescriptorStatus,
} from "../../src/translate/rate-limit-global.js";
import { splitMethodPath } from "../../src/translate/grpc-path.js";

const head = { ":method": "POST", ":path": "/pkg.Greeter/SayHello", "content-type": "application/grpc", "x-tenant": ["acme", "other"], "x-empty": "" };

describe("buildDescriptors", () => {
  it("takes each entry's value from its source (a repeated header's first value), in the configured order", () => {
    const specs: EntrySpec[][] = [
      [{ key: "remote_address", source: { kind: "client_address" } }],
      [
        { key: "generic_key", source: { kind: "literal", value: "edge" } },
        { key: "tenant", source: { kind: "header", name: "x-tenant" } },
        { key: "service", source: { kind: "service" } },
        { key: "method", source: { kind: "method" } },
      ],
    ];
    expect(buildDescriptors(specs, { path: "/pkg.Greeter/SayHello", clientAddress: "10.1.2.3", head })).toEqual([
      { entries: [{ key: "remote_address", value: "10.1.2.3" }] },
      {
        entries: [
          { key: "generic_key", value: "edge" },
          { key: "tenant", value: "acme" },
          { key: "service", value: "pkg.Greeter" },
          { key: "method", value: "SayHello" },
        ],
      },
    ]);
  });

  it("leaves out a whole descriptor when one of its entries has no value (absent or empty header, unknown address)", () => {
    const specs: EntrySpec[][] = [
      [
        { key: "generic_key", source: { kind: "literal", value: "x" } },
        { key: "user", source: { kind: "header", name: "x-user" } },
      ],
      [{ key: "e", source: { kind: "header", name: "x-empty" } }],
      [{ key: "remote_address", source: { kind: "client_address" } }],
      [{ key: "tenant", source: { kind: "header", name: "x-tenant" } }],
    ];
    expect(buildDescriptors(specs, { path: "/pkg.Greeter/SayHello", clientAddress: "", head })).toEqual([{ entries: [{ key: "tenant", value: "acme" }] }]);
  });

  it("service and method need a /service/method path, read from the call's canonical name, never the raw :path", () => {
    expect(splitMethodPath("/a.B/C")).toEqual(["a.B", "C"]);
    for (const p of ["/", "//C", "/a.B/", "/a/b/c", "a.B/C", "", undefined]) expect(splitMethodPath(p)).toBeUndefined();
    const specs: EntrySpec[][] = [[{ key: "m", source: { kind: "method" } }]];
    expect(buildDescriptors(specs, { path: "/only", clientAddress: "", head: { ":path": "/a.B/C" } })).toEqual([]);
    expect(buildDescriptors(specs, { path: "/a.B/C", clientAddress: "", head: { ":path": "/a.B/C?x=1" } })).toEqual([{ entries: [{ key: "m", value: "C" }] }]);
  });

  it("property: every descriptor sent has all its configured entries, in order, and a literal-only descriptor is always sent", () => {
    const source = fc.oneof(
      fc.constant({ kind: "client_address" as const }),
      fc.constantFrom("x-a", "x-b").map((name) => ({ kind: "header" as const, name })),
      fc.constant({ kind: "service" as const }),
      fc.constant({ kind: "method" as const }),
      fc.string({ minLength: 1, maxLength: 5 }).map((value) => ({ kind: "literal" as const, value })),
    );
    const spec = fc.array(fc.record({ key: fc.string({ minLength: 1, maxLength: 5 }), source }), { minLength: 1, maxLength: 4 });
    fc.assert(
      fc.property(
        fc.array(spec, { minLength: 1, maxLength: 5 }),
        fc.constantFrom("", "127.0.0.1"),
        fc.record({ "x-a": fc.option(fc.string({ maxLength: 3 }), { nil: undefined }), "x-b": fc.option(fc.string({ maxLength: 3 }), { nil: undefined }) }),
        fc.constantFrom("/s.S/M", "/bad"),
        (specs, addr, hs, path) => {
          const h: Record<string, string> = { ":path": path };
          for (const [k, v] of Object.entries(hs)) if (v !== undefined) h[k] = v;
          const out = buildDescriptors(specs, { path, clientAddress: addr, head: h });
          // each sent descriptor is one of the configured ones, in configured order, its keys intact
          let j = 0;
          for (const d of out) {
            while (j < specs.length && specs[j]!.map((e) => e.key).join("\0") !== d.entries.map((e) => e.key).join("\0")) j++;
            expect(j).toBeLessThan(specs.length);
            for (const e of d.entries) expect(e.value).not.toBe("");
            j++;
          }
          const literalOnly = specs.filter((s) => s.every((e) => e.source.kind === "literal")).length;
          expect(out.length).toBeGreaterThanOrEqual(literalOnly);
        },
      ),
    );
  });
});

describe("rateLimitHeaders (Envoy's DRAFT_VERSION_03)", () => {
  it("the status with the fewest remaining decides limit, remaining and reset; the quota policy lists every limit", () => {
    const statuses: RlsDescriptorStatus[] = [
      { code: "OK", current_limit: { requests_per_unit: 100, unit: "HOUR", name: "hourly" }, limit_remaining: 40, duration_until_reset: { seconds: "1200" } },
      { code: "OVER_LIMIT", current_limit: { requests_per_unit: 10, unit: "MINUTE" }, limit_remaining: 0, duration_until_reset: { seconds: "17", nanos: 5e8 } },
      { code: "OK" },
    ];
    expect(rateLimitHeaders(statuses)).toEqual({
      "x-ratelimit-limit": '10, 100;w=3600;name="hourly", 10;w=60',
      "x-ratelimit-remaining": "0",
      "x-ratelimit-reset": "18",
    });
  });

  it("nothing when no status carries a limit", () => {
    expect(rateLimitHeaders([{ code: "OVER_LIMIT" }])).toBeUndefined();
    expect(rateLimitHeaders(undefined)).toBeUndefined();
  });

  it("property: remaining is the minimum, the limit starts with its limit, the header values are header-safe", () => {
    const unit = fc.constantFrom(...Object.keys(UNIT_SECONDS), "UNKNOWN");
    const status = fc.record({
      current_limit: fc.record({ requests_per_unit: fc.nat(1e6), unit, name: fc.string({ maxLength: 8, unit: "binary" }) }),
      limit_remaining: fc.nat(1e6),
      duration_until_reset: fc.record({ seconds: fc.nat(1e6).map(String), nanos: fc.nat(999_999_999) }),
    });
    fc.assert(
      fc.property(fc.array(status, { minLength: 1, maxLength: 6 }), (sts) => {
        const h = rateLimitHeaders(sts)!;
        const min = Math.min(...sts.map((s) => s.limit_remaining));
        expect(h["x-ratelimit-remaining"]).toBe(String(min));
        const decider = sts.find((s) => s.limit_remaining === min)!;
        expect(h["x-ratelimit-limit"].startsWith(String(decider.current_limit.requests_per_unit))).toBe(true);
        expect(Number(h["x-ratelimit-reset"])).toBeGreaterThanOrEqual(Number(decider.duration_until_reset.seconds));
        // no character an HTTP/2 field value may not carry, and a name's quotes stay balanced
        for (const v of Object.values(h)) expect(v).toMatch(/^[\x20-\x7e]*$/);
        expect((h["x-ratelimit-limit"].match(/"/g) ?? []).length % 2).toBe(0);
      }),
    );
  });
});

describe("globalVerdict", () => {
  const over = {
    overall_code: "OVER_LIMIT",
    statuses: [{ code: "OVER_LIMIT", current_limit: { requests_per_unit: 5, unit: "SECOND" }, limit_remaining: 0, duration_until_reset: { seconds: "1" } }],
  };
  it("only OVER_LIMIT refuses", () => {
    expect(globalVerdict({ overall_code: "OK" }, true)).toEqual({ over: false });
    expect(globalVerdict({ overall_code: "UNKNOWN" }, true)).toEqual({ over: false });
    expect(globalVerdict({}, true)).toEqual({ over: false });
    expect(globalVerdict(over, true)).toEqual({
      over: true,
      headers: { "x-ratelimit-limit": "5, 5;w=1", "x-ratelimit-remaining": "0", "x-ratelimit-reset": "1", "grpc-retry-pushback-ms": "1000" },
    });
  });
  it("responseHeaders: false sends no hint", () => {
    expect(globalVerdict(over, false)).toEqual({ over: true, headers: undefined });
  });
});
