import { describe, expect, it } from "vitest";
import fc from "fast-check";
import {
  decodeBase64Chunk,
  encodeBase64Chunk,
  encodeTrailerFrame,
  finishBase64,
  newBase64Decoder,
  newBase64Encoder,
  parseTrailerBlock,
  parseWebContentType,
  upstreamContentType,
  webResponseContentType,
} from "../../src/translate/grpc-web.js";

const ascii = (s: string): Uint8Array => Uint8Array.from(s, (c) => c.charCodeAt(0));
const text = (b: Uint8Array): string => String.fromCharCode(...b);
const cat = (parts: readonly Uint8Array[]): Uint8Array => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
};
/** Splits at the given cut points (deduplicated, sorted, modulo length + 1). */
const split = (b: Uint8Array, cuts: readonly number[]): Uint8Array[] => {
  const pts = [...new Set(cuts.map((c) => c % (b.length + 1)))].sort((x, y) => x - y);
  const out: Uint8Array[] = [];
  let prev = 0;
  for (const p of pts) {
    out.push(b.subarray(prev, p));
    prev = p;
  }
  out.push(b.subarray(prev));
  return out;
};

describe("parseWebContentType()", () => {
  it.each([
    ["application/grpc-web", { text: false, subtype: "" }],
    ["application/grpc-web+proto", { text: false, subtype: "proto" }],
    ["application/grpc-web-text", { text: true, subtype: "" }],
    ["Application/GRPC-Web-Text+proto; charset=utf-8", { text: true, subtype: "proto" }],
    ["application/grpc-web+json", { text: false, subtype: "json" }],
    ["application/grpc", null],
    ["application/grpc-webx", null],
    ["application/grpc-web+", null],
    ["text/plain", null],
    [undefined, null],
  ])("%s → %j", (ct, want) => {
    expect(parseWebContentType(ct)).toEqual(want);
  });

  it("maps to the upstream's and the response's content types", () => {
    expect(upstreamContentType({ text: true, subtype: "" })).toBe("application/grpc");
    expect(upstreamContentType({ text: false, subtype: "proto" })).toBe("application/grpc+proto");
    expect(webResponseContentType({ text: true, subtype: "" })).toBe("application/grpc-web-text+proto");
    expect(webResponseContentType({ text: false, subtype: "json" })).toBe("application/grpc-web+json");
  });
});

describe("trailer frame", () => {
  it("is flag 0x80, a length, and an HTTP/1 header block (PROTOCOL-WEB.md)", () => {
    const f = encodeTrailerFrame([["grpc-status", "0"], ["Grpc-Message", "ok%20then"]]);
    expect(Buffer.from(f).toString("latin1")).toBe("\x80\x00\x00\x00\x29grpc-status: 0\r\ngrpc-message: ok%20then\r\n");
    expect(parseTrailerBlock(f.subarray(5))).toEqual([["grpc-status", "0"], ["grpc-message", "ok%20then"]]);
  });

  it("round-trips any printable field list", () => {
    const name = fc.stringMatching(/^[a-z0-9-]{1,12}$/);
    const value = fc.stringMatching(/^[!-~]([ -~]{0,30}[!-~])?$/);
    fc.assert(
      fc.property(fc.array(fc.tuple(name, value), { maxLength: 8 }), (fields) => {
        const f = encodeTrailerFrame(fields);
        expect(f[0]).toBe(0x80);
        expect((f[1]! << 24) | (f[2]! << 16) | (f[3]! << 8) | f[4]!).toBe(f.length - 5);
        expect(parseTrailerBlock(f.subarray(5))).toEqual(fields);
      }),
    );
  });
});

describe("base64, incrementally", () => {
  it("encodes chunks into exactly the base64 of the whole body, however it is split", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), fc.array(fc.nat(), { maxLength: 6 }), (body, cuts) => {
        const e = newBase64Encoder();
        const parts = split(body, cuts);
        const out = parts.map((p, i) => encodeBase64Chunk(e, p, i === parts.length - 1));
        expect(text(cat(out))).toBe(Buffer.from(body).toString("base64"));
      }),
    );
  });

  it("decodes the base64 of a body however the text is split", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), fc.array(fc.nat(), { maxLength: 6 }), (body, cuts) => {
        const d = newBase64Decoder();
        const parts = split(ascii(Buffer.from(body).toString("base64")), cuts).map((p) => decodeBase64Chunk(d, p));
        expect(parts.every((p) => p.ok)).toBe(true);
        expect(finishBase64(d).ok).toBe(true);
        expect(Buffer.from(cat(parts.map((p) => (p.ok ? p.bytes : new Uint8Array()))))).toEqual(Buffer.from(body));
      }),
    );
  });

  it("accepts padding between chunks (each sender chunk padded on its own), as grpc-web clients send", () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 40 }), { maxLength: 5 }), fc.array(fc.nat(), { maxLength: 4 }), (msgs, cuts) => {
        const wire = ascii(msgs.map((m) => Buffer.from(m).toString("base64")).join(""));
        const d = newBase64Decoder();
        const parts = split(wire, cuts).map((p) => decodeBase64Chunk(d, p));
        expect(parts.every((p) => p.ok)).toBe(true);
        expect(finishBase64(d).ok).toBe(true);
        expect(Buffer.from(cat(parts.map((p) => (p.ok ? p.bytes : new Uint8Array()))))).toEqual(Buffer.from(cat(msgs)));
      }),
    );
  });

  it.each([
    ["AB*D", "illegal base64 character at offset 2"],
    ["A=AA", "illegal base64 padding at offset 1"],
    ["AB=C", "base64 data after padding at offset 3"],
  ])("refuses %s: %s", (s, err) => {
    expect(decodeBase64Chunk(newBase64Decoder(), ascii(s))).toEqual({ ok: false, error: err });
  });

  it("says when the body ends inside a group, and never throws on any input", () => {
    const d = newBase64Decoder();
    expect(decodeBase64Chunk(d, ascii("QUJD QQ")).ok).toBe(true);
    expect(finishBase64(d)).toEqual({ ok: false, error: "base64 body ends inside a 4-character group (2 left over)" });
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 100 }), (junk) => {
        const r = decodeBase64Chunk(newBase64Decoder(), junk);
        expect(typeof r.ok).toBe("boolean");
      }),
    );
  });
});
