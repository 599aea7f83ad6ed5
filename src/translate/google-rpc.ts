// The google.rpc types a JSON error body is made of, carried by dojang so that a status's details
// print whatever the listener's descriptor set holds: google/rpc/status.proto (Status: code,
// message, details as Any) and google/rpc/error_details.proto (ErrorInfo, RetryInfo, DebugInfo,
// QuotaFailure, PreconditionFailure, BadRequest, RequestInfo, ResourceInfo, Help,
// LocalizedMessage), from googleapis (Apache License 2.0, Copyright Google LLC).
//
// Each is its FileDescriptorProto serialized and base64-encoded, exactly as the Go module
// google.golang.org/genproto/googleapis/rpc ships it (test/engines/grpc-gateway prints these with
// `grpc-gateway descriptors`; test/behaviour/json-transcoding-gateway.test.ts checks they are
// equal). The well-known types they import, and the others protojson resolves in an Any, come
// from @bufbuild/protobuf's own copies.
//
// Pure: no I/O.
import { createFileRegistry, createRegistry, fromBinary, type DescFile, type DescMessage, type Registry } from "@bufbuild/protobuf";
import {
  FileDescriptorProtoSchema,
  file_google_protobuf_any,
  file_google_protobuf_api,
  file_google_protobuf_duration,
  file_google_protobuf_empty,
  file_google_protobuf_field_mask,
  file_google_protobuf_source_context,
  file_google_protobuf_struct,
  file_google_protobuf_timestamp,
  file_google_protobuf_type,
  file_google_protobuf_wrappers,
} from "@bufbuild/protobuf/wkt";

const STATUS_PROTO = "Chdnb29nbGUvcnBjL3N0YXR1cy5wcm90bxIKZ29vZ2xlLnJwYxoZZ29vZ2xlL3Byb3RvYnVmL2FueS5wcm90byJmCgZTdGF0dXMSEgoEY29kZRgBIAEoBVIEY29kZRIYCgdtZXNzYWdlGAIgASgJUgdtZXNzYWdlEi4KB2RldGFpbHMYAyADKAsyFC5nb29nbGUucHJvdG9idWYuQW55UgdkZXRhaWxzQl4KDmNvbS5nb29nbGUucnBjQgtTdGF0dXNQcm90b1ABWjdnb29nbGUuZ29sYW5nLm9yZy9nZW5wcm90by9nb29nbGVhcGlzL3JwYy9zdGF0dXM7c3RhdHVzogIDUlBDYgZwcm90bzM=";

const ERROR_DETAILS_PROTO =
  "Ch5nb29nbGUvcnBjL2Vycm9yX2RldGFpbHMucHJvdG8SCmdvb2dsZS5ycGMaHmdvb2dsZS9wcm90b2J1Zi9kdXJhdGlvbi5wcm90byK5AQoJRXJyb3JJbmZvEhYKBnJlYXNvbhgBIAEoCVIGcmVhc29uEhYKBmRvbWFpbhgCIAEoCVIGZG9tYWluEj8KCG1ldGFkYXRhGAMgAygLMiMuZ29vZ2xlLnJwYy5FcnJvckluZm8uTWV0YWRhdGFFbnRyeVIIbWV0YWRhdGEaOwoNTWV0YWRhdGFFbnRyeRIQCgNrZXkYASABKAlSA2tleRIUCgV2YWx1ZRgCIAEoCVIFdmFsdWU6AjgBIkcKCVJldHJ5SW5mbxI6CgtyZXRyeV9kZWxheRgBIAEoCzIZLmdvb2dsZS5wcm90b2J1Zi5EdXJhdGlvblIKcmV0cnlEZWxheSJICglEZWJ1Z0luZm8SIwoNc3RhY2tfZW50cmllcxgBIAMoCVIMc3RhY2tFbnRyaWVzEhYKBmRldGFpbBgCIAEoCVIGZGV0YWlsIo4ECgxRdW90YUZhaWx1cmUSQgoKdmlvbGF0aW9ucxgBIAMoCzIiLmdvb2dsZS5ycGMuUXVvdGFGYWlsdXJlLlZpb2xhdGlvblIKdmlvbGF0aW9ucxq5AwoJVmlvbGF0aW9uEhgKB3N1YmplY3QYASABKAlSB3N1YmplY3QSIAoLZGVzY3JpcHRpb24YAiABKAlSC2Rlc2NyaXB0aW9uEh8KC2FwaV9zZXJ2aWNlGAMgASgJUgphcGlTZXJ2aWNlEiEKDHF1b3RhX21ldHJpYxgEIAEoCVILcXVvdGFNZXRyaWMSGQoIcXVvdGFfaWQYBSABKAlSB3F1b3RhSWQSYgoQcXVvdGFfZGltZW5zaW9ucxgGIAMoCzI3Lmdvb2dsZS5ycGMuUXVvdGFGYWlsdXJlLlZpb2xhdGlvbi5RdW90YURpbWVuc2lvbnNFbnRyeVIPcXVvdGFEaW1lbnNpb25zEh8KC3F1b3RhX3ZhbHVlGAcgASgDUgpxdW90YVZhbHVlEjEKEmZ1dHVyZV9xdW90YV92YWx1ZRgIIAEoA0gAUhBmdXR1cmVRdW90YVZhbHVliAEBGkIKFFF1b3RhRGltZW5zaW9uc0VudHJ5EhAKA2tleRgBIAEoCVIDa2V5EhQKBXZhbHVlGAIgASgJUgV2YWx1ZToCOAFCFQoTX2Z1dHVyZV9xdW90YV92YWx1ZSK9AQoTUHJlY29uZGl0aW9uRmFpbHVyZRJJCgp2aW9sYXRpb25zGAEgAygLMikuZ29vZ2xlLnJwYy5QcmVjb25kaXRpb25GYWlsdXJlLlZpb2xhdGlvblIKdmlvbGF0aW9ucxpbCglWaW9sYXRpb24SEgoEdHlwZRgBIAEoCVIEdHlwZRIYCgdzdWJqZWN0GAIgASgJUgdzdWJqZWN0EiAKC2Rlc2NyaXB0aW9uGAMgASgJUgtkZXNjcmlwdGlvbiKMAgoKQmFkUmVxdWVzdBJQChBmaWVsZF92aW9sYXRpb25zGAEgAygLMiUuZ29vZ2xlLnJwYy5CYWRSZXF1ZXN0LkZpZWxkVmlvbGF0aW9uUg9maWVsZFZpb2xhdGlvbnMaqwEKDkZpZWxkVmlvbGF0aW9uEhQKBWZpZWxkGAEgASgJUgVmaWVsZBIgCgtkZXNjcmlwdGlvbhgCIAEoCVILZGVzY3JpcHRpb24SFgoGcmVhc29uGAMgASgJUgZyZWFzb24SSQoRbG9jYWxpemVkX21lc3NhZ2UYBCABKAsyHC5nb29nbGUucnBjLkxvY2FsaXplZE1lc3NhZ2VSEGxvY2FsaXplZE1lc3NhZ2UiTwoLUmVxdWVzdEluZm8SHQoKcmVxdWVzdF9pZBgBIAEoCVIJcmVxdWVzdElkEiEKDHNlcnZpbmdfZGF0YRgCIAEoCVILc2VydmluZ0RhdGEikAEKDFJlc291cmNlSW5mbxIjCg1yZXNvdXJjZV90eXBlGAEgASgJUgxyZXNvdXJjZVR5cGUSIwoNcmVzb3VyY2VfbmFtZRgCIAEoCVIMcmVzb3VyY2VOYW1lEhQKBW93bmVyGAMgASgJUgVvd25lchIgCgtkZXNjcmlwdGlvbhgEIAEoCVILZGVzY3JpcHRpb24ibwoESGVscBIrCgVsaW5rcxgBIAMoCzIVLmdvb2dsZS5ycGMuSGVscC5MaW5rUgVsaW5rcxo6CgRMaW5rEiAKC2Rlc2NyaXB0aW9uGAEgASgJUgtkZXNjcmlwdGlvbhIQCgN1cmwYAiABKAlSA3VybCJEChBMb2NhbGl6ZWRNZXNzYWdlEhYKBmxvY2FsZRgBIAEoCVIGbG9jYWxlEhgKB21lc3NhZ2UYAiABKAlSB21lc3NhZ2VCbAoOY29tLmdvb2dsZS5ycGNCEUVycm9yRGV0YWlsc1Byb3RvUAFaP2dvb2dsZS5nb2xhbmcub3JnL2dlbnByb3RvL2dvb2dsZWFwaXMvcnBjL2VycmRldGFpbHM7ZXJyZGV0YWlsc6ICA1JQQ2IGcHJvdG8z";

/** The well-known types (google/protobuf/*.proto with a JSON form or used in an Any). */
const WELL_KNOWN: readonly DescFile[] = [
  file_google_protobuf_any,
  file_google_protobuf_api,
  file_google_protobuf_duration,
  file_google_protobuf_empty,
  file_google_protobuf_field_mask,
  file_google_protobuf_source_context,
  file_google_protobuf_struct,
  file_google_protobuf_timestamp,
  file_google_protobuf_type,
  file_google_protobuf_wrappers,
];

function file(base64: string): DescFile {
  const proto = fromBinary(FileDescriptorProtoSchema, decodeBase64(base64));
  const reg = createFileRegistry(proto, (name) => WELL_KNOWN.find((f) => f.proto.name === name));
  return reg.getFile(proto.name)!;
}

function decodeBase64(s: string): Uint8Array {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

let files: { status: DescFile; details: DescFile } | undefined;

function loaded(): { status: DescFile; details: DescFile } {
  files ??= { status: file(STATUS_PROTO), details: file(ERROR_DETAILS_PROTO) };
  return files;
}

/** google.rpc.Status, as dojang carries it. */
export function statusMessage(): DescMessage {
  return loaded().status.messages[0]!;
}

/**
 * A registry of the well-known types and the google.rpc types dojang carries, then the descriptor
 * set's own types (which win where a name is in both): an Any of a type the set does not hold
 * still resolves, as protojson resolves every type its Go program links.
 */
export function withCarriedTypes(own: Registry): Registry {
  const { status, details } = loaded();
  return createRegistry(...WELL_KNOWN, status, details, own);
}
