// Header rules per route (issue 12): `headers: { request: { add, remove }, response: { add, remove } }`,
// `rewriteAuthority` and `rewritePrefix`. Request rules change the head every attempt starts from
// (before the first one, so retries carry the same head); response rules change the head that
// goes to the client (a Trailers-Only answer's too). Statuses dojang answers itself (no route,
// limits, deadline) are not upstream responses and are left alone.
//
// Cost: routes without rules get no filter; a route with rules shares one frozen filter object
// among its calls (no allocation per call).
import type { RouteConfig } from "../../../config/index.js";
import type { CallFilter, FilterCall, FilterFactory } from "../../call/filter.js";
import type { OutgoingHeaders } from "../../call/headers.js";
import type { CompiledRoute } from "../../router.js";
import type { Cluster } from "../../upstream/cluster.js";

interface Rules {
  readonly reqAdd: readonly (readonly [string, string])[];
  readonly reqRemove: readonly string[];
  readonly resAdd: readonly (readonly [string, string])[];
  readonly resRemove: readonly string[];
  readonly authority: string | null;
  /** the part of :path the route matched, and what replaces it */
  readonly matched: string | null;
  readonly prefix: string | null;
}

function rulesOf(r: RouteConfig): Rules | null {
  if (r.headers === null && r.rewriteAuthority === null && r.rewritePrefix === null) return null;
  const m = r.match;
  const matched = m.path ?? (m.service !== undefined ? `/${m.service}/` : (m.prefix ?? "/"));
  return {
    reqAdd: Object.entries(r.headers?.request.add ?? {}),
    reqRemove: r.headers?.request.remove ?? [],
    resAdd: Object.entries(r.headers?.response.add ?? {}),
    resRemove: r.headers?.response.remove ?? [],
    authority: r.rewriteAuthority,
    matched: r.rewritePrefix === null ? null : matched,
    prefix: r.rewritePrefix,
  };
}

function apply(h: OutgoingHeaders, remove: readonly string[], add: readonly (readonly [string, string])[]): void {
  for (let i = 0; i < remove.length; i++) delete h[remove[i]!];
  for (let i = 0; i < add.length; i++) h[add[i]![0]] = add[i]![1];
}

function filterOf(rules: Rules): CallFilter {
  return Object.freeze({
    onRequestHead(c: FilterCall): boolean {
      const h = c.upHeaders;
      if (h === undefined) return true;
      apply(h, rules.reqRemove, rules.reqAdd);
      if (rules.authority !== null) h[":authority"] = rules.authority;
      if (rules.prefix !== null) {
        const p = h[":path"];
        if (typeof p === "string" && p.startsWith(rules.matched!)) h[":path"] = rules.prefix + p.slice(rules.matched!.length);
      }
      return true;
    },
    shapeResponseHead(_c: FilterCall, out: OutgoingHeaders): void {
      apply(out, rules.resRemove, rules.resAdd);
    },
  });
}

/** The listener's header-rules filter factory; null when none of its routes has rules. */
export function headerRulesFilterFactory(routes: readonly RouteConfig[]): FilterFactory | null {
  const filters = routes.map((r) => {
    const rules = rulesOf(r);
    return rules === null ? null : filterOf(rules);
  });
  if (filters.every((f) => f === null)) return null;
  return {
    forCall(_c: FilterCall, route: CompiledRoute<Cluster>): CallFilter | null {
      return filters[route.index] ?? null;
    },
  };
}
