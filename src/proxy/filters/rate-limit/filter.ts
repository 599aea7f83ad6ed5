// Local rate limits per route (issue 12): `rateLimit: { callsPerSecond, burst, key }`, a token
// bucket per key (src/translate/token-bucket.ts), refilled lazily from the call's clock. A call
// with no token left ends at once with 8 RESOURCE_EXHAUSTED, decided_by rate_limited (not 14: a
// client must not retry it at once), and is never sent upstream.
//
// Cost: a listener none of whose routes has a rateLimit gets no factory at all; otherwise each
// call pays one array lookup (its route's limiter, null for a route without one) and, on a
// limited route, one bucket take. Only a refused call gets a filter (one shared object, no
// allocation per call): it ends the call in its request-head hook.
import type { RouteConfig } from "../../../config/index.js";
import { Code, outcome } from "../../../translate/index.js";
import { KeyedBuckets } from "../../../translate/token-bucket.js";
import type { CallFilter, FilterCall, FilterFactory } from "../../call/filter.js";
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
}

const kind = (key: string): Pick<Limiter, "header" | "byAddress"> =>
  key === "client_address" ? { header: null, byAddress: true } : key.startsWith("metadata:") ? { header: key.slice("metadata:".length), byAddress: false } : { header: null, byAddress: false };

/** The value of request header `name` in node's raw header list ([name, value, ...]); "" when absent. */
function rawHeader(raw: readonly string[], name: string): string {
  for (let i = 0; i < raw.length; i += 2) if (raw[i] === name) return raw[i + 1] ?? "";
  return "";
}

/** The one filter a refused call gets: it ends the call before any attempt. */
function refusing(message: string): CallFilter {
  return Object.freeze({
    onRequestHead(c: FilterCall): boolean {
      c.finishLocal(outcome(Code.RESOURCE_EXHAUSTED, message, "rate_limited"));
      return false;
    },
  });
}

/** The listener's rate-limit filter factory; null when none of its routes has a rateLimit. */
export function rateLimitFilterFactory(routes: readonly RouteConfig[], now: () => number): FilterFactory | null {
  if (!routes.some((r) => r.rateLimit !== null)) return null;
  const limiters: (Limiter | null)[] = routes.map((r) => {
    const rl = r.rateLimit;
    if (rl === null) return null;
    return {
      buckets: new KeyedBuckets({ ratePerSecond: rl.callsPerSecond, burst: rl.burst }, MAX_KEYS),
      ...kind(rl.key),
      message: `rate limited: more than ${rl.callsPerSecond} calls per second (burst ${rl.burst}) by ${rl.key}`,
    };
  });
  const refusals = limiters.map((l) => (l === null ? null : refusing(l.message)));
  return {
    forCall(c: FilterCall, route: CompiledRoute<Cluster>, raw: readonly string[]): CallFilter | null {
      const l = limiters[route.index];
      if (l === undefined || l === null) return null;
      const key = l.byAddress ? (c.clientAddress) : l.header !== null ? rawHeader(raw, l.header) : "";
      return l.buckets.take(key, now()) ? null : refusals[route.index]!;
    },
  };
}
