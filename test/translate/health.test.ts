import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { decodeHealthRequest, decodeHealthResponse, encodeHealthRequest, encodeHealthResponse, ServingStatus } from "../../src/translate/health.js";

const hex = (b: Uint8Array): string => Buffer.from(b).toString("hex");

describe("grpc.health.v1 messages", () => {
  it("encodes as protoc does (vectors)", () => {
    expect(hex(encodeHealthRequest(""))).toBe("");
    expect(hex(encodeHealthRequest("pkg.Svc"))).toBe("0a07706b672e537663");
    expect(hex(encodeHealthResponse(ServingStatus.SERVING))).toBe("0801");
    expect(hex(encodeHealthResponse(ServingStatus.NOT_SERVING))).toBe("0802");
    expect(hex(encodeHealthResponse(ServingStatus.UNKNOWN))).toBe("");
  });

  it("round-trips any service name, including long and non-ASCII ones", () => {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme", maxLength: 300 }), (s) => {
        expect(decodeHealthRequest(encodeHealthRequest(s))).toEqual({ ok: true, service: s });
      }),
    );
  });

  it("skips unknown fields and reads the last status", () => {
    // field 2 varint, field 3 bytes, then status 2
    expect(decodeHealthResponse(Uint8Array.from([0x10, 0x05, 0x1a, 0x02, 0x61, 0x62, 0x08, 0x02]))).toEqual({ ok: true, status: 2 });
    expect(decodeHealthResponse(new Uint8Array(0))).toEqual({ ok: true, status: 0 });
  });

  it("rejects malformed input without throwing", () => {
    expect(decodeHealthResponse(Uint8Array.from([0x08]))).toMatchObject({ ok: false });
    expect(decodeHealthResponse(Uint8Array.from([0x0a, 0x01, 0x01]))).toMatchObject({ ok: false });
    expect(decodeHealthRequest(Uint8Array.from([0x0a, 0x05, 0x61]))).toMatchObject({ ok: false });
    expect(decodeHealthRequest(Uint8Array.from([0x0a, 0x02, 0xff, 0xfe]))).toMatchObject({ ok: false });
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (b) => {
        decodeHealthRequest(b);
        decodeHealthResponse(b);
      }),
    );
  });
});
