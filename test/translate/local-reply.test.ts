import { describe, expect, it } from "vitest";
import { outcome } from "../../src/translate/outcome.js";
import { MAX_SYNTH_MESSAGE_BYTES, statusTrailers, trailersOnlyHeaders } from "../../src/translate/local-reply.js";
import { decodeGrpcMessage } from "../../src/translate/grpc-message.js";

describe("trailersOnlyHeaders()", () => {
  it("builds a complete Trailers-Only block with :status 200 and the gRPC content-type", () => {
    expect(trailersOnlyHeaders(outcome(14, "no healthy upstream", "upstream_unreachable"))).toEqual({
      ":status": 200,
      "content-type": "application/grpc",
      "grpc-status": "14",
      "grpc-message": "no healthy upstream",
    });
  });

  it("carries the call's reply content-type when given one (the request's own subtype)", () => {
    expect(trailersOnlyHeaders(outcome(12, "no route", "no_route"), "application/grpc+json")["content-type"]).toBe("application/grpc+json");
  });

  it("keeps an early abort's HTTP status", () => {
    expect(trailersOnlyHeaders(outcome(3, 'invalid gRPC request content-type "text/plain"', "bad_request", 415))).toMatchObject({
      ":status": 415,
      "grpc-status": "3",
      "grpc-message": 'invalid gRPC request content-type "text/plain"',
    });
  });

  it("percent-encodes the message in grpc-go's format", () => {
    expect(trailersOnlyHeaders(outcome(2, "100% «fail»\n", "upstream_protocol"))["grpc-message"]).toBe("100%25 %C2%ABfail%C2%BB%0A");
  });

  it("sends grpc-message even when it is empty, as grpc-go does", () => {
    expect(trailersOnlyHeaders(outcome(0, "", "upstream"))["grpc-message"]).toBe("");
  });

  it("caps a long message at MAX_SYNTH_MESSAGE_BYTES before encoding", () => {
    const h = trailersOnlyHeaders(outcome(13, "é".repeat(10_000), "upstream_protocol"));
    const msg = h["grpc-message"] as string;
    expect(decodeGrpcMessage(msg)).toBe("é".repeat(MAX_SYNTH_MESSAGE_BYTES / 2));
    expect(msg.length).toBeLessThanOrEqual(3 * MAX_SYNTH_MESSAGE_BYTES);
  });

  it("writes codes outside 0..16 as plain decimals", () => {
    expect(trailersOnlyHeaders(outcome(42, "x", "upstream"))["grpc-status"]).toBe("42");
  });
});

describe("statusTrailers()", () => {
  it("builds only grpc-status and grpc-message, with no pseudo-headers", () => {
    expect(statusTrailers(outcome(8, "grpc: received message larger than max (4194305 vs. 4194304)", "message_too_large"))).toEqual({
      "grpc-status": "8",
      "grpc-message": "grpc: received message larger than max (4194305 vs. 4194304)",
    });
  });
});
