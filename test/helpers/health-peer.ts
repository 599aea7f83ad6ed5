// grpc.health.v1 as grpc-node's own package ships it (grpc-health-check: the official health.proto,
// read by @grpc/proto-loader and protobufjs), so the health tests' peers and clients never code the
// messages with dojang's src/translate/health.ts, the code under test (issue 0.4.1 item 10).
import type * as grpc from "@grpc/grpc-js";
import { service } from "grpc-health-check";

/** The Health service (Check and Watch) with the official message codecs; enums are their names. */
export const HEALTH_SERVICE = service as unknown as grpc.ServiceDefinition;

export type Serving = "UNKNOWN" | "SERVING" | "NOT_SERVING" | "SERVICE_UNKNOWN";
export interface HealthRequest {
  service: string;
}
export interface HealthResponse {
  status: Serving;
}

const check = HEALTH_SERVICE["Check"]!;

/** A HealthCheckRequest's bytes, as grpc-node writes them. */
export function healthRequestBytes(serviceName: string): Buffer {
  return check.requestSerialize({ service: serviceName });
}

/** A HealthCheckResponse's status, as grpc-node reads it. */
export function healthResponseStatus(b: Buffer): Serving {
  return (check.responseDeserialize(b) as HealthResponse).status;
}
