// The gRPC method path: the grammar a call's :path must be in, the one canonical method name a call
// carries (derived once per call, by the Call: routing, rbac, rate-limit descriptors, faults, metric
// labels, the access record, span names and the :path sent upstream all read that one name), the
// normalisation of a URL a bridge takes (Connect, JSON) before any rule sees it, and what a record
// may show of a target that is not a method path. Pure: no node:* imports, no clock.
//
// Why one name (issue 0.5.1 item 1): a proxy that decides on one reading of the path while the
// upstream acts on another lets a denied method through. connect-go (Go's net/http) decodes the
// path and drops its query, so /pkg.Svc/Un%61ry and /pkg.Svc/Unary?x=1 run Unary there, while a
// rule comparing the raw :path saw another method. Envoy's advisories are the record of this class
// (relative segments GHSA-xcx5-93pw-jw2w, escaped slashes CVE-2021-29492, path parameters on dot
// segments); its answer is one normalised path every decision and the upstream share.

// === the grammar ===

/*
 * gRPC over HTTP/2 (grpc/grpc doc/PROTOCOL-HTTP2.md, "Requests"): Path → ":path" "/" Service-Name
 * "/" {method name}, case-sensitive. The names are the IDL's; dojang takes protobuf's (the
 * language spec's ident = letter { letter | decimalDigit | "_" }, with "_" also allowed first, as
 * protoc accepts, and a service's full name dotted):
 *
 *   method-path = "/" service "/" method
 *   service     = ident *( "." ident )
 *   method      = ident
 *   ident       = ( ALPHA / "_" ) *( ALPHA / DIGIT / "_" )
 *
 * Nothing an HTTP server could read differently is in it: no "%", "?", "#", ";", "\", empty or dot
 * segments, whitespace, control or non-ASCII characters. grpc-go's server answers a path it cannot
 * split, or a name it does not serve, with 12 UNIMPLEMENTED; dojang refuses a path outside the
 * grammar the same way, before routing.
 */

/** Per ASCII code: 2 may start an ident (ALPHA, "_"), 1 may continue one (DIGIT), 0 neither. */
const IDENT: Uint8Array = (() => {
  const t = new Uint8Array(128);
  for (let c = 0x30; c <= 0x39; c++) t[c] = 1;
  for (let c = 0x41; c <= 0x5a; c++) t[c] = 2;
  for (let c = 0x61; c <= 0x7a; c++) t[c] = 2;
  t[0x5f] = 2;
  return t;
})();
const SLASH = 0x2f;
const DOT = 0x2e;

/** Is `p` a method path in the grammar above? One pass, no allocation (the hot path: a call's :path). */
export function isMethodPath(p: string): boolean {
  const n = p.length;
  if (n < 4 || p.charCodeAt(0) !== SLASH) return false;
  let i = 1;
  // the service: idents joined by single dots, up to the one "/"
  for (;;) {
    if (i >= n || (IDENT[p.charCodeAt(i)] ?? 0) !== 2) return false;
    i++;
    let c = 0;
    while (i < n && (IDENT[(c = p.charCodeAt(i))] ?? 0) !== 0) i++;
    if (i >= n) return false;
    i++;
    if (c === DOT) continue;
    if (c === SLASH) break;
    return false;
  }
  // the method: one ident, to the end
  if (i >= n || (IDENT[p.charCodeAt(i)] ?? 0) !== 2) return false;
  for (i++; i < n; i++) if ((IDENT[p.charCodeAt(i)] ?? 0) === 0) return false;
  return true;
}

/** A method path's service and method ("/pkg.Svc/Method" → ["pkg.Svc", "Method"]); undefined for anything outside the grammar. */
export function splitMethodPath(path: string | undefined): readonly [string, string] | undefined {
  if (path === undefined || !isMethodPath(path)) return undefined;
  const slash = path.lastIndexOf("/");
  return [path.slice(1, slash), path.slice(slash + 1)];
}

// === a URL a bridge takes ===

/** A request target normalised: its path, and its query (without the "?"; "" when none). */
export type NormalizedTarget = { readonly ok: true; readonly path: string; readonly query: string } | { readonly ok: false; readonly error: string };

/** RFC 3986 §2.3 unreserved: ALPHA / DIGIT / "-" / "." / "_" / "~". */
function unreserved(c: number): boolean {
  return (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x2d || c === DOT || c === 0x5f || c === 0x7e;
}
function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  return -1;
}
const HEX = "0123456789ABCDEF";

/**
 * An HTTP request target (origin form) normalised as Envoy normalises a path when
 * `normalize_path` and `merge_slashes` are on, before any rule sees it:
 * - a fragment is refused (Envoy rejects a path with "#"); an absolute or asterisk form too;
 * - the query is split off at the first "?" (Envoy's route and RBAC path matchers compare the
 *   path without it) and returned apart;
 * - RFC 3986 §6.2.2: percent-encoded unreserved characters are decoded ("%61" → "a", "%2E" → "."),
 *   the hex digits of the others upper-cased ("%2f" → "%2F"); a "%" not followed by two hex
 *   digits is refused (Go's url parser refuses it too);
 * - escaped slashes ("%2F", "%5C") are kept as they are (Envoy's KEEP_UNCHANGED: they are not
 *   separators; a gRPC name never holds one, so Connect's method check refuses them);
 * - dot segments are removed (RFC 3986 §5.2.4, on the decoded path, so "%2E%2E" is one), then,
 *   with `merge` (the default), runs of "/" merged into one.
 * A target that is already a method path is returned as it is, with no allocation.
 *
 * `merge: false` is for JSON transcoding: there the method is the matched rule's, so no rule reads
 * the URL as a method and merging buys no safety, while it would change a path variable's value
 * ("a//b" bound by `{name=**}` became "a/b") and match a rule the real grpc-gateway does not
 * ("/v1//query" is its 404): the judge of that bridge keeps the empty segment.
 */
export function normalizeTarget(target: string, merge = true): NormalizedTarget {
  if (isMethodPath(target)) return { ok: true, path: target, query: "" };
  if (target.charCodeAt(0) !== SLASH) return { ok: false, error: "not a path (absolute or asterisk form)" };
  if (target.includes("#")) return { ok: false, error: "a fragment in the request target" };
  const q = target.indexOf("?");
  const raw = q < 0 ? target : target.slice(0, q);
  const query = q < 0 ? "" : target.slice(q + 1);
  // RFC 3986 §6.2.2.1 / §6.2.2.2: percent-encoding normalisation
  let decoded = "";
  let from = 0;
  for (let i = raw.indexOf("%"); i >= 0; i = raw.indexOf("%", i)) {
    const h = i + 2 < raw.length ? hexValue(raw.charCodeAt(i + 1)) : -1;
    const l = h >= 0 ? hexValue(raw.charCodeAt(i + 2)) : -1;
    if (l < 0) return { ok: false, error: "a \"%\" not followed by two hex digits" };
    const c = h * 16 + l;
    decoded += raw.slice(from, i) + (unreserved(c) ? String.fromCharCode(c) : `%${HEX[h]}${HEX[l]}`);
    from = i += 3;
  }
  const dotless = removeDotSegments(from === 0 ? raw : decoded + raw.slice(from));
  const path = merge ? mergeSlashes(dotless) : dotless;
  return { ok: true, path, query };
}

/** RFC 3986 §5.2.4, for an absolute path: "." and ".." segments resolved ("/a/b/../c" → "/a/c", "/.." → "/"). */
function removeDotSegments(path: string): string {
  if (!path.includes(".")) return path;
  const segs = path.split("/"); // [""] + the segments: the path starts with "/"
  const out: string[] = [];
  for (let i = 1; i < segs.length; i++) {
    const s = segs[i]!;
    const last = i === segs.length - 1;
    if (s === ".") {
      if (last) out.push(""); // "/a/." → "/a/"
    } else if (s === "..") {
      out.pop();
      if (last) out.push(""); // "/a/b/.." → "/a/"
    } else out.push(s);
  }
  return "/" + out.join("/");
}

/** Runs of "/" as one (Envoy's merge_slashes). */
function mergeSlashes(path: string): string {
  return path.includes("//") ? path.replace(/\/{2,}/g, "/") : path;
}

/**
 * The method a URL names (a Connect call: connect-go reads the request's decoded path, without its
 * query): the target normalised (normalizeTarget), then in the grammar; null when it is not.
 * A target that already is a method path is returned as it is (no allocation).
 */
export function methodPathFromUrl(target: string): string | null {
  if (isMethodPath(target)) return target;
  const n = normalizeTarget(target);
  return n.ok && isMethodPath(n.path) ? n.path : null;
}

// === what a record shows ===

/** The longest target a record shows of a call refused for its path. */
export const MAX_SHOWN_TARGET = 256;
/** What stands for a value no record, log line or /config may show (a query: it may carry ?access_token=). */
export const REDACTED = "<redacted>";

/**
 * What an access record, a log line or a status message may show of a request target that is not
 * a method path: the path before any "?" or "#", the rest replaced with `?<redacted>` (a query
 * can carry a credential: ?access_token=…), cut to MAX_SHOWN_TARGET characters.
 */
export function redactTarget(target: string): string {
  let end = target.length;
  for (let i = 0; i < target.length; i++) {
    const c = target.charCodeAt(i);
    if (c === 0x3f /* ? */ || c === 0x23 /* # */) {
      end = i;
      break;
    }
  }
  const cut = end > MAX_SHOWN_TARGET ? `${target.slice(0, MAX_SHOWN_TARGET)}…` : target.slice(0, end);
  return end < target.length ? `${cut}${target.charCodeAt(end) === 0x3f ? "?" : "#"}${REDACTED}` : cut;
}
