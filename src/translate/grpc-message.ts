// grpc-message percent codec (grpc-go encodeGrpcMessage / decodeGrpcMessage, spec sheet §4.2, §4.3). Never throws.

import { headerBytes, utf8SequenceLength } from "./go-text.js";

// "%XX" with upper-case hex for every byte value, built once.
const HEX_DIGITS = "0123456789ABCDEF";
const PCT: readonly string[] = Array.from(
  { length: 256 },
  (_, b) => "%" + HEX_DIGITS.charAt(b >> 4) + HEX_DIGITS.charAt(b & 15),
);
/** U+FFFD as grpc-go writes it for every invalid UTF-8 byte. */
const REPLACEMENT_PCT = "%EF%BF%BD";

function pct(b: number): string {
  return PCT[b] as string;
}

/** grpc-go: kept as-is are 0x20..0x7E except '%' (spaceByte..tildeByte, != percentByte). */
function isKept(c: number): boolean {
  return c >= 0x20 && c <= 0x7e && c !== 0x25;
}

/**
 * Encodes a JS string as grpc-go would encode its UTF-8 bytes: well-formed UTF-16 is encoded as
 * UTF-8, a lone surrogate becomes U+FFFD (as TextEncoder does), every byte outside the kept
 * range becomes %XX. Fast path: input with only kept chars is returned unchanged.
 */
export function encodeGrpcMessage(msg: string): string {
  const n = msg.length;
  let i = 0;
  while (i < n && isKept(msg.charCodeAt(i))) i++;
  if (i === n) return msg;
  let out = "";
  let run = 0; // start of the pending run of kept chars
  while (i < n) {
    const c = msg.charCodeAt(i);
    if (isKept(c)) {
      i++;
      continue;
    }
    if (run < i) out += msg.slice(run, i);
    if (c < 0x80) {
      out += pct(c);
      i++;
    } else if (c < 0x800) {
      out += pct(0xc0 | (c >> 6)) + pct(0x80 | (c & 0x3f));
      i++;
    } else if (c >= 0xd800 && c <= 0xdbff && i + 1 < n) {
      const lo = msg.charCodeAt(i + 1);
      if (lo >= 0xdc00 && lo <= 0xdfff) {
        const cp = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
        out +=
          pct(0xf0 | (cp >> 18)) + pct(0x80 | ((cp >> 12) & 0x3f)) + pct(0x80 | ((cp >> 6) & 0x3f)) + pct(0x80 | (cp & 0x3f));
        i += 2;
      } else {
        out += REPLACEMENT_PCT; // lone high surrogate
        i++;
      }
    } else if (c >= 0xd800 && c <= 0xdfff) {
      out += REPLACEMENT_PCT; // lone surrogate (low, or high at the end)
      i++;
    } else {
      out += pct(0xe0 | (c >> 12)) + pct(0x80 | ((c >> 6) & 0x3f)) + pct(0x80 | (c & 0x3f));
      i++;
    }
    run = i;
  }
  if (run < n) out += msg.slice(run);
  return out;
}

/**
 * grpc-go `encodeGrpcMessage` on raw bytes: runes are decoded one at a time Go-style
 * (utf8.DecodeRuneInString), so every byte that does not start a valid sequence (bad lead,
 * truncated, overlong, surrogate) becomes its own U+FFFD, written `%EF%BF%BD`.
 */
export function encodeGrpcMessageBytes(bytes: Uint8Array): string {
  const n = bytes.length;
  let out = "";
  for (let i = 0; i < n; ) {
    const b = bytes[i] as number;
    if (b < 0x80) {
      out += isKept(b) ? String.fromCharCode(b) : pct(b);
      i++;
      continue;
    }
    const size = utf8SequenceLength(bytes, i, n);
    if (size === 0) {
      out += REPLACEMENT_PCT;
      i++;
      continue;
    }
    for (let k = 0; k < size; k++) out += pct(bytes[i + k] as number);
    i += size;
  }
  return out;
}

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  return -1;
}

/**
 * grpc-go `decodeGrpcMessage`, byte-wise and lenient: a `%` followed by two more bytes that are
 * both hex digits (either case; strconv.ParseUint(x, 16, 8)) becomes that byte; any other `%` is
 * copied and scanning resumes at the next byte. The result may be invalid UTF-8. The input's
 * bytes are its chars when every char is <= 0xFF (node's latin1 header strings), else its UTF-8.
 */
export function decodeGrpcMessageBytes(s: string): Uint8Array {
  const src = headerBytes(s);
  const n = src.length;
  const out = new Uint8Array(n);
  let j = 0;
  for (let i = 0; i < n; i++) {
    const c = src[i] as number;
    if (c === 0x25 && i + 2 < n) {
      const hi = hexValue(src[i + 1] as number);
      const lo = hi < 0 ? -1 : hexValue(src[i + 2] as number);
      if (lo >= 0) {
        out[j++] = (hi << 4) | lo;
        i += 2;
        continue;
      }
    }
    out[j++] = c;
  }
  return j === n ? out : out.slice(0, j);
}

const UTF8_DECODER = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });

/** decodeGrpcMessageBytes, then UTF-8 with U+FFFD for invalid sequences. Fast path: ASCII without escapes is returned as is. */
export function decodeGrpcMessage(s: string): string {
  const n = s.length;
  let plain = true;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x80 || (c === 0x25 && i + 2 < n)) {
      plain = false;
      break;
    }
  }
  if (plain) return s;
  return UTF8_DECODER.decode(decodeGrpcMessageBytes(s));
}

/**
 * Caps msg at maxBytes bytes of UTF-8 (a lone surrogate counts as the 3 bytes of U+FFFD), cutting
 * only between code points. Meant for messages dojang synthesizes; upstream messages are
 * forwarded unchanged.
 */
export function truncateGrpcMessage(msg: string, maxBytes: number): string {
  if (!(maxBytes > 0)) return "";
  const n = msg.length;
  if (n * 3 <= maxBytes) return msg; // UTF-8 never needs more than 3 bytes per UTF-16 unit
  let bytes = 0;
  for (let i = 0; i < n; ) {
    const c = msg.charCodeAt(i);
    let width = 3;
    let step = 1;
    if (c < 0x80) width = 1;
    else if (c < 0x800) width = 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < n) {
      const lo = msg.charCodeAt(i + 1);
      if (lo >= 0xdc00 && lo <= 0xdfff) {
        width = 4;
        step = 2;
      }
    }
    if (bytes + width > maxBytes) return msg.slice(0, i);
    bytes += width;
    i += step;
  }
  return msg;
}
