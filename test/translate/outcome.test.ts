import { describe, expect, it } from "vitest";
import fc from "fast-check";
import {
  classifyResponseHead,
  DECIDED_BY,
  decideUpstreamEnd,
  outcome,
  type HeadVerdict,
  type ResponseHeadFacts,
  type UpstreamEndFacts,
} from "../../src/translate/outcome.js";

function head(f: Partial<ResponseHeadFacts>): HeadVerdict {
  return classifyResponseHead({ status: 200, contentType: "application/grpc", grpcStatus: undefined, endStream: false, ...f });
}

function end(f: Partial<UpstreamEndFacts>) {
  return decideUpstreamEnd({
    statusFixed: false, rstCode: undefined, endedWithoutTrailers: false, sessionLost: false, refused: false, budgetExpired: false, ...f,
  });
}

describe("DECIDED_BY", () => {
  it("is a closed table of snake_case keys with a one-line description each", () => {
    expect(Object.keys(DECIDED_BY).sort()).toEqual([
      "bad_request", "client_cancel", "deadline", "ext_authz", "fault", "jwt", "message_too_large", "no_route", "overflow", "overload", "rate_limit_service_failed", "rate_limited", "rate_limited_global", "rbac", "shutdown", "stream_idle", "upstream",
      "upstream_connection_lost", "upstream_http", "upstream_protocol", "upstream_reset", "upstream_reset_after_request", "upstream_unreachable",
    ]);
    for (const [k, v] of Object.entries(DECIDED_BY)) {
      expect(k).toMatch(/^[a-z]+(_[a-z]+)*$/);
      expect(v.length).toBeGreaterThan(10);
      expect(v).not.toContain("\n");
    }
  });
});

describe("outcome()", () => {
  it("defaults the HTTP status to 200", () => {
    expect(outcome(14, "x", "upstream_unreachable")).toEqual({ code: 14, message: "x", decidedBy: "upstream_unreachable", httpStatus: 200 });
  });

  it("keeps an early abort's HTTP status", () => {
    expect(outcome(3, "bad ct", "bad_request", 415).httpStatus).toBe(415);
  });
});

describe("classifyResponseHead()", () => {
  it("forwards a normal gRPC response head", () => {
    expect(head({})).toEqual({ kind: "forward" });
    expect(head({ contentType: "application/grpc+proto" })).toEqual({ kind: "forward" });
  });

  it.each([
    [200, "application/grpc", "0", true],
    [503, "application/grpc", "14", true],
    [415, "application/grpc", "3", true],
    [400, "application/grpc", "13", true],
    [200, "application/grpc", "0", false],
    [500, "application/grpc+json", "2", false],
  ] as const)("forwards :status %i with %s and grpc-status %s (endStream %s) whatever :status says", (status, contentType, grpcStatus, endStream) => {
    expect(head({ status, contentType, grpcStatus, endStream })).toEqual({ kind: "forward" });
  });

  it("reports a missing :status as INTERNAL, adding grpc-go's content-type note", () => {
    expect(head({ status: undefined, contentType: undefined })).toEqual({
      kind: "synthesize",
      outcome: { code: 13, message: "malformed header: missing HTTP status; malformed header: missing HTTP content-type", decidedBy: "upstream_protocol", httpStatus: 200 },
    });
    expect(head({ status: undefined })).toMatchObject({ outcome: { code: 13, message: "malformed header: missing HTTP status" } });
    expect(head({ status: undefined, contentType: "text/html", grpcStatus: "0" })).toMatchObject({
      outcome: { code: 13, message: 'malformed header: missing HTTP status; transport: received unexpected content-type "text/html"' },
    });
  });

  it("skips 1xx informational headers", () => {
    expect(head({ status: 100, contentType: undefined })).toEqual({ kind: "skip" });
    expect(head({ status: 103 })).toEqual({ kind: "skip" });
  });

  it("reports a 1xx with END_STREAM as a protocol error", () => {
    expect(head({ status: 103, endStream: true })).toEqual({
      kind: "synthesize",
      outcome: { code: 13, message: "protocol error: informational header with status code 103 must not have END_STREAM set", decidedBy: "upstream_protocol", httpStatus: 200 },
    });
  });

  it.each([
    [503, "text/html", undefined, 14, 'unexpected HTTP status code received from server: 503 (Service Unavailable); transport: received unexpected content-type "text/html"'],
    [404, undefined, undefined, 12, "unexpected HTTP status code received from server: 404 (Not Found); malformed header: missing HTTP content-type"],
    [431, "text/plain", undefined, 2, 'unexpected HTTP status code received from server: 431 (Request Header Fields Too Large); transport: received unexpected content-type "text/plain"'],
    [500, "text/plain", undefined, 2, 'unexpected HTTP status code received from server: 500 (Internal Server Error); transport: received unexpected content-type "text/plain"'],
    [401, "text/html", "0", 16, 'unexpected HTTP status code received from server: 401 (Unauthorized); transport: received unexpected content-type "text/html"'],
    [503, "application/grpc", undefined, 14, "unexpected HTTP status code received from server: 503 (Service Unavailable)"],
    [429, "application/grpc", undefined, 14, "unexpected HTTP status code received from server: 429 (Too Many Requests)"],
  ] as const)("maps :status %i with %s and grpc-status %s to %i via the HTTP table", (status, contentType, grpcStatus, code, message) => {
    expect(head({ status, contentType, grpcStatus })).toEqual({
      kind: "synthesize",
      outcome: { code, message, decidedBy: "upstream_http", httpStatus: 200 },
    });
  });

  it("maps :status 200 with a non-gRPC content-type to UNKNOWN even if grpc-status is 0", () => {
    expect(head({ contentType: undefined, grpcStatus: "0", endStream: true })).toEqual({
      kind: "synthesize",
      outcome: {
        code: 2,
        message: "unexpected HTTP status code received from server: 200 (OK); malformed header: missing HTTP content-type",
        decidedBy: "upstream_protocol",
        httpStatus: 200,
      },
    });
    expect(head({ contentType: "application/grpc-web" })).toMatchObject({ outcome: { code: 2, decidedBy: "upstream_protocol" } });
  });

  it("maps a Trailers-Only response without grpc-status to UNKNOWN", () => {
    const v = head({ endStream: true });
    expect(v).toMatchObject({ kind: "synthesize", outcome: { code: 2, decidedBy: "upstream_protocol" } });
    if (v.kind === "synthesize") expect(v.outcome.message).toContain("grpc-status");
  });

  it("returns shared verdict objects on the normal path (no allocation)", () => {
    expect(head({})).toBe(head({}));
    expect(head({ status: 100 })).toBe(head({ status: 100 }));
  });

  it("never forwards a head whose content-type is not gRPC, and never throws", () => {
    fc.assert(fc.property(
      fc.option(fc.integer({ min: 0, max: 999 }), { nil: undefined }),
      fc.option(fc.oneof(fc.constant("application/grpc"), fc.constant("text/html"), fc.string()), { nil: undefined }),
      fc.option(fc.oneof(fc.constant("0"), fc.string()), { nil: undefined }),
      fc.boolean(),
      (status, contentType, grpcStatus, endStream) => {
        const v = classifyResponseHead({ status, contentType, grpcStatus, endStream });
        const grpc = contentType !== undefined && /^application\/grpc($|[+;])/.test(contentType);
        if (v.kind === "forward") expect(grpc && status !== undefined).toBe(true);
        if (v.kind === "skip") expect(status !== undefined && status >= 100 && status < 200 && !endStream).toBe(true);
        if (v.kind === "synthesize") expect(v.outcome.httpStatus).toBe(200);
      },
    ));
  });
});

describe("decideUpstreamEnd()", () => {
  it("decides nothing once trailers fixed the status, whatever follows", () => {
    fc.assert(fc.property(fc.option(fc.nat(20), { nil: undefined }), fc.boolean(), fc.boolean(), fc.boolean(), fc.boolean(), (rstCode, a, b, c, d) => {
      expect(decideUpstreamEnd({ statusFixed: true, rstCode, endedWithoutTrailers: a, sessionLost: b, refused: c, budgetExpired: d })).toBeNull();
    }));
  });

  it("reports a lost upstream connection as UNAVAILABLE, not node's synthetic CANCEL", () => {
    expect(end({ sessionLost: true, rstCode: 8 })).toEqual({
      code: 14, message: "error reading from server: connection lost", decidedBy: "upstream_connection_lost", httpStatus: 200,
    });
    expect(end({ sessionLost: true, rstCode: 8, budgetExpired: true, refused: true })).toMatchObject({ code: 14, decidedBy: "upstream_connection_lost" });
  });

  it("reports REFUSED_STREAM or a GOAWAY-refused stream as UNAVAILABLE and not processed", () => {
    expect(end({ refused: true, rstCode: 7 })).toEqual({
      code: 14,
      message: "stream terminated by RST_STREAM with error code: REFUSED_STREAM (not processed upstream)",
      decidedBy: "upstream_reset",
      httpStatus: 200,
    });
    expect(end({ refused: true, rstCode: 8, budgetExpired: true })).toMatchObject({ code: 14 });
  });

  it("reports CANCEL after dojang's budget ran out as DEADLINE_EXCEEDED", () => {
    expect(end({ rstCode: 8, budgetExpired: true })).toEqual({ code: 4, message: "context deadline exceeded", decidedBy: "deadline", httpStatus: 200 });
  });

  it("reports CANCEL within the budget as CANCELLED", () => {
    expect(end({ rstCode: 8 })).toEqual({
      code: 1, message: "stream terminated by RST_STREAM with error code: CANCEL", decidedBy: "upstream_reset", httpStatus: 200,
    });
  });

  it.each([
    [0, 13, "NO_ERROR"], [1, 13, "PROTOCOL_ERROR"], [2, 13, "INTERNAL_ERROR"], [3, 8, "FLOW_CONTROL_ERROR"],
    [4, 13, "SETTINGS_TIMEOUT"], [5, 13, "STREAM_CLOSED"], [6, 13, "FRAME_SIZE_ERROR"], [7, 14, "REFUSED_STREAM"],
    [9, 13, "COMPRESSION_ERROR"], [10, 13, "CONNECT_ERROR"], [11, 8, "ENHANCE_YOUR_CALM"], [12, 7, "INADEQUATE_SECURITY"],
    [13, 13, "HTTP_1_1_REQUIRED"], [85, 2, "unknown error code 0x55"], [0xffffffff, 2, "unknown error code 0xffffffff"],
  ] as const)("maps a reset with code %i to gRPC %i", (rstCode, code, name) => {
    expect(end({ rstCode })).toEqual({
      code, message: `stream terminated by RST_STREAM with error code: ${name}`, decidedBy: "upstream_reset", httpStatus: 200,
    });
  });

  it("maps END_STREAM without trailers (node reports rstCode 0) to INTERNAL with grpc-go's message", () => {
    const want = { code: 13, message: "server closed the stream without sending trailers", decidedBy: "upstream_protocol", httpStatus: 200 };
    expect(end({ endedWithoutTrailers: true, rstCode: 0 })).toEqual(want);
    expect(end({ endedWithoutTrailers: true })).toEqual(want);
  });

  it("lets a real reset code win over a clean-looking end", () => {
    expect(end({ endedWithoutTrailers: true, rstCode: 2 })).toMatchObject({ code: 13, decidedBy: "upstream_reset" });
    expect(end({ endedWithoutTrailers: true, rstCode: 8, budgetExpired: true })).toMatchObject({ code: 4, decidedBy: "deadline" });
  });

  it("falls back to INTERNAL decided by upstream_protocol when no fact explains the end", () => {
    expect(end({})).toMatchObject({ code: 13, decidedBy: "upstream_protocol" });
    expect(end({ budgetExpired: true })).toMatchObject({ code: 13, decidedBy: "upstream_protocol" });
  });

  it("always returns an Outcome with a known decider and HTTP 200 when the status is open", () => {
    fc.assert(fc.property(fc.option(fc.nat(0xffffffff), { nil: undefined }), fc.boolean(), fc.boolean(), fc.boolean(), fc.boolean(), (rstCode, a, b, c, d) => {
      const o = decideUpstreamEnd({ statusFixed: false, rstCode, endedWithoutTrailers: a, sessionLost: b, refused: c, budgetExpired: d });
      expect(o).not.toBeNull();
      if (o === null) return;
      expect(Object.keys(DECIDED_BY)).toContain(o.decidedBy);
      expect(o.httpStatus).toBe(200);
      expect(o.code).toBeGreaterThanOrEqual(0);
      expect(o.code).toBeLessThanOrEqual(16);
    }));
  });
});
