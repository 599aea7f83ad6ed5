import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { codeFromRstCode, rstCodeName, rstMessage, SPEC_DISAGREEMENTS } from "../../src/translate/rst-code.js";

// grpc-go http2ErrConvTab (spec sheet §6, grpc-go column).
const TABLE: readonly [number, string, number][] = [
  [0x0, "NO_ERROR", 13], [0x1, "PROTOCOL_ERROR", 13], [0x2, "INTERNAL_ERROR", 13],
  [0x3, "FLOW_CONTROL_ERROR", 8], [0x4, "SETTINGS_TIMEOUT", 13], [0x5, "STREAM_CLOSED", 13],
  [0x6, "FRAME_SIZE_ERROR", 13], [0x7, "REFUSED_STREAM", 14], [0x8, "CANCEL", 1],
  [0x9, "COMPRESSION_ERROR", 13], [0xa, "CONNECT_ERROR", 13], [0xb, "ENHANCE_YOUR_CALM", 8],
  [0xc, "INADEQUATE_SECURITY", 7], [0xd, "HTTP_1_1_REQUIRED", 13],
];

describe("codeFromRstCode() follows grpc-go http2ErrConvTab", () => {
  it.each(TABLE)("maps RST_STREAM %i (%s) to gRPC %i", (rst, name, code) => {
    expect(codeFromRstCode(rst)).toBe(code);
    expect(rstCodeName(rst)).toBe(name);
    expect(rstMessage(rst)).toBe(`stream terminated by RST_STREAM with error code: ${name}`);
  });

  it("maps FLOW_CONTROL_ERROR to RESOURCE_EXHAUSTED as grpc-go does, not INTERNAL as the spec says", () => {
    expect(codeFromRstCode(3)).toBe(8);
  });

  it("maps unknown code 85 to UNKNOWN and names it in golang/net's hex form", () => {
    expect(codeFromRstCode(85)).toBe(2);
    expect(rstCodeName(85)).toBe("unknown error code 0x55");
    expect(rstMessage(85)).toBe("stream terminated by RST_STREAM with error code: unknown error code 0x55");
  });

  it("maps 0xffffffff to UNKNOWN and prints it as an unsigned 32-bit value", () => {
    expect(codeFromRstCode(0xffffffff)).toBe(2);
    expect(rstCodeName(0xffffffff)).toBe("unknown error code 0xffffffff");
  });

  it("maps every code above 13 to UNKNOWN", () => {
    fc.assert(fc.property(fc.integer({ min: 14, max: 0xffffffff }), (c) => {
      expect(codeFromRstCode(c)).toBe(2);
      expect(rstCodeName(c)).toBe(`unknown error code 0x${c.toString(16)}`);
    }));
  });
});

describe("SPEC_DISAGREEMENTS", () => {
  it("records each disagreement with what, grpcGo, spec and dojang filled in", () => {
    expect(SPEC_DISAGREEMENTS.length).toBeGreaterThanOrEqual(10);
    for (const d of SPEC_DISAGREEMENTS) {
      expect(Object.keys(d).sort()).toEqual(["dojang", "grpcGo", "spec", "what"]);
      for (const v of Object.values(d)) expect(typeof v === "string" && v.length > 0).toBe(true);
    }
  });

  it.each(["FLOW_CONTROL_ERROR", "outside 0..13", "CANCEL", "431", "gRPC content-type and no grpc-status"])(
    "covers the %s case",
    (needle) => {
      expect(SPEC_DISAGREEMENTS.some((d) => d.what.includes(needle))).toBe(true);
    },
  );
});
