// HTTP :status → gRPC code (grpc-go HTTPStatusConvTab), Go StatusText wording, and grpc-go's client message for it.

import { Code } from "./codes.js";
import { isGrpcContentType } from "./content-type.js";
import { goQuote } from "./go-text.js";

/**
 * grpc-go internal/transport/http_util.go `HTTPStatusConvTab` (unchanged since v1.4.0), spec
 * sheet §5.1. Any other status, 200, 431 and 500 included, is the operateHeaders fallback
 * `codes.Unknown`. SMAP's extra 431 → INTERNAL is not used (see SPEC_DISAGREEMENTS).
 */
export function codeFromHttpStatus(status: number): Code {
  switch (status) {
    case 400: return Code.INTERNAL; //          grpc-go: http.StatusBadRequest
    case 401: return Code.UNAUTHENTICATED; //   grpc-go: http.StatusUnauthorized
    case 403: return Code.PERMISSION_DENIED; // grpc-go: http.StatusForbidden
    case 404: return Code.UNIMPLEMENTED; //     grpc-go: http.StatusNotFound
    case 429: return Code.UNAVAILABLE; //       grpc-go: http.StatusTooManyRequests
    case 502: return Code.UNAVAILABLE; //       grpc-go: http.StatusBadGateway
    case 503: return Code.UNAVAILABLE; //       grpc-go: http.StatusServiceUnavailable
    case 504: return Code.UNAVAILABLE; //       grpc-go: http.StatusGatewayTimeout
    default: return Code.UNKNOWN; //            grpc-go operateHeaders fallback
  }
}

/**
 * The other way: the HTTP status for a gRPC code, google/rpc/code.proto's mapping (what JSON
 * transcoding and Connect's unary errors answer); 500 for a code outside 0..16.
 */
const HTTP_OF_CODE: readonly number[] = Object.freeze([200, 499, 500, 400, 504, 404, 409, 403, 429, 400, 409, 400, 501, 500, 503, 500, 401]);

export function httpStatusOfCode(code: number): number {
  return HTTP_OF_CODE[code] ?? 500;
}

/**
 * Go net/http status.go `StatusText` (RFC 9110 registry as Go words it; 103 and 425 as in
 * current Go). "" for a code Go does not know, exactly like Go.
 */
const STATUS_TEXT: ReadonlyMap<number, string> = new Map<number, string>([
  [100, "Continue"],
  [101, "Switching Protocols"],
  [102, "Processing"],
  [103, "Early Hints"],
  [200, "OK"],
  [201, "Created"],
  [202, "Accepted"],
  [203, "Non-Authoritative Information"],
  [204, "No Content"],
  [205, "Reset Content"],
  [206, "Partial Content"],
  [207, "Multi-Status"],
  [208, "Already Reported"],
  [226, "IM Used"],
  [300, "Multiple Choices"],
  [301, "Moved Permanently"],
  [302, "Found"],
  [303, "See Other"],
  [304, "Not Modified"],
  [305, "Use Proxy"],
  [307, "Temporary Redirect"],
  [308, "Permanent Redirect"],
  [400, "Bad Request"],
  [401, "Unauthorized"],
  [402, "Payment Required"],
  [403, "Forbidden"],
  [404, "Not Found"],
  [405, "Method Not Allowed"],
  [406, "Not Acceptable"],
  [407, "Proxy Authentication Required"],
  [408, "Request Timeout"],
  [409, "Conflict"],
  [410, "Gone"],
  [411, "Length Required"],
  [412, "Precondition Failed"],
  [413, "Request Entity Too Large"],
  [414, "Request URI Too Long"],
  [415, "Unsupported Media Type"],
  [416, "Requested Range Not Satisfiable"],
  [417, "Expectation Failed"],
  [418, "I'm a teapot"],
  [421, "Misdirected Request"],
  [422, "Unprocessable Entity"],
  [423, "Locked"],
  [424, "Failed Dependency"],
  [425, "Too Early"],
  [426, "Upgrade Required"],
  [428, "Precondition Required"],
  [429, "Too Many Requests"],
  [431, "Request Header Fields Too Large"],
  [451, "Unavailable For Legal Reasons"],
  [500, "Internal Server Error"],
  [501, "Not Implemented"],
  [502, "Bad Gateway"],
  [503, "Service Unavailable"],
  [504, "Gateway Timeout"],
  [505, "HTTP Version Not Supported"],
  [506, "Variant Also Negotiates"],
  [507, "Insufficient Storage"],
  [508, "Loop Detected"],
  [510, "Not Extended"],
  [511, "Network Authentication Required"],
]);

export function httpStatusText(status: number): string {
  return STATUS_TEXT.get(status) ?? "";
}

// grpc-go http2_client.go operateHeaders, spec sheet §5.2 step 3.
const MISSING_CONTENT_TYPE = "malformed header: missing HTTP content-type";

/**
 * grpc-go's client message for a non-gRPC response:
 * `unexpected HTTP status code received from server: <s> (<StatusText>)` then `; ` and either
 * `malformed header: missing HTTP content-type` (contentType undefined) or
 * `transport: received unexpected content-type "<ct>"` (Go %q quoting). When contentType is a
 * gRPC one (dojang's §11.5 case: non-200, gRPC content-type, no grpc-status) only the first part
 * is returned: there is nothing wrong with the content-type.
 */
export function httpStatusMessage(status: number, contentType: string | undefined): string {
  const head = `unexpected HTTP status code received from server: ${status} (${httpStatusText(status)})`;
  if (contentType === undefined) return head + "; " + MISSING_CONTENT_TYPE;
  if (isGrpcContentType(contentType)) return head;
  return head + "; transport: received unexpected content-type " + goQuote(contentType);
}

