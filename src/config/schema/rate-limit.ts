// A route's rate limits (src/proxy/filters/rate-limit): `rateLimit` (local token buckets per key)
// and `rateLimit.global` (Envoy's RateLimitService, asked per call); the zod schema and each key's
// documentation (the JSON Schema's descriptions, config/json-schema.ts), written once, here.
import { z } from "zod";
import { DEFAULTS, type GlobalDescriptorEntry, type GlobalRateLimitConfig, type RateLimitConfig } from "../types.js";
import { count, durationMs, expected, flag, hostPort, name, nonEmptyText } from "./scalars.js";
import { formatDuration } from "../units.js";
import { countKind, durationKind, FLAG, HOST_PORT_RE, NAME, withEnv, type KeyDoc } from "./key-doc.js";

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
export const rateLimit = z
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

/** The keys' documentation, by path (config/json-schema.ts KEYS). */
export const RATE_LIMIT_KEYS: Readonly<Record<string, KeyDoc>> = {
  "listeners[].routes[].rateLimit": {
    description: "A local rate limit: token buckets per key; a call over it ends 8 RESOURCE_EXHAUSTED (decided_by rate_limited). null = none.",
    default: null,
  },
  "listeners[].routes[].rateLimit.callsPerSecond": { description: "Tokens added per second (calls allowed per second, on average); more than 0.", kind: { type: "number", minimum: 0, maximum: 1_000_000_000 } },
  "listeners[].routes[].rateLimit.burst": { description: "The bucket's size: calls allowed at once above the rate. Default: callsPerSecond rounded up.", kind: countKind({ min: 1, max: 1_000_000_000 }) },
  "listeners[].routes[].rateLimit.key": {
    description: 'One bucket for the route ("route"), one per client IP address ("client_address"), or one per value of a request header ("metadata:<name>"; calls without it share one). At most 10000 keys, least recently used dropped.',
    kind: { type: "string", pattern: "^(route|client_address|metadata:[0-9a-z!#$%&'*+.^_`|~-]+)$" },
    default: "route",
  },
  "listeners[].routes[].rateLimit.responseHeaders": {
    description:
      "A refused call's status carries x-ratelimit-limit (the bucket's size), x-ratelimit-remaining (0), x-ratelimit-reset (whole seconds until a call would be admitted) and grpc-retry-pushback-ms (the milliseconds until then: a gRPC client whose retry policy retries RESOURCE_EXHAUSTED waits that long). Admitted calls carry none. false = none.",
    kind: FLAG,
    default: true,
  },
  "listeners[].routes[].rateLimit.global": {
    description:
      "A global rate limit: each call on the route asks an Envoy RateLimitService (ShouldRateLimit, e.g. envoyproxy/ratelimit) shared by every replica, after the local limit; OVER_LIMIT ends it 8 RESOURCE_EXHAUSTED (decided_by rate_limited_global). null = none.",
    default: null,
  },
  "listeners[].routes[].rateLimit.global.service": {
    description: 'The rate-limit service\'s gRPC address, "host:port": h2c, on a cluster of its own (one per address, no health checks). Give service or cluster.',
    kind: { type: "string", pattern: withEnv(HOST_PORT_RE) },
  },
  "listeners[].routes[].rateLimit.global.cluster": {
    description: "The cluster (by name, one of clusters) the questions ride, with its health checks, outlier detection, circuit breakers and TLS. Give service or cluster.",
    kind: NAME,
  },
  "listeners[].routes[].rateLimit.global.domain": { description: "The domain the service's limits are configured under.", kind: { type: "string", minLength: 1 } },
  "listeners[].routes[].rateLimit.global.timeout": {
    description: "The longest a call waits for the service's answer (the gRPC deadline of each ShouldRateLimit); past it the call is admitted (or refused with failureModeDeny).",
    kind: durationKind(1),
    default: formatDuration(DEFAULTS.rateLimitGlobal.timeoutMs),
  },
  "listeners[].routes[].rateLimit.global.failureModeDeny": {
    description: "When the service fails or is late: false admits the call (and counts it in dojang_rate_limit_service_calls_total); true refuses it with 14 UNAVAILABLE (decided_by rate_limit_service_failed).",
    kind: FLAG,
    default: false,
  },
  "listeners[].routes[].rateLimit.global.descriptors": { description: "The descriptors sent with each call (1 to 16); one whose entry has no value for the call is left out." },
  "listeners[].routes[].rateLimit.global.descriptors[]": { description: "A descriptor: a list of entries, in order." },
  "listeners[].routes[].rateLimit.global.descriptors[][]": { description: "An entry: key, and either from (a value of the call) or value (a literal)." },
  "listeners[].routes[].rateLimit.global.descriptors[][].key": { description: 'The entry\'s key, as the service\'s config names it ("remote_address", "generic_key", ...).', kind: { type: "string", minLength: 1 } },
  "listeners[].routes[].rateLimit.global.descriptors[][].from": {
    description: 'The call\'s value: "client_address" (its IP address), "service" or "method" (from :path /<service>/<method>), or "metadata:<name>" (a request header; absent or empty leaves the descriptor out).',
    kind: { type: "string", pattern: withEnv("client_address|service|method|metadata:[0-9a-z!#$%&'*+.^_`|~-]+") },
  },
  "listeners[].routes[].rateLimit.global.descriptors[][].value": { description: "A literal value.", kind: { type: "string", minLength: 1 } },
};
