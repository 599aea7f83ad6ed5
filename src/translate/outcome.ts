// The closed "who decided" table, the Outcome value, and the pure deciders for an upstream's response head and stream end (spec sheet §5.2, §10.3, §11).

import { Code } from "./codes.js";
import { codeFromHttpStatus, httpStatusMessage } from "./http-status.js";
import { isGrpcContentType } from "./content-type.js";
import { goQuote } from "./go-text.js";
import { codeFromRstCode, rstMessage } from "./rst-code.js";

/**
 * Who decided a call's status. Closed list, snake_case keys (metric label values and docs),
 * one line each, in the manner of Envoy's ResponseCodeDetailValues. Change docs with it.
 * DECIDED_BY is the whole list: the call's own reasons, then those only a filter decides
 * (FILTER_DECIDED_BY: each belongs to one filter of src/proxy/filters/index.ts, which names it,
 * and test/proxy/filters/registry.test.ts checks that every one is claimed once).
 */
const CALL_DECIDED_BY = {
  upstream: "the upstream sent grpc-status (trailers or Trailers-Only); dojang forwarded it",
  upstream_http: "the upstream answered a non-200 HTTP status without grpc-status; mapped by HTTPStatusConvTab",
  upstream_protocol: "the upstream broke the gRPC protocol (bad content-type, no :status, no trailers or no grpc-status)",
  upstream_reset: "the upstream reset the stream with RST_STREAM; mapped by http2ErrConvTab",
  upstream_unreachable: "dojang could not connect to any upstream endpoint",
  upstream_connection_lost: "the upstream connection closed or failed before the call ended",
  deadline:
    "the call's deadline (grpc-timeout or route timeout) passed in dojang; also an upstream's DEADLINE_EXCEEDED that arrives once that deadline has passed (the upstream counts down the budget dojang sent it, and its status is forwarded as it came)",
  message_too_large: "a message's declared length exceeded the route's size limit",
  no_route: "no route matched the request's :path or authority, or its :path is not a gRPC method path (refused before routing: 12, as grpc-go refuses a malformed method name)",
  bad_request: "the request was not valid gRPC (content-type, grpc-timeout, method, headers or metadata, a message cut short by END_STREAM)",
  stream_idle: "nothing moved either way on the call for the listener's or route's streamIdleTimeout",
  upstream_reset_after_request: "the upstream reset the stream after the whole request was sent: it may have done the work, so it is not retried unless the route allows it",
  overflow: "a cluster's circuit breaker (maxCalls, maxPendingCalls, maxConnections, maxRetries) was full: the call was not sent",
  client_cancel: "the downstream client cancelled the call or disconnected",
  shutdown: "dojang was shutting down and did not start or finish the call",
  overload: "the client did not read its responses and their buffers went past the connection's or the process's budget: dojang cut the call (RST_STREAM ENHANCE_YOUR_CALM). Also a call whose client advertised a stream window under one frame, cut at once past the unread budget (a Trailers-Only 8 when cut at its response head)",
} as const;

/** The reasons a filter decides (src/proxy/filters/index.ts: each filter names its own). */
export const FILTER_DECIDED_BY = {
  rate_limited: "the route's rateLimit had no token left for the call's key: the call was not sent (8, not 14: it should not be retried at once; grpc-retry-pushback-ms and x-ratelimit-reset say when a token is back)",
  rate_limited_global: "the route's global rate-limit service (rateLimit.global) answered OVER_LIMIT: the call was not sent (8; x-ratelimit-* and grpc-retry-pushback-ms say when the limit resets)",
  rate_limit_service_failed: "the route's global rate-limit service did not answer in time or failed, and rateLimit.global.failureModeDeny is on: the call was not sent (14)",
  fault: "a fault rule injected this status (abort, reset, raw HTTP, unreachable, cut connection)",
  jwt: "the route's jwt block refused the call: no bearer token, or one that did not verify (signature, issuer, audience, expiry, keys unavailable): 16 UNAUTHENTICATED",
  rbac: "the route's rbac rules denied the call (by method, client certificate, JWT claims or client address): 7 PERMISSION_DENIED",
  ext_authz: "the route's external authorization service denied the call (its status code and message), or the check failed or timed out without failOpen (7 PERMISSION_DENIED)",
} as const;
export type FilterDecidedBy = keyof typeof FILTER_DECIDED_BY;

export const DECIDED_BY = { ...CALL_DECIDED_BY, ...FILTER_DECIDED_BY } as const;
export type DecidedBy = keyof typeof DECIDED_BY;

export interface Outcome {
  readonly code: number;
  readonly message: string;
  readonly decidedBy: DecidedBy;
  /** 200 except the early aborts (415 bad content-type, 400 malformed grpc-timeout; spec sheet §11.7) */
  readonly httpStatus: number;
}

export function outcome(code: number, message: string, decidedBy: DecidedBy, httpStatus = 200): Outcome {
  return { code, message, decidedBy, httpStatus };
}

// ---------------------------------------------------------------------------------------------
// Response head

/** Facts of the upstream's first non-1xx (or any) response HEADERS frame. */
export interface ResponseHeadFacts {
  readonly status: number | undefined;
  readonly contentType: string | undefined;
  readonly grpcStatus: string | undefined;
  readonly endStream: boolean;
}

export type HeadVerdict =
  | { readonly kind: "skip" } // 1xx informational without END_STREAM
  | { readonly kind: "forward" } // gRPC response: forward headers (or Trailers-Only when endStream), :status normalized to 200
  | { readonly kind: "synthesize"; readonly outcome: Outcome }; // dojang writes the status; upstream body never forwarded

// The two verdicts of the normal path are shared constants: no allocation per call.
const SKIP: HeadVerdict = Object.freeze({ kind: "skip" });
const FORWARD: HeadVerdict = Object.freeze({ kind: "forward" });

const MISSING_STATUS = "malformed header: missing HTTP status"; // grpc-go http2_client.go operateHeaders

/** grpc-go joins its content-type complaint to the missing-status one with "; " (spec sheet §5.3 last row). */
function missingStatusMessage(contentType: string | undefined): string {
  if (contentType === undefined) return MISSING_STATUS + "; malformed header: missing HTTP content-type";
  if (isGrpcContentType(contentType)) return MISSING_STATUS;
  return MISSING_STATUS + "; transport: received unexpected content-type " + goQuote(contentType);
}
/** grpc-go reports 2 with the (possibly empty) grpc-message here; dojang says what was missing. */
const TRAILERS_ONLY_WITHOUT_STATUS = "malformed header: Trailers-Only response without grpc-status";

function synthesize(code: number, message: string, decidedBy: DecidedBy): HeadVerdict {
  return { kind: "synthesize", outcome: outcome(code, message, decidedBy) };
}

/**
 * Classifies the upstream's response HEADERS (spec sheet §11.5 and §5.2), in order:
 *  1. no :status → 13 `malformed header: missing HTTP status` (+ grpc-go's content-type note);
 *  2. 1xx → skip; with END_STREAM → 13 (grpc-go's informational-header protocol error);
 *  3. gRPC content-type and grpc-status present → forward, whatever :status says;
 *  4. :status ≠ 200 (no grpc-status, or not gRPC) → HTTPStatusConvTab, upstream_http;
 *  5. :status 200, missing/non-gRPC content-type → 2, upstream_protocol;
 *  6. :status 200, gRPC, no grpc-status, END_STREAM → 2, upstream_protocol;
 *  7. otherwise (200, gRPC, headers to be followed by messages and trailers) → forward.
 */
export function classifyResponseHead(f: ResponseHeadFacts): HeadVerdict {
  const status = f.status;
  if (status === undefined) {
    return synthesize(Code.INTERNAL, missingStatusMessage(f.contentType), "upstream_protocol");
  }
  if (status >= 100 && status < 200) {
    if (!f.endStream) return SKIP;
    return synthesize(
      Code.INTERNAL,
      `protocol error: informational header with status code ${status} must not have END_STREAM set`,
      "upstream_protocol",
    );
  }
  const grpc = isGrpcContentType(f.contentType);
  if (grpc && f.grpcStatus !== undefined) return FORWARD;
  if (status !== 200) {
    return synthesize(codeFromHttpStatus(status), httpStatusMessage(status, f.contentType), "upstream_http");
  }
  if (!grpc) return synthesize(Code.UNKNOWN, httpStatusMessage(200, f.contentType), "upstream_protocol");
  if (f.endStream) return synthesize(Code.UNKNOWN, TRAILERS_ONLY_WITHOUT_STATUS, "upstream_protocol");
  return FORWARD;
}

// ---------------------------------------------------------------------------------------------
// Stream end

export interface UpstreamEndFacts {
  /** trailers or Trailers-Only with a status were received/forwarded: nothing to decide */
  readonly statusFixed: boolean;
  /** upstream stream's rstCode at 'close' */
  readonly rstCode: number | undefined;
  /** END_STREAM on DATA, no trailers */
  readonly endedWithoutTrailers: boolean;
  /** upstream session closed/errored before trailers (node reports rstCode 8: treat as 14) */
  readonly sessionLost: boolean;
  /** REFUSED_STREAM, or stream id above a GOAWAY last-stream-id */
  readonly refused: boolean;
  /** dojang's deadline for the call has passed */
  readonly budgetExpired: boolean;
}

/**
 * grpc-go's wording when a transport read fails is `error reading from server: <io error>`
 * (http2_client.go reader); node gives dojang no io error here, so the cause is named instead.
 */
const CONNECTION_LOST = outcome(Code.UNAVAILABLE, "error reading from server: connection lost", "upstream_connection_lost");
/** REFUSED_STREAM / above GOAWAY last-stream-id: the upstream never processed the call (A6: safe to retry). */
const REFUSED = outcome(Code.UNAVAILABLE, rstMessage(7) + " (not processed upstream)", "upstream_reset");
/** grpc-go's message for an expired context (context.DeadlineExceeded). */
const DEADLINE = outcome(Code.DEADLINE_EXCEEDED, "context deadline exceeded", "deadline");
/** grpc-go http2_client.go operateHeaders / reader: DATA END_STREAM and no trailers. */
const NO_TRAILERS = outcome(Code.INTERNAL, "server closed the stream without sending trailers", "upstream_protocol");
const NO_STATUS = outcome(Code.INTERNAL, "upstream stream closed without a gRPC status", "upstream_protocol");
/** One Outcome per known RST code, built once. */
const RST_OUTCOMES: readonly Outcome[] = Array.from({ length: 14 }, (_, c) =>
  outcome(codeFromRstCode(c), rstMessage(c), "upstream_reset"),
);

/**
 * Spec sheet §10.3: the status of an upstream stream that closed before a status was fixed.
 * Returns null when statusFixed (an RST or 'aborted' after trailers never changes the status).
 * The shared Outcome constants it returns are frozen-by-convention: do not mutate.
 */
export function decideUpstreamEnd(f: UpstreamEndFacts): Outcome | null {
  if (f.statusFixed) return null;
  // Before rstCode: node synthesizes CANCEL on connection loss (probe I, I2).
  if (f.sessionLost) return CONNECTION_LOST;
  if (f.refused) return REFUSED;
  const rst = f.rstCode;
  if (rst === 8 && f.budgetExpired) return DEADLINE;
  // rstCode 0 after END_STREAM on DATA is node's normal close, not a reset (probe C0).
  if (rst !== undefined && !(rst === 0 && f.endedWithoutTrailers)) {
    return RST_OUTCOMES[rst] ?? outcome(codeFromRstCode(rst), rstMessage(rst), "upstream_reset");
  }
  if (f.endedWithoutTrailers) return NO_TRAILERS;
  return NO_STATUS;
}
