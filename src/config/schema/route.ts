// A route's schema: match, timeout, retry, rate limit, header rules, auth (schema/auth.ts) (strict: an unknown key is an error).

import { z } from "zod";
import { describeValue } from "../issues.js";
import { DEFAULTS, LIMITS, RULE_FORBIDDEN, RULE_HEADER_RE, type GlobalDescriptorEntry, type GlobalRateLimitConfig, type RateLimitConfig, type RetryConfig, type RouteMatch } from "../types.js";
import { extAuthz, jwt, rbac } from "./auth.js";
import { count, durationMs, expected, flag, grpcCode, hostPort, name, nonEmptyText, routeTimeout, sizeBytes } from "./scalars.js";

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

/** A rate-limit key: "route", "client_address" or "metadata:<lower-case header name>". */
const RATE_LIMIT_KEY_RE = /^(route|client_address|metadata:[0-9a-z!#$%&'*+.^_`|~-]+)$/;
/** Where a global descriptor entry's value comes from. */
const ENTRY_FROM_RE = /^(client_address|service|method|metadata:[0-9a-z!#$%&'*+.^_`|~-]+)$/;
const descriptorEntry = z
  .strictObject(
    {
      key: nonEmptyText("a descriptor key like \"remote_address\""),
      from: z
        .string({ error: expected('"client_address", "service", "method" or "metadata:<name>"') })
        .regex(ENTRY_FROM_RE, 'must be "client_address", "service", "method" or "metadata:<lower-case header name>"')
        .optional(),
      value: nonEmptyText("a literal descriptor value").optional(),
    },
    { error: expected('a descriptor entry like { key: remote_address, from: client_address } or { key: generic_key, value: edge }') },
  )
  .superRefine((e, ctx) => {
    if ((e.from === undefined) === (e.value === undefined)) ctx.addIssue({ code: "custom", message: "give exactly one of from and value" });
  })
  .transform((e): GlobalDescriptorEntry => {
    if (e.value !== undefined) return { key: e.key, source: { kind: "literal", value: e.value } };
    const f = e.from!;
    if (f.startsWith("metadata:")) return { key: e.key, source: { kind: "header", name: f.slice("metadata:".length) } };
    return { key: e.key, source: { kind: f as "client_address" | "service" | "method" } };
  });
const globalRateLimit = z
  .strictObject(
    {
      service: hostPort(false).optional(),
      cluster: name.optional(),
      domain: nonEmptyText('the rate-limit domain, like "edge"'),
      timeout: durationMs(1).default(DEFAULTS.rateLimitGlobal.timeoutMs),
      failureModeDeny: flag.default(false),
      descriptors: z
        .array(z.array(descriptorEntry, { error: expected("a descriptor: a list of entries") }).min(1, "a descriptor needs at least one entry"), {
          error: expected("a list of descriptors"),
        })
        .min(1, "needs at least one descriptor")
        .max(16, "at most 16 descriptors"),
    },
    { error: expected("a global rate limit mapping like { service: 127.0.0.1:8081, domain: edge, descriptors: [...] }") },
  )
  .superRefine((g, ctx) => {
    if ((g.service === undefined) === (g.cluster === undefined)) {
      ctx.addIssue({ code: "custom", path: g.service === undefined ? ["service"] : ["cluster"], message: g.service === undefined ? 'needs service ("host:port") or cluster (a cluster\'s name)' : "give service or cluster, not both" });
    }
  })
  .transform(
    (g): GlobalRateLimitConfig => ({
      service: g.service ?? null,
      cluster: g.cluster ?? null,
      domain: g.domain,
      timeoutMs: g.timeout,
      failureModeDeny: g.failureModeDeny,
      descriptors: g.descriptors,
    }),
  );
const rateLimit = z
  .strictObject(
    {
      callsPerSecond: z
        .number({ error: expected("a number of calls per second") })
        .max(1_000_000_000, "must be at most 1000000000")
        .refine((v) => v > 0, "must be more than 0")
        .optional(),
      burst: count({ min: 1, max: 1_000_000_000 }).optional(),
      key: z
        .string({ error: expected('"route", "client_address" or "metadata:<name>"') })
        .regex(RATE_LIMIT_KEY_RE, 'must be "route", "client_address" or "metadata:<lower-case header name>"')
        .default("route"),
      responseHeaders: flag.default(true),
      global: globalRateLimit.nullable().default(null),
    },
    { error: expected("a rateLimit mapping") },
  )
  .superRefine((r, ctx) => {
    if (r.callsPerSecond === undefined && r.global === null) ctx.addIssue({ code: "custom", path: ["callsPerSecond"], message: "needs callsPerSecond (a local limit), global, or both" });
    if (r.callsPerSecond === undefined && r.burst !== undefined) ctx.addIssue({ code: "custom", path: ["burst"], message: "burst needs callsPerSecond" });
  })
  .transform(
    (r): RateLimitConfig => ({
      callsPerSecond: r.callsPerSecond ?? null,
      burst: r.callsPerSecond === undefined ? 0 : (r.burst ?? Math.max(1, Math.ceil(r.callsPerSecond))),
      key: r.key,
      responseHeaders: r.responseHeaders,
      global: r.global,
    }),
  );

const ruleHeaderName = z
  .string({ error: expected("a header name") })
  .regex(RULE_HEADER_RE, "must be a lower-case header name (no pseudo-headers)")
  .refine((n) => !RULE_FORBIDDEN.has(n), "is owned by HTTP/2 or gRPC framing and cannot be changed by a rule");
const headerRuleSet = z
  .strictObject(
    {
      add: z.record(ruleHeaderName, z.string({ error: expected("a header value") })).default({}),
      remove: z.array(ruleHeaderName, { error: expected("a list of header names") }).default([]),
    },
    { error: expected("a mapping with add and remove") },
  )
  .default({ add: {}, remove: [] });
const headerRules = z.strictObject({ request: headerRuleSet, response: headerRuleSet }, { error: expected("a mapping with request and response") });

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
