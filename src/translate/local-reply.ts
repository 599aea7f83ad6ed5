// Outcome → the header blocks dojang writes for a status it synthesizes (spec sheet §4.1, §11.6).

import { GRPC_CONTENT_TYPE } from "./content-type.js";
import { encodeGrpcMessage, truncateGrpcMessage } from "./grpc-message.js";
import type { Outcome } from "./outcome.js";

/**
 * Cap on a synthesized message before percent-encoding, in UTF-8 bytes. Encoded it is at most
 * 3 × this (12 KiB), well below node's default 64 KiB header list limit past which trailers
 * silently vanish (spec sheet §10.2 P9) and below Envoy's 16 KiB cap.
 */
export const MAX_SYNTH_MESSAGE_BYTES = 4096;

// grpc-status values 0..16 as strings, built once.
const STATUS_STRINGS: readonly string[] = Array.from({ length: 17 }, (_, c) => String(c));

function statusString(code: number): string {
  return STATUS_STRINGS[code] ?? String(code);
}

function messageValue(o: Outcome): string {
  return encodeGrpcMessage(truncateGrpcMessage(o.message, MAX_SYNTH_MESSAGE_BYTES));
}

/**
 * Header block for a synthesized Trailers-Only response. content-type is always present: without
 * it a grpc-go client ignores grpc-status and reports 2 (spec sheet §5.2); `contentType` is the
 * call's reply content-type (grpcReplyContentType: the request's own subtype, so a client of
 * `application/grpc+json` reads the status). grpc-message is always sent, even empty, as grpc-go
 * does.
 */
export function trailersOnlyHeaders(o: Outcome, contentType: string = GRPC_CONTENT_TYPE): Record<string, string | number> {
  return {
    ":status": o.httpStatus,
    "content-type": contentType,
    "grpc-status": statusString(o.code),
    "grpc-message": messageValue(o),
  };
}

/** Trailer block for a status sent after response headers (no pseudo-headers: node rejects them in trailers). */
export function statusTrailers(o: Outcome): Record<string, string> {
  return { "grpc-status": statusString(o.code), "grpc-message": messageValue(o) };
}
