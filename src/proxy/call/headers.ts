// Header blocks for the two legs of a call, built from node's rawHeaders (never from the
// folded headers object, which joins duplicates with ", " and drops repeated single-value
// fields: spec §1.5, §10.2 P10). No payload is touched here.
import type { X509Certificate } from "node:crypto";
import { isNotForwarded, requestFieldProblem } from "../../translate/index.js";

export type OutgoingHeaders = Record<string, string | string[] | number>;

/**
 * A downstream session's verified client certificate as an x-forwarded-client-cert value, set
 * once per connection by a TLS listener with client certificates (src/proxy/downstream/tls.ts);
 * absent everywhere else. The call adds it to the upstream request (a client's own was dropped).
 */
export const kClientCert = Symbol("dojang.clientCert");
export type ClientCertSession = { [kClientCert]?: string };
/**
 * Who the client is, per connection (issue 18 item 5): what the access record names as
 * client_address / client_port / tls_identity / tls_sni / tls_version. Read once when the
 * connection arrives (src/proxy/downstream/peer.ts) and kept on the session (an HTTP/2 session,
 * or an HTTP/1.1 socket's stand-in for gRPC-Web); a call keeps a reference, and nothing is
 * formatted per call. The fields are absent when they do not apply (no TLS, no SNI sent, no
 * client certificate the CA verified).
 */
export interface ClientPeer {
  /** the downstream socket's remote address, as node reports it (an IPv4 client of a dual-stack listener shows as ::ffff:a.b.c.d) */
  readonly address: string | undefined;
  readonly port: number | undefined;
  /** the verified client certificate's first URI SAN (a SPIFFE id, say), else its subject (RFC 2253) */
  readonly tlsIdentity: string | undefined;
  /** the server name the client asked for (SNI) */
  readonly tlsSni: string | undefined;
  /** the negotiated protocol version, "TLSv1.3" or "TLSv1.2" */
  readonly tlsVersion: string | undefined;
  /** the verified client certificate's URI and DNS SANs, values only (access rules match them); absent without one */
  readonly tlsSans?: readonly string[];
  /** the verified client certificate itself (an external authorization check may send it); absent without one */
  readonly tlsCertificate?: X509Certificate;
}
export const kPeer = Symbol("dojang.clientPeer");
export type PeerSession = { [kPeer]?: ClientPeer };
/**
 * Request body bytes a downstream connection has delivered to its calls (the listener's
 * unproductive-bytes guard compares them with what the socket read); counted per chunk.
 */
export const kRequestBytes = Symbol("dojang.requestBytes");
export type RequestBytesSession = { [kRequestBytes]?: number };

// node:http2 throws ERR_HTTP2_HEADER_SINGLE_VALUE when one of these is given as an array
// (lib/internal/http2/util.js kSingleValueHeaders); keep the first field, as node does on input.
const SINGLE_VALUE = new Set([
  "access-control-allow-credentials", "access-control-max-age", "access-control-request-method",
  "age", "authorization", "content-encoding", "content-language", "content-length", "content-location",
  "content-md5", "content-range", "content-type", "date", "dnt", "etag", "expires", "from", "host",
  "if-match", "if-modified-since", "if-none-match", "if-range", "if-unmodified-since", "last-modified",
  "location", "max-forwards", "proxy-authorization", "range", "referer", "retry-after", "tk",
  "upgrade-insecure-requests", "user-agent", "x-content-type-options",
]);

/**
 * Copies the forwardable fields of rawHeaders into `out`. Pseudo-headers, hop-by-hop fields,
 * `te` other than "trailers", `host`, and `content-length` (a proxy that may cut a stream short
 * must not promise a length) never pass; `skip` names one more field the caller regenerates.
 */
export function copyHeaders(out: OutgoingHeaders, raw: readonly string[], skip: string | undefined): OutgoingHeaders {
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.charCodeAt(0) === 58 /* : */) continue;
    const value = raw[i + 1]!;
    if (name === skip || name === "content-length" || isNotForwarded(name, value)) continue;
    addField(out, name, value);
  }
  return out;
}

/**
 * copyHeaders for a request, checking each forwarded field on the way (the same one pass):
 * returns null, or why the call must be refused instead of forwarded (src/translate/metadata.ts;
 * issue 10 item 9). `out` is then incomplete and must not be sent.
 */
export function copyRequestHeaders(out: OutgoingHeaders, raw: readonly string[], skip: string | undefined): string | null {
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.charCodeAt(0) === 58 /* : */) continue;
    const value = raw[i + 1]!;
    if (name === skip || name === "content-length" || isNotForwarded(name, value)) continue;
    const problem = requestFieldProblem(name, value);
    if (problem !== null) return problem;
    addField(out, name, value);
  }
  return null;
}

/** node keeps only the first of a repeated `name` (its kSingleValueHeaders). */
export function isSingleValueField(name: string): boolean {
  return SINGLE_VALUE.has(name);
}

function addField(out: OutgoingHeaders, name: string, value: string): void {
  const prev = out[name];
  if (prev === undefined) out[name] = value;
  else if (SINGLE_VALUE.has(name)) return;
  else if (typeof prev === "string") out[name] = [prev, value];
  else if (Array.isArray(prev)) prev.push(value);
}

/**
 * `h` as node's flat header list ([name, value, name, value, ...]; an array value stays one
 * entry, node expands it), for request() and respond() on a native stream. Given an object,
 * node copies it into a null-prototype object and lists its keys before encoding it; given a
 * list it encodes it as it is (about 0.9 KB less garbage per call for the request head,
 * bench/alloc.mjs --profile). The list is node's from then on (respond() appends `date` to it).
 * `status`: a response's :status, put first (a bridge's head, which is not in `h`).
 */
export function headerList(h: OutgoingHeaders, status?: number): string[] {
  // sized once (push would grow it twice or three times for a usual head)
  let n = status === undefined ? 0 : 2;
  for (const _ in h) n += 2;
  const out = new Array<unknown>(n);
  let i = 0;
  if (status !== undefined) {
    out[i++] = ":status";
    out[i++] = status;
  }
  for (const k in h) {
    out[i++] = k;
    out[i++] = h[k];
  }
  return out as string[];
}

/** A flat name/value list (headerList's shape) as a header object; a repeated name becomes an array. */
export function headerObject(list: readonly string[]): OutgoingHeaders {
  const out: OutgoingHeaders = {};
  for (let i = 0; i + 1 < list.length; i += 2) {
    const name = list[i]!;
    const v = list[i + 1]!;
    const prev = out[name];
    out[name] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [String(prev), v];
  }
  return out;
}

/** Value of the first field named `name` in rawHeaders (names are lower-case in HTTP/2). */
export function rawGet(raw: readonly string[], name: string): string | undefined {
  for (let i = 0; i + 1 < raw.length; i += 2) if (raw[i] === name) return raw[i + 1];
  return undefined;
}
