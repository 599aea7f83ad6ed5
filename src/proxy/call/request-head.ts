// The request head, both ways: the checks a gRPC request head must pass before anything goes
// upstream (grpc-go's server's early aborts, spec §11.7), and the head an attempt sends
// upstream (pseudo-headers, the forwardable fields copied from rawHeaders in one pass, the
// verified client identity, grpc-timeout, te, x-request-id), and the request ids dojang makes.
// Module functions: no per-call object.
import type { IncomingHttpHeaders } from "node:http2";
import { randomBytes } from "node:crypto";
import { Code, MAX_INT64_NS, XFCC, decodeTimeout, encodeTimeout, isGrpcContentType, outcome, type Outcome } from "../../translate/index.js";
import type { Cluster } from "../upstream/cluster.js";
import type { Downstream } from "./downstream.js";
import { copyRequestHeaders, kClientCert, type OutgoingHeaders } from "./headers.js";

/** What the upstream head reads of its call (implemented by Call). */
export interface HeadHost {
  readonly path: string;
  readonly authority: string | undefined;
  readonly down: Downstream;
}

/** Request ids made here: a random per-process prefix and a counter, unique without a
 * UUID's cost per call (x-request-id from the client is kept as it is). */
const ID_PREFIX = randomBytes(6).toString("hex");
let idCounter = 0;
export function newRequestId(): string {
  return `${ID_PREFIX}-${(++idCounter).toString(36)}`;
}

/**
 * The request head's own checks, before the route: :method POST (405), a gRPC content-type
 * (415), a well-formed grpc-timeout (400); these go out with their HTTP status. Returns the
 * Outcome that refuses the call, else the client's grpc-timeout in ms (undefined: none sent).
 */
export function checkRequestHead(headers: IncomingHttpHeaders): Outcome | number | undefined {
  const method = headers[":method"];
  if (method !== "POST") {
    return outcome(Code.INTERNAL, `Received a HEADERS frame with :method "${String(method)}" which should be POST`, "bad_request", 405);
  }
  const ct = headers["content-type"];
  if (!isGrpcContentType(ct)) {
    return outcome(Code.INVALID_ARGUMENT, `invalid gRPC request content-type "${ct ?? ""}"`, "bad_request", 415);
  }
  const gt = headers["grpc-timeout"];
  if (typeof gt !== "string") return undefined;
  const d = decodeTimeout(gt);
  if (!d.ok) return outcome(Code.INTERNAL, `malformed grpc-timeout: ${d.error}`, "bad_request", 400);
  return Number(d.ns) / 1e6;
}

/** The grpc-timeout for `ms` left of a deadline (at least 1 ns; capped at int64 ns). */
export function timeoutHeaderFor(ms: number): string {
  const ns = ms * 1e6;
  return encodeTimeout(ns >= 9.2e18 ? MAX_INT64_NS : BigInt(Math.max(1, Math.ceil(ns))));
}

/**
 * The head the first attempt sends upstream, or a string naming the field that makes the
 * request this call's error alone (400 + 13). `timeoutHeader`: what is left of the deadline
 * (undefined: no deadline); `requestId`: set when dojang made the call's x-request-id.
 */
export function upstreamHead(c: HeadHost, cluster: Cluster, raw: readonly string[], timeoutHeader: string | undefined, requestId: string | undefined): OutgoingHeaders | string {
  const out: OutgoingHeaders = {
    ":method": "POST",
    // clusters[].tls: the upstream connection is https (RFC 9113 §8.3.1: the scheme of the target)
    ":scheme": cluster.cfg.tls === null ? "http" : "https",
    ":path": c.path,
    ":authority": c.authority ?? "",
  };
  // Checked in the same pass that copies: a field an upstream would take for a connection
  // error (bad -bin base64, a name or value gRPC forbids) is this call's error alone, 400 +
  // 13 as grpc-go's server answers malformed binary metadata (issue 10 item 9).
  const bad = copyRequestHeaders(out, raw, "grpc-timeout");
  if (bad !== null) return bad;
  // TLS listener with client certificates (src/proxy/downstream/tls.ts): the verified identity,
  // set once per connection; the client's own x-forwarded-client-cert was dropped above.
  const xfcc = c.down.session?.[kClientCert];
  if (xfcc !== undefined) out[XFCC] = xfcc;
  if (timeoutHeader !== undefined) out["grpc-timeout"] = timeoutHeader;
  if (out["te"] === undefined) out["te"] = "trailers";
  if (requestId !== undefined) out["x-request-id"] = requestId;
  return out;
}
