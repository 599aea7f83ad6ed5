// The wire format's writers and reader (src/translate/proto-wire.ts) against @bufbuild/protobuf's
// BinaryWriter and BinaryReader, on random values: the 64-bit integers, the fixed-size values
// and the floats that json-wire.ts writes and reads, and the strict strings of proto3.
import { BinaryReader, BinaryWriter } from "@bufbuild/protobuf/wire";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { int32Size, WireError, WireReader, writeDouble, writeFixed32, writeFixed64, writeFloat, writeInt32, writeInt64 } from "../../src/translate/proto-wire.js";

const SAFE = fc.integer({ min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER });
const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");

function written(size: number, write: (out: Uint8Array, at: number) => number): string {
  const out = new Uint8Array(size + 2);
  expect(write(out, 1)).toBe(1 + size);
  return hex(out.subarray(1, 1 + size));
}

describe("proto-wire writers", () => {
  it("property: an int64 within ±2^53 as BinaryWriter writes it (ten bytes when negative), int32 likewise", () => {
    fc.assert(
      fc.property(SAFE, (n) => {
        const want = new BinaryWriter().int64(n).finish();
        expect(int32Size(n)).toBe(want.length);
        expect(written(want.length, (o, a) => writeInt64(o, a, n))).toBe(hex(want));
      }),
      { numRuns: 2000 },
    );
    fc.assert(
      fc.property(fc.integer(), (n) => {
        expect(written(int32Size(n), (o, a) => writeInt32(o, a, n))).toBe(hex(new BinaryWriter().int32(n).finish()));
      }),
    );
    expect(written(10, (o, a) => writeInt64(o, a, -1))).toBe("ffffffffffffffffff01");
  });

  it("property: fixed32, sfixed32, fixed64, sfixed64, float and double as BinaryWriter writes them", () => {
    fc.assert(
      fc.property(fc.nat({ max: 4294967295 }), fc.integer(), SAFE, fc.float(), fc.double(), (u, i, n, f, d) => {
        expect(written(4, (o, a) => writeFixed32(o, a, u))).toBe(hex(new BinaryWriter().fixed32(u).finish()));
        expect(written(4, (o, a) => writeFixed32(o, a, i >>> 0))).toBe(hex(new BinaryWriter().sfixed32(i).finish()));
        expect(written(8, (o, a) => writeFixed64(o, a, n))).toBe(hex(new BinaryWriter().sfixed64(n).finish()));
        expect(written(4, (o, a) => writeFloat(o, a, f))).toBe(hex(new BinaryWriter().float(f).finish()));
        expect(written(8, (o, a) => writeDouble(o, a, d))).toBe(hex(new BinaryWriter().double(d).finish()));
      }),
      { numRuns: 2000 },
    );
    expect(written(8, (o, a) => writeDouble(o, a, 1))).toBe("000000000000f03f");
  });
});

describe("WireReader", () => {
  it("property: 64-bit varints and fixed64s whole (lo and hi), floats and doubles, as BinaryWriter wrote them", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }), fc.float(), fc.double(), (big, f, d) => {
        const bytes = new BinaryWriter().uint64(big).fixed64(big).float(f).double(d).finish();
        const r = new WireReader(bytes);
        r.varint64();
        expect((BigInt(r.hi) << 32n) | BigInt(r.lo)).toBe(big);
        r.fixed64();
        expect((BigInt(r.hi) << 32n) | BigInt(r.lo)).toBe(big);
        const ref = new BinaryReader(bytes.subarray(r.pos));
        expect(Object.is(r.float(), ref.float())).toBe(true);
        expect(Object.is(r.double(), ref.double())).toBe(true);
        expect(r.pos).toBe(bytes.length);
      }),
      { numRuns: 2000 },
    );
  });

  it("a string that is not UTF-8: U+FFFD when lenient, WireError when strict (proto3); truncated values throw", () => {
    const bad = Uint8Array.from([2, 0xc3, 0x28]);
    expect(new WireReader(bad).string()).toBe("\ufffd(");
    expect(() => new WireReader(bad).string(true)).toThrow(WireError);
    expect(new WireReader(Uint8Array.from([3, 0x61, 0xc3, 0xa9])).string(true)).toBe("aé");
    expect(() => new WireReader(Uint8Array.from([1, 2, 3])).fixed64()).toThrow(WireError);
    expect(() => new WireReader(Uint8Array.from([0xff, 0xff])).varint64()).toThrow(WireError);
  });
});
