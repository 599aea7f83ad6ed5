// Which request/response header fields a proxy must not forward (spec sheet §1.4, RFC 9113 §8.2.2).

/**
 * Connection-specific fields: RFC 9113 §8.2.2 plus `proxy-connection`, `keep-alive` and
 * `http2-settings`. node throws ERR_HTTP2_INVALID_CONNECTION_HEADERS if any is passed to
 * request()/respond() (spec sheet §1.4, probe L), so they must be stripped before forwarding.
 */
export const HOP_BY_HOP_HEADERS: ReadonlySet<string> = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "upgrade",
  "http2-settings",
]);

/** Envoy's header for the client certificate's identity, set by a TLS listener with client certificates. */
export const XFCC = "x-forwarded-client-cert";

/** The only `te` value HTTP/2 allows (RFC 9113 §8.2.2), and the one gRPC requires (SPEC "Requests"). */
export const TE_TRAILERS = "trailers";

/**
 * true if the lower-case field `name` must not be forwarded: pseudo-headers (`:`-prefixed; the
 * proxy writes its own), hop-by-hop fields, `te` unless the value is exactly "trailers",
 * `host` (dropped: `:authority` carries the authority) and x-forwarded-client-cert (dojang's own).
 */
export function isNotForwarded(name: string, value: string): boolean {
  if (name.charCodeAt(0) === 0x3a /* : */) return true;
  if (name === "te") return value !== TE_TRAILERS;
  if (name === "host") return true;
  // Only dojang says who the client is (a TLS listener's verified client certificate): a
  // client's own x-forwarded-client-cert is never forwarded, on any listener.
  if (name === XFCC) return true;
  return HOP_BY_HOP_HEADERS.has(name);
}

/**
 * The field names an HTTP/1.1 Connection header value nominates as hop-by-hop (RFC 9110 §7.6.1:
 * "a proxy or gateway MUST ... remove any header or trailer field(s) from the message with the
 * same name as the connection-option"), lower-cased; tokens only (anything else names no field).
 */
export function connectionOptions(value: string): string[] {
  const out: string[] = [];
  for (const part of value.split(",")) {
    const t = part.trim().toLowerCase();
    if (t !== "" && TOKEN.test(t)) out.push(t);
  }
  return out;
}
/** RFC 9110 §5.6.2 token (a field name) */
const TOKEN = /^[!#$%&'*+.^_`|~0-9a-z-]+$/;
