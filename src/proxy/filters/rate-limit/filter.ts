// Local rate limits per route (issue 12): `rateLimit: { callsPerSecond, burst, key }`, a token
// bucket per key (src/translate/token-bucket.ts), refilled lazily from the call's clock. A call
// with no token left ends at once with 8 RESOURCE_EXHAUSTED, decided_by rate_limited (not 14: a
// client must not retry it at once), and is never sent upstream.
//
// The refusal says when to come back (issue 18 item 8; `responseHeaders: false` turns it off):
// Envoy's local rate limit headers x-ratelimit-limit / -remaining / -reset (draft RFC RateLimit
// headers, version 03: the bucket's size, whole tokens left, whole seconds until a call would be
// admitted) and grpc-retry-pushback-ms (the milliseconds until the key's bucket has a token),
// which a gRPC client honours when RESOURCE_EXHAUSTED is in its retry policy's
// retryableStatusCodes (gRFC A6): it waits that long and retries, instead of its own back-off.
// Admitted calls carry none of them: Envoy (enable_x_ratelimit_headers) adds them to every
// response of the route, which here would cost each admitted call a filter object and three
// formatted numbers on the hot path, for a hint only a refused client needs.
//
// Cost: a listener none of whose routes has a rateLimit gets no factory at all; otherwise each
// call pays one array lookup (its route's limiter, null for a route without one) and, on a
// limited route, one bucket take. Only a refused call gets a filter (with its hint's header
// fields: allocated on refusals only): it ends the call in its request-head hook. On a route
// that also has auth (jwt, rbac, extAuthz), every call gets a small filter that takes the token
// in the request-head hook, after auth let the call through (AfterAuth).
import type { RouteConfig } from "../../../config/index.js";
import { Code, outcome } from "../../../translate/index.js";
import { KeyedBuckets, rateLimitHint } from "../../../translate/token-bucket.js";
import type { CallFilter, FilterCall, FilterFactory } from "../../call/filter.js";
import { rawGet, type OutgoingHeaders } from "../../call/headers.js";
import type { CompiledRoute } from "../../router.js";
import type { Cluster } from "../../upstream/cluster.js";

/** Keys kept per route (least recently used dropped), so a client cycling addresses or values cannot grow memory. */
export const MAX_KEYS = 10_000;

interface Limiter {
  readonly buckets: KeyedBuckets;
  /** "route" → null; "client_address" → ""; "metadata:<name>" → name */
  readonly header: string | null;
  readonly byAddress: boolean;
  readonly message: string;
  /** rateLimit.responseHeaders: a refusal carries x-ratelimit-* and grpc-retry-pushback-ms */
  readonly hints: boolean;
  /** the refusal without hints (one shared object) */
  readonly refusal: CallFilter;
}

const kind = (key: string): Pick<Limiter, "header" | "byAddress"> =>
  key === "client_address" ? { header: null, byAddress: true } : key.startsWith("metadata:") ? { header: key.slice("metadata:".length), byAddress: false } : { header: null, byAddress: false };

/** The filter a refused call gets: it ends the call before any attempt, with `extra` on its status. */
class Refusal implements CallFilter {
  constructor(
    private readonly message: string,
    private readonly extra: OutgoingHeaders | undefined,
  ) {}
  onRequestHead(c: FilterCall): boolean {
    c.finishLocal(outcome(Code.RESOURCE_EXHAUSTED, this.message, "rate_limited"), this.extra);
    return false;
  }
}

/** The refusal's hint for the bucket of `key`, as status fields. */
function refusalWithHint(l: Limiter, key: string): CallFilter {
  const b = l.buckets.peek(key);
  if (b === undefined) return l.refusal;
  const h = rateLimitHint(b, l.buckets.cfg);
  return new Refusal(l.message, {
    "x-ratelimit-limit": String(h.limit),
    "x-ratelimit-remaining": String(h.remaining),
    "x-ratelimit-reset": String(h.resetSeconds),
    "grpc-retry-pushback-ms": String(h.pushbackMs),
  });
}

/** A field's first value in a request head ("" when absent). */
function headKey(h: OutgoingHeaders | undefined, name: string): string {
  const v = h?.[name];
  return v === undefined ? "" : Array.isArray(v) ? (v[0] ?? "") : String(v);
}

/**
 * A route that also has auth (jwt, rbac, extAuthz: src/proxy/filters/auth, earlier in the chain)
 * takes its token in the request-head hook, after those have let the call through: a caller they
 * refuse spends no token. (The factories' forCall all run before any hook.) A `metadata:` key is
 * read then, from the request head as auth left it: a header auth set or removed counts as such,
 * so a client cannot pick its own bucket by sending a header a stage replaces.
 */
class AfterAuth implements CallFilter {
  constructor(
    private readonly l: Limiter,
    private readonly clientAddress: string,
    private readonly now: () => number,
  ) {}
  onRequestHead(c: FilterCall): boolean {
    const l = this.l;
    const key = l.byAddress ? this.clientAddress : l.header !== null ? headKey(c.upHeaders, l.header) : "";
    if (l.buckets.take(key, this.now())) return true;
    return (l.hints ? refusalWithHint(l, key) : l.refusal).onRequestHead!(c);
  }
}

/** The listener's local rate-limit filter factory; null when none of its routes has a local rateLimit (callsPerSecond). */
export function rateLimitFilterFactory(routes: readonly RouteConfig[], now: () => number): FilterFactory | null {
  if (!routes.some((r) => r.rateLimit?.callsPerSecond != null)) return null;
  const afterAuth = routes.map((r) => r.jwt !== null || r.rbac !== null || r.extAuthz !== null);
  const limiters: (Limiter | null)[] = routes.map((r) => {
    const rl = r.rateLimit;
    // a route with only a global limit (rateLimit.global, global.ts) has no bucket here
    if (rl === null || rl.callsPerSecond === null) return null;
    const message = `rate limited: more than ${rl.callsPerSecond} calls per second (burst ${rl.burst}) by ${rl.key}`;
    return {
      buckets: new KeyedBuckets({ ratePerSecond: rl.callsPerSecond, burst: rl.burst }, MAX_KEYS),
      ...kind(rl.key),
      message,
      hints: rl.responseHeaders,
      refusal: Object.freeze(new Refusal(message, undefined)),
    };
  });
  return {
    forCall(c: FilterCall, route: CompiledRoute<Cluster>, raw: readonly string[]): CallFilter | null {
      const l = limiters[route.index];
      if (l === undefined || l === null) return null;
      // (the address read once per connection: no getpeername per call)
      if (afterAuth[route.index] === true) return new AfterAuth(l, c.clientAddress, now);
      // no stage before this one: the client's head is the call's
      const key = l.byAddress ? c.clientAddress : l.header !== null ? (rawGet(raw, l.header) ?? "") : "";
      if (l.buckets.take(key, now())) return null;
      return l.hints ? refusalWithHint(l, key) : l.refusal;
    },
  };
}
