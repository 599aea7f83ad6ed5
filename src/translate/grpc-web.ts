// gRPC-Web on the wire: its content types, the trailer frame (flag 0x80) that carries the status in the body, and the incremental base64 of the -text variants.
//
// Source: grpc/grpc doc/PROTOCOL-WEB.md. A gRPC-Web response body is the gRPC message frames
// followed by one frame whose flag byte has its most significant bit set; that frame's payload
// is the trailers as an HTTP/1 header block ("grpc-status: 0\r\ngrpc-message: ...\r\n", names in
// lower case). In application/grpc-web-text the body, both ways, is base64; a sender may end each
// chunk with padding, so a decoder must accept padded groups anywhere ("AAA=AAAA" is legal), and
// must carry the 0..3 characters of an incomplete group over to the next chunk.
//
// Pure: Uint8Array views only (no node: types), no clock, no I/O.
import { frameMessage } from "./framing.js";

export const GRPC_WEB = "application/grpc-web";
export const GRPC_WEB_TEXT = "application/grpc-web-text";
/** The flag byte of the trailer frame (the MSB of a message frame's flag). */
export const TRAILER_FLAG = 0x80;

export interface WebContentType {
  /** -text: the body is base64 both ways */
  readonly text: boolean;
  /** what follows "+" ("proto", "json"...), or "" */
  readonly subtype: string;
}

/**
 * application/grpc-web, application/grpc-web+proto, application/grpc-web-text(+proto), with
 * parameters ignored and case-insensitive; anything else is null.
 */
export function parseWebContentType(ct: string | undefined): WebContentType | null {
  if (ct === undefined) return null;
  const semi = ct.indexOf(";");
  const v = (semi < 0 ? ct : ct.slice(0, semi)).trim().toLowerCase();
  let rest: string;
  let text: boolean;
  if (v.startsWith(GRPC_WEB_TEXT)) {
    text = true;
    rest = v.slice(GRPC_WEB_TEXT.length);
  } else if (v.startsWith(GRPC_WEB)) {
    text = false;
    rest = v.slice(GRPC_WEB.length);
  } else return null;
  if (rest === "") return { text, subtype: "" };
  if (rest[0] !== "+" || rest.length === 1 || !/^[a-z0-9.+_-]+$/.test(rest.slice(1))) return null;
  return { text, subtype: rest.slice(1) };
}

/** The native gRPC content type for the upstream request ("application/grpc+proto" keeps the subtype). */
export function upstreamContentType(w: WebContentType): string {
  return w.subtype === "" ? "application/grpc" : `application/grpc+${w.subtype}`;
}

/** The response content type a gRPC-Web client expects for its request's type. */
export function webResponseContentType(w: WebContentType): string {
  const base = w.text ? GRPC_WEB_TEXT : GRPC_WEB;
  return w.subtype === "" ? `${base}+proto` : `${base}+${w.subtype}`;
}

// === the trailer frame ===

const utf8 = new TextEncoder();
const latin1 = new TextDecoder("latin1");

/**
 * The trailer frame for `fields` (names lower-cased; values as they go on the wire, already
 * percent-encoded where gRPC says so). Header values are ASCII by HTTP's rules; anything else is
 * written as UTF-8 bytes.
 */
export function encodeTrailerFrame(fields: readonly (readonly [string, string])[]): Uint8Array {
  let block = "";
  for (const [n, v] of fields) block += `${n.toLowerCase()}: ${v}\r\n`;
  return frameMessage(utf8.encode(block), TRAILER_FLAG);
}

/** A trailer frame's payload (without its 5-byte prefix) → fields in order; lines without ":" are skipped. */
export function parseTrailerBlock(payload: Uint8Array): [string, string][] {
  const out: [string, string][] = [];
  for (const line of latin1.decode(payload).split("\r\n")) {
    if (line === "") continue;
    const i = line.indexOf(":");
    if (i <= 0) continue;
    out.push([line.slice(0, i).trim().toLowerCase(), line.slice(i + 1).trim()]);
  }
  return out;
}

// === base64, incrementally ===

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const ENC = Uint8Array.from(ALPHABET, (c) => c.charCodeAt(0));
const DEC = new Int16Array(256).fill(-1);
for (let i = 0; i < 64; i++) DEC[ALPHABET.charCodeAt(i)] = i;
const PAD = 0x3d; // "="

/** The encoder's carry: 0..2 bytes not yet written (a response's chunks need not be multiples of 3). */
export interface Base64Encoder {
  carry: Uint8Array;
  carried: number;
}

export function newBase64Encoder(): Base64Encoder {
  return { carry: new Uint8Array(2), carried: 0 };
}

/**
 * Base64 of `bytes` after what was carried, as ASCII bytes; a remainder of 1..2 bytes is carried
 * to the next call unless `final`, which pads. So a response's chunks concatenate to the base64
 * of the whole body, without padding in the middle (which every decoder accepts).
 */
export function encodeBase64Chunk(e: Base64Encoder, bytes: Uint8Array, final: boolean): Uint8Array {
  const total = e.carried + bytes.length;
  const whole = Math.floor(total / 3);
  const rest = total - whole * 3;
  const out = new Uint8Array(whole * 4 + (final && rest > 0 ? 4 : 0));
  let o = 0;
  let i = 0; // index into the virtual concatenation carry ++ bytes
  const at = (k: number): number => (k < e.carried ? e.carry[k]! : bytes[k - e.carried]!);
  for (let g = 0; g < whole; g++, i += 3) {
    const n = (at(i) << 16) | (at(i + 1) << 8) | at(i + 2);
    out[o++] = ENC[(n >>> 18) & 63]!;
    out[o++] = ENC[(n >>> 12) & 63]!;
    out[o++] = ENC[(n >>> 6) & 63]!;
    out[o++] = ENC[n & 63]!;
  }
  const left = [at(i), rest > 1 ? at(i + 1) : 0];
  if (final) {
    if (rest > 0) {
      const n = (left[0]! << 16) | (left[1]! << 8);
      out[o++] = ENC[(n >>> 18) & 63]!;
      out[o++] = ENC[(n >>> 12) & 63]!;
      out[o++] = rest === 2 ? ENC[(n >>> 6) & 63]! : PAD;
      out[o++] = PAD;
    }
    e.carried = 0;
  } else {
    if (rest > 0) e.carry[0] = left[0]!;
    if (rest > 1) e.carry[1] = left[1]!;
    e.carried = rest;
  }
  return out;
}

/** The decoder's carry: 0..3 characters of an incomplete 4-character group. */
export interface Base64Decoder {
  readonly group: Uint8Array;
  have: number;
  /** the group being filled has seen "=": only "=" may complete it */
  padded: number;
  /** characters consumed so far (for error offsets) */
  offset: number;
}

export function newBase64Decoder(): Base64Decoder {
  return { group: new Uint8Array(4), have: 0, padded: 0, offset: 0 };
}

export type DecodeResult = { readonly ok: true; readonly bytes: Uint8Array } | { readonly ok: false; readonly error: string };

/**
 * Decodes the base64 text in `chunk` (ASCII bytes) that completes groups, carrying an incomplete
 * group over. Padding may end any group (each sender's chunk may be padded on its own); ASCII
 * whitespace is skipped. Errors name the offset of the bad character in the whole stream.
 */
export function decodeBase64Chunk(d: Base64Decoder, chunk: Uint8Array): DecodeResult {
  const out = new Uint8Array(Math.floor(((d.have + chunk.length) * 3) / 4) + 3);
  let o = 0;
  for (let i = 0; i < chunk.length; i++, d.offset++) {
    const c = chunk[i]!;
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) continue;
    if (c === PAD) {
      // "=" only in the 3rd or 4th place of a group, and a group with "=" in the 3rd needs it in the 4th
      if (d.have < 2) return { ok: false, error: `illegal base64 padding at offset ${d.offset}` };
      d.padded++;
      d.group[d.have++] = 0;
    } else {
      const v = DEC[c]!;
      if (v < 0) return { ok: false, error: `illegal base64 character at offset ${d.offset}` };
      if (d.padded > 0) return { ok: false, error: `base64 data after padding at offset ${d.offset}` };
      d.group[d.have++] = v;
    }
    if (d.have === 4) {
      const g = d.group;
      const n = (g[0]! << 18) | (g[1]! << 12) | (g[2]! << 6) | g[3]!;
      out[o++] = (n >>> 16) & 0xff;
      if (d.padded < 2) out[o++] = (n >>> 8) & 0xff;
      if (d.padded < 1) out[o++] = n & 0xff;
      d.have = 0;
      d.padded = 0;
    }
  }
  return { ok: true, bytes: out.subarray(0, o) };
}

/** At the end of the body: an incomplete group left over is an error (a cut-off body). */
export function finishBase64(d: Base64Decoder): DecodeResult {
  if (d.have === 0) return { ok: true, bytes: new Uint8Array(0) };
  return { ok: false, error: `base64 body ends inside a 4-character group (${d.have} left over)` };
}
