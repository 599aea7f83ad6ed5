import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { base64ErrorOffset, isBinaryHeader, requestFieldProblem } from "../../src/translate/metadata.js";

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/** The model: what grpc-go's decodeBinHeader accepts (StdEncoding if len % 4 == 0, else RawStdEncoding). */
function goAccepts(v: string): boolean {
  if (v.length % 4 === 0) return /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(v);
  return /^[A-Za-z0-9+/]*$/.test(v) && v.length % 4 !== 1;
}

describe("base64ErrorOffset() (grpc-go decodeBinHeader, spec sheet §1.5)", () => {
  it("accepts padded and unpadded standard base64, as grpc-go does (http_util_test.go vectors)", () => {
    for (const v of ["", "Zm9vAGJhcg==", "Zm9vAGJhcg", "woA=", "woA", "AAEC", "+/+/"]) expect(base64ErrorOffset(v)).toBe(-1);
  });

  it("gives the offset Go's decoder reports for each kind of bad input", () => {
    expect(base64ErrorOffset("!!!")).toBe(0); // illegal byte
    expect(base64ErrorOffset("AA!A")).toBe(2);
    expect(base64ErrorOffset("AAEC, AAED")).toBe(4); // a folded value: grpc-go does not split
    expect(base64ErrorOffset("A")).toBe(0); // a lone final byte (RawStdEncoding)
    expect(base64ErrorOffset("AAAAA")).toBe(4);
    expect(base64ErrorOffset("AA=")).toBe(2); // "=" where unpadded is read
    expect(base64ErrorOffset("A===")).toBe(1); // padding too early
    expect(base64ErrorOffset("AA=A")).toBe(2); // incorrect padding
    expect(base64ErrorOffset("AAA=AAAA")).toBe(4); // data after the padding
    expect(base64ErrorOffset("AA==AAAA")).toBe(4);
    expect(base64ErrorOffset("-_-_")).toBe(0); // the URL alphabet is not the standard one
  });

  it("accepts every encoding of any bytes, padded or not", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        let bin = "";
        for (const b of bytes) bin += String.fromCharCode(b);
        const padded = btoa(bin);
        expect(base64ErrorOffset(padded)).toBe(-1);
        expect(base64ErrorOffset(padded.replace(/=+$/, ""))).toBe(-1);
      }),
    );
  });

  it("agrees with the model of grpc-go's decoder on arbitrary strings of base64 characters, padding and junk", () => {
    const ch = fc.constantFrom(...(ALPHABET.slice(0, 6) + "+/=,- \0é").split(""));
    fc.assert(
      fc.property(fc.array(ch, { maxLength: 16 }), (cs) => {
        const v = cs.join("");
        const at = base64ErrorOffset(v);
        expect(at < 0).toBe(goAccepts(v));
        if (at >= 0) expect(at).toBeLessThanOrEqual(v.length);
      }),
    );
  });
});

describe("requestFieldProblem() (issue 10 item 9)", () => {
  it("lets ordinary gRPC request metadata through", () => {
    for (const [n, v] of [
      ["content-type", "application/grpc"],
      ["te", "trailers"],
      ["user-agent", "grpc-node-js/1.14.0"],
      ["grpc-accept-encoding", "identity,deflate,gzip"],
      ["x-request-id", ""],
      ["trace.id_2", "a b\tc".replace("\t", "~")],
      ["x-trace-bin", "AAEC"],
      ["x-empty-bin", ""],
    ]) {
      expect(requestFieldProblem(n!, v!), `${n}: ${v}`).toBeNull();
    }
  });

  it("refuses a -bin value that is not base64, in grpc-go's words without echoing the value", () => {
    expect(requestFieldProblem("x-bin", "!!!")).toBe('malformed binary metadata in header "x-bin": illegal base64 data at input byte 0');
    expect(requestFieldProblem("x-token-bin", "c2VjcmV0IHRva2Vu!")).not.toContain("c2VjcmV0");
  });

  it("refuses names gRPC does not allow and values HTTP/2 or gRPC forbid", () => {
    expect(requestFieldProblem("", "a")).toMatch(/empty metadata name/);
    for (const n of ["X-Foo", "x foo", "x@foo", "x!y", "x\0y", "é"]) expect(requestFieldProblem(n, "a"), n).toMatch(/metadata name/);
    for (const v of ["a\0b", "a\rb", "a\nb", " a", "a ", "a\t", "\ta", "a\x7fb", "a\xe9b", "a\x01"]) {
      expect(requestFieldProblem("x-foo", v), JSON.stringify(v)).toMatch(/^malformed header: value of "x-foo"/);
    }
  });

  it("never throws, and refuses exactly the fields outside the rules, for arbitrary names and values", () => {
    const nameOk = (n: string): boolean => /^[0-9a-z_.-]+$/.test(n);
    const valueOk = (n: string, v: string): boolean => (isBinaryHeader(n) ? goAccepts(v) : /^(?:[!-~](?:[ -~]*[!-~])?)?$/.test(v));
    fc.assert(
      fc.property(fc.string({ maxLength: 12 }), fc.boolean(), fc.string({ maxLength: 20 }), (n, bin, v) => {
        const name = bin ? `${n}-bin` : n;
        const p = requestFieldProblem(name, v);
        expect(p === null).toBe(nameOk(name) && valueOk(name, v));
      }),
    );
  });

  it("names the offset of the first byte outside printable ASCII, in short values and in long ones", () => {
    const firstBad = (v: string): number => {
      for (let i = 0; i < v.length; i++) if (v.charCodeAt(i) < 0x20 || v.charCodeAt(i) > 0x7e) return i;
      return -1;
    };
    const token = "Bearer " + "eyJhbGciOiJSUzI1NiJ9".repeat(60);
    expect(requestFieldProblem("authorization", token)).toBeNull();
    expect(requestFieldProblem("authorization", `${token}\x01`)).toBe('malformed header: value of "authorization" has a byte outside printable ASCII at offset 1207');
    expect(requestFieldProblem("x-foo", "ab\u00e9\u{1f600}")).toMatch(/at offset 2$/);
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 300, unit: "binary" }), (v) => {
        const inner = `a${v}a`;
        const at = firstBad(inner);
        const p = requestFieldProblem("x-foo", inner);
        if (at < 0) expect(p).toBeNull();
        else expect(p).toBe(`malformed header: value of "x-foo" has a byte outside printable ASCII at offset ${at}`);
      }),
    );
  });

  it("reads a field whose name ends in -bin as binary only when something precedes the suffix", () => {
    expect(isBinaryHeader("x-bin")).toBe(true);
    expect(isBinaryHeader("-bin")).toBe(false);
    expect(isBinaryHeader("binary")).toBe(false);
  });
});
