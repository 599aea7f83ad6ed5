// How a unary call dojang makes ends, as its client reads it (the side calls: the rate-limit service's ShouldRateLimit, ext_authz's Check): the gRPC code and message, and the response's one message.
//
// The same tables as an upstream attempt's (outcome.ts): the response head by classifyResponseHead
// (HTTP status → HTTPStatusConvTab, a content-type that is not gRPC → 2, Trailers-Only without
// grpc-status → 2), the stream's end by decideUpstreamEnd (RST_STREAM → http2ErrConvTab, refused
// → 14, connection lost → 14, END_STREAM without trailers → 13). One case more: a connection that
// ended with an HTTP/2 error code (the service sent GOAWAY with one, or dojang found a protocol
// error in its bytes and ended it with one) takes that code through http2ErrConvTab, as a
// stream's reset does: the service broke the protocol (13), it did not merely go away (14).
import { Code, parseGrpcStatus } from "./codes.js";
import { decodeGrpcMessage } from "./grpc-message.js";
import { classifyResponseHead, decideUpstreamEnd, type ResponseHeadFacts } from "./outcome.js";
import { codeFromRstCode, rstCodeName } from "./rst-code.js";

export interface UnaryEndFacts {
  /** the response HEADERS (the first that is not 1xx); undefined when none came */
  readonly head: ResponseHeadFacts | undefined;
  /** the trailers' grpc-status and grpc-message (raw); undefined without trailers */
  readonly trailerStatus: string | undefined;
  readonly trailerMessage: string | undefined;
  /** trailers came (with or without grpc-status) */
  readonly trailers: boolean;
  /** the head's grpc-message (a Trailers-Only response's) */
  readonly headMessage: string | undefined;
  /** the stream's rstCode at its close */
  readonly rstCode: number | undefined;
  /** the session was lost (closed or destroyed) before the stream ended */
  readonly sessionLost: boolean;
  /** the connection ended with this HTTP/2 error code (node's own ERR_HTTP2_ERROR / ERR_HTTP2_SESSION_ERROR on the stream); undefined otherwise */
  readonly connectionError: number | undefined;
  /** REFUSED_STREAM, or the stream above a GOAWAY's last-stream-id */
  readonly refused: boolean;
}

export interface UnaryStatus {
  readonly code: number;
  readonly message: string;
}

const NO_STATUS_IN_TRAILERS: UnaryStatus = { code: Code.UNKNOWN, message: "trailers without grpc-status" };

/** The status of a unary call's response (code 0: its message is the answer). */
export function decideUnaryEnd(f: UnaryEndFacts): UnaryStatus {
  const head = f.head;
  if (head !== undefined) {
    const v = classifyResponseHead(head);
    if (v.kind === "synthesize") return { code: v.outcome.code, message: v.outcome.message };
    // Trailers-Only: the head carries the status
    if (v.kind === "forward" && head.endStream) return status(head.grpcStatus, f.headMessage);
    if (f.trailers) return f.trailerStatus === undefined ? NO_STATUS_IN_TRAILERS : status(f.trailerStatus, f.trailerMessage);
  }
  const ce = f.connectionError;
  if (ce !== undefined && ce !== 0) return { code: codeFromRstCode(ce), message: `connection error: ${rstCodeName(ce)}` };
  const o = decideUpstreamEnd({
    statusFixed: false,
    rstCode: f.rstCode,
    endedWithoutTrailers: head !== undefined && f.rstCode === 0,
    sessionLost: f.sessionLost,
    refused: f.refused,
    budgetExpired: false,
  });
  return o === null ? { code: Code.INTERNAL, message: "stream closed without a status" } : { code: o.code, message: o.message };
}

/** A grpc-status value (an unparsable one is 2, as grpc-go reads it) and its message. */
function status(raw: string | undefined, message: string | undefined): UnaryStatus {
  const code = parseGrpcStatus(raw);
  return { code: code ?? Code.UNKNOWN, message: message === undefined ? "" : decodeGrpcMessage(message) };
}

/** A message's length prefix: the compressed flag and the length (framing.ts draws it). */
const PREFIX = 5;

/**
 * The one message of a unary response's body (a view, no copy), or why the body is not exactly one
 * uncompressed message: none, one cut short, a compressed one (dojang offers no grpc-encoding, so a
 * server must not compress; grpc-go says 13 for one it cannot decompress), or more than one
 * (grpc-go: 13 "too many messages" for a unary response).
 */
export function unaryMessage(body: Uint8Array): Uint8Array | string {
  const n = body.length;
  if (n === 0) return "no response message";
  if (n < PREFIX) return "response message cut short";
  const flag = body[0]!;
  if (flag !== 0) return flag === 1 ? "compressed response message, but no grpc-encoding was offered" : `bad compressed flag ${flag}`;
  const len = body[1]! * 0x1000000 + body[2]! * 0x10000 + body[3]! * 0x100 + body[4]!;
  if (n < PREFIX + len) return "response message cut short";
  if (n > PREFIX + len) return "more than one response message";
  return body.subarray(PREFIX, n);
}
