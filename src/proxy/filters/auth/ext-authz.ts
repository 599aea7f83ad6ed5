// The Authorization client: Envoy's envoy.service.auth.v3.Authorization/Check, one unary call on
// dojang's own upstream (upstream/unary.ts), on the cluster `extAuthz.cluster` names or the
// address's own (upstream/side-clusters.ts). The request is written straight from the call's
// attributes and the answer read back by src/translate/ext-authz-wire.ts. Each Check is a side
// call (upstream/side-call.ts): it settles once, within its timeout, on dojang's own timer,
// whatever the service does.
import { CHECK_PATH, decodeCheckResponse, encodeCheckRequest, type CheckFacts, type CheckResponseFields } from "../../../translate/ext-authz-wire.js";
import type { Cluster } from "../../upstream/cluster.js";
import type { SideClusters, SideService } from "../../upstream/side-clusters.js";
import { sideCall, type SideCallHandle, type SideOutcome } from "../../upstream/side-call.js";
import { startUnary, unaryTarget, type UnaryTarget } from "../../upstream/unary.js";

/** Where a route's checks go. */
export interface CheckTarget {
  /** the service in metrics and messages: the cluster's name, or its address */
  readonly label: string;
  readonly target: UnaryTarget;
  readonly timeoutMs: number;
}

/** The target of `service`'s checks (its cluster starts connecting now: the first Check's timeout is for the Check). */
export function checkTarget(side: SideClusters, clusters: ReadonlyMap<string, Cluster>, service: SideService, timeoutMs: number): CheckTarget {
  const r = side.route(service, clusters);
  return { label: r.label, target: unaryTarget(r.cluster, CHECK_PATH, r.authority, timeoutMs), timeoutMs };
}

/**
 * One Check within the target's timeout (the deadline also travels as grpc-timeout): `done` runs
 * exactly once, with the CheckResponse or the failure (every gRPC status counts, CANCELLED
 * included: a service's RST_STREAM(CANCEL) is its answer; "cancelled" only after the handle's
 * cancel()).
 */
export function check(t: CheckTarget, facts: CheckFacts, done: (o: SideOutcome<CheckResponseFields>) => void): SideCallHandle {
  // (a slice of node's buffer pool: every byte is written, see encodeCheckRequest)
  const message = encodeCheckRequest(facts, Buffer.allocUnsafe);
  return sideCall<CheckResponseFields>(t.timeoutMs, (settle) => startUnary(t.target, message, decodeCheckResponse, settle), done);
}
