// The Authorization client: Envoy's envoy.service.auth.v3.Authorization/Check over gRPC (h2c),
// carried by @grpc/grpc-js with the channel the rate-limit service uses too (src/protos/channel.ts).
// One channel per address for the process (a reload that keeps the address keeps the channel).
import type { Client } from "@grpc/grpc-js";
import { envoyServiceClient } from "../../../protos/channel.js";

type CheckFn = (req: Record<string, unknown>, opts: { deadline: number }, cb: (err: Error | null, res?: Record<string, unknown>) => void) => unknown;

const clients = new Map<string, Client>();

function clientFor(target: string): Client {
  let c = clients.get(target);
  if (c === undefined) {
    c = envoyServiceClient("envoy.service.auth.v3.Authorization", target);
    clients.set(target, c);
  }
  return c;
}

/** One Check within `timeoutMs` (the deadline travels as grpc-timeout); rejects on any failure. */
export function check(target: string, req: Record<string, unknown>, timeoutMs: number): Promise<Record<string, unknown>> {
  const c = clientFor(target) as unknown as { Check: CheckFn };
  return new Promise((resolve, reject) => {
    c.Check(req, { deadline: Date.now() + timeoutMs }, (err, res) => (err !== null ? reject(err) : resolve(res ?? {})));
  });
}
