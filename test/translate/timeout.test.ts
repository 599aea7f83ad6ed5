import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { decodeTimeout, encodeTimeout, MAX_INT64_NS } from "../../src/translate/timeout.js";
import { vectors, type DecodeTimeoutRow } from "./vectors.js";

const UNITS: readonly [string, bigint][] = [
  ["n", 1n], ["u", 1_000n], ["m", 1_000_000n], ["S", 1_000_000_000n], ["M", 60_000_000_000n], ["H", 3_600_000_000_000n],
];

function expectRow(row: DecodeTimeoutRow): void {
  const r = decodeTimeout(row.input);
  if ("ns" in row) expect(r).toEqual({ ok: true, ns: BigInt(row.ns) });
  else expect(r).toEqual({ ok: false, error: row.error });
}

describe("encodeTimeout() matches grpc-go EncodeDuration", () => {
  it.each(vectors.encodeDuration)("encodes $ns ns as $encoded, which decodes to $decodesTo ns", (v) => {
    expect(encodeTimeout(BigInt(v.ns))).toBe(v.encoded);
    expect(decodeTimeout(v.encoded)).toEqual({ ok: true, ns: BigInt(v.decodesTo) });
  });

  it.each(vectors.encodeDurationGrpcGoTests)("passes grpc-go's own case $ns ns → $encoded", (v) => {
    expect(encodeTimeout(BigInt(v.ns))).toBe(v.encoded);
  });

  it("sends everyday budgets in the smallest fitting unit, not 1S or 1H", () => {
    expect(encodeTimeout(1_000_000_000n)).toBe("1000000u");
    expect(encodeTimeout(3_600_000_000_000n)).toBe("3600000m");
  });

  it("clamps input above MaxInt64 to MaxInt64", () => {
    expect(encodeTimeout(MAX_INT64_NS * 4n)).toBe("2562048H");
    expect(MAX_INT64_NS).toBe(9223372036854775807n);
  });

  it("never gives the upstream less time than the budget, and decoding rounds up by less than one unit", () => {
    fc.assert(fc.property(fc.bigInt({ min: 1n, max: MAX_INT64_NS }), (ns) => {
      const enc = encodeTimeout(ns);
      const r = decodeTimeout(enc);
      expect(r.ok).toBe(true);
      if (!r.ok) return;
      expect(r.ns >= ns).toBe(true);
      const unit = UNITS.find(([u]) => u === enc.slice(-1));
      expect(unit).toBeDefined();
      if (unit) expect(r.ns - ns < unit[1]).toBe(true);
    }));
  });

  it("picks the smallest unit whose rounded-up value has at most 8 digits", () => {
    fc.assert(fc.property(fc.oneof(fc.bigInt({ min: 1n, max: MAX_INT64_NS }), fc.bigInt({ min: 1n, max: 10n ** 12n })), (ns) => {
      const enc = encodeTimeout(ns);
      const value = BigInt(enc.slice(0, -1));
      const idx = UNITS.findIndex(([u]) => u === enc.slice(-1));
      const ceil = (d: bigint): bigint => (ns + d - 1n) / d;
      expect(value).toBe(ceil((UNITS[idx] as [string, bigint])[1]));
      if (idx < 5) expect(value <= 99_999_999n).toBe(true);
      for (let k = 0; k < idx; k++) expect(ceil((UNITS[k] as [string, bigint])[1]) > 99_999_999n).toBe(true);
      expect(enc.length).toBeLessThanOrEqual(9);
    }));
  });

  it("encodes zero and negative budgets as 0n", () => {
    fc.assert(fc.property(fc.bigInt({ max: 0n }), (ns) => { expect(encodeTimeout(ns)).toBe("0n"); }));
  });
});

describe("decodeTimeout() matches grpc-go decodeTimeout", () => {
  it.each(vectors.decodeTimeout)("decodes $input like grpc-go", (row) => { expectRow(row); });

  it.each(vectors.decodeTimeoutGrpcGoTests)("passes grpc-go's own case $input", (row) => { expectRow(row); });

  it("accepts 0 as a valid, already expired timeout", () => {
    expect(decodeTimeout("0S")).toEqual({ ok: true, ns: 0n });
    expect(decodeTimeout("0n")).toEqual({ ok: true, ns: 0n });
  });

  it("clamps H values above 2562047 to MaxInt64 instead of failing", () => {
    expect(decodeTimeout("2562047H")).toEqual({ ok: true, ns: 2562047n * 3_600_000_000_000n });
    expect(decodeTimeout("2562048H")).toEqual({ ok: true, ns: MAX_INT64_NS });
  });

  it("quotes the value in error messages the way Go %q does", () => {
    expect(decodeTimeout('1"S')).toEqual({ ok: false, error: 'strconv.ParseUint: parsing "1\\"": invalid syntax' });
    expect(decodeTimeout("\n")).toEqual({ ok: false, error: 'transport: timeout string is too short: "\\n"' });
    expect(decodeTimeout("1\x00S")).toEqual({ ok: false, error: 'strconv.ParseUint: parsing "1\\x00": invalid syntax' });
  });

  it("counts length in wire bytes, as grpc-go counts a Go string", () => {
    // "€" is 3 UTF-8 bytes: 8 chars but 10 bytes is too long.
    expect(decodeTimeout("1234567€")).toEqual({ ok: false, error: 'transport: timeout string is too long: "1234567€"' });
    expect(decodeTimeout("1€")).toEqual({ ok: false, error: 'transport: timeout unit is not recognized: "1€"' });
  });

  it("accepts exactly 1..8 ASCII digits followed by one unit letter", () => {
    fc.assert(fc.property(fc.string({ unit: fc.constantFrom(..."0123456789HMSmun +-_.xé\u20ac"), maxLength: 11 }), (s) => {
      const r = decodeTimeout(s);
      const valid = /^[0-9]{1,8}[HMSmun]$/.test(s);
      expect(r.ok).toBe(valid);
      if (r.ok) {
        const unit = UNITS.find(([u]) => u === s.slice(-1));
        const want = BigInt(s.slice(0, -1)) * (unit as [string, bigint])[1];
        expect(r.ns).toBe(want > MAX_INT64_NS ? MAX_INT64_NS : want);
      }
    }));
  });

  it("never throws on arbitrary strings", () => {
    fc.assert(fc.property(fc.oneof(fc.string(), fc.string({ unit: "binary" }), fc.string({ unit: "grapheme" })), (s) => {
      const r = decodeTimeout(s);
      if (!r.ok) expect(typeof r.error).toBe("string");
    }));
  });

  it("round-trips every valid value through encodeTimeout without losing time", () => {
    fc.assert(fc.property(fc.integer({ min: 0, max: 99_999_999 }), fc.constantFrom(...UNITS), (n, [u]) => {
      const r = decodeTimeout(`${n}${u}`);
      expect(r.ok).toBe(true);
      if (!r.ok) return;
      const again = decodeTimeout(encodeTimeout(r.ns));
      expect(again.ok && again.ns >= r.ns).toBe(true);
    }));
  });
});
