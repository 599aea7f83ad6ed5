// The gRPC client of the global rate limit: Envoy's RateLimitService (envoy.service.ratelimit.v3,
// ShouldRateLimit) over @grpc/grpc-js, with the descriptors compiled from Envoy's .proto files
// (src/protos). One channel per distinct service address, shared by every route and every call
// that names it, for the life of the Dojang (closed by closeRlsPool in global.ts). global.ts
// loads this module with import() the first time a config has a global limit, so a process
// without one never loads grpc-js for it. This is the I/O alone: global.ts runs each question
// as a side call (upstream/side-call.ts), which bounds it by dojang's own timer and counts it.
import * as grpc from "@grpc/grpc-js";
import { envoyServiceClient } from "../../../protos/channel.js";
import type { Descriptor, RlsResponse } from "../../../translate/rate-limit-global.js";
import { failureOfGrpcCode, type Settle } from "../../upstream/side-call.js";

/**
 * One service's client: one shared channel. Declared here, beside its one maker, so that global.ts
 * and this file do not import each other (house review 3, §3).
 */
export interface RlsClient {
  readonly address: string;
  /** Sends one ShouldRateLimit; its end goes to `settle` (any number of times: the side call takes the first); returns how to cancel it. */
  start(domain: string, descriptors: readonly Descriptor[], timeoutMs: number, settle: Settle<RlsResponse>): () => void;
  close(): void;
}

type ShouldRateLimit = (req: unknown, md: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: RlsResponse) => void) => grpc.ClientUnaryCall;

const EMPTY_METADATA = new grpc.Metadata();

/** A client for the service at `address` ("host:port"). */
export function newRlsClient(address: string): RlsClient {
  const client = envoyServiceClient("envoy.service.ratelimit.v3.RateLimitService", address);
  const call = (client as unknown as { ShouldRateLimit: ShouldRateLimit }).ShouldRateLimit.bind(client);
  return {
    address,
    start(domain: string, descriptors: readonly Descriptor[], timeoutMs: number, settle: Settle<RlsResponse>): () => void {
      // the deadline also travels to the service as grpc-timeout (grpc-js takes wall-clock ms)
      const c = call({ domain, descriptors }, EMPTY_METADATA, { deadline: Date.now() + timeoutMs }, (err, res) =>
        // every status counts, CANCELLED included: a service's RST_STREAM(CANCEL) arrives as
        // CANCELLED, and a cancel of dojang's own has settled before grpc-js reports it
        settle(err !== null ? { result: failureOfGrpcCode(err.code), detail: `code ${err.code}` } : { result: "ok", value: res ?? {} }),
      );
      return () => c.cancel();
    },
    close() {
      client.close();
    },
  };
}
