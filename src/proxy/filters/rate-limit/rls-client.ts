// The gRPC client of the global rate limit: Envoy's RateLimitService (envoy.service.ratelimit.v3,
// ShouldRateLimit) over @grpc/grpc-js, with the descriptors compiled from Envoy's .proto files
// (src/protos). One channel per distinct service address, shared by every route and every call
// that names it, for the life of the Dojang (closed by closeRlsPool in global.ts). global.ts
// loads this module with import() the first time a config has a global limit, so a process
// without one never loads grpc-js for it.
import * as grpc from "@grpc/grpc-js";
import { envoyServiceClient } from "../../../protos/channel.js";
import type { Descriptor, RlsResponse } from "../../../translate/rate-limit-global.js";
import type { Metrics, RlsResult } from "../../observe/metrics.js";
import type { RlsClient } from "./global.js";

type ShouldRateLimit = (req: unknown, md: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: RlsResponse) => void) => grpc.ClientUnaryCall;

/** The failure a grpc-js error stands for in dojang_rate_limit_service_calls_total. */
export function failureOf(err: grpc.ServiceError): RlsResult {
  if (err.code === grpc.status.DEADLINE_EXCEEDED) return "timeout";
  if (err.code === grpc.status.UNAVAILABLE) return "unavailable";
  return "error";
}

const EMPTY_METADATA = new grpc.Metadata();

/** A client for the service at `address` ("host:port"), counting into `metrics`. */
export function newRlsClient(address: string, metrics: Metrics): RlsClient {
  const client = envoyServiceClient("envoy.service.ratelimit.v3.RateLimitService", address);
  const call = (client as unknown as { ShouldRateLimit: ShouldRateLimit }).ShouldRateLimit.bind(client);
  const counters = metrics.rateLimitServiceCounters(address);
  return {
    address,
    ask(domain: string, descriptors: readonly Descriptor[], timeoutMs: number, done: (result: RlsResult, res: RlsResponse | undefined) => void) {
      // grpc-js takes the deadline as wall-clock milliseconds; it fails the call with
      // DEADLINE_EXCEEDED when it passes, whether or not the service ever answers
      const deadline = Date.now() + timeoutMs;
      return call({ domain, descriptors }, EMPTY_METADATA, { deadline }, (err, res) => {
        if (err !== null) {
          if (err.code === grpc.status.CANCELLED) return; // cancelled by us: the call ended first
          const f = failureOf(err);
          counters[f].inc();
          done(f, undefined);
          return;
        }
        const r = res ?? {};
        const result: RlsResult = r.overall_code === "OVER_LIMIT" ? "over_limit" : "ok";
        counters[result].inc();
        done(result, r);
      });
    },
    close() {
      client.close();
    },
  };
}
