// envoy.service.auth.v3.Authorization/Check on the wire: the CheckRequest a call's attributes make, written in one buffer, and the CheckResponse read back.
//
// Messages (envoy/service/auth/v3/external_auth.proto and attribute_context.proto,
// envoy/config/core/v3/address.proto and base.proto, google/rpc/status.proto):
//   CheckRequest     { AttributeContext attributes = 1; }
//   AttributeContext { Peer source = 1; Request request = 4; … }
//   Peer             { Address address = 1; string principal = 4; string certificate = 5; … }
//   Address          { oneof { SocketAddress socket_address = 1; … } }
//   SocketAddress    { string address = 2; oneof { uint32 port_value = 3; … } }
//   Request          { Timestamp time = 1; HttpRequest http = 2; }
//   HttpRequest      { string id = 1; string method = 2; map<string, string> headers = 3;
//                      string path = 4; string host = 5; string scheme = 6; string protocol = 10; … }
//   CheckResponse    { google.rpc.Status status = 1;
//                      oneof { DeniedHttpResponse denied_response = 2; OkHttpResponse ok_response = 3; } … }
//   Status           { int32 code = 1; string message = 2; … }
//   DeniedHttpResponse { HttpStatus status = 1; repeated HeaderValueOption headers = 2; string body = 3; }
//   OkHttpResponse   { repeated HeaderValueOption headers = 2; repeated string headers_to_remove = 5; … }
//   HeaderValueOption { HeaderValue header = 1; google.protobuf.BoolValue append = 2;
//                       HeaderAppendAction append_action = 3; … }
//   HeaderValue      { string key = 1; string value = 2; bytes raw_value = 3; }
//   HttpStatus       { StatusCode code = 1; }   (the enum's numbers are the HTTP statuses)
//
// What the request carries is Envoy's ext_authz filter's choice of attributes: the source's address
// and port, principal and (URL-encoded) certificate; the request's time, id, method (POST: gRPC),
// headers (a repeated field joined with ","), path, host, the client's scheme and HTTP/2. Empty
// strings are left out, as every proto3 encoder leaves them; port_value is in a oneof and always
// written. The constant fields are encoded once, the rest is sized first and written into one
// buffer with the gRPC message prefix in front. The bytes are protobufjs's for the same message
// (test/translate/ext-authz-wire.test.ts).
//
// The response is read into the shape @grpc/proto-loader hands over (field names as in the
// .proto, enums by name, except HttpStatus.code, a number: the HTTP status), and only the fields
// the verdict reads (src/proxy/filters/auth/check.ts mapCheckResponse).
import { writePrefix } from "./framing.js";
import { int32Size, lenFieldSize, stringField, utf8Size, varintSize, WireError, WireReader, WIRE_LEN, WIRE_VARINT, writeInt32, writeUtf8, writeVarint } from "./proto-wire.js";

/** The gRPC method. */
export const CHECK_PATH = "/envoy.service.auth.v3.Authorization/Check";

/** What a call brings to the check. */
export interface CheckFacts {
  /**
   * The call's request head as the stages before the check left it (what the upstream would get
   * now): its pseudo-headers and fields, a repeated field as a list
   */
  readonly head: Readonly<Record<string, string | readonly string[] | number>>;
  /** the client's scheme: "https" on a TLS listener, else "http" (the head's :scheme is the upstream's) */
  readonly scheme: string;
  readonly requestId: string;
  readonly clientAddress: string;
  readonly clientPort: number | undefined;
  /** the verified client certificate's identity (first URI SAN, else its subject), "" without one */
  readonly principal: string;
  /** the verified client certificate, PEM (sent URL-encoded, as Envoy does), "" when not sent */
  readonly certificatePem: string;
  /** wall-clock milliseconds (the request's time) */
  readonly nowMs: number;
}

const METHOD = stringField(2, "POST");
const PROTOCOL = stringField(10, "HTTP/2");

/** A zeroed buffer of `n` bytes: encodeCheckRequest's allocator when the caller gives none. */
function zeroed(n: number): Uint8Array {
  return new Uint8Array(n);
}

/**
 * One call's Check request, framed (the 5-byte gRPC prefix, then the CheckRequest). Two passes
 * over the head: sizes, then bytes. `alloc` gives the buffer: every byte of it is written (checked
 * at the end), so it may be one not zeroed from a pool (ext-authz.ts passes node's pooled
 * allocUnsafe: a ~600-byte Uint8Array of its own, with its backing store outside the heap,
 * cost ~0.5 µs per call, a slice of node's pool ~0.1 µs, and node's stream takes it as it is).
 */
export function encodeCheckRequest(f: CheckFacts, alloc: (n: number) => Uint8Array = zeroed): Uint8Array {
  const head = f.head;
  // the headers map's entries: names and values as strings, with their UTF-8 sizes
  const strs: string[] = [];
  const sizes: number[] = [];
  let headers = 0;
  let path = "";
  let host = "";
  for (const name in head) {
    const v = head[name]!;
    const value = name === ":scheme" ? f.scheme : typeof v === "object" ? v.join(",") : typeof v === "string" ? v : String(v);
    if (name === ":path") path = value;
    else if (name === ":authority") host = value;
    const kn = utf8Size(name);
    const vn = utf8Size(value);
    strs.push(name, value);
    sizes.push(kn, vn);
    headers += lenFieldSize(lenFieldSize(kn) + lenFieldSize(vn));
  }
  const idN = utf8Size(f.requestId);
  const pathN = utf8Size(path);
  const hostN = utf8Size(host);
  const schemeN = utf8Size(f.scheme);
  const http =
    (idN > 0 ? lenFieldSize(idN) : 0) + METHOD.length + headers + (pathN > 0 ? lenFieldSize(pathN) : 0) + (hostN > 0 ? lenFieldSize(hostN) : 0) + (schemeN > 0 ? lenFieldSize(schemeN) : 0) + PROTOCOL.length;
  const seconds = Math.floor(f.nowMs / 1000);
  const nanos = Math.round((f.nowMs - seconds * 1000) * 1e6);
  const time = (seconds !== 0 ? 1 + varintSize(seconds) : 0) + (nanos !== 0 ? 1 + int32Size(nanos) : 0);
  const request = lenFieldSize(time) + lenFieldSize(http);
  const addrN = utf8Size(f.clientAddress);
  const port = f.clientPort ?? 0;
  const socket = (addrN > 0 ? lenFieldSize(addrN) : 0) + 1 + varintSize(port);
  const address = lenFieldSize(socket);
  const cert = f.certificatePem === "" ? "" : encodeURIComponent(f.certificatePem);
  const principalN = utf8Size(f.principal);
  const certN = cert.length; // (URL-encoded: ASCII)
  const source = lenFieldSize(address) + (principalN > 0 ? lenFieldSize(principalN) : 0) + (certN > 0 ? lenFieldSize(certN) : 0);
  const attributes = lenFieldSize(source) + lenFieldSize(request);
  const body = lenFieldSize(attributes);

  const out = alloc(5 + body);
  writePrefix(out, 0, 0, body);
  let at = 5;
  out[at++] = 0x0a; // CheckRequest.attributes (1)
  at = writeVarint(out, at, attributes);
  out[at++] = 0x0a; // AttributeContext.source (1)
  at = writeVarint(out, at, source);
  out[at++] = 0x0a; // Peer.address (1)
  at = writeVarint(out, at, address);
  out[at++] = 0x0a; // Address.socket_address (1)
  at = writeVarint(out, at, socket);
  if (addrN > 0) at = str(out, at, 0x12, f.clientAddress, addrN); // SocketAddress.address (2)
  out[at++] = 0x18; // SocketAddress.port_value (3)
  at = writeVarint(out, at, port);
  if (principalN > 0) at = str(out, at, 0x22, f.principal, principalN); // Peer.principal (4)
  if (certN > 0) at = str(out, at, 0x2a, cert, certN); // Peer.certificate (5)
  out[at++] = 0x22; // AttributeContext.request (4)
  at = writeVarint(out, at, request);
  out[at++] = 0x0a; // Request.time (1)
  at = writeVarint(out, at, time);
  if (seconds !== 0) {
    out[at++] = 0x08; // Timestamp.seconds (1)
    at = writeVarint(out, at, seconds);
  }
  if (nanos !== 0) {
    out[at++] = 0x10; // Timestamp.nanos (2)
    at = writeInt32(out, at, nanos);
  }
  out[at++] = 0x12; // Request.http (2)
  at = writeVarint(out, at, http);
  if (idN > 0) at = str(out, at, 0x0a, f.requestId, idN); // HttpRequest.id (1)
  out.set(METHOD, at); // HttpRequest.method (2)
  at += METHOD.length;
  for (let i = 0; i < strs.length; i += 2) {
    const kn = sizes[i]!;
    const vn = sizes[i + 1]!;
    out[at++] = 0x1a; // HttpRequest.headers (3): a map entry { key = 1; value = 2; }
    at = writeVarint(out, at, lenFieldSize(kn) + lenFieldSize(vn));
    at = str(out, at, 0x0a, strs[i]!, kn);
    at = str(out, at, 0x12, strs[i + 1]!, vn);
  }
  if (pathN > 0) at = str(out, at, 0x22, path, pathN); // HttpRequest.path (4)
  if (hostN > 0) at = str(out, at, 0x2a, host, hostN); // HttpRequest.host (5)
  if (schemeN > 0) at = str(out, at, 0x32, f.scheme, schemeN); // HttpRequest.scheme (6)
  out.set(PROTOCOL, at); // HttpRequest.protocol (10)
  // the sizes and the bytes disagree (a bug): never send what a pooled buffer held before
  if (at + PROTOCOL.length !== out.length) throw new Error(`CheckRequest: ${at + PROTOCOL.length} bytes written of ${out.length}`);
  return out;
}

/** A string field with a one-byte tag; `n` its UTF-8 size. */
function str(out: Uint8Array, at: number, tagByte: number, s: string, n: number): number {
  out[at++] = tagByte;
  return writeUtf8(out, writeVarint(out, at, n), s);
}

// === the response ===

/** HeaderValueOption as proto-loader hands it over. */
export interface HeaderValueOptionFields {
  header?: { key?: string; value?: string; raw_value?: Uint8Array };
  append?: { value?: boolean };
  append_action?: string;
}

/** The CheckResponse fields the verdict reads. */
export interface CheckResponseFields {
  status?: { code?: number; message?: string };
  ok_response?: { headers?: HeaderValueOptionFields[]; headers_to_remove?: string[] };
  denied_response?: { status?: { code?: number }; headers?: HeaderValueOptionFields[]; body?: string };
}

const APPEND_ACTIONS: readonly string[] = ["APPEND_IF_EXISTS_OR_ADD", "ADD_IF_ABSENT", "OVERWRITE_IF_EXISTS_OR_ADD", "OVERWRITE_IF_EXISTS"];

/**
 * A CheckResponse; null when the bytes are not one. The oneof's last member on the wire wins (the
 * other is dropped), as protobuf requires. Unknown fields are skipped.
 */
export function decodeCheckResponse(b: Uint8Array): CheckResponseFields | null {
  try {
    const r = new WireReader(b);
    const out: CheckResponseFields = {};
    for (let f = r.next(); f !== 0; f = r.next()) {
      if (r.wt !== WIRE_LEN) r.skip();
      else if (f === 1) out.status = rpcStatus(r.message());
      else if (f === 2) {
        delete out.ok_response;
        out.denied_response = denied(r.message());
      } else if (f === 3) {
        delete out.denied_response;
        out.ok_response = ok(r.message());
      } else r.skip();
    }
    return out;
  } catch (err) {
    if (err instanceof WireError) return null;
    throw err;
  }
}

function rpcStatus(r: WireReader): NonNullable<CheckResponseFields["status"]> {
  const s: NonNullable<CheckResponseFields["status"]> = {};
  for (let f = r.next(); f !== 0; f = r.next()) {
    if (f === 1 && r.wt === WIRE_VARINT) s.code = r.int32();
    else if (f === 2 && r.wt === WIRE_LEN) s.message = r.string();
    else r.skip();
  }
  return s;
}

function ok(r: WireReader): NonNullable<CheckResponseFields["ok_response"]> {
  const o: NonNullable<CheckResponseFields["ok_response"]> = {};
  for (let f = r.next(); f !== 0; f = r.next()) {
    if (f === 2 && r.wt === WIRE_LEN) (o.headers ??= []).push(headerOption(r.message()));
    else if (f === 5 && r.wt === WIRE_LEN) (o.headers_to_remove ??= []).push(r.string());
    else r.skip();
  }
  return o;
}

function denied(r: WireReader): NonNullable<CheckResponseFields["denied_response"]> {
  const d: NonNullable<CheckResponseFields["denied_response"]> = {};
  for (let f = r.next(); f !== 0; f = r.next()) {
    if (f === 1 && r.wt === WIRE_LEN) d.status = httpStatus(r.message());
    else if (f === 2 && r.wt === WIRE_LEN) (d.headers ??= []).push(headerOption(r.message()));
    else if (f === 3 && r.wt === WIRE_LEN) d.body = r.string();
    else r.skip();
  }
  return d;
}

function httpStatus(r: WireReader): { code?: number } {
  const s: { code?: number } = {};
  for (let f = r.next(); f !== 0; f = r.next()) {
    if (f === 1 && r.wt === WIRE_VARINT) s.code = r.int32();
    else r.skip();
  }
  return s;
}

function headerOption(r: WireReader): HeaderValueOptionFields {
  const o: HeaderValueOptionFields = {};
  for (let f = r.next(); f !== 0; f = r.next()) {
    if (f === 1 && r.wt === WIRE_LEN) o.header = headerValue(r.message());
    else if (f === 2 && r.wt === WIRE_LEN) o.append = boolValue(r.message());
    else if (f === 3 && r.wt === WIRE_VARINT) {
      const a = r.int32();
      o.append_action = APPEND_ACTIONS[a] ?? String(a);
    } else r.skip();
  }
  return o;
}

function headerValue(r: WireReader): NonNullable<HeaderValueOptionFields["header"]> {
  const h: NonNullable<HeaderValueOptionFields["header"]> = {};
  for (let f = r.next(); f !== 0; f = r.next()) {
    if (f === 1 && r.wt === WIRE_LEN) h.key = r.string();
    else if (f === 2 && r.wt === WIRE_LEN) h.value = r.string();
    else if (f === 3 && r.wt === WIRE_LEN) h.raw_value = r.bytes();
    else r.skip();
  }
  return h;
}

function boolValue(r: WireReader): { value?: boolean } {
  const v: { value?: boolean } = {};
  for (let f = r.next(); f !== 0; f = r.next()) {
    if (f === 1 && r.wt === WIRE_VARINT) v.value = r.bool();
    else r.skip();
  }
  return v;
}
