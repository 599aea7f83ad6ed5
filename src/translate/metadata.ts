// Which request metadata dojang refuses rather than forwards (issue 10 item 9): a field an
// upstream would treat as a connection error costs every call sharing that connection, so a
// bad field is that call's error alone, answered by dojang. Pure (see purity.test.ts).

/*
 * Rules, each field of the request (pseudo-headers and the fields dojang does not forward
 * excepted; the caller skips those first):
 *
 *  - name: gRPC's Header-Name, 1*( %x30-39 / %x61-7A / "_" / "-" / "." ) (PROTOCOL-HTTP2
 *    "Custom-Metadata"). grpc-js and grpc-go refuse to send anything else; an upper-case name
 *    never gets here (nghttp2 resets that stream with PROTOCOL_ERROR, spec sheet §1.4).
 *  - value of a `-bin` field: base64, standard alphabet, padded when its length is a multiple
 *    of 4, unpadded otherwise: grpc-go's decodeBinHeader (http_util.go), which accepts both
 *    (spec sheet §1.5). A grpc-go server answers a bad one with HTTP 400 + 13 "malformed binary
 *    metadata ..."; a grpcio upstream drops the whole HTTP/2 connection (issue 10).
 *  - any other value: gRPC's ASCII-Value, %x20-%x7E (PROTOCOL-HTTP2), with no leading or
 *    trailing space (RFC 9113 §8.2.1). This covers what RFC 9113 forbids (NUL, CR, LF, other
 *    controls) in case a field gets this far; node drops most such fields itself (see README,
 *    "Bad requests and abusive clients").
 *
 * One scan per string and no allocation unless the field is refused: this runs inside
 * copyRequestHeaders' single pass over rawHeaders, on every call. The scans are regular
 * expressions, not charCodeAt loops: V8's compiled regexp reads a flat string about 4× faster
 * per character (1 KB value: 0.6 µs against 2.4 µs; a 19-character one: 24 ns against 42 ns;
 * docs/contributing/benchmarks.md), which counts for a long token sent on every call. Where a
 * field is refused, the offset the message names is found by String.prototype.search.
 */

import { goQuote } from "./go-text.js";

const BIN_SUFFIX = "-bin";

/** A character outside a metadata name's 0-9 a-z _ - . */
const BAD_NAME_CHAR = /[^0-9a-z_.-]/;
/** A character outside printable ASCII (%x20-%x7E), in a value that is not -bin */
const BAD_VALUE_CHAR = /[^\x20-\x7e]/;
/** Base64's alphabet only (no padding, nothing else): the common -bin value, decided without the loop */
const PLAIN_BASE64 = /^[A-Za-z0-9+/]*$/;

/** RFC 4648 §4 alphabet: A-Z a-z 0-9 + / */
function isBase64Char(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39) || c === 0x2b || c === 0x2f;
}

const PAD = 0x3d; // "="

/**
 * -1 if `v` decodes as grpc-go decodes a -bin value, else the offset Go's base64 decoder
 * reports (`illegal base64 data at input byte N`): StdEncoding when len % 4 == 0, else
 * RawStdEncoding (where "=" is just an illegal byte and a lone final byte is illegal).
 */
export function base64ErrorOffset(v: string): number {
  const n = v.length;
  const padded = n % 4 === 0;
  // alphabet only: the loop below would run to its end, where only the length decides
  if (PLAIN_BASE64.test(v)) return !padded && n % 4 === 1 ? n - 1 : -1;
  for (let i = 0; i < n; i++) {
    const c = v.charCodeAt(i);
    if (isBase64Char(c)) continue;
    if (c !== PAD || !padded) return i;
    // Go's decodeQuantum on padding: where in its 4-byte quantum the first "=" sits.
    const j = i % 4;
    if (j < 2) return i;
    if (j === 2) {
      if (i + 1 === n) return n;
      if (v.charCodeAt(i + 1) !== PAD) return i;
      return i + 2 < n ? i + 2 : -1;
    }
    return i + 1 < n ? i + 1 : -1;
  }
  return !padded && n % 4 === 1 ? n - 1 : -1;
}

/** True for a -bin field name (grpc-go: strings.HasSuffix(key, "-bin")). */
export function isBinaryHeader(name: string): boolean {
  return name.length > BIN_SUFFIX.length && name.endsWith(BIN_SUFFIX);
}

/**
 * null if the request field may be forwarded, else why not (dojang's answer: HTTP 400 and
 * 13 INTERNAL, as grpc-go's server answers malformed binary metadata). The value itself is
 * never quoted back: a -bin or other field may carry a credential.
 */
export function requestFieldProblem(name: string, value: string): string | null {
  const nl = name.length;
  if (nl === 0) return "malformed header: empty metadata name";
  if (BAD_NAME_CHAR.test(name)) return `malformed header: metadata name ${goQuote(name)} has a character gRPC does not allow (0-9 a-z _ - .)`;
  if (isBinaryHeader(name)) {
    const at = base64ErrorOffset(value);
    return at < 0 ? null : `malformed binary metadata in header ${goQuote(name)}: illegal base64 data at input byte ${at}`;
  }
  const vl = value.length;
  if (vl === 0) return null;
  if (value.charCodeAt(0) === 0x20 || value.charCodeAt(vl - 1) === 0x20) {
    return `malformed header: value of ${goQuote(name)} has leading or trailing whitespace`;
  }
  if (!BAD_VALUE_CHAR.test(value)) return null;
  return `malformed header: value of ${goQuote(name)} has a byte outside printable ASCII at offset ${value.search(BAD_VALUE_CHAR)}`;
}
