import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { GRPC_CONTENT_TYPE, grpcContentSubtype, grpcReplyContentType, isGrpcContentType } from "../../src/translate/content-type.js";

describe("grpcContentSubtype() follows grpc-go ContentSubtype", () => {
  it.each([
    ["application/grpc", ""],
    ["application/grpc+proto", "proto"],
    ["application/grpc+json", "json"],
    ["application/grpc;x", "x"],
    ["application/grpc+", ""],
    ["application/grpc;", ""],
    ["application/grpc;charset=utf-8", "charset=utf-8"],
  ] as const)("accepts %j with subtype %j", (v, sub) => {
    expect(grpcContentSubtype(v)).toBe(sub);
    expect(isGrpcContentType(v)).toBe(true);
  });

  it.each(["application/grpc-web", "application/grpcx", "application/grpc-web+proto", "text/html", "", "Application/GRPC", "application/GRPC", " application/grpc", "application/json"])(
    "rejects %j",
    (v) => {
      expect(grpcContentSubtype(v)).toBeUndefined();
      expect(isGrpcContentType(v)).toBe(false);
    },
  );

  it("treats a missing header as not gRPC", () => {
    expect(grpcContentSubtype(undefined)).toBeUndefined();
    expect(isGrpcContentType(undefined)).toBe(false);
  });

  it("exports the base content type", () => {
    expect(GRPC_CONTENT_TYPE).toBe("application/grpc");
  });

  it("agrees between the two functions on arbitrary strings", () => {
    fc.assert(fc.property(fc.oneof(fc.string(), fc.string().map((s) => "application/grpc" + s)), (v) => {
      expect(isGrpcContentType(v)).toBe(grpcContentSubtype(v) !== undefined);
    }));
  });
});

describe("grpcReplyContentType(): the content-type of a status dojang writes itself", () => {
  it.each([
    ["application/grpc+json", "application/grpc+json"],
    ["application/grpc+proto", "application/grpc+proto"],
    ["application/grpc+vnd.example-v1_x", "application/grpc+vnd.example-v1_x"],
    ["application/grpc+a", "application/grpc+a"],
  ] as const)("echoes the request's valid subtype: %j → %j", (v, want) => {
    expect(grpcReplyContentType(v)).toBe(want);
  });

  it.each([
    "application/grpc",
    "application/grpc+",
    "application/grpc;charset=utf-8",
    "application/grpc;",
    "application/grpc+json;charset=utf-8",
    "application/grpc+json\r\nx-injected: 1",
    "application/grpc+ json",
    "application/grpc+-json",
    "application/grpc+json/x",
    "application/grpc+" + "a".repeat(128),
    "application/grpc-web+json",
    "application/json",
    "text/html",
    "",
  ])("answers plain application/grpc for %j", (v) => {
    expect(grpcReplyContentType(v)).toBe("application/grpc");
  });

  it("answers plain application/grpc when the request had no content-type", () => {
    expect(grpcReplyContentType(undefined)).toBe("application/grpc");
  });

  it("is either the request's own value or application/grpc, and the echoed value is a gRPC content-type (property)", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.string().map((s) => `application/grpc+${s}`)), (v) => {
        const r = grpcReplyContentType(v);
        expect(r === v || r === "application/grpc").toBe(true);
        expect(isGrpcContentType(r)).toBe(true);
        expect(/^[\x21-\x7e]+$/.test(r)).toBe(true);
      }),
    );
  });
});
