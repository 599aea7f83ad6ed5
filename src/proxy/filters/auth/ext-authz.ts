// The Authorization client: Envoy's envoy.service.auth.v3.Authorization/Check over gRPC (h2c),
// carried by @grpc/grpc-js with the channel the rate-limit service uses too (src/protos/channel.ts).
// One channel per address for the process (a reload that keeps the address keeps the channel).
// Each Check is a side call (upstream/side-call.ts): it settles once, within its timeout, on
// dojang's own timer, whatever the service does.
import type { Client, ClientUnaryCall, ServiceError } from "@grpc/grpc-js";
import { envoyServiceClient } from "../../../protos/channel.js";
import { failureOfGrpcCode, sideCall, type SideCallHandle, type SideOutcome } from "../../upstream/side-call.js";

type CheckFn = (req: Record<string, unknown>, opts: { deadline: number }, cb: (err: ServiceError | null, res?: Record<string, unknown>) => void) => ClientUnaryCall;

const clients = new Map<string, Client>();

/** The client for `target`, made now if it is not yet (the config's load calls this, so no call pays for it). */
export function clientFor(target: string): Client {
  let c = clients.get(target);
  if (c === undefined) {
    c = envoyServiceClient("envoy.service.auth.v3.Authorization", target);
    clients.set(target, c);
  }
  return c;
}

/**
 * One Check within `timeoutMs` (the deadline also travels as grpc-timeout): `done` runs exactly
 * once, with the CheckResponse or the failure (every gRPC status counts, CANCELLED included: a
 * service's RST_STREAM(CANCEL) arrives as CANCELLED; "cancelled" only after the handle's cancel()).
 */
export function check(target: string, req: Record<string, unknown>, timeoutMs: number, done: (o: SideOutcome<Record<string, unknown>>) => void): SideCallHandle {
  const c = clientFor(target) as unknown as { Check: CheckFn };
  return sideCall<Record<string, unknown>>(
    timeoutMs,
    (settle) => {
      const call = c.Check(req, { deadline: Date.now() + timeoutMs }, (err, res) =>
        settle(err !== null ? { result: failureOfGrpcCode(err.code), detail: `code ${err.code}${err.details ? `: ${err.details}` : ""}` } : { result: "ok", value: res ?? {} }),
      );
      return () => call.cancel();
    },
    done,
  );
}
