// Go text semantics the translate codecs reproduce: header string → bytes, utf8.DecodeRune, strconv.Quote. Internal, pure.

/*
 * Header values arrive from node:http2 as one-byte (latin1) strings: each char is one wire byte.
 * A string holding any char above 0xFF cannot have come off the wire, so it is read as UTF-8
 * text instead. This is the rule grpc_vectors.py (decode_grpc_message) uses for the spec sheet's
 * vectors; with it, "the bytes of a Go string" has one meaning on both sides.
 */

const UTF8_ENCODER = new TextEncoder();

/** True if every char of s is <= 0xFF, i.e. s is a byte string (latin1) as node delivers headers. */
export function isByteString(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0xff) return false;
  return true;
}

/** The bytes grpc-go would see for this header value (see the rule above). Allocates. */
export function headerBytes(s: string): Uint8Array {
  if (!isByteString(s)) return UTF8_ENCODER.encode(s); // lone surrogates become EF BF BD
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

/** Go-visible byte length of a header value (len(s) in grpc-go). */
export function headerByteLength(s: string): number {
  return isByteString(s) ? s.length : UTF8_ENCODER.encode(s).length;
}

/**
 * Size of the valid UTF-8 sequence starting at b[i] (ending before `end`), or 0 if the bytes there
 * are not one. Mirrors Go unicode/utf8 DecodeRune and its accept ranges: on 0, Go yields
 * (RuneError, 1), so the caller consumes exactly one byte. Overlong forms, surrogates
 * (ED A0..BF) and code points above U+10FFFF are invalid.
 */
export function utf8SequenceLength(b: ArrayLike<number>, i: number, end: number): number {
  const c0 = b[i] as number;
  if (c0 < 0x80) return 1;
  let need: number;
  let lo = 0x80;
  let hi = 0xbf;
  if (c0 >= 0xc2 && c0 <= 0xdf) need = 1;
  else if (c0 === 0xe0) { need = 2; lo = 0xa0; }
  else if (c0 === 0xed) { need = 2; hi = 0x9f; }
  else if (c0 >= 0xe1 && c0 <= 0xef) need = 2;
  else if (c0 === 0xf0) { need = 3; lo = 0x90; }
  else if (c0 >= 0xf1 && c0 <= 0xf3) need = 3;
  else if (c0 === 0xf4) { need = 3; hi = 0x8f; }
  else return 0; // 0x80..0xC1 (continuation / overlong lead), 0xF5..0xFF
  if (end - i < need + 1) return 0;
  const c1 = b[i + 1] as number;
  if (c1 < lo || c1 > hi) return 0;
  for (let k = 2; k <= need; k++) {
    const ck = b[i + k] as number;
    if (ck < 0x80 || ck > 0xbf) return 0;
  }
  return need + 1;
}

function decodeSequence(b: Uint8Array, i: number, size: number): number {
  const c0 = b[i] as number;
  if (size === 2) return ((c0 & 0x1f) << 6) | ((b[i + 1] as number) & 0x3f);
  if (size === 3) return ((c0 & 0x0f) << 12) | (((b[i + 1] as number) & 0x3f) << 6) | ((b[i + 2] as number) & 0x3f);
  return (
    ((c0 & 0x07) << 18) |
    (((b[i + 1] as number) & 0x3f) << 12) |
    (((b[i + 2] as number) & 0x3f) << 6) |
    ((b[i + 3] as number) & 0x3f)
  );
}

// Go unicode.IsPrint for non-ASCII runes: categories L, M, N, P, S (IsGraphic minus the spaces
// other than U+0020). The Unicode version is the JS engine's, not Go's; only unassigned code
// points can differ.
const PRINTABLE = /^[\p{L}\p{M}\p{N}\p{P}\p{S}]$/u;

function hex(n: number, width: number): string {
  return n.toString(16).padStart(width, "0");
}

/**
 * Go strconv.Quote (fmt %q) of a header value, as grpc-go prints it in error messages:
 * `"` and `\` escaped, \a \b \f \n \r \t \v, other control bytes and invalid UTF-8 bytes as
 * \xhh, non-printable runes as \uhhhh / \Uhhhhhhhh (lower-case hex, as Go writes them).
 */
export function goQuote(s: string): string {
  let plain = true;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 0x22 || c === 0x5c) { plain = false; break; }
  }
  if (plain) return '"' + s + '"';
  const b = headerBytes(s);
  let out = '"';
  for (let i = 0; i < b.length; ) {
    const c = b[i] as number;
    if (c < 0x80) {
      i++;
      if (c === 0x22) out += '\\"';
      else if (c === 0x5c) out += "\\\\";
      else if (c >= 0x20 && c <= 0x7e) out += String.fromCharCode(c);
      else if (c === 0x07) out += "\\a";
      else if (c === 0x08) out += "\\b";
      else if (c === 0x0c) out += "\\f";
      else if (c === 0x0a) out += "\\n";
      else if (c === 0x0d) out += "\\r";
      else if (c === 0x09) out += "\\t";
      else if (c === 0x0b) out += "\\v";
      else out += "\\x" + hex(c, 2);
      continue;
    }
    const size = utf8SequenceLength(b, i, b.length);
    if (size === 0) {
      out += "\\x" + hex(c, 2);
      i++;
      continue;
    }
    const r = decodeSequence(b, i, size);
    i += size;
    if (PRINTABLE.test(String.fromCodePoint(r))) out += String.fromCodePoint(r);
    else if (r < 0x10000) out += "\\u" + hex(r, 4);
    else out += "\\U" + hex(r, 8);
  }
  return out + '"';
}
