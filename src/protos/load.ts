/**
 * The protobuf services dojang speaks as a client (xDS, Envoy's RateLimitService, Envoy's
 * Authorization service), loaded once from the descriptors that scripts/protos.mjs generated at
 * build time. @grpc/grpc-js carries the calls; dojang hand-writes no gRPC.
 */
import { loadPackageDefinition, type GrpcObject } from "@grpc/grpc-js";
import { fromJSON, type PackageDefinition } from "@grpc/proto-loader";
import { DESCRIPTOR_JSON } from "./descriptor.gen.js";

/** keepCase: field names as in the .proto (snake_case), as Envoy's docs and control planes write them. */
export const LOADER_OPTIONS = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: false,
  oneofs: true,
} as const;

let definition: PackageDefinition | undefined;
let grpcObject: GrpcObject | undefined;

export function packageDefinition(): PackageDefinition {
  definition ??= fromJSON(JSON.parse(DESCRIPTOR_JSON), LOADER_OPTIONS);
  return definition;
}

export function protos(): GrpcObject {
  grpcObject ??= loadPackageDefinition(packageDefinition());
  return grpcObject;
}
