// RST_STREAM error code → gRPC code (grpc-go http2ErrConvTab), code names, and the record of where the sources disagree.

import { Code } from "./codes.js";

/**
 * HTTP/2 error codes (RFC 9113 §7) → gRPC code, grpc-go internal/transport/http_util.go
 * `http2ErrConvTab` (spec sheet §6, grpc-go column), index = RST_STREAM code.
 * Names from golang/net http2/errors.go (what grpc-go prints).
 */
const RST_TABLE: readonly { readonly name: string; readonly code: Code }[] = [
  { name: "NO_ERROR", code: Code.INTERNAL }, //              0x0 (only reached when no trailers were seen)
  { name: "PROTOCOL_ERROR", code: Code.INTERNAL }, //        0x1
  { name: "INTERNAL_ERROR", code: Code.INTERNAL }, //        0x2
  { name: "FLOW_CONTROL_ERROR", code: Code.RESOURCE_EXHAUSTED }, // 0x3 grpc-go; SPEC and grpc-js say 13
  { name: "SETTINGS_TIMEOUT", code: Code.INTERNAL }, //      0x4
  { name: "STREAM_CLOSED", code: Code.INTERNAL }, //         0x5 SPEC gives no mapping
  { name: "FRAME_SIZE_ERROR", code: Code.INTERNAL }, //      0x6
  { name: "REFUSED_STREAM", code: Code.UNAVAILABLE }, //     0x7 not processed: safe to retry (A6)
  { name: "CANCEL", code: Code.CANCELLED }, //               0x8 (4 after the deadline: see outcome.ts)
  { name: "COMPRESSION_ERROR", code: Code.INTERNAL }, //     0x9
  { name: "CONNECT_ERROR", code: Code.INTERNAL }, //         0xa
  { name: "ENHANCE_YOUR_CALM", code: Code.RESOURCE_EXHAUSTED }, // 0xb
  { name: "INADEQUATE_SECURITY", code: Code.PERMISSION_DENIED }, // 0xc
  { name: "HTTP_1_1_REQUIRED", code: Code.INTERNAL }, //     0xd SPEC silent
];

// grpc-go http2_client.go handleRSTStream: `stream terminated by RST_STREAM with error code: %v`.
const RST_PREFIX = "stream terminated by RST_STREAM with error code: ";
const RST_MESSAGES: readonly string[] = RST_TABLE.map((r) => RST_PREFIX + r.name);

/** grpc-go http2ErrConvTab; a code outside 0..13 is UNKNOWN (grpc-go logs it and uses codes.Unknown). */
export function codeFromRstCode(rstCode: number): Code {
  return RST_TABLE[rstCode]?.code ?? Code.UNKNOWN;
}

/** golang/net http2 ErrCode.String(): the name, or `unknown error code 0x<hex>` (lower-case hex of the uint32). */
export function rstCodeName(rstCode: number): string {
  return RST_TABLE[rstCode]?.name ?? `unknown error code 0x${(rstCode >>> 0).toString(16)}`;
}

/** grpc-go's status message for a received RST_STREAM. Precomputed for 0..13. */
export function rstMessage(rstCode: number): string {
  return RST_MESSAGES[rstCode] ?? RST_PREFIX + rstCodeName(rstCode);
}

/*
 * Where grpc-go and the gRPC spec (PROTOCOL-HTTP2.md, http-grpc-status-mapping.md) or grpc-js
 * disagree, and what dojang does. grpc-go is normative for dojang except where the spec sheet's
 * §11 decides otherwise (the non-200 + gRPC content-type case). Sources: spec sheet §1.2, §2.2,
 * §2.3, §4.1, §4.3, §5.1, §5.3, §6, §11. The same list is exported below for docs and tests.
 *
 *  - RST FLOW_CONTROL_ERROR: grpc-go 8; SPEC and grpc-js 13; dojang 8.
 *  - RST code outside 0..13: grpc-go 2; grpc-js 13; dojang 2.
 *  - RST STREAM_CLOSED / HTTP_1_1_REQUIRED: SPEC gives no code; grpc-go 13; dojang 13.
 *  - RST CANCEL: grpc-go 4 once the call's deadline passed, else 1; SPEC only encourages that;
 *    grpc-js 1 or 14 on a dropped connection; dojang 4 after its budget, 14 on connection loss.
 *  - RST NO_ERROR without trailers: grpc-js uses the HTTP-mapped code if :status ≠ 200; grpc-go
 *    and dojang 13.
 *  - HTTP 431: SMAP 13; grpc-go, grpc-js, C-core 2; dojang 2.
 *  - Non-200 + gRPC content-type + no grpc-status: grpc-go 2 (:status ignored); SMAP and grpc-js
 *    the HTTP-mapped code; dojang the HTTP-mapped code.
 *  - 200 + non-gRPC content-type + grpc-status 0: grpc-go 2; grpc-js 0; dojang 2.
 *  - Missing :status: grpc-go 13; grpc-js 2; dojang 13.
 *  - grpc-timeout 0: SPEC says positive; grpc-go accepts it (immediate deadline); dojang accepts.
 *  - grpc-timeout parsing: grpc-js uses an unanchored regex (` 1S`, `x5Sy` accepted); dojang is
 *    strict like grpc-go.
 *  - grpc-timeout encoding: grpc-js starts at milliseconds; grpc-go and dojang use the smallest
 *    unit that fits 8 digits, rounding up.
 *  - grpc-message: grpc-js uses encodeURI/decodeURI (throws, leaves `%2C` encoded); dojang uses
 *    grpc-go's percent codec and forwards upstream values unchanged.
 *  - content-type: grpc-js servers accept anything starting with `application/grpc`; dojang uses
 *    grpc-go's exact rule.
 *  - te: SPEC requires `te: trailers`; grpc-go and grpc-js servers do not check it; dojang
 *    forwards only `te: trailers`.
 */
export interface SpecDisagreement {
  readonly what: string;
  readonly grpcGo: string;
  readonly spec: string;
  readonly dojang: string;
}

export const SPEC_DISAGREEMENTS: readonly SpecDisagreement[] = Object.freeze([
  {
    what: "RST_STREAM FLOW_CONTROL_ERROR (0x3)",
    grpcGo: "8 RESOURCE_EXHAUSTED (http2ErrConvTab, since 2015)",
    spec: "SPEC: INTERNAL; grpc-js: 13",
    dojang: "8, following grpc-go",
  },
  {
    what: "RST_STREAM code outside 0..13",
    grpcGo: "2 UNKNOWN (logged)",
    spec: "SPEC: not listed; grpc-js: 13",
    dojang: "2, following grpc-go",
  },
  {
    what: "RST_STREAM STREAM_CLOSED (0x5) and HTTP_1_1_REQUIRED (0xd)",
    grpcGo: "13 INTERNAL",
    spec: "SPEC: STREAM_CLOSED has no mapping, HTTP_1_1_REQUIRED is not listed; grpc-js: 13",
    dojang: "13, following grpc-go",
  },
  {
    what: "RST_STREAM CANCEL (0x8) received after the call's deadline",
    grpcGo: "4 DEADLINE_EXCEEDED if the call's own deadline has passed, else 1 CANCELLED",
    spec: "SPEC: CANCELLED, clients encouraged to report DEADLINE_EXCEEDED after the deadline; grpc-js: 1, or 14 when the connection dropped",
    dojang: "4 once dojang's budget has run out, 14 on upstream connection loss (node reports it as CANCEL), else 1",
  },
  {
    what: "RST_STREAM NO_ERROR (0x0) before any trailers",
    grpcGo: "13 INTERNAL",
    spec: "SPEC: INTERNAL; grpc-js: the HTTP-mapped code when :status is not 200, else 13",
    dojang: "13; ignored once trailers or Trailers-Only fixed the status",
  },
  {
    what: "HTTP 431 without grpc-status",
    grpcGo: "2 UNKNOWN (not in HTTPStatusConvTab)",
    spec: "SMAP: 13 INTERNAL; grpc-js, C-core: 2",
    dojang: "2, following grpc-go",
  },
  {
    what: "non-200 :status with a gRPC content-type and no grpc-status",
    grpcGo: "2 UNKNOWN with an empty message (:status ignored for gRPC responses)",
    spec: "SMAP and grpc-js: the HTTP-mapped code (e.g. 503 → 14)",
    dojang: "the HTTP-mapped code, message without the content-type suffix (spec sheet §11.5)",
  },
  {
    what: ":status 200 with a missing or non-gRPC content-type but grpc-status 0",
    grpcGo: "2 UNKNOWN (grpc-status ignored for non-gRPC responses)",
    spec: "grpc-js: 0 OK (it never checks the response content-type)",
    dojang: "2, following grpc-go",
  },
  {
    what: "response without :status",
    grpcGo: "13 INTERNAL `malformed header: missing HTTP status`",
    spec: "grpc-js: 2 `No status information received`",
    dojang: "13, following grpc-go",
  },
  {
    what: "grpc-timeout with value 0",
    grpcGo: "accepted: zero duration, the call fails with 4 at once",
    spec: "SPEC: TimeoutValue is a positive integer",
    dojang: "accepted, following grpc-go",
  },
  {
    what: "grpc-timeout syntax",
    grpcGo: "strict: 1..8 digits then one unit letter, nothing else",
    spec: "grpc-js: unanchored regex, so ` 1S`, `1 S`, `x5Sy`, `100000000S` are accepted",
    dojang: "strict, following grpc-go",
  },
  {
    what: "grpc-timeout encoding",
    grpcGo: "smallest unit n,u,m,S,M,H whose rounded-up value has at most 8 digits",
    spec: "grpc-js: starts at milliseconds (1 ns of budget is sent as `1m`)",
    dojang: "grpc-go's EncodeDuration",
  },
  {
    what: "grpc-message percent-encoding",
    grpcGo: "keep 0x20-0x7E except %, %XX everything else; lenient decode that never fails",
    spec: "grpc-js: encodeURI/decodeURI (space becomes %20, `%2C` stays encoded, malformed input throws)",
    dojang: "grpc-go's codec for synthesized messages; upstream values forwarded unchanged",
  },
  {
    what: "request content-type test",
    grpcGo: "exactly application/grpc, or application/grpc followed by + or ;",
    spec: "grpc-js server: startsWith('application/grpc'), so application/grpc-web passes",
    dojang: "grpc-go's rule",
  },
  {
    what: "te request header",
    grpcGo: "server does not check it",
    spec: "SPEC: `te: trailers` required; grpc-js server does not check it either",
    dojang: "forwards te only when it is exactly `trailers`",
  },
]);
