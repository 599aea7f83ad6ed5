// The proto3 JSON edges dojang reads and prints as protojson does (src/translate/proto-json.ts),
// each against a third party: JavaScript's Date for the calendar, BigInt for integers, Node's
// Buffer for base64, JSON.stringify for objects without duplicate keys, Math.fround for 32-bit
// floats, and protojson's own documented examples (encoding/protojson well_known_types.go). The
// whole mapping is judged by the real grpc-gateway in test/behaviour/json-transcoding-gateway.test.ts.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  duplicateKey,
  fieldMaskText,
  float32Text,
  intFromJsonNumber,
  isJsonNumber,
  isProtoBase64,
  parseDuration,
  parseJson,
  parseTimestamp,
} from "../../src/translate/proto-json.js";

const pad = (n: number, w: number): string => String(n).padStart(w, "0");

describe("parseTimestamp (RFC 3339 as google/protobuf/timestamp.proto uses it)", () => {
  it("reads real dates, offsets and up to 9 fractional digits", () => {
    expect(parseTimestamp("1970-01-01T00:00:00Z")).toEqual({ seconds: 0, nanos: 0 });
    expect(parseTimestamp("2024-02-29T12:00:00.5Z")).toEqual({ seconds: 1709208000, nanos: 500000000 });
    expect(parseTimestamp("2024-01-01T01:00:00+01:00")).toEqual({ seconds: 1704067200, nanos: 0 });
    expect(parseTimestamp("2023-12-31T00:01:00-23:59")).toEqual({ seconds: 1704067200, nanos: 0 });
    expect(parseTimestamp("2000-02-29T00:00:00.123456789Z")).toEqual({ seconds: 951782400, nanos: 123456789 });
    expect(parseTimestamp("0001-01-01T00:00:00Z")).toEqual({ seconds: -62135596800, nanos: 0 });
    expect(parseTimestamp("9999-12-31T23:59:59.999999999Z")).toEqual({ seconds: 253402300799, nanos: 999999999 });
  });

  it.each([
    ["2024-02-30T00:00:00Z", "a day February 2024 does not have"],
    ["2023-02-29T00:00:00Z", "not a leap year"],
    ["1900-02-29T00:00:00Z", "a century that is not a leap year"],
    ["2024-04-31T00:00:00Z", "April has 30 days"],
    ["2024-13-01T00:00:00Z", "month 13"],
    ["2024-00-10T00:00:00Z", "month 0"],
    ["2024-01-00T00:00:00Z", "day 0"],
    ["2024-01-01T24:00:00Z", "hour 24"],
    ["2024-01-01T23:60:00Z", "minute 60"],
    ["2024-01-01T23:59:60Z", "a leap second (protojson refuses it too)"],
    ["2024-01-01T00:00:00+24:00", "offset hour 24"],
    ["2024-01-01T00:00:00+23:60", "offset minute 60"],
    ["2024-01-01T00:00:00.1234567891Z", "10 fractional digits"],
    ["2024-01-01T00:00:00.Z", "a point without digits"],
    ["2024-01-01T00:00:00,5Z", "a decimal comma"],
    ["2024-01-01T00:00:00", "no offset"],
    ["2024-01-01 00:00:00Z", "a space for T"],
    ["2024-01-01t00:00:00z", "lower-case t and z"],
    ["2024-01-01T00:00:00Zjunk", "text after it"],
    ["0001-01-01T00:00:00+01:00", "before 0001-01-01T00:00:00Z once the offset is applied"],
    ["9999-12-31T23:59:59-01:00", "after 9999-12-31T23:59:59Z once the offset is applied"],
    ["10000-01-01T00:00:00Z", "a five-digit year"],
    ["", "nothing"],
  ])("refuses %s (%s)", (s) => {
    expect(parseTimestamp(s)).toBeNull();
  });

  it("property: any instant in range, written in UTC or with an offset, reads back as Date puts it", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -62135596800 + 86400, max: 253402300799 - 86400 }),
        fc.integer({ min: 0, max: 999999999 }),
        fc.integer({ min: -(23 * 60 + 59), max: 23 * 60 + 59 }),
        (seconds, nanos, offsetMinutes) => {
          const local = new Date((seconds + offsetMinutes * 60) * 1000);
          const sign = offsetMinutes < 0 ? "-" : "+";
          const off = Math.abs(offsetMinutes);
          const text =
            `${pad(local.getUTCFullYear(), 4)}-${pad(local.getUTCMonth() + 1, 2)}-${pad(local.getUTCDate(), 2)}T${pad(local.getUTCHours(), 2)}:${pad(local.getUTCMinutes(), 2)}:` +
            `${pad(local.getUTCSeconds(), 2)}.${pad(nanos, 9)}${sign}${pad(Math.floor(off / 60), 2)}:${pad(off % 60, 2)}`;
          expect(parseTimestamp(text)).toEqual({ seconds, nanos });
        },
      ),
    );
  });

  it("property: a calendar date is read exactly when Date does not roll it over", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 9999 }), fc.integer({ min: 0, max: 13 }), fc.integer({ min: 0, max: 32 }), (y, m, d) => {
        const dt = new Date(0);
        dt.setUTCFullYear(y, m - 1, d);
        const real = m >= 1 && m <= 12 && dt.getUTCFullYear() === y && dt.getUTCMonth() === m - 1 && dt.getUTCDate() === d;
        const parsed = parseTimestamp(`${pad(y, 4)}-${pad(m, 2)}-${pad(d, 2)}T00:00:00Z`);
        expect(parsed !== null).toBe(real);
        if (real) expect(parsed!.seconds).toBe(dt.getTime() / 1000);
      }),
    );
  });
});

describe("parseDuration (protojson's grammar)", () => {
  it("reads protojson's examples: 1s, 0.1s, 1.s, .1s, +1s, -1s, -.1s (and .s, which its parser takes too)", () => {
    expect(["1s", "0.1s", "1.s", ".1s", "+1s", "-1s", "-.1s", ".s"].map(parseDuration)).toEqual([
      { seconds: 1, nanos: 0 },
      { seconds: 0, nanos: 100000000 },
      { seconds: 1, nanos: 0 },
      { seconds: 0, nanos: 100000000 },
      { seconds: 1, nanos: 0 },
      { seconds: -1, nanos: 0 },
      { seconds: 0, nanos: -100000000 },
      { seconds: 0, nanos: 0 },
    ]);
    expect(parseDuration("-315576000000.999999999s")).toEqual({ seconds: -315576000000, nanos: -999999999 });
  });

  it.each(["1.5sjunk", "1s ", " 1s", "1", "s", "-s", "01s", "1.1234567891s", "315576000001s", "9223372036854775808s", "1e3s", "1S", "1h", "1.5 s", ""])("refuses %j", (s) => {
    expect(parseDuration(s)).toBeNull();
  });

  it("property: seconds and nanos in range, written with 0 to 9 fractional digits, read back", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 315576000000 }), fc.integer({ min: 0, max: 999999999 }), fc.boolean(), (s, n, neg) => {
        const frac = pad(n, 9).replace(/0+$/, "");
        const sign = neg ? -1 : 1;
        expect(parseDuration(`${neg ? "-" : ""}${s}${frac === "" ? "" : "." + frac}s`)).toEqual({ seconds: sign * s + 0, nanos: sign * n + 0 });
      }),
    );
  });
});

describe("intFromJsonNumber (protojson's normalizeToIntString)", () => {
  it("takes exponents and zero fractions, not fractions; keeps every digit", () => {
    expect(intFromJsonNumber("9007199254740993", "int64")).toBe("9007199254740993");
    expect(intFromJsonNumber("1e3", "int64")).toBe("1000");
    expect(intFromJsonNumber("1.5e1", "int32")).toBe("15");
    expect(intFromJsonNumber("100e-2", "int32")).toBe("1");
    expect(intFromJsonNumber("9.007199254740993e15", "int64")).toBe("9007199254740993");
    expect(intFromJsonNumber("-0", "uint64")).toBe("0");
    expect(intFromJsonNumber("-9223372036854775808", "int64")).toBe("-9223372036854775808");
    for (const [s, k] of [["1.5", "int32"], ["-1", "uint32"], ["9223372036854775808", "int64"], ["18446744073709551616", "uint64"], ["2147483648", "int32"], [" 1", "int32"], ["0x1", "int64"], ["01", "int32"], ["", "int32"], ["+1", "int32"], ["1e", "int32"]] as const) {
      expect([s, intFromJsonNumber(s, k)]).toEqual([s, null]);
    }
  });

  it("property: any 64-bit integer, plain or as digits and an exponent, is read exactly (BigInt the oracle)", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), fc.integer({ min: 0, max: 5 }), (n, k) => {
        expect(intFromJsonNumber(n.toString(), "int64")).toBe(n.toString());
        const scale = 10n ** BigInt(k);
        if (n % scale === 0n) expect(intFromJsonNumber(`${n / scale}e${k}`, "int64")).toBe(n.toString());
      }),
    );
  });
});

describe("isProtoBase64 (protojson's bytes)", () => {
  it("property: Buffer's standard and URL-safe encodings, padded or not, are read", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 40 }), (bytes) => {
        const b = Buffer.from(bytes);
        for (const s of [b.toString("base64"), b.toString("base64").replace(/=+$/, ""), b.toString("base64url"), b.toString("base64url") + "=".repeat((4 - (b.toString("base64url").length % 4)) % 4)]) {
          expect([s, isProtoBase64(s)]).toEqual([s, true]);
        }
      }),
    );
  });

  it.each(["AQ=", "A===", "AQ==\n", "A", "*", "A Q==", "+-AA", "AQ==AQ=="])("refuses %j", (s) => {
    expect(isProtoBase64(s)).toBe(false);
  });
});

describe("duplicateKey", () => {
  it("property: JSON.stringify never repeats a key; a repeated one is found at any depth", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.string(), (v, k) => {
        const text = JSON.stringify(v);
        expect(duplicateKey(text)).toBeUndefined();
        expect(duplicateKey(`{"x":[${text},{${JSON.stringify(k)}:1,${JSON.stringify(k)}:2}]}`)).toBe(k);
      }),
    );
  });

  it("compares keys after their escapes, and is not fooled by quotes in strings", () => {
    expect(duplicateKey('{"a":1,"\\u0061":2}')).toBe("a");
    expect(duplicateKey('{"a\\\\":"\\"a\\":","a":1}')).toBeUndefined();
    expect(duplicateKey('{"a":{"a":1},"b":[{"a":1},{"a":2}]}')).toBeUndefined();
  });
});

describe("parseJson", () => {
  it("keeps the text of numbers a double may not hold, only when there are some", () => {
    expect(parseJson('{"a":1.5}').long).toBe(false);
    const p = parseJson('{"a":9007199254740993,"b":[1]}');
    expect(p.long).toBe(true);
    expect(JSON.stringify((p.value as { a: { source: string } }).a.source)).toBe('"9007199254740993"');
    expect(() => parseJson('{"a":1,"a":2}')).toThrow(/duplicate key "a"/);
    expect(() => parseJson("\ufeff{}")).toThrow(/not JSON/);
  });

  it("isJsonNumber is RFC 8259's number", () => {
    expect(["0", "-0", "1.5", "1e3", "1E+3", "-1.5e-3"].every(isJsonNumber)).toBe(true);
    expect(["01", "+1", ".5", "1.", "0x1", " 1", "NaN", "Infinity", ""].some(isJsonNumber)).toBe(false);
  });
});

describe("fieldMaskText", () => {
  it("takes lowerCamel paths, refuses underscores and empty paths", () => {
    expect(fieldMaskText(" fString,fNested.name ")).toBe("fString,fNested.name");
    expect(fieldMaskText("")).toBe("");
    expect([fieldMaskText("f_string"), fieldMaskText("a,,b"), fieldMaskText("a."), fieldMaskText("1a")]).toEqual([null, null, null, null]);
  });
});

describe("float32Text", () => {
  it("property: the shortest decimal that is the same 32-bit float (Math.fround the oracle)", () => {
    fc.assert(
      fc.property(fc.float({ noNaN: true, noDefaultInfinity: true }), (f) => {
        fc.pre(!Object.is(f, -0));
        const s = float32Text(f);
        expect(Math.fround(Number(s))).toBe(f);
        // significant digits: no sign, exponent, point, or leading or trailing zeros
        const digits = s.replace(/^-/, "").replace(/e.*$/, "").replace(".", "").replace(/^0+/, "").replace(/0+$/, "").length;
        if (digits > 1) expect(Math.fround(Number(f.toPrecision(digits - 1)))).not.toBe(f);
      }),
    );
    expect([float32Text(Math.fround(0.1)), float32Text(Math.fround(3.4028235e38)), float32Text(Math.fround(1e-45))]).toEqual(["0.1", "3.4028235e+38", "1e-45"]);
  });
});
