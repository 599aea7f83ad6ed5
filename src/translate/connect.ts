// The Connect protocol on the wire, and its mapping to gRPC: content types, the code table (names
// and HTTP statuses, both ways), connect-timeout-ms, the unary GET query, the error JSON (with
// google.rpc.Status details both ways), the streaming end-of-stream message, and which header
// names are renamed on the way through.
//
// Source: connectrpc.com/docs/protocol. A unary call is a POST whose body is the bare message
// (content-type application/proto or application/json), or a GET with the message in the query;
// its response is the bare message with the status in the HTTP status, metadata as headers and
// trailers as `trailer-` headers; an error is JSON {"code","message","details"}. A streaming call
// (application/connect+<codec>) uses 5-byte envelopes like gRPC's, and ends with one envelope
// whose flag has 0x02 set, carrying JSON {"error":..., "metadata":...}.
//
// Pure: Uint8Array views only (no node: types), no clock, no I/O.
import { frameMessage } from "./framing.js";
import { Code } from "./codes.js";
import { codeFromHttpStatus, httpStatusOfCode } from "./http-status.js";
import { encodeTimeout } from "./timeout.js";

export type ConnectKind = "unary" | "stream";

export interface ConnectContentType {
  /** unary (application/<codec>) or streaming (application/connect+<codec>) */
  readonly kind: ConnectKind;
  /** "proto", "json", ... */
  readonly codec: string;
}

/** The codecs a unary Connect request may name (application/<codec>); other application/* types are not Connect. */
const UNARY_CODECS: ReadonlySet<string> = new Set(["proto", "json"]);
const STREAM_PREFIX = "application/connect+";
const TOKEN = /^[a-z0-9._-]+$/;

/** Which of the three a request is, by its method and content type (the GET form is told by its query). */
export function parseConnectContentType(ct: string | undefined): ConnectContentType | null {
  if (ct === undefined) return null;
  const semi = ct.indexOf(";");
  const v = (semi < 0 ? ct : ct.slice(0, semi)).trim().toLowerCase();
  if (v.startsWith(STREAM_PREFIX)) {
    const codec = v.slice(STREAM_PREFIX.length);
    return TOKEN.test(codec) ? { kind: "stream", codec } : null;
  }
  if (!v.startsWith("application/")) return null;
  const codec = v.slice("application/".length);
  return UNARY_CODECS.has(codec) ? { kind: "unary", codec } : null;
}

/** The gRPC content type upstream for a Connect codec (proto: plain application/grpc; others application/grpc+<codec>). */
export function grpcContentType(codec: string): string {
  return codec === "proto" ? "application/grpc" : `application/grpc+${codec}`;
}

/** The response content type a Connect client expects. */
export function connectResponseContentType(c: ConnectContentType): string {
  return c.kind === "unary" ? `application/${c.codec}` : `${STREAM_PREFIX}${c.codec}`;
}

// === codes ===

/** Index = gRPC code; Connect's lower-snake names (code 0 has no Connect name: success is not an error). */
const CONNECT_NAMES: readonly string[] = Object.freeze([
  "ok", "canceled", "unknown", "invalid_argument", "deadline_exceeded", "not_found", "already_exists",
  "permission_denied", "resource_exhausted", "failed_precondition", "aborted", "out_of_range",
  "unimplemented", "internal", "unavailable", "data_loss", "unauthenticated",
]);
const CODE_FOR_NAME: ReadonlyMap<string, number> = new Map(CONNECT_NAMES.map((n, i) => [n, i]));

/** Connect's name for a gRPC code; a code outside 1..16 is "unknown" (Connect has no other). */
export function connectCodeName(code: number): string {
  return Number.isInteger(code) && code >= 1 && code <= 16 ? CONNECT_NAMES[code]! : "unknown";
}

/** The gRPC code for a Connect code name, or undefined (not a Connect code; "ok" is not one either). */
export function codeFromConnectName(name: string): number | undefined {
  const c = CODE_FOR_NAME.get(name);
  return c === undefined || c === 0 ? undefined : c;
}

/**
 * The HTTP status of a unary error response with this code: google/rpc/code.proto's mapping, as
 * JSON transcoding's (500 for a code outside 1..16, as for unknown: 0 is no error).
 */
export function connectHttpStatus(code: number): number {
  return code === 0 ? 500 : httpStatusOfCode(code);
}

/**
 * The HTTP status of a unary error: a path that names no method is 404, as a Connect server
 * (connect-go: its ServeMux, or the generated handler's switch) answers an unknown procedure, and
 * the code stays unimplemented. A path names no method when no route matched it or it is not a
 * method path (`no_route`), or when the upstream said so with HTTP 404 (`upstream_http` with 12:
 * grpc-go's HTTPStatusConvTab maps only 404 to 12), which is what a connect-go upstream behind a
 * `prefix` route answers (issue 0.5.1 item 7). Else the code's status (an upstream's own
 * grpc-status 12 is 501: gRPC says "unknown method" and "not implemented" with the same code).
 */
export function connectLocalHttpStatus(code: number, decidedBy: string | undefined): number {
  if (decidedBy === "no_route" || (decidedBy === "upstream_http" && code === Code.UNIMPLEMENTED)) return 404;
  return connectHttpStatus(code);
}

/**
 * The code a Connect client infers from a unary error response whose body is not Connect's error
 * JSON (an intermediary answered): the protocol's table, which is gRPC's HTTPStatusConvTab.
 */
export { codeFromHttpStatus };

// === timeouts ===

export type ConnectTimeout = { readonly ok: true; readonly ms: number } | { readonly ok: false; readonly error: string };

/** connect-timeout-ms: a positive integer of at most 10 ASCII digits. */
export function parseConnectTimeout(v: string): ConnectTimeout {
  if (!/^[0-9]{1,10}$/.test(v)) return { ok: false, error: `invalid connect-timeout-ms "${v.slice(0, 32)}": want 1 to 10 digits` };
  return { ok: true, ms: Number(v) };
}

/** The grpc-timeout header for a Connect timeout (rounded up, never less time than asked). */
export function grpcTimeoutForConnect(ms: number): string {
  return encodeTimeout(BigInt(ms) * 1_000_000n);
}

/** The connect-timeout-ms value for a budget in nanoseconds (rounded up to whole ms; capped at 10 digits). */
export function connectTimeoutForNs(ns: bigint): string {
  if (ns <= 0n) return "0";
  const ms = (ns + 999_999n) / 1_000_000n;
  return ms > 9_999_999_999n ? "9999999999" : ms.toString();
}

// === the unary GET form ===

export type GetRequest =
  | { readonly ok: true; readonly codec: string; readonly message: Uint8Array; readonly compression: string | null }
  | { readonly ok: false; readonly error: string };

/** Whether a GET's query asks for Connect (it names `encoding`, as every Connect GET must). */
export function isConnectGet(query: string): boolean {
  return /(?:^|&)encoding=/.test(query);
}

/**
 * The query of a Connect GET (`?connect=v1&encoding=json&base64=1&compression=gzip&message=...`):
 * percent-decoded as bytes ("+" is a space, as forms have it), the message base64url when
 * base64=1 (padded or not). `encoding` is required; a `connect` other than v1 is refused.
 */
export function parseGetQuery(query: string): GetRequest {
  let message: Uint8Array = new Uint8Array(0);
  let codec: string | null = null;
  let b64 = false;
  let compression: string | null = null;
  for (const part of query.split("&")) {
    if (part === "") continue;
    const eq = part.indexOf("=");
    const key = latin(percentDecode(eq < 0 ? part : part.slice(0, eq)));
    const raw = eq < 0 ? "" : part.slice(eq + 1);
    switch (key) {
      case "message": message = percentDecode(raw); break;
      case "encoding": codec = latin(percentDecode(raw)).toLowerCase(); break;
      case "base64": b64 = latin(percentDecode(raw)) === "1"; break;
      case "compression": {
        const c = latin(percentDecode(raw)).toLowerCase();
        compression = c === "" || c === "identity" ? null : c;
        break;
      }
      case "connect": {
        const v = latin(percentDecode(raw));
        if (v !== "v1") return { ok: false, error: `connect must be "v1": got "${v.slice(0, 32)}"` };
        break;
      }
      default: break;
    }
  }
  if (codec === null) return { ok: false, error: "missing encoding parameter" };
  if (!TOKEN.test(codec)) return { ok: false, error: `invalid encoding "${codec.slice(0, 32)}"` };
  if (b64) {
    const d = decodeBase64Loose(latin(message));
    if (d === null) return { ok: false, error: "message is not base64url" };
    message = d;
  }
  return { ok: true, codec, message, compression };
}

function latin(b: Uint8Array): string {
  let s = "";
  for (let i = 0; i < b.length; i++) s += String.fromCharCode(b[i]!);
  return s;
}

function hex(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  return -1;
}

/** Percent-decoding to bytes; "+" is a space; a "%" not followed by two hex digits stays as it is. */
export function percentDecode(s: string): Uint8Array {
  const out = new Uint8Array(s.length * 3);
  let o = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x25 && i + 2 < s.length) {
      const h = hex(s.charCodeAt(i + 1));
      const l = h < 0 ? -1 : hex(s.charCodeAt(i + 2));
      if (l >= 0) {
        out[o++] = (h << 4) | l;
        i += 2;
        continue;
      }
    }
    if (c === 0x2b) out[o++] = 0x20;
    else if (c < 0x80) out[o++] = c;
    else o += utf8.encodeInto(s[i]!, out.subarray(o)).written;
  }
  return out.slice(0, o);
}

// === base64 (standard and url alphabets, padding optional) ===

const STD = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const DEC = new Int16Array(256).fill(-1);
for (let i = 0; i < 64; i++) DEC[STD.charCodeAt(i)] = i;
DEC[0x2d] = 62; // "-"
DEC[0x5f] = 63; // "_"

/** Base64 in either alphabet, padding optional; null when it is not base64. */
export function decodeBase64Loose(s: string): Uint8Array | null {
  let end = s.length;
  while (end > 0 && s.charCodeAt(end - 1) === 0x3d) end--;
  if (s.length - end > 2 || end % 4 === 1) return null;
  const out = new Uint8Array(Math.floor((end * 3) / 4));
  let o = 0;
  let acc = 0;
  let bits = 0;
  for (let i = 0; i < end; i++) {
    const v = DEC[s.charCodeAt(i) & 0xff]!;
    if (v < 0 || s.charCodeAt(i) > 0xff) return null;
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (acc >>> bits) & 0xff;
    }
  }
  return out.subarray(0, o);
}

/** Standard base64 without padding (what Connect's error details carry). */
export function encodeBase64Raw(b: Uint8Array): string {
  let s = "";
  let i = 0;
  for (; i + 2 < b.length; i += 3) {
    const n = (b[i]! << 16) | (b[i + 1]! << 8) | b[i + 2]!;
    s += STD[(n >>> 18) & 63]! + STD[(n >>> 12) & 63]! + STD[(n >>> 6) & 63]! + STD[n & 63]!;
  }
  if (b.length - i === 1) {
    const n = b[i]! << 16;
    s += STD[(n >>> 18) & 63]! + STD[(n >>> 12) & 63]!;
  } else if (b.length - i === 2) {
    const n = (b[i]! << 16) | (b[i + 1]! << 8);
    s += STD[(n >>> 18) & 63]! + STD[(n >>> 12) & 63]! + STD[(n >>> 6) & 63]!;
  }
  return s;
}

// === google.rpc.Status (grpc-status-details-bin) <-> Connect's details ===

export interface ConnectErrorDetail {
  /** the message's full name (the Any's type URL without its prefix) */
  readonly type: string;
  /** the message, standard base64 without padding */
  readonly value: string;
}

export interface ConnectError {
  readonly code: string;
  readonly message?: string;
  readonly details?: readonly ConnectErrorDetail[];
}

export interface GrpcStatus {
  readonly code: number;
  readonly message: string;
  readonly details: readonly { readonly typeUrl: string; readonly value: Uint8Array }[];
}

const utf8 = new TextEncoder();
const utf8d = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
const ANY_PREFIX = "type.googleapis.com/";

/** Decodes a google.rpc.Status (code 1, message 2, details 3: Any{type_url 1, value 2}); null if malformed. */
export function decodeStatusProto(b: Uint8Array): GrpcStatus | null {
  const r = { pos: 0 };
  let code = 0;
  let message = "";
  const details: { typeUrl: string; value: Uint8Array }[] = [];
  while (r.pos < b.length) {
    const tag = varint(b, r);
    if (tag === null) return null;
    const field = Math.floor(tag / 8);
    const wire = tag & 7;
    if (wire === 0) {
      const v = varint(b, r);
      if (v === null) return null;
      if (field === 1) code = v | 0;
    } else if (wire === 2) {
      const bytes = lengthDelimited(b, r);
      if (bytes === null) return null;
      if (field === 2) message = utf8d.decode(bytes);
      else if (field === 3) {
        const any = decodeAny(bytes);
        if (any === null) return null;
        details.push(any);
      }
    } else if (!skip(b, r, wire)) return null;
  }
  return { code, message, details };
}

function decodeAny(b: Uint8Array): { typeUrl: string; value: Uint8Array } | null {
  const r = { pos: 0 };
  let typeUrl = "";
  let value: Uint8Array = new Uint8Array(0);
  while (r.pos < b.length) {
    const tag = varint(b, r);
    if (tag === null) return null;
    const wire = tag & 7;
    if (wire === 2) {
      const bytes = lengthDelimited(b, r);
      if (bytes === null) return null;
      if (tag >>> 3 === 1) typeUrl = utf8d.decode(bytes);
      else if (tag >>> 3 === 2) value = bytes;
    } else if (!skip(b, r, wire)) return null;
  }
  return { typeUrl, value };
}

function varint(b: Uint8Array, r: { pos: number }): number | null {
  let v = 0;
  let mul = 1;
  for (let i = 0; i < 10; i++) {
    if (r.pos >= b.length) return null;
    const x = b[r.pos++]!;
    v += (x & 0x7f) * mul;
    mul *= 128;
    if ((x & 0x80) === 0) return v;
  }
  return null;
}

function lengthDelimited(b: Uint8Array, r: { pos: number }): Uint8Array | null {
  const n = varint(b, r);
  if (n === null || r.pos + n > b.length) return null;
  const out = b.subarray(r.pos, r.pos + n);
  r.pos += n;
  return out;
}

function skip(b: Uint8Array, r: { pos: number }, wire: number): boolean {
  if (wire === 0) return varint(b, r) !== null;
  if (wire === 1) r.pos += 8;
  else if (wire === 5) r.pos += 4;
  else return false;
  return r.pos <= b.length;
}

function putVarint(out: number[], v: number): void {
  while (v >= 0x80) {
    out.push((v % 128) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
}

function putBytes(out: number[], field: number, bytes: Uint8Array): void {
  putVarint(out, field * 8 + 2);
  putVarint(out, bytes.length);
  for (let i = 0; i < bytes.length; i++) out.push(bytes[i]!);
}

/** Encodes a google.rpc.Status (the inverse of decodeStatusProto; a negative code as int32 does). */
export function encodeStatusProto(s: GrpcStatus): Uint8Array {
  const out: number[] = [];
  if (s.code !== 0) {
    out.push(0x08);
    putVarint(out, s.code < 0 ? s.code + 2 ** 64 : s.code);
  }
  if (s.message !== "") putBytes(out, 2, utf8.encode(s.message));
  for (const d of s.details) {
    const any: number[] = [];
    if (d.typeUrl !== "") putBytes(any, 1, utf8.encode(d.typeUrl));
    if (d.value.length > 0) putBytes(any, 2, d.value);
    putBytes(out, 3, Uint8Array.from(any));
  }
  return Uint8Array.from(out);
}

/**
 * Connect's error for a gRPC status: the code's name, the (already percent-decoded) message when
 * not empty, and the details of grpc-status-details-bin (base64 of a google.rpc.Status; its own
 * code and message are not used: grpc-status and grpc-message are the status). Unreadable details
 * are left out.
 */
export function connectErrorFor(code: number, message: string, detailsBin?: string): ConnectError {
  const details: ConnectErrorDetail[] = [];
  if (detailsBin !== undefined && detailsBin !== "") {
    const raw = decodeBase64Loose(detailsBin);
    const st = raw === null ? null : decodeStatusProto(raw);
    if (st !== null) {
      for (const d of st.details) {
        const slash = d.typeUrl.lastIndexOf("/");
        details.push({ type: slash < 0 ? d.typeUrl : d.typeUrl.slice(slash + 1), value: encodeBase64Raw(d.value) });
      }
    }
  }
  const e: { code: string; message?: string; details?: ConnectErrorDetail[] } = { code: connectCodeName(code) };
  if (message !== "") e.message = message;
  if (details.length > 0) e.details = details;
  return e;
}

/**
 * The gRPC status for Connect's error JSON (the way back): the code from its name (else from the
 * HTTP status, as a Connect client infers it), the message, and details as a google.rpc.Status
 * for grpc-status-details-bin (standard base64, unpadded; undefined when there are none).
 */
export function grpcStatusFor(err: unknown, httpStatus: number): { code: number; message: string; detailsBin: string | undefined } {
  const o = typeof err === "object" && err !== null ? (err as Record<string, unknown>) : {};
  const byName = typeof o["code"] === "string" ? codeFromConnectName(o["code"]) : undefined;
  const code = byName ?? codeFromHttpStatus(httpStatus);
  const message = typeof o["message"] === "string" ? o["message"] : "";
  const details: { typeUrl: string; value: Uint8Array }[] = [];
  if (Array.isArray(o["details"])) {
    for (const d of o["details"] as unknown[]) {
      if (typeof d !== "object" || d === null) continue;
      const t = (d as Record<string, unknown>)["type"];
      const v = (d as Record<string, unknown>)["value"];
      if (typeof t !== "string" || typeof v !== "string") continue;
      const value = decodeBase64Loose(v);
      if (value !== null) details.push({ typeUrl: ANY_PREFIX + t, value });
    }
  }
  const detailsBin = details.length === 0 ? undefined : encodeBase64Raw(encodeStatusProto({ code, message, details }));
  return { code, message, detailsBin };
}

// === the streaming end-of-stream message ===

/** The flag byte of a streaming response's last envelope. */
export const END_STREAM_FLAG = 0x02;

/** Metadata as Connect's end-stream JSON has it: name → values (names lower-cased, in first-seen order). */
function metadataObject(fields: readonly (readonly [string, string])[]): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [n, v] of fields) {
    const k = n.toLowerCase();
    (out[k] ??= []).push(v);
  }
  return out;
}

/** The end-of-stream envelope: {"error":...} when the status is not OK, {"metadata":...} when there are trailers. */
export function encodeEndStream(error: ConnectError | null, trailers: readonly (readonly [string, string])[]): Uint8Array {
  const body: { error?: ConnectError; metadata?: Record<string, string[]> } = {};
  if (error !== null) body.error = error;
  if (trailers.length > 0) body.metadata = metadataObject(trailers);
  return frameMessage(utf8.encode(JSON.stringify(body)), END_STREAM_FLAG);
}

/** An end-stream payload (without its prefix) read back: null when it is not a JSON object. */
export function parseEndStream(payload: Uint8Array): { error: ConnectError | null; metadata: Record<string, string[]> } | null {
  let v: unknown;
  try {
    v = JSON.parse(utf8d.decode(payload));
  } catch {
    return null;
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) return null;
  const o = v as { error?: ConnectError; metadata?: Record<string, string[]> };
  return { error: o.error ?? null, metadata: o.metadata ?? {} };
}

// === headers ===

/**
 * Request fields renamed on the way upstream, by kind. The unary form uses HTTP's own
 * content-encoding (the whole body is the one message); streaming has connect-prefixed names
 * (content-encoding would be the HTTP body's). connect-timeout-ms is converted, not renamed.
 */
export const REQUEST_RENAMES: Readonly<Record<ConnectKind, Readonly<Record<string, string>>>> = {
  unary: { "content-encoding": "grpc-encoding", "accept-encoding": "grpc-accept-encoding" },
  stream: { "connect-content-encoding": "grpc-encoding", "connect-accept-encoding": "grpc-accept-encoding" },
};

/** Request fields that are Connect's own and never go upstream (beside HTTP/1.1's connection fields). */
export const CONNECT_REQUEST_ONLY: ReadonlySet<string> = new Set([
  "connect-protocol-version", "connect-timeout-ms", "content-type", "content-length",
  // the other kind's encoding names mean nothing to gRPC
  "connect-content-encoding", "connect-accept-encoding", "content-encoding", "accept-encoding",
]);

/** Response fields of a gRPC head or trailer block that are gRPC's own: never Connect metadata. */
export const GRPC_RESPONSE_ONLY: ReadonlySet<string> = new Set([
  "content-type", "content-length", "grpc-status", "grpc-message", "grpc-status-details-bin",
  "grpc-encoding", "grpc-accept-encoding", "transfer-encoding", "connection", "keep-alive", "te", "trailer",
]);

/** The response field names for a gRPC head's encodings, by kind. */
export const RESPONSE_ENCODING: Readonly<Record<ConnectKind, { readonly encoding: string; readonly accept: string }>> = {
  unary: { encoding: "content-encoding", accept: "accept-encoding" },
  stream: { encoding: "connect-content-encoding", accept: "connect-accept-encoding" },
};
