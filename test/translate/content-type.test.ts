import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { GRPC_CONTENT_TYPE, grpcContentSubtype, isGrpcContentType } from "../../src/translate/content-type.js";

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
