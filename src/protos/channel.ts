/**
 * The generated grpc-js client class of a service in the loaded descriptors (the xDS client's
 * AggregatedDiscoveryService). The services dojang asks per call (RateLimitService, Authorization)
 * ride dojang's own upstream instead (src/proxy/upstream/unary.ts).
 */
import type { ServiceClientConstructor } from "@grpc/grpc-js";
import { protos } from "./load.js";

/** The generated client class of the service at `path` (e.g. "envoy.service.discovery.v3.AggregatedDiscoveryService"). */
export function serviceConstructor(path: string): ServiceClientConstructor {
  let node: unknown = protos();
  for (const part of path.split(".")) node = (node as Record<string, unknown> | undefined)?.[part];
  if (typeof node !== "function") throw new Error(`no service ${path} in the generated descriptors`);
  return node as ServiceClientConstructor;
}
