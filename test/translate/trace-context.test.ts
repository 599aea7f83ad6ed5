import { describe, expect, it } from "vitest";
import fc from "fast-check";
import {
  checkTracestate,
  formatB3Single,
  formatTraceparent,
  parseB3Multi,
  parseB3Single,
  parseTraceparent,
  rpcNames,
  sampleCall,
  spanStatusFor,
} from "../../src/translate/trace-context.js";

const hex = (n: number) => fc.string({ unit: fc.constantFrom(..."0123456789abcdef"), minLength: n, maxLength: n });
const traceId = hex(32).filter((s) => !/^0+$/.test(s));
const spanId = hex(16).filter((s) => !/^0+$/.test(s));

describe("traceparent (W3C Trace Context)", () => {
  it("reads the spec's own example", () => {
    expect(parseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")).toEqual({
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
      spanId: "00f067aa0ba902b7",
      sampled: true,
    });
    expect(parseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")?.sampled).toBe(false);
    // only bit 0 of trace-flags is the sampled flag
    expect(parseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-02")?.sampled).toBe(false);
    expect(parseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03")?.sampled).toBe(true);
  });

  it.each([
    ["missing", undefined],
    ["empty", ""],
    ["version ff", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"],
    ["all-zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"],
    ["all-zero span id", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"],
    ["upper-case hex", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"],
    ["version 00 with more after it", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz"],
    ["a short trace id", "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01"],
    ["wrong separators", "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01"],
    ["non-hex flags", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g"],
    ["a later version with junk glued on", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01xyz"],
  ])("refuses %s", (_why, v) => {
    expect(parseTraceparent(v)).toBeUndefined();
  });

  it("reads a later version's first four fields (forward compatibility)", () => {
    expect(parseTraceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds")).toEqual({
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
      spanId: "00f067aa0ba902b7",
      sampled: true,
    });
  });

  it("property: what formatTraceparent writes parses back to the same ids and flag", () => {
    fc.assert(
      fc.property(traceId, spanId, fc.boolean(), (t, s, sampled) => {
        expect(parseTraceparent(formatTraceparent(t, s, sampled))).toEqual({ traceId: t, spanId: s, sampled });
      }),
    );
  });

  it("property: any string either parses to well-formed ids or is refused, never throws", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 80 }), fc.string({ unit: fc.constantFrom(..."0123456789abcdef-"), minLength: 50, maxLength: 60 })), (v) => {
        const p = parseTraceparent(v);
        if (p !== undefined) {
          expect(p.traceId).toMatch(/^[0-9a-f]{32}$/);
          expect(p.spanId).toMatch(/^[0-9a-f]{16}$/);
          expect(p.traceId).not.toMatch(/^0+$/);
        }
      }),
    );
  });
});

describe("tracestate", () => {
  it("passes a well-formed list on as it is, and drops a malformed or oversized one", () => {
    expect(checkTracestate("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")).toBe("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
    expect(checkTracestate(undefined)).toBeUndefined();
    expect(checkTracestate("")).toBeUndefined();
    expect(checkTracestate("no-equals-sign")).toBeUndefined();
    expect(checkTracestate("=value")).toBeUndefined();
    expect(checkTracestate("k=")).toBeUndefined();
    expect(checkTracestate("a=1,".repeat(33))).toBeUndefined();
    expect(checkTracestate(`a=${"x".repeat(600)}`)).toBeUndefined();
  });
});

describe("B3", () => {
  it("reads the single header, widening a 64-bit trace id", () => {
    expect(parseB3Single("80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1-05e3ac9a4f6e3b90")).toEqual({
      traceId: "80f198ee56343ba864fe8b2a57d3eff7",
      spanId: "e457b5a2e4d86bd1",
      sampled: true,
    });
    expect(parseB3Single("64fe8b2a57d3eff7-e457b5a2e4d86bd1-0")).toEqual({
      traceId: "000000000000000064fe8b2a57d3eff7",
      spanId: "e457b5a2e4d86bd1",
      sampled: false,
    });
    expect(parseB3Single("64fe8b2a57d3eff7-e457b5a2e4d86bd1-d")?.sampled).toBe(true);
    expect(parseB3Single("0")).toBeUndefined();
    expect(parseB3Single("64fe8b2a57d3eff7-e457b5a2e4d86bd1-x")).toBeUndefined();
    expect(parseB3Single("64fe8b2a57d3eff7")).toBeUndefined();
  });

  it("reads the multi-header form, X-B3-Flags: 1 meaning debug (sampled)", () => {
    expect(parseB3Multi("463ac35c9f6413ad48485a3953bb6124", "a2fb4a1d1a96d312", "1", undefined)?.sampled).toBe(true);
    expect(parseB3Multi("463ac35c9f6413ad48485a3953bb6124", "a2fb4a1d1a96d312", undefined, "1")?.sampled).toBe(true);
    expect(parseB3Multi("463ac35c9f6413ad48485a3953bb6124", "a2fb4a1d1a96d312", "0", undefined)?.sampled).toBe(false);
    expect(parseB3Multi("463ac35c9f6413ad48485a3953bb6124", undefined, "1", undefined)).toBeUndefined();
  });

  it("property: formatB3Single parses back", () => {
    fc.assert(
      fc.property(traceId, spanId, fc.boolean(), (t, s, sampled) => {
        expect(parseB3Single(formatB3Single(t, s, sampled))).toEqual({ traceId: t, spanId: s, sampled });
      }),
    );
  });
});

describe("sampling", () => {
  it("follows a parent's flag whatever the ratio", () => {
    fc.assert(
      fc.property(traceId, spanId, fc.boolean(), fc.double({ min: 0, max: 1, noNaN: true }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (t, s, sampled, ratio, draw) => {
        expect(sampleCall({ traceId: t, spanId: s, sampled }, ratio, draw)).toBe(sampled);
      }),
    );
  });
  it("samples a new trace when the draw is below the ratio: 1 always, 0 never", () => {
    fc.assert(
      fc.property(fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (draw) => {
        expect(sampleCall(undefined, 1, draw)).toBe(true);
        expect(sampleCall(undefined, 0, draw)).toBe(false);
        expect(sampleCall(undefined, 0.01, draw)).toBe(draw < 0.01);
      }),
    );
  });
});

describe("span status from a gRPC code (OpenTelemetry RPC conventions)", () => {
  it("a CLIENT span is an error for every code but OK", () => {
    expect(spanStatusFor(0, "client")).toBe("unset");
    for (let c = 1; c <= 16; c++) expect(spanStatusFor(c, "client")).toBe("error");
  });
  it("a SERVER span only for the codes that are the server's fault", () => {
    const errors = [];
    for (let c = 0; c <= 16; c++) if (spanStatusFor(c, "server") === "error") errors.push(c);
    expect(errors).toEqual([2, 4, 12, 13, 14, 15]);
    expect(spanStatusFor(-1, "server")).toBe("error");
  });
});

describe("rpcNames", () => {
  it("splits a gRPC path, and refuses other shapes", () => {
    expect(rpcNames("/helloworld.Greeter/SayHello")).toEqual({ service: "helloworld.Greeter", method: "SayHello" });
    expect(rpcNames("/a/b/c")).toBeUndefined();
    expect(rpcNames("//m")).toBeUndefined();
    expect(rpcNames("/svc/")).toBeUndefined();
    expect(rpcNames("svc/m")).toBeUndefined();
  });
});
