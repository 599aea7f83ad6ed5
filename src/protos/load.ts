/**
 * The protobuf services dojang speaks as a client, loaded once from the descriptors that
 * scripts/protos.mjs generated at build time. @grpc/grpc-js carries the xDS client's stream; the
 * side calls (Envoy's RateLimitService and Authorization service) ride dojang's own upstream with
 * hand-written codecs (src/translate/rls-wire.ts, ext-authz-wire.ts), which their tests check
 * against these descriptors.
 */
import { loadPackageDefinition, type GrpcObject } from "@grpc/grpc-js";
import { fromJSON, type PackageDefinition } from "@grpc/proto-loader";
import { DESCRIPTOR_JSON } from "./descriptor.gen.js";
import protobufjs, { type INamespace, type Root, type Type } from "protobufjs";

const { Root: RootCtor } = protobufjs;

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

let root: Root | undefined;

/** The protobufjs Root of the same descriptors (xDS decodes the `google.protobuf.Any` resources with it). */
export function protoRoot(): Root {
  if (root === undefined) {
    // resolved once: every decodeAny looks its type up here
    root = RootCtor.fromJSON(JSON.parse(DESCRIPTOR_JSON) as INamespace);
    root.resolveAll();
  }
  return root;
}

/** A message type by its full name ("envoy.config.cluster.v3.Cluster"); undefined when not loaded. */
export function lookupType(fullName: string): Type | undefined {
  try {
    return protoRoot().lookupType(fullName);
  } catch {
    return undefined;
  }
}

/**
 * A `google.protobuf.Any` ({ type_url, value }) decoded into a plain object with LOADER_OPTIONS'
 * conventions (snake_case, longs and enums as strings, oneofs named); throws when the type is not
 * loaded or the bytes do not decode. Nested Any values stay { type_url, value } (decode them with
 * this again).
 */
export function decodeAny(any: { readonly type_url?: string; readonly value?: Uint8Array }): { readonly typeName: string; readonly value: Record<string, unknown> } {
  const url = any.type_url ?? "";
  const typeName = url.slice(url.lastIndexOf("/") + 1);
  const t = lookupType(typeName);
  if (t === undefined) throw new Error(`unknown type ${JSON.stringify(url)}`);
  const msg = t.decode(any.value ?? new Uint8Array(0));
  return { typeName, value: t.toObject(msg, { ...LOADER_OPTIONS, bytes: Buffer }) };
}
