// CORS for gRPC-Web and Connect (a listener's `cors: { allowOrigins }`): which origins a browser page may
// call from, the preflight answer, and the headers on the actual response. A refused origin gets
// no CORS header at all, so the browser refuses the response itself (the call may still reach
// dojang from a non-browser client, which CORS does not concern).
//
// The response exposes grpc-status, grpc-message and grpc-status-details-bin: without that, a
// Trailers-Only status in the headers is invisible to the page (grpc/grpc-web#962).

/** What a preflight allows for one protocol: its methods and the request headers its clients send. */
export interface PreflightAllow {
  readonly methods: readonly string[];
  readonly headers: readonly string[];
}
/** gRPC-Web: POST, and the request headers a gRPC-Web client sends (always allowed in a preflight). */
export const WEB_PREFLIGHT: PreflightAllow = { methods: ["POST"], headers: ["content-type", "x-grpc-web", "x-user-agent", "grpc-timeout"] };
/** Connect: GET too (a Connect GET needs no preflight, but may have one), and a Connect client's headers besides gRPC-Web's. */
export const CONNECT_PREFLIGHT: PreflightAllow = {
  methods: ["GET", "POST"],
  headers: [...WEB_PREFLIGHT.headers, "connect-protocol-version", "connect-timeout-ms", "connect-content-encoding", "connect-accept-encoding", "content-encoding"],
};

/** The preflight allowances of the protocols a listener takes, together (dispatch.ts: each row's). */
export function joinPreflight(each: readonly PreflightAllow[]): PreflightAllow {
  const methods = new Set<string>();
  const headers = new Set<string>();
  for (const a of each) {
    for (const m of a.methods) methods.add(m);
    for (const h of a.headers) headers.add(h);
  }
  return { methods: [...methods].sort(), headers: [...headers] };
}
// (and a rate-limit refusal's hint: grpc-retry-pushback-ms and x-ratelimit-*)
const EXPOSE = "grpc-status,grpc-message,grpc-status-details-bin,grpc-retry-pushback-ms,x-ratelimit-limit,x-ratelimit-remaining,x-ratelimit-reset";
/** How long a browser may cache the preflight answer (seconds). */
const MAX_AGE = "600";

/** The CORS answer for one request (responseCors): headers to add, or none. */
export type CorsHeaders = Readonly<Record<string, string>> | null;

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
 * The preflight (OPTIONS) answer: 204 with the allow headers for an allowed origin asking for a
 * method `allow` names (the listener's protocols' together; gRPC-Web's alone by default); null for
 * a refused one (the caller answers without CORS headers).
 */
export function preflightCors(p: CorsPolicy | null, origin: string | undefined, method: string | undefined, requested: string | undefined, allow: PreflightAllow = WEB_PREFLIGHT): Record<string, string> | null {
  if (p === null || origin === undefined || !originAllowed(p, origin)) return null;
  const m = method?.toUpperCase();
  if (m !== undefined && !allow.methods.includes(m)) return null;
  const names = new Set(allow.headers);
  if (requested !== undefined) {
    for (const n of requested.split(",")) {
      const t = n.trim().toLowerCase();
      // a token (RFC 9110 field-name): anything else is not echoed back
      if (t !== "" && /^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(t)) names.add(t);
    }
  }
  return {
    "access-control-allow-origin": origin,
    "access-control-allow-methods": allow.methods.join(","),
    "access-control-allow-headers": [...names].join(","),
    "access-control-max-age": MAX_AGE,
    vary: "Origin",
  };
}
