// Loads test/vectors/grpc-go.json (derived from ../shared/spec/grpc_vectors.py); shared by the codec tests.
import { readFileSync } from "node:fs";

export interface GrpcGoVectors {
  readonly encodeDuration: readonly { ns: string; encoded: string; decodesTo: string }[];
  readonly encodeDurationGrpcGoTests: readonly { ns: string; encoded: string }[];
  readonly decodeTimeout: readonly DecodeTimeoutRow[];
  readonly decodeTimeoutGrpcGoTests: readonly DecodeTimeoutRow[];
  readonly encodeGrpcMessage: readonly { inputHex: string; encoded: string }[];
  readonly encodeGrpcMessageGrpcGoTests: readonly { inputHex: string; encoded: string }[];
  readonly decodeGrpcMessage: readonly { input: string; bytesHex: string }[];
  readonly decodeGrpcMessageGrpcGoTests: readonly { input: string; bytesHex: string }[];
  readonly roundTripGrpcGoTests: readonly { inputHex: string; bytesHex: string }[];
}
export type DecodeTimeoutRow = { input: string; ns: string } | { input: string; error: string; kind: string };

export const vectors = JSON.parse(
  readFileSync(new URL("../vectors/grpc-go.json", import.meta.url), "utf8"),
) as GrpcGoVectors;

export function fromHex(hex: string): Uint8Array {
  return Uint8Array.from(Buffer.from(hex, "hex"));
}
export function toHex(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString("hex");
}
