// A route's schema: match, timeout, retry, rate limit, header rules, auth (schema/auth.ts) (strict: an unknown key is an error).

import { z } from "zod";
import { describeValue } from "../issues.js";
import { DEFAULTS, LIMITS, type RetryConfig, type RouteMatch } from "../types.js";
import { extAuthz, jwt, rbac } from "./auth.js";
import { headerRules } from "./headers.js";
import { rateLimit } from "./rate-limit.js";
import { count, durationMs, expected, flag, grpcCode, nonEmptyText, routeTimeout, sizeBytes } from "./scalars.js";

const MiB = 1_048_576;

const MATCH_KINDS = ["prefix", "path", "service"] as const;

const routeMatch = z
  .strictObject(
    {
      prefix: nonEmptyText("a path prefix like \"/\"")
        .refine((s) => s === "" || s.startsWith("/"), { error: (iss) => `prefix ${describeValue(iss.input)} must start with "/"` })
        .optional(),
      path: nonEmptyText('a path like "/pkg.Svc/Method"')
        .refine((s) => s === "" || s.startsWith("/"), { error: (iss) => `path ${describeValue(iss.input)} must start with "/"` })
        .optional(),
      service: nonEmptyText('a service name like "pkg.Svc"')
        .refine((s) => !s.includes("/"), {
          error: (iss) => `service ${describeValue(iss.input)} must not contain "/" (use path: "/pkg.Svc/Method" to match one method)`,
        })
        .optional(),
      authority: nonEmptyText('a host like "api.example.com"').optional(),
    },
    { error: expected('a mapping like { prefix: "/" }') },
  )
  .superRefine((m, ctx) => {
    const given = MATCH_KINDS.filter((k) => m[k] !== undefined);
    if (given.length !== 1) {
      ctx.addIssue({
        code: "custom",
        message:
          given.length === 0
            ? "needs one of prefix, path or service"
            : `give only one of prefix, path or service (got ${given.join(" and ")})`,
      });
    }
  })
  .transform((m): RouteMatch => {
    // Build without undefined-valued keys (exactOptionalPropertyTypes; `"prefix" in match` is reliable).
    const out: { prefix?: string; path?: string; service?: string; authority?: string } = {};
    if (m.prefix !== undefined) out.prefix = m.prefix;
    if (m.path !== undefined) out.path = m.path;
    if (m.service !== undefined) out.service = m.service;
    if (m.authority !== undefined) out.authority = m.authority.toLowerCase();
    return out;
  });

const retry = z
  .strictObject(
    {
      retryOn: z.array(grpcCode, { error: expected("a list of gRPC codes") }).min(1, "needs at least one code").default([14 /* UNAVAILABLE */]),
      maxAttempts: count(LIMITS.maxAttempts).default(DEFAULTS.retry.maxAttempts),
      perTryTimeout: durationMs(1).nullable().default(DEFAULTS.retry.perTryTimeoutMs),
      backoff: z
        .strictObject(
          { base: durationMs(1).default(DEFAULTS.retry.backoffBaseMs), max: durationMs(1).default(DEFAULTS.retry.backoffMaxMs) },
          { error: expected("a mapping like { base: 25ms, max: 250ms }") },
        )
        .default({ base: DEFAULTS.retry.backoffBaseMs, max: DEFAULTS.retry.backoffMaxMs }),
      bufferBytes: sizeBytes({ min: 0, max: 64 * MiB }).default(DEFAULTS.retry.bufferBytes),
      retryResetAfterRequest: flag.default(DEFAULTS.retry.retryResetAfterRequest),
    },
    { error: expected("a retry mapping like { retryOn: [UNAVAILABLE], maxAttempts: 3 }") },
  )
  .superRefine((r, ctx) => {
    if (r.backoff.max < r.backoff.base) ctx.addIssue({ code: "custom", path: ["backoff", "max"], message: `must be at least backoff.base (${r.backoff.base}ms)` });
  })
  .transform(
    (r): RetryConfig => ({
      retryOn: [...new Set(r.retryOn)],
      maxAttempts: r.maxAttempts,
      perTryTimeoutMs: r.perTryTimeout,
      backoffBaseMs: r.backoff.base,
      backoffMaxMs: r.backoff.max,
      bufferBytes: r.bufferBytes,
      retryResetAfterRequest: r.retryResetAfterRequest,
    }),
  );

export const route = z.strictObject(
  {
    match: routeMatch,
    cluster: z.string({ error: expected("a cluster name") }).min(1, "must not be empty"),
    timeout: routeTimeout.default(DEFAULTS.route.timeoutMs),
    maxRequestMessageBytes: sizeBytes(LIMITS.messageBytes).default(DEFAULTS.route.maxRequestMessageBytes),
    maxResponseMessageBytes: sizeBytes(LIMITS.messageBytes).default(DEFAULTS.route.maxResponseMessageBytes),
    // Rules are validated by the fault filter's own parser (parse.ts, after this schema).
    faults: z.array(z.unknown(), { error: expected("a list of fault rules") }).default([]),
    streamIdleTimeout: durationMs(0).nullable().default(null),
    retry: retry.nullable().default(null),
    rateLimit: rateLimit.nullable().default(null),
    headers: headerRules.nullable().default(null),
    rewriteAuthority: z.string({ error: expected("an authority like \"api.internal:443\"") }).min(1, "must not be empty").nullable().default(null),
    rewritePrefix: z.string({ error: expected('a path prefix starting with "/"') }).refine((v) => v.startsWith("/"), 'must start with "/"').nullable().default(null),
    jwt: jwt.nullable().default(null),
    rbac: rbac.nullable().default(null),
    extAuthz: extAuthz.nullable().default(null),
  },
  { error: expected("a route mapping") },
).superRefine((r, ctx) => {
  // a claims condition reads the verified token: without jwt on the route it could never hold
  if (r.rbac !== null && r.jwt === null) {
    r.rbac.rules.forEach((x, i) => {
      if (Object.keys(x.claims).length > 0) ctx.addIssue({ code: "custom", path: ["rbac", "rules", i, "claims"], message: "claims conditions need jwt on the same route" });
    });
  }
});
