// CORS for gRPC-Web (a listener's `cors: { allowOrigins }`): which origins a browser page may
// call from, the preflight answer, and the headers on the actual response. A refused origin gets
// no CORS header at all, so the browser refuses the response itself (the call may still reach
// dojang from a non-browser client, which CORS does not concern).
//
// The response exposes grpc-status, grpc-message and grpc-status-details-bin: without that, a
// Trailers-Only status in the headers is invisible to the page (grpc/grpc-web#962).

/** The request headers a gRPC-Web client sends (always allowed in a preflight). */
const WEB_REQUEST_HEADERS = ["content-type", "x-grpc-web", "x-user-agent", "grpc-timeout"];
/** ... and a Connect client's (connect: true; a Connect GET needs no preflight, but may have one). */
const CONNECT_REQUEST_HEADERS = ["connect-protocol-version", "connect-timeout-ms", "connect-content-encoding", "connect-accept-encoding", "content-encoding"];
// (and a rate-limit refusal's hint: grpc-retry-pushback-ms and x-ratelimit-*)
const EXPOSE = "grpc-status,grpc-message,grpc-status-details-bin,grpc-retry-pushback-ms,x-ratelimit-limit,x-ratelimit-remaining,x-ratelimit-reset";
/** How long a browser may cache the preflight answer (seconds). */
const MAX_AGE = "600";

export interface CorsPolicy {
  /** "*" allows every origin */
  readonly any: boolean;
  readonly exact: ReadonlySet<string>;
  readonly patterns: readonly RegExp[];
}

/**
 * The policy for `allowOrigins` (lower-cased by the config): "*"; an exact origin
 * "https://app.example.com"; a wildcard "https://*.example.com" (any subdomain, that scheme); or
 * one without a scheme ("*.example.com", "app.example.com:8443"), which matches on any scheme.
 */
export function compileCors(allowOrigins: readonly string[]): CorsPolicy {
  let any = false;
  const exact = new Set<string>();
  const patterns: RegExp[] = [];
  for (const o of allowOrigins) {
    if (o === "*") any = true;
    else if (!o.includes("*") && o.includes("://")) exact.add(o);
    else {
      const scheme = o.includes("://") ? "" : "[a-z][a-z0-9+.-]*://";
      const body = o.replace(/[.+?^${}()|[\]\\/]/g, "\\$&").replace("*", "[a-z0-9-]+(?:\\.[a-z0-9-]+)*");
      patterns.push(new RegExp(`^${scheme}${body}$`));
    }
  }
  return { any, exact, patterns };
}

export function originAllowed(p: CorsPolicy, origin: string): boolean {
  if (p.any) return true;
  const o = origin.toLowerCase();
  if (p.exact.has(o)) return true;
  for (const r of p.patterns) if (r.test(o)) return true;
  return false;
}

/** Headers for the actual response to `origin`, or null (no origin, or refused). */
export function responseCors(p: CorsPolicy | null, origin: string | undefined): Record<string, string> | null {
  if (p === null || origin === undefined || !originAllowed(p, origin)) return null;
  return { "access-control-allow-origin": origin, "access-control-expose-headers": EXPOSE, vary: "Origin" };
}

/**
 * The preflight (OPTIONS) answer: 204 with the allow headers for an allowed origin asking for
 * POST (or GET, and Connect's headers, on a `connect` listener); null for a refused one (the caller answers without CORS headers).
 */
export function preflightCors(p: CorsPolicy | null, origin: string | undefined, method: string | undefined, requested: string | undefined, connect = false): Record<string, string> | null {
  if (p === null || origin === undefined || !originAllowed(p, origin)) return null;
  const m = method?.toUpperCase();
  if (m !== undefined && m !== "POST" && !(connect && m === "GET")) return null;
  const names = new Set(connect ? [...WEB_REQUEST_HEADERS, ...CONNECT_REQUEST_HEADERS] : WEB_REQUEST_HEADERS);
  if (requested !== undefined) {
    for (const n of requested.split(",")) {
      const t = n.trim().toLowerCase();
      // a token (RFC 9110 field-name): anything else is not echoed back
      if (t !== "" && /^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(t)) names.add(t);
    }
  }
  return {
    "access-control-allow-origin": origin,
    "access-control-allow-methods": connect ? "GET,POST" : "POST",
    "access-control-allow-headers": [...names].join(","),
    "access-control-max-age": MAX_AGE,
    vary: "Origin",
  };
}
