/**
 * A grpc-js client for one of the Envoy services dojang asks per call (RateLimitService,
 * Authorization): plaintext, one channel per address, with the options both want. These services
 * are sidecars or a few replicas asked on the hot path, so the channel is kept warm between
 * bursts, reconnects soon after an outage (grpc-js backs off up to 120 s by default), never
 * retries by itself (the caller's timeout is the whole budget), and keeps no channelz bookkeeping.
 */
import { credentials, type Client, type ServiceClientConstructor } from "@grpc/grpc-js";
import { protos } from "./load.js";

const OPTIONS = {
  "grpc.keepalive_time_ms": 30_000,
  "grpc.keepalive_timeout_ms": 10_000,
  "grpc.max_reconnect_backoff_ms": 5_000,
  "grpc.enable_retries": 0,
  "grpc.enable_channelz": 0,
} as const;

/** The generated client class of the service at `path` (e.g. "envoy.service.discovery.v3.AggregatedDiscoveryService"). */
export function serviceConstructor(path: string): ServiceClientConstructor {
  let node: unknown = protos();
  for (const part of path.split(".")) node = (node as Record<string, unknown> | undefined)?.[part];
  if (typeof node !== "function") throw new Error(`no service ${path} in the generated descriptors`);
  return node as ServiceClientConstructor;
}

/**
 * A client of the service at `path` (e.g. "envoy.service.auth.v3.Authorization") for `address`,
 * its channel connecting at once: the first call asked of it should not also pay for the
 * connection (grpc-js connects lazily otherwise), nor for the descriptors, loaded here.
 */
export function envoyServiceClient(path: string, address: string): Client {
  const c = new (serviceConstructor(path))(address, credentials.createInsecure(), OPTIONS);
  c.getChannel().getConnectivityState(true);
  return c;
}
