import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { Code, CODE_NAMES, codeLabel, codeName, parseGrpcStatus } from "../../src/translate/codes.js";

const EXPECTED: readonly [number, string][] = [
  [0, "OK"], [1, "CANCELLED"], [2, "UNKNOWN"], [3, "INVALID_ARGUMENT"], [4, "DEADLINE_EXCEEDED"],
  [5, "NOT_FOUND"], [6, "ALREADY_EXISTS"], [7, "PERMISSION_DENIED"], [8, "RESOURCE_EXHAUSTED"],
  [9, "FAILED_PRECONDITION"], [10, "ABORTED"], [11, "OUT_OF_RANGE"], [12, "UNIMPLEMENTED"],
  [13, "INTERNAL"], [14, "UNAVAILABLE"], [15, "DATA_LOSS"], [16, "UNAUTHENTICATED"],
];

describe("Code and CODE_NAMES", () => {
  it.each(EXPECTED)("code %i is named %s in every table", (n, name) => {
    expect((Code as Record<string, number>)[name]).toBe(n);
    expect(CODE_NAMES[n]).toBe(name);
    expect(codeName(n)).toBe(name);
    expect(codeLabel(n)).toBe(name);
  });

  it("has exactly 17 codes", () => {
    expect(Object.keys(Code)).toHaveLength(17);
    expect(CODE_NAMES).toHaveLength(17);
  });

  it("names codes outside 0..16 CODE_<n> and labels them OTHER", () => {
    expect(codeName(17)).toBe("CODE_17");
    expect(codeName(-1)).toBe("CODE_-1");
    expect(codeName(2147483647)).toBe("CODE_2147483647");
    expect(codeLabel(17)).toBe("OTHER");
    expect(codeLabel(-1)).toBe("OTHER");
    expect(codeLabel(1.5)).toBe("OTHER");
  });

  it("keeps metric labels within 18 values for any integer", () => {
    const labels = new Set<string>();
    fc.assert(fc.property(fc.integer(), (n) => { labels.add(codeLabel(n)); }));
    for (let n = -3; n < 20; n++) labels.add(codeLabel(n));
    expect(labels.size).toBeLessThanOrEqual(18);
  });
});

describe("parseGrpcStatus()", () => {
  it.each([
    ["0", 0], ["7", 7], ["16", 16], ["17", 17], ["007", 7], ["+5", 5], ["-1", -1], ["-0", 0],
    ["2147483647", 2147483647], ["-2147483648", -2147483648],
  ] as const)("parses %j as %i like Go ParseInt(v, 10, 32)", (v, n) => {
    expect(parseGrpcStatus(v)).toBe(n);
  });

  it.each(["", "+", "-", " 1", "1 ", "1.0", "0x1", "1_0", "a", "2147483648", "-2147483649", "99999999999999999999", "١"])(
    "rejects %j as unparsable",
    (v) => { expect(parseGrpcStatus(v)).toBeUndefined(); },
  );

  it("returns undefined for an absent header", () => {
    expect(parseGrpcStatus(undefined)).toBeUndefined();
  });

  it("agrees with a reference decimal parser on arbitrary strings", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.integer().map(String), fc.stringMatching(/^[+-]?[0-9]{1,12}$/)), (v) => {
        const ok = /^[+-]?[0-9]+$/.test(v);
        const n = ok ? Number(v) : NaN;
        const want = ok && n >= -2147483648 && n <= 2147483647 ? (n === 0 ? 0 : n) : undefined;
        expect(parseGrpcStatus(v)).toBe(want);
      }),
    );
  });
});
