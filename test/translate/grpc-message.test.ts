import { describe, expect, it } from "vitest";
import fc from "fast-check";
import {
  decodeGrpcMessage,
  decodeGrpcMessageBytes,
  encodeGrpcMessage,
  encodeGrpcMessageBytes,
  truncateGrpcMessage,
} from "../../src/translate/grpc-message.js";
import { fromHex, toHex, vectors } from "./vectors.js";

const ALLOWED = /^[\x20-\x24\x26-\x7e]*(?:%[0-9A-F]{2}[\x20-\x24\x26-\x7e]*)*$/;
const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder();

const strictDecoder = new TextDecoder("utf-8", { fatal: true });

function validUtf8(b: Uint8Array): boolean {
  try {
    strictDecoder.decode(b);
    return true;
  } catch {
    return false;
  }
}

function isWellFormed(s: string): boolean {
  return utf8Decoder.decode(utf8.encode(s)) === s;
}

describe("encodeGrpcMessageBytes() matches grpc-go encodeGrpcMessage", () => {
  it.each(vectors.encodeGrpcMessage)("encodes bytes $inputHex as $encoded", (v) => {
    expect(encodeGrpcMessageBytes(fromHex(v.inputHex))).toBe(v.encoded);
  });

  it.each(vectors.encodeGrpcMessageGrpcGoTests)("passes grpc-go's own case $inputHex → $encoded", (v) => {
    expect(encodeGrpcMessageBytes(fromHex(v.inputHex))).toBe(v.encoded);
  });

  it("turns each invalid byte into one U+FFFD, Go-style", () => {
    expect(encodeGrpcMessageBytes(Uint8Array.of(0xf0, 0x9f, 0x98))).toBe("%EF%BF%BD%EF%BF%BD%EF%BF%BD");
    expect(encodeGrpcMessageBytes(Uint8Array.of(0xf4, 0x90, 0x80, 0x80))).toBe("%EF%BF%BD".repeat(4));
    expect(encodeGrpcMessageBytes(Uint8Array.of(0xe0, 0x80, 0x80))).toBe("%EF%BF%BD".repeat(3));
    expect(encodeGrpcMessageBytes(Uint8Array.of(0x61, 0x80, 0x62))).toBe("a%EF%BF%BDb");
  });

  it("encodes valid UTF-8 exactly like the JS-string encoder", () => {
    fc.assert(fc.property(fc.string({ unit: "binary" }), (s) => {
      expect(encodeGrpcMessageBytes(utf8.encode(s))).toBe(encodeGrpcMessage(s));
    }));
  });

  it("only ever outputs allowed characters and upper-case escapes", () => {
    fc.assert(fc.property(fc.uint8Array({ maxLength: 64 }), (b) => {
      expect(encodeGrpcMessageBytes(b)).toMatch(ALLOWED);
    }));
  });
});

describe("encodeGrpcMessage()", () => {
  it.each(vectors.encodeGrpcMessage.filter((v) => validUtf8(fromHex(v.inputHex))))(
    "encodes the text whose UTF-8 is $inputHex as $encoded",
    (v) => {
      expect(encodeGrpcMessage(utf8Decoder.decode(fromHex(v.inputHex)))).toBe(v.encoded);
    },
  );

  it("returns the input itself when nothing needs escaping", () => {
    const s = "unexpected HTTP status code received from server: 503 (Service Unavailable)";
    expect(encodeGrpcMessage(s)).toBe(s);
    expect(encodeGrpcMessage("")).toBe("");
  });

  it("keeps space and encodes percent, controls and non-ASCII", () => {
    expect(encodeGrpcMessage("upstream said: 100% «fail»")).toBe("upstream said: 100%25 %C2%ABfail%C2%BB");
    expect(encodeGrpcMessage("a\nb\u007f")).toBe("a%0Ab%7F");
    expect(encodeGrpcMessage("😀系")).toBe("%F0%9F%98%80%E7%B3%BB");
  });

  it("encodes lone surrogates as U+FFFD", () => {
    expect(encodeGrpcMessage("a\ud800b")).toBe("a%EF%BF%BDb");
    expect(encodeGrpcMessage("\udc00")).toBe("%EF%BF%BD");
    expect(encodeGrpcMessage("x\ud83d")).toBe("x%EF%BF%BD");
  });

  it("agrees with TextEncoder plus byte-wise escaping for arbitrary strings", () => {
    fc.assert(fc.property(fc.string({ unit: fc.oneof(fc.constant("\ud800"), fc.constant("\udfff"), fc.string({ unit: "binary", minLength: 1, maxLength: 1 })) }), (s) => {
      let want = "";
      for (const b of utf8.encode(s)) {
        want += b >= 0x20 && b <= 0x7e && b !== 0x25 ? String.fromCharCode(b) : "%" + b.toString(16).toUpperCase().padStart(2, "0");
      }
      expect(encodeGrpcMessage(s)).toBe(want);
    }));
  });

  it("only ever outputs allowed characters and upper-case escapes", () => {
    fc.assert(fc.property(fc.string({ unit: "binary" }), (s) => { expect(encodeGrpcMessage(s)).toMatch(ALLOWED); }));
  });

  it("round-trips arbitrary well-formed strings through decodeGrpcMessage", () => {
    fc.assert(fc.property(fc.string({ unit: "binary" }), (s) => {
      expect(decodeGrpcMessage(encodeGrpcMessage(s))).toBe(s);
    }));
  });
});

describe("decodeGrpcMessageBytes() matches grpc-go decodeGrpcMessage", () => {
  it.each(vectors.decodeGrpcMessage)("decodes $input to bytes $bytesHex", (v) => {
    expect(toHex(decodeGrpcMessageBytes(v.input))).toBe(v.bytesHex);
  });

  it.each(vectors.decodeGrpcMessageGrpcGoTests)("passes grpc-go's own case $input", (v) => {
    expect(toHex(decodeGrpcMessageBytes(v.input))).toBe(v.bytesHex);
  });

  it.each(vectors.roundTripGrpcGoTests)("passes grpc-go's round trip of $inputHex", (v) => {
    expect(toHex(decodeGrpcMessageBytes(encodeGrpcMessageBytes(fromHex(v.inputHex))))).toBe(v.bytesHex);
  });

  it("round-trips arbitrary valid UTF-8 bytes and turns invalid ones into valid UTF-8 with U+FFFD", () => {
    fc.assert(fc.property(fc.oneof(fc.uint8Array({ maxLength: 48 }), fc.string({ unit: "binary" }).map((t) => utf8.encode(t))), (b) => {
      const back = decodeGrpcMessageBytes(encodeGrpcMessageBytes(b));
      if (validUtf8(b)) {
        expect(toHex(back)).toBe(toHex(b));
      } else {
        expect(validUtf8(back)).toBe(true);
        // Go replaces per bad byte, so at least as many U+FFFD as WHATWG's maximal-subpart rule.
        const count = (t: string): number => t.split("\ufffd").length;
        expect(count(utf8Decoder.decode(back))).toBeGreaterThanOrEqual(count(utf8Decoder.decode(b)));
      }
    }));
  });

  it("reads chars above 0xFF as UTF-8 text", () => {
    expect(toHex(decodeGrpcMessageBytes("系%41"))).toBe("e7b3bb41");
  });

  it("never throws, and never grows the input, on arbitrary strings", () => {
    fc.assert(fc.property(fc.oneof(fc.string(), fc.string({ unit: "binary" }), fc.stringMatching(/^[%0-9a-fA-FgG]*$/)), (s) => {
      const b = decodeGrpcMessageBytes(s);
      expect(b.length).toBeLessThanOrEqual(utf8.encode(s).length);
    }));
  });
});

describe("decodeGrpcMessage()", () => {
  it.each(vectors.decodeGrpcMessage)("decodes $input as UTF-8 text", (v) => {
    expect(decodeGrpcMessage(v.input)).toBe(utf8Decoder.decode(fromHex(v.bytesHex)));
  });

  it("returns plain ASCII unchanged", () => {
    const s = "nothing to decode 100%";
    expect(decodeGrpcMessage(s)).toBe(s);
  });

  it("replaces invalid UTF-8 with U+FFFD", () => {
    expect(decodeGrpcMessage("%FF")).toBe("\ufffd");
    expect(decodeGrpcMessage("%E7%B3")).toBe("\ufffd");
  });

  it("treats node's latin1 header chars as the wire bytes they are", () => {
    expect(decodeGrpcMessage("\xc3\xa9")).toBe("é");
  });

  it("never throws on arbitrary strings", () => {
    fc.assert(fc.property(fc.oneof(fc.string(), fc.string({ unit: "binary" }), fc.stringMatching(/^[%0-9a-fA-Fz]*$/)), (s) => {
      expect(typeof decodeGrpcMessage(s)).toBe("string");
    }));
  });
});

describe("truncateGrpcMessage()", () => {
  it("returns short messages unchanged", () => {
    expect(truncateGrpcMessage("hello", 5)).toBe("hello");
    expect(truncateGrpcMessage("héllo", 100)).toBe("héllo");
  });

  it("cuts at the byte cap without splitting a code point", () => {
    expect(truncateGrpcMessage("hello", 3)).toBe("hel");
    expect(truncateGrpcMessage("aé", 2)).toBe("a");
    expect(truncateGrpcMessage("a😀b", 4)).toBe("a");
    expect(truncateGrpcMessage("a😀b", 5)).toBe("a😀");
    expect(truncateGrpcMessage("系统", 5)).toBe("系");
  });

  it("returns an empty string for a cap of zero or less", () => {
    expect(truncateGrpcMessage("abc", 0)).toBe("");
    expect(truncateGrpcMessage("abc", -1)).toBe("");
    expect(truncateGrpcMessage("abc", Number.NaN)).toBe("");
  });

  it("yields the longest code-point prefix whose UTF-8 fits the cap", () => {
    fc.assert(fc.property(fc.string({ unit: "binary", maxLength: 40 }), fc.integer({ min: 0, max: 120 }), (s, cap) => {
      const t = truncateGrpcMessage(s, cap);
      expect(s.startsWith(t)).toBe(true);
      expect(utf8.encode(t).length).toBeLessThanOrEqual(cap);
      expect(isWellFormed(t)).toBe(true);
      if (t.length < s.length) {
        const cp = String.fromCodePoint(s.codePointAt(t.length) as number);
        expect(utf8.encode(t + cp).length).toBeGreaterThan(cap);
      }
    }));
  });
});
