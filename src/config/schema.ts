// The config's normalized types, every default and every limit, and the zod schema that turns
// an (env-expanded) unknown value into them. Defaults live here, beside the schema (fastify's
// habit), so the proxy never checks for undefined. Cross-references (unknown cluster, duplicate
// names and addresses) are checked in parse.ts, which sees the whole document.
// Must not import anything from src/proxy (imports run translate ← config ← proxy).

import { z } from "zod";
import { describeValue, didYouMean } from "./issues.js";
import { parseDuration, parseHostPort, parseSize, type HostPort } from "./units.js";
import { MIN_PROCESS_BYTES, minimumLimitBytes } from "./memory.js";
import { CODE_NAMES } from "../translate/codes.js";
import type { FaultRule } from "./faults/model.js";
import type { FaultSetSettings } from "./faults/parse.js";
import { LOG_LEVELS, type LogLevel } from "./levels.js";

// === normalized types (what the proxy is coded against) ===

/** "host:port" as parsed (owned by units.ts, which parses it; re-exported for the proxy). */
export type { HostPort };

export interface RouteMatch {
  /** `:path` prefix, starts with "/". */
  readonly prefix?: string;
  /** Exact `:path` ("/pkg.Svc/Method"), starts with "/". */
  readonly path?: string;
  /** Fully-qualified service ("pkg.Svc"): matches "/pkg.Svc/<any method>". No "/". */
  readonly service?: string;
  /** Optional `:authority` the route is limited to, lower-cased. */
  readonly authority?: string;
}

export interface RouteConfig {
  readonly match: RouteMatch;
  readonly cluster: string;
  /** `timeout`; null = no cap beyond the client's own grpc-timeout. */
  readonly timeoutMs: number | null;
  readonly maxRequestMessageBytes: number;
  readonly maxResponseMessageBytes: number;
  /** fault rules for calls on this route (parsed by src/config/faults/parse.ts) */
  readonly faults: readonly FaultRule[];
  /** `streamIdleTimeout` for calls on this route; null = the listener's */
  readonly streamIdleTimeoutMs: number | null;
  /** `retry`: the route's retry policy; null = none (only transparent retries, which are
   * always on: the upstream never processed those attempts) */
  readonly retry: RetryConfig | null;
  /** `rateLimit`: a token bucket per key for calls on this route; null = none */
  readonly rateLimit: RateLimitConfig | null;
  /** `headers`: request and response header rules (src/proxy/filters/headers); null = none */
  readonly headers: HeaderRulesConfig | null;
  /** `rewriteAuthority`: the :authority sent upstream; null = the client's */
  readonly rewriteAuthority: string | null;
  /** `rewritePrefix`: replaces the part of :path the route matched (its prefix, "/<service>/", or the whole path); null = none */
  readonly rewritePrefix: string | null;
}

/** Header fields to add (set, replacing) and to remove, on the request or on the response head. */
export interface HeaderRuleSet {
  readonly add: Readonly<Record<string, string>>;
  readonly remove: readonly string[];
}
export interface HeaderRulesConfig {
  readonly request: HeaderRuleSet;
  readonly response: HeaderRuleSet;
}

/** A route's `rateLimit` (src/proxy/filters/rate-limit): over it a call ends 8 RESOURCE_EXHAUSTED (rate_limited). */
export interface RateLimitConfig {
  /** tokens added per second */
  readonly callsPerSecond: number;
  /** the most calls at once above the rate (the bucket's size); default: callsPerSecond rounded up */
  readonly burst: number;
  /** "route" (one bucket), "client_address", or "metadata:<name>" (one bucket per value; calls without it share one) */
  readonly key: string;
  /** a refusal carries x-ratelimit-limit/-remaining/-reset and grpc-retry-pushback-ms (default true) */
  readonly responseHeaders: boolean;
}

/** A route's `retry` block, normalized (see src/translate/retry.ts for the decision). */
export interface RetryConfig {
  /** gRPC codes retried (`retryOn`, names or numbers; default UNAVAILABLE) */
  readonly retryOn: readonly number[];
  /** attempts in all, the first included */
  readonly maxAttempts: number;
  /** each attempt's own time limit; null = only the call's deadline */
  readonly perTryTimeoutMs: number | null;
  /** `backoff.base` / `backoff.max`: retry n waits random(0, min(base × 2^(n−1), max)) */
  readonly backoffBaseMs: number;
  readonly backoffMaxMs: number;
  /** request bytes kept for replay; past it the call commits to its attempt */
  readonly bufferBytes: number;
  /** retry attempts reset after the whole request was sent (the upstream may have done the work) */
  readonly retryResetAfterRequest: boolean;
}

export interface ListenerConfig {
  readonly name: string;
  readonly address: HostPort;
  readonly routes: readonly RouteConfig[];
  /** SETTINGS_MAX_CONCURRENT_STREAMS advertised to clients. */
  readonly maxConcurrentStreams: number;
  /** Node's `maxHeaderListPairs`; its default of 128 resets legitimate calls with much metadata. */
  readonly maxHeaderListPairs: number;
  /** SETTINGS_MAX_HEADER_LIST_SIZE, bytes. */
  readonly maxHeaderListSize: number;
  /** SETTINGS_INITIAL_WINDOW_SIZE, per stream, bytes. */
  readonly initialWindowSize: number;
  /** Connection-level receive window, bytes (grown by WINDOW_UPDATE right after the preface). */
  readonly connectionWindowSize: number;
  /** Node's `maxSessionMemory`, MiB per client session. */
  readonly maxSessionMemoryMiB: number;
  /** fault rules for every call on this listener */
  readonly faults: readonly FaultRule[];
  /** honour fault-injection request headers (x-envoy-fault-*, x-dojang-fault); off: an edge must not let clients inject faults */
  readonly faultHeaders: boolean;
  /** name the fault rule(s) in an `x-dojang-fault` response trailer */
  readonly faultTrailer: boolean;
  /** `streamIdleTimeout`: a call on which no frame moves either way for this long ends with
   * 14 UNAVAILABLE (decided_by stream_idle); 0 = never. Envoy's default is 5 minutes. */
  readonly streamIdleTimeoutMs: number;
  /** `maxConnectionAge`: a client connection older than this gets GOAWAY (so clients behind an
   * L4 balancer rebalance, as grpc-go's MaxConnectionAge); null = never */
  readonly maxConnectionAgeMs: number | null;
  /** `maxConnectionAgeGrace`: how long its calls may still run after that GOAWAY */
  readonly maxConnectionAgeGraceMs: number;
  /** `idleTimeout`: a client connection with no open stream for this long is closed; null = never */
  readonly idleTimeoutMs: number | null;
  /** `maxConnections`: client connections open at once on this listener; more are closed at accept; null = no limit */
  readonly maxConnections: number | null;
  /** `requestHeadersTimeout`: a client connection that has not sent a first request (HEADERS) this
   * long after it was accepted is closed (slowloris: TCP only, or the preface and nothing); null = never */
  readonly requestHeadersTimeoutMs: number | null;
  /** `healthService`: answer grpc.health.v1 Check on this listener from the clusters' health */
  readonly healthService: boolean;
  /** `attemptsHeader`: add x-dojang-attempts (upstream attempts made) to each response */
  readonly attemptsHeader: boolean;
  /** `grpcWeb`: also take gRPC-Web requests (application/grpc-web, -text) and translate them to gRPC upstream */
  readonly grpcWeb: boolean;
  /** `cors`: the origins a browser page may call this listener from (gRPC-Web); null = no CORS headers */
  readonly cors: { readonly allowOrigins: readonly string[] } | null;
  /**
   * `http1Address`: an HTTP/1.1 socket for gRPC-Web beside the listener's own (node's h2c server
   * speaks only HTTP/2); on a listener with `tls`, HTTPS/1.1 with the listener's TLS (certificates,
   * client-certificate rule)
   */
  readonly http1Address: HostPort | null;
  /** `tls`: serve TLS (ALPN h2) with these certificates; null = h2c (plaintext) */
  readonly tls: ListenerTlsConfig | null;
}

/**
 * A listener's `tls` block. Paths only (read by src/proxy/downstream/tls.ts, relative to the
 * working directory): no key material is ever part of the config, so /config cannot show it.
 */
export interface ListenerTlsConfig {
  /** the default certificate chain (PEM), served when no `certificates` entry matches the SNI name */
  readonly certFile: string;
  /** its private key (PEM) */
  readonly keyFile: string;
  /** CA bundle (PEM) client certificates are verified against; null = no client certificates asked for */
  readonly caFile: string | null;
  /** refuse the handshake of a client without a certificate the CA verifies (mTLS); needs caFile */
  readonly requireClientCert: boolean;
  /** more certificates, chosen by the SNI name ("api.example.com" or "*.example.com") */
  readonly certificates: readonly { readonly serverNames: readonly string[]; readonly certFile: string; readonly keyFile: string }[];
}

/** A cluster's `tls` block: dojang connects to its endpoints over TLS (ALPN h2), verifying them. */
export interface ClusterTlsConfig {
  /** CA bundle (PEM) the upstream's certificate is verified against; null = the system CAs */
  readonly caFile: string | null;
  /** SNI name sent and the name the certificate must carry; null = the endpoint's host */
  readonly serverName: string | null;
  /** client certificate (PEM) for mTLS to the upstream; null = none (with keyFile) */
  readonly certFile: string | null;
  readonly keyFile: string | null;
}

export const LB_POLICIES = ["round_robin", "least_request", "random"] as const;
export type LbPolicy = (typeof LB_POLICIES)[number];

export interface ClusterConfig {
  readonly name: string;
  /** static endpoints (empty when `dns` is given) */
  readonly endpoints: readonly HostPort[];
  /** each static endpoint's weight (same order; 1 unless written as { address, weight }) */
  readonly endpointWeights: readonly number[];
  /** `dns: "name:port"`: endpoints are the name's A/AAAA records, re-resolved every refreshInterval */
  readonly dns: { readonly host: string; readonly port: number; readonly refreshIntervalMs: number } | null;
  readonly lb: LbPolicy;
  /** `healthCheck`: active grpc.health.v1 checks; null = none */
  readonly healthCheck: {
    readonly service: string;
    readonly intervalMs: number;
    readonly timeoutMs: number;
    readonly unhealthyThreshold: number;
    readonly healthyThreshold: number;
  } | null;
  /** `outlierDetection`: eject endpoints after consecutive failures; null = off */
  readonly outlierDetection: {
    readonly consecutiveFailures: number;
    readonly baseEjectionMs: number;
    readonly maxEjectionMs: number;
    readonly maxEjectionPercent: number;
  } | null;
  /** `circuitBreaker`: overflow answers 14 at once (decided_by overflow) */
  readonly circuitBreaker: {
    readonly maxConnections: number;
    readonly maxPendingCalls: number;
    readonly maxCalls: number;
    readonly maxRetries: number;
  };
  /** `retryBudget`: retries ≤ percent of the calls in a 10 s window, with a floor per second */
  readonly retryBudget: { readonly percent: number; readonly minRetriesPerSecond: number };
  /** `keepalive`: PING every interval, drop the session when one is not answered in timeout; null = off */
  readonly keepalive: { readonly intervalMs: number; readonly timeoutMs: number } | null;
  /** `connectTimeout`. */
  readonly connectTimeoutMs: number;
  /** Open another session beyond min(this, the peer's SETTINGS_MAX_CONCURRENT_STREAMS). */
  readonly maxConcurrentStreamsPerSession: number;
  readonly maxSessionsPerEndpoint: number;
  readonly initialWindowSize: number;
  readonly connectionWindowSize: number;
  /** `tls`: connect to the endpoints over TLS; null = h2c (plaintext) */
  readonly tls: ClusterTlsConfig | null;
}

export interface AdminConfig {
  readonly address: HostPort;
  /** admin requests that change traffic (non-GET /faults, later /reload, /drain); off unless set */
  readonly mutations: boolean;
  /** bearer token required on every admin mutation; required when mutations are on and the
   * address is not loopback. Never logged or shown on /config. */
  readonly token: string | null;
  /** `readyClusters`: /ready answers 200 only while each named cluster has a healthy endpoint */
  readonly readyClusters: readonly string[];
}

export { LOG_LEVELS, type LogLevel };
/** `concurrentMarking`: V8's old-generation marking on a helper thread (src/proxy/observe/heap.ts). */
export const CONCURRENT_MARKING_MODES = ["auto", "on", "off"] as const;
export type ConcurrentMarkingMode = (typeof CONCURRENT_MARKING_MODES)[number];

/** `memory`: the container's memory budget (src/config/memory.ts derives V8's sizes and the
 * overload manager's budgets from it; the launcher applies them at start). */
export interface MemoryConfig {
  /** `limit`: bytes for all of dojang's processes; null: the cgroup's limit if there is one, else none */
  readonly limitBytes: number | null;
}

export interface Config {
  /** Omitted (or null) → no admin listener. */
  readonly admin: AdminConfig | null;
  readonly listeners: readonly ListenerConfig[];
  readonly clusters: readonly ClusterConfig[];
  /** `drainTimeout`: how long open calls may finish after SIGTERM before sessions are closed. */
  readonly drainTimeoutMs: number;
  readonly workers: number;
  readonly logLevel: LogLevel;
  readonly accessLog: boolean;
  /** recent calls kept for GET /calls and the library's `calls` (0 = none, the CLI's default:
   * a kept record per call is old-generation garbage; startDojang defaults it to 1000) */
  readonly journal: number;
  /** `shrinkHeapWhenIdle`: after this long with no call, one memory-reducing GC gives the
   * young generation back (CLI and workers only; 0 = never, the default: see
   * src/proxy/observe/heap.ts for its CPU cost) */
  readonly shrinkHeapWhenIdleMs: number;
  /** V8's concurrent marking: auto (off on one CPU while bytes flow fast), on, off (CLI and
   * workers only; see src/proxy/observe/heap.ts) */
  readonly concurrentMarking: ConcurrentMarkingMode;
  /** `memory`: the memory budget (CLI and workers only; needs a restart) */
  readonly memory: MemoryConfig;
  /** the fault rule set's seed (percentages replay identically) and concurrency cap */
  readonly faultInjection: FaultSetSettings;
  /** `watchConfig`: reload when the config file changes (CLI only) */
  readonly watchConfig: boolean;
}

// === defaults ===

const MiB = 1_048_576;

/** Every default, one place. config/example-full.yaml shows each of them. */
export const DEFAULTS = Object.freeze({
  route: Object.freeze({
    timeoutMs: null,
    // grpc-go and grpc-java default max receive size (4 MiB).
    maxRequestMessageBytes: 4 * MiB,
    maxResponseMessageBytes: 4 * MiB,
  }),
  listener: Object.freeze({
    maxConcurrentStreams: 1000,
    maxHeaderListPairs: 2000,
    maxHeaderListSize: 65_536,
    initialWindowSize: 1 * MiB,
    connectionWindowSize: 16 * MiB,
    maxSessionMemoryMiB: 64,
    // Envoy's stream_idle_timeout default (5 minutes).
    streamIdleTimeoutMs: 300_000,
    maxConnectionAgeMs: null,
    maxConnectionAgeGraceMs: 10_000,
    idleTimeoutMs: null,
    // issue 12 (protections): safe for the open internet (nginx closes such connections at 60 s, HAProxy at 50 s)
    maxConnections: 10_000,
    requestHeadersTimeoutMs: 10_000,
    healthService: false,
    attemptsHeader: false,
    tls: null,
    grpcWeb: false,
    cors: null,
    http1Address: null,
  }),
  // gRFC A6 and Envoy's router: UNAVAILABLE only, 25 ms base, 10 × base cap.
  retry: Object.freeze({
    retryOn: Object.freeze(["UNAVAILABLE"]),
    maxAttempts: 3,
    perTryTimeoutMs: null,
    backoffBaseMs: 25,
    backoffMaxMs: 250,
    bufferBytes: 64 * 1024,
    retryResetAfterRequest: false,
  }),
  cluster: Object.freeze({
    lb: "round_robin" as LbPolicy,
    dnsRefreshIntervalMs: 5000,
    // Envoy's circuit-breaker defaults.
    circuitBreaker: Object.freeze({ maxConnections: 1024, maxPendingCalls: 1024, maxCalls: 1024, maxRetries: 3 }),
    // linkerd's retry budget: 20 % with 10 retries a second always allowed.
    retryBudget: Object.freeze({ percent: 20, minRetriesPerSecond: 10 }),
    healthCheck: Object.freeze({ service: "", intervalMs: 5000, timeoutMs: 1000, unhealthyThreshold: 3, healthyThreshold: 2 }),
    outlierDetection: Object.freeze({ consecutiveFailures: 5, baseEjectionMs: 30_000, maxEjectionMs: 300_000, maxEjectionPercent: 50 }),
    keepalive: Object.freeze({ intervalMs: 30_000, timeoutMs: 10_000 }),
    connectTimeoutMs: 5000,
    maxConcurrentStreamsPerSession: 1000,
    maxSessionsPerEndpoint: 8,
    initialWindowSize: 1 * MiB,
    connectionWindowSize: 16 * MiB,
    tls: null,
  }),
  config: Object.freeze({
    admin: null,
    drainTimeoutMs: 10_000,
    workers: 1,
    logLevel: "info" as LogLevel,
    accessLog: true,
    journal: 0,
    shrinkHeapWhenIdleMs: 0,
    concurrentMarking: "auto" as ConcurrentMarkingMode,
    memory: Object.freeze({ limitBytes: null }) as MemoryConfig,
    watchConfig: false,
  }),
});

// === limits (inclusive), with where each comes from ===

const U32_MAX = 2 ** 32 - 1;
const I31_MAX = 2 ** 31 - 1;

export const LIMITS = Object.freeze({
  // RFC 9113 §6.5.1: SETTINGS values are 32-bit unsigned. 0 streams would refuse every call.
  maxConcurrentStreams: { min: 1, max: U32_MAX },
  // a listener's open client connections (node's server.maxConnections)
  maxConnections: { min: 1, max: 10_000_000 },
  // Node http2 docs: "The minimum value is 4" for maxHeaderListPairs. Upper bound is ours.
  maxHeaderListPairs: { min: 4, max: 1_000_000 },
  // RFC 9113 §6.5.2 SETTINGS_MAX_HEADER_LIST_SIZE, 32-bit.
  maxHeaderListSize: { min: 1, max: U32_MAX },
  // RFC 9113 §6.5.2: above 2^31−1 is a FLOW_CONTROL_ERROR. 0 is legal but stalls every stream.
  initialWindowSize: { min: 1, max: I31_MAX },
  // RFC 9113 §6.9.2: the connection window starts at 65535 and can only grow.
  connectionWindowSize: { min: 65_535, max: I31_MAX },
  // Node's maxSessionMemory is in MiB, minimum 1. Upper bound (64 GiB) is ours.
  maxSessionMemoryMiB: { min: 1, max: 65_536 },
  // gRPC length prefix is a 32-bit unsigned integer (PROTOCOL-HTTP2.md, Length-Prefixed-Message).
  messageBytes: { min: 0, max: U32_MAX },
  maxConcurrentStreamsPerSession: { min: 1, max: U32_MAX },
  // Ours: more sessions than this to one endpoint means the endpoint is the problem.
  maxSessionsPerEndpoint: { min: 1, max: 1024 },
  // Ours: one worker per core on any machine we expect.
  workers: { min: 1, max: 64 },
  // Ours (src/config/memory.ts): 96 MiB is the smallest budget the plan's floors fit in; 1 PiB
  // is where a cgroup limit stops meaning anything.
  memoryLimit: { min: MIN_PROCESS_BYTES, max: 2 ** 50 - 1 },
  // gRFC A6 caps maxAttempts at 5; ours allows 10.
  maxAttempts: { min: 1, max: 10 },
  weight: { min: 1, max: 1000 },
  thresholds: { min: 1, max: 100 },
  percent: { min: 0, max: 100 },
  budgetPercent: { min: 0, max: 1000 },
  breaker: { min: 1, max: 1_000_000 },
  retriesPerSecond: { min: 0, max: 100_000 },
  // Names show up in logs and metric labels.
  nameLength: { min: 1, max: 64 },
});

// === scalar schemas ===

type Range = { readonly min: number; readonly max: number };

/** Message for a wrong-typed (or missing) value of a unit-bearing field. */
const expected = (what: string) => (iss: { readonly input?: unknown }) =>
  iss.input === undefined ? "is required" : `expected ${what}, got ${describeValue(iss.input)}`;

const stringOrNumber = (what: string) => z.union([z.string(), z.number()], { error: expected(what) });

const outOfRange = (shown: string, r: Range, unit = "") =>
  `${shown} is out of range (${r.min}${unit} to ${r.max}${unit})`;

/** A duration ("5s", "250ms", plain number = ms) → whole ms within `min`..MAX_DURATION_MS. */
function durationMs(min: number) {
  return stringOrNumber('a duration like "5s" or "250ms"').transform((v, ctx) => {
    const r = parseDuration(v);
    if (!r.ok) {
      ctx.issues.push({ code: "custom", message: r.error, input: v });
      return z.NEVER;
    }
    if (r.ms < min) {
      ctx.issues.push({ code: "custom", message: `duration ${describeValue(v)} must be at least ${min}ms`, input: v });
      return z.NEVER;
    }
    return r.ms;
  });
}

/** A size (bytes, "4MiB", "64KiB", "4MB") → whole bytes within `range`. */
function sizeBytes(range: Range) {
  return stringOrNumber('a size like 4194304 or "4MiB"').transform((v, ctx) => {
    const r = parseSize(v);
    if (!r.ok) {
      ctx.issues.push({ code: "custom", message: r.error, input: v });
      return z.NEVER;
    }
    if (r.bytes < range.min || r.bytes > range.max) {
      ctx.issues.push({ code: "custom", message: outOfRange(`size ${describeValue(v)}`, range, " bytes"), input: v });
      return z.NEVER;
    }
    return r.bytes;
  });
}

/** A whole number within `range`; a decimal string is accepted so `${WORKERS:-4}` works. */
function count(range: Range) {
  return stringOrNumber("a whole number").transform((v, ctx) => {
    const n = typeof v === "number" ? v : /^\s*\d+\s*$/.test(v) ? Number(v) : NaN;
    if (!Number.isSafeInteger(n)) {
      ctx.issues.push({ code: "custom", message: `expected a whole number, got ${describeValue(v)}`, input: v });
      return z.NEVER;
    }
    if (n < range.min || n > range.max) {
      ctx.issues.push({ code: "custom", message: outOfRange(describeValue(v), range), input: v });
      return z.NEVER;
    }
    return n;
  });
}

/** true/false; the strings "true"/"false" are accepted so `${ACCESS_LOG:-true}` works. */
const flag = z
  .union([z.boolean(), z.enum(["true", "false"])], { error: expected("true or false") })
  .transform((v) => v === true || v === "true");

/** "host:port" → HostPort. `allowPortZero` for listeners (ephemeral port); never for endpoints. */
function hostPort(allowPortZero: boolean) {
  return z.string({ error: expected('an address "host:port"') }).transform((v, ctx): HostPort => {
    const r = parseHostPort(v);
    if (!r.ok) {
      ctx.issues.push({ code: "custom", message: r.error, input: v });
      return z.NEVER;
    }
    if (!allowPortZero && r.hostPort.port === 0) {
      ctx.issues.push({ code: "custom", message: `endpoint "${v}" needs a real port (port 0 is only for listeners)`, input: v });
      return z.NEVER;
    }
    return r.hostPort;
  });
}

const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;
const name = z
  .string({ error: expected("a name") })
  .max(LIMITS.nameLength.max, `names are at most ${LIMITS.nameLength.max} characters`)
  .refine((s) => NAME_RE.test(s), {
    error: (iss) =>
      `invalid name ${describeValue(iss.input)}: use letters, digits, "_", "." and "-", starting with a letter or digit`,
  });

/** One of a fixed set of words (case-insensitive); `what` names the key in the message. */
function oneOf<T extends string>(values: readonly T[], what: string) {
  return z.string({ error: expected(`one of ${values.join(", ")}`) }).transform((v, ctx): T => {
    const found = values.find((l) => l === v.toLowerCase());
    if (found === undefined) {
      ctx.issues.push({
        code: "custom",
        message: `unknown ${what} ${describeValue(v)}: expected one of ${values.join(", ")}${didYouMean(v, values)}`,
        input: v,
      });
      return z.NEVER;
    }
    return found;
  });
}

const logLevel = oneOf(LOG_LEVELS, "log level");
const concurrentMarking = oneOf(CONCURRENT_MARKING_MODES, "concurrentMarking value");

/** `timeout`: a positive duration, or null / "none" for no cap. */
const routeTimeout = z
  .union([z.string(), z.number(), z.null()], { error: expected('a duration like "30s", or "none"') })
  .transform((v, ctx): number | null => {
    if (v === null || (typeof v === "string" && v.trim().toLowerCase() === "none")) return null;
    const r = parseDuration(v);
    if (!r.ok) {
      ctx.issues.push({ code: "custom", message: r.error, input: v });
      return z.NEVER;
    }
    if (r.ms === 0) {
      ctx.issues.push({ code: "custom", message: 'timeout must be greater than 0 (write "none", or leave it out, for no timeout)', input: v });
      return z.NEVER;
    }
    return r.ms;
  });

const nonEmptyText = (what: string) =>
  z
    .string({ error: expected(what) })
    .min(1, "must not be empty")
    .refine((s) => !/\s/.test(s), { error: (iss) => `${describeValue(iss.input)} must not contain whitespace` });

/** A gRPC status code: its name (case-insensitive, as in doc/statuscodes.md) or number 0..16. */
const grpcCode = z
  .union([z.string(), z.number()], { error: expected('a gRPC code like "UNAVAILABLE" or 14') })
  .transform((v, ctx): number => {
    if (typeof v === "number" ? Number.isInteger(v) && v >= 0 && v <= 16 : false) return v as number;
    const i = typeof v === "string" ? CODE_NAMES.indexOf(v.trim().toUpperCase()) : -1;
    if (i >= 0 && i <= 16) return i;
    if (typeof v === "string" && /^\s*\d+\s*$/.test(v) && Number(v) <= 16) return Number(v);
    ctx.issues.push({ code: "custom", message: `unknown gRPC code ${describeValue(v)}: expected a name like UNAVAILABLE or a number 0 to 16${typeof v === "string" ? didYouMean(v.toUpperCase(), CODE_NAMES.slice(0, 17)) : ""}`, input: v });
    return z.NEVER;
  });

// === object schemas (strict: an unknown key is an error) ===

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
const rateLimit = z
  .strictObject(
    {
      callsPerSecond: z
        .number({ error: expected("a number of calls per second") })
        .max(1_000_000_000, "must be at most 1000000000")
        .refine((v) => v > 0, "must be more than 0"),
      burst: count({ min: 1, max: 1_000_000_000 }).optional(),
      key: z
        .string({ error: expected('"route", "client_address" or "metadata:<name>"') })
        .regex(RATE_LIMIT_KEY_RE, 'must be "route", "client_address" or "metadata:<lower-case header name>"')
        .default("route"),
      responseHeaders: flag.default(true),
    },
    { error: expected("a rateLimit mapping") },
  )
  .transform((r) => ({ callsPerSecond: r.callsPerSecond, burst: r.burst ?? Math.max(1, Math.ceil(r.callsPerSecond)), key: r.key, responseHeaders: r.responseHeaders }));

/** A header name a rule may touch: lower-case token; not a pseudo-header, nor one HTTP/2 or gRPC framing owns. */
const RULE_HEADER_RE = /^[0-9a-z!#$%&'*+.^_`|~-]+$/;
const RULE_FORBIDDEN = new Set(["content-type", "te", "connection", "transfer-encoding", "keep-alive", "upgrade", "host", "grpc-status", "grpc-message", "content-length"]);
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

const route = z.strictObject(
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
  },
  { error: expected("a route mapping") },
);

// === TLS (paths only; the files are read by src/config/load.ts for --check and by the proxy) ===

const filePath = z.string({ error: expected("a file path") }).min(1, "must not be empty");
/** An SNI name: a DNS name, or "*." and a DNS name (matches exactly one more label). */
const SERVER_NAME_RE = /^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;
const serverName = z
  .string({ error: expected('a server name like "api.example.com" or "*.example.com"') })
  .transform((v, ctx) => {
    const n = v.trim().toLowerCase();
    if (!SERVER_NAME_RE.test(n) || n.length > 253) {
      ctx.addIssue({ code: "custom", message: `expected a server name like "api.example.com" or "*.example.com", got ${describeValue(v)}` });
      return z.NEVER;
    }
    return n;
  });

const listenerTls = z
  .strictObject(
    {
      certFile: filePath,
      keyFile: filePath,
      caFile: filePath.nullable().default(null),
      requireClientCert: flag.default(false),
      certificates: z
        .array(
          z.strictObject(
            {
              serverNames: z.array(serverName, { error: expected("a list of server names") }).min(1, "needs at least one server name"),
              certFile: filePath,
              keyFile: filePath,
            },
            { error: expected("a mapping like { serverNames: [api.example.com], certFile, keyFile }") },
          ),
          { error: expected("a list of certificates chosen by SNI") },
        )
        .default([]),
    },
    { error: expected("a mapping like { certFile: server.pem, keyFile: server.key }") },
  )
  .superRefine((t, ctx) => {
    if (t.requireClientCert && t.caFile === null) {
      ctx.addIssue({ code: "custom", path: ["caFile"], message: "requireClientCert needs caFile (the CA that client certificates are verified against)" });
    }
  });

const clusterTls = z
  .strictObject(
    {
      caFile: filePath.nullable().default(null),
      serverName: serverName.nullable().default(null),
      certFile: filePath.nullable().default(null),
      keyFile: filePath.nullable().default(null),
    },
    { error: expected("a mapping like { caFile: ca.pem, serverName: backend.internal } ({} for the system CAs)") },
  )
  .superRefine((t, ctx) => {
    if ((t.certFile === null) !== (t.keyFile === null)) {
      ctx.addIssue({ code: "custom", path: [t.certFile === null ? "certFile" : "keyFile"], message: "a client certificate needs both certFile and keyFile" });
    }
    if (t.serverName !== null && t.serverName.startsWith("*.")) {
      ctx.addIssue({ code: "custom", path: ["serverName"], message: "must be one name, not a wildcard" });
    }
  });

// === gRPC-Web and CORS (src/proxy/downstream/grpc-web.ts, cors.ts) ===

/** "*", an origin "https://app.example.com(:port)", or a wildcard "https://*.example.com" / "*.example.com". */
const ORIGIN_RE = /^(\*|([a-z][a-z0-9+.-]*:\/\/)?(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*(:[0-9]{1,5})?)$/;
const corsOrigin = z.string({ error: expected('an origin like "https://app.example.com", "*.example.com" or "*"') }).transform((v, ctx) => {
  const o = v.trim().toLowerCase();
  if (!ORIGIN_RE.test(o)) {
    ctx.addIssue({ code: "custom", message: `expected an origin like "https://app.example.com", "*.example.com" or "*", got ${describeValue(v)}` });
    return z.NEVER;
  }
  return o;
});
const cors = z.strictObject(
  { allowOrigins: z.array(corsOrigin, { error: expected("a list of origins") }).min(1, "needs at least one origin") },
  { error: expected('a mapping like { allowOrigins: ["https://app.example.com"] }') },
);

const listener = z.strictObject(
  {
    name,
    address: hostPort(true),
    routes: z.array(route, { error: expected("a list of routes") }).min(1, "needs at least one route"),
    maxConcurrentStreams: count(LIMITS.maxConcurrentStreams).default(DEFAULTS.listener.maxConcurrentStreams),
    maxHeaderListPairs: count(LIMITS.maxHeaderListPairs).default(DEFAULTS.listener.maxHeaderListPairs),
    maxHeaderListSize: sizeBytes(LIMITS.maxHeaderListSize).default(DEFAULTS.listener.maxHeaderListSize),
    initialWindowSize: sizeBytes(LIMITS.initialWindowSize).default(DEFAULTS.listener.initialWindowSize),
    connectionWindowSize: sizeBytes(LIMITS.connectionWindowSize).default(DEFAULTS.listener.connectionWindowSize),
    maxSessionMemoryMiB: count(LIMITS.maxSessionMemoryMiB).default(DEFAULTS.listener.maxSessionMemoryMiB),
    faults: z.array(z.unknown(), { error: expected("a list of fault rules") }).default([]),
    faultHeaders: flag.default(false),
    faultTrailer: flag.default(false),
    streamIdleTimeout: durationMs(0).default(DEFAULTS.listener.streamIdleTimeoutMs),
    maxConnectionAge: durationMs(1).nullable().default(DEFAULTS.listener.maxConnectionAgeMs),
    maxConnectionAgeGrace: durationMs(0).default(DEFAULTS.listener.maxConnectionAgeGraceMs),
    idleTimeout: durationMs(1).nullable().default(DEFAULTS.listener.idleTimeoutMs),
    maxConnections: count(LIMITS.maxConnections).nullable().default(DEFAULTS.listener.maxConnections),
    requestHeadersTimeout: durationMs(1).nullable().default(DEFAULTS.listener.requestHeadersTimeoutMs),
    healthService: flag.default(DEFAULTS.listener.healthService),
    attemptsHeader: flag.default(DEFAULTS.listener.attemptsHeader),
    tls: listenerTls.nullable().default(DEFAULTS.listener.tls),
    grpcWeb: flag.default(DEFAULTS.listener.grpcWeb),
    cors: cors.nullable().default(DEFAULTS.listener.cors),
    http1Address: hostPort(true).nullable().default(DEFAULTS.listener.http1Address),
  },
  { error: expected("a listener mapping") },
).superRefine((l, ctx) => {
  // These serve gRPC-Web only: without it they would be a key with nothing behind it.
  if (!l.grpcWeb && l.cors !== null) ctx.addIssue({ code: "custom", path: ["cors"], message: "cors needs grpcWeb: true (it answers browsers' gRPC-Web calls)" });
  if (!l.grpcWeb && l.http1Address !== null) ctx.addIssue({ code: "custom", path: ["http1Address"], message: "http1Address needs grpcWeb: true (it serves gRPC-Web over HTTP/1.1)" });
});

/** An endpoint: "host:port", or { address: "host:port", weight } for weighted balancing. */
const endpointString = hostPort(false);
const endpointObject = z.strictObject(
  { address: hostPort(false), weight: count(LIMITS.weight).default(1) },
  { error: expected('{ address: "host:port", weight: 2 }') },
);
const endpoint = z
  .union([z.string(), z.record(z.string(), z.unknown())], { error: expected('an endpoint "host:port" or { address, weight }') })
  .transform((v, ctx): { hp: HostPort; weight: number } => {
    // Each form reports its own issues (a union would only say "neither").
    const r = typeof v === "string" ? endpointString.safeParse(v) : endpointObject.safeParse(v);
    if (!r.success) {
      for (const iss of r.error.issues) ctx.issues.push({ code: "custom", message: iss.message, input: v, path: iss.path as PropertyKey[] });
      return z.NEVER;
    }
    return typeof r.data === "object" && "address" in r.data ? { hp: r.data.address, weight: r.data.weight } : { hp: r.data as HostPort, weight: 1 };
  });

const healthCheck = z.strictObject(
  {
    service: z.string({ error: expected("a service name (\"\" for the whole server)") }).default(DEFAULTS.cluster.healthCheck.service),
    interval: durationMs(1).default(DEFAULTS.cluster.healthCheck.intervalMs),
    timeout: durationMs(1).default(DEFAULTS.cluster.healthCheck.timeoutMs),
    unhealthyThreshold: count(LIMITS.thresholds).default(DEFAULTS.cluster.healthCheck.unhealthyThreshold),
    healthyThreshold: count(LIMITS.thresholds).default(DEFAULTS.cluster.healthCheck.healthyThreshold),
  },
  { error: expected("a mapping like { interval: 5s, timeout: 1s }") },
);

const outlierDetection = z.strictObject(
  {
    consecutiveFailures: count(LIMITS.thresholds).default(DEFAULTS.cluster.outlierDetection.consecutiveFailures),
    baseEjection: durationMs(1).default(DEFAULTS.cluster.outlierDetection.baseEjectionMs),
    maxEjection: durationMs(1).default(DEFAULTS.cluster.outlierDetection.maxEjectionMs),
    maxEjectionPercent: count(LIMITS.percent).default(DEFAULTS.cluster.outlierDetection.maxEjectionPercent),
  },
  { error: expected("a mapping like { consecutiveFailures: 5, baseEjection: 30s }") },
);

const circuitBreaker = z.strictObject(
  {
    maxConnections: count(LIMITS.breaker).default(DEFAULTS.cluster.circuitBreaker.maxConnections),
    maxPendingCalls: count(LIMITS.breaker).default(DEFAULTS.cluster.circuitBreaker.maxPendingCalls),
    maxCalls: count(LIMITS.breaker).default(DEFAULTS.cluster.circuitBreaker.maxCalls),
    maxRetries: count(LIMITS.breaker).default(DEFAULTS.cluster.circuitBreaker.maxRetries),
  },
  { error: expected("a mapping like { maxCalls: 1024 }") },
);

const retryBudget = z.strictObject(
  {
    percent: count(LIMITS.budgetPercent).default(DEFAULTS.cluster.retryBudget.percent),
    minRetriesPerSecond: count(LIMITS.retriesPerSecond).default(DEFAULTS.cluster.retryBudget.minRetriesPerSecond),
  },
  { error: expected("a mapping like { percent: 20, minRetriesPerSecond: 10 }") },
);

const keepalive = z.strictObject(
  {
    interval: durationMs(1).default(DEFAULTS.cluster.keepalive.intervalMs),
    timeout: durationMs(1).default(DEFAULTS.cluster.keepalive.timeoutMs),
  },
  { error: expected("a mapping like { interval: 30s, timeout: 10s }") },
);

const cluster = z
  .strictObject(
    {
      name,
      endpoints: z.array(endpoint, { error: expected('a list of "host:port" endpoints') }).min(1, "needs at least one endpoint").optional(),
      dns: hostPort(false).optional(),
      refreshInterval: durationMs(100).default(DEFAULTS.cluster.dnsRefreshIntervalMs),
      lb: oneOf(LB_POLICIES, "lb policy").default(DEFAULTS.cluster.lb),
      healthCheck: healthCheck.nullable().default(null),
      outlierDetection: outlierDetection.nullable().default(null),
      circuitBreaker: circuitBreaker.default({ ...DEFAULTS.cluster.circuitBreaker }),
      retryBudget: retryBudget.default({ ...DEFAULTS.cluster.retryBudget }),
      keepalive: keepalive.nullable().default(null),
      connectTimeout: durationMs(1).default(DEFAULTS.cluster.connectTimeoutMs),
      maxConcurrentStreamsPerSession: count(LIMITS.maxConcurrentStreamsPerSession).default(
        DEFAULTS.cluster.maxConcurrentStreamsPerSession,
      ),
      maxSessionsPerEndpoint: count(LIMITS.maxSessionsPerEndpoint).default(DEFAULTS.cluster.maxSessionsPerEndpoint),
      initialWindowSize: sizeBytes(LIMITS.initialWindowSize).default(DEFAULTS.cluster.initialWindowSize),
      connectionWindowSize: sizeBytes(LIMITS.connectionWindowSize).default(DEFAULTS.cluster.connectionWindowSize),
      tls: clusterTls.nullable().default(DEFAULTS.cluster.tls),
    },
    { error: expected("a cluster mapping") },
  )
  .superRefine((c, ctx) => {
    if ((c.endpoints === undefined) === (c.dns === undefined)) {
      ctx.addIssue({
        code: "custom",
        path: c.endpoints === undefined ? ["endpoints"] : ["dns"],
        message: c.endpoints === undefined ? 'needs endpoints (a list of "host:port") or dns ("name:port")' : "give endpoints or dns, not both",
      });
    }
  });

const admin = z
  .strictObject(
    {
      address: hostPort(true),
      mutations: flag.default(false),
      readyClusters: z.array(name, { error: expected("a list of cluster names") }).default([]),
      token: z.string({ error: (iss) => (iss.input === undefined ? "is required" : "expected a bearer token as text (the value given is not shown: it may be a secret)") }).min(16, "must be at least 16 characters").nullable().default(null),
    },
    { error: expected("a mapping like { address: 127.0.0.1:9901 }") },
  )
  .superRefine((a, ctx) => {
    if (a.mutations && a.token === null && !isLoopbackHost(a.address.host)) {
      ctx.addIssue({
        code: "custom",
        path: ["token"],
        message: `admin.mutations is on and admin.address ${a.address.host} is not a loopback address: set admin.token (for example \${DOJANG_ADMIN_TOKEN})`,
      });
    }
  });

/** 127.0.0.0/8, ::1 and "localhost": addresses only this machine can reach. */
export function isLoopbackHost(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host) || /^::ffff:127\./.test(host);
}

/**
 * The whole document. Keys later versions will add (tls, faults, rateLimits, per-route filters)
 * are not accepted yet: an unknown key is always an error, never silently ignored.
 */
const document = z.strictObject(
  {
    admin: admin.nullable().default(DEFAULTS.config.admin),
    listeners: z.array(listener, { error: expected("a list of listeners") }).min(1, "needs at least one listener"),
    clusters: z.array(cluster, { error: expected("a list of clusters") }).min(1, "needs at least one cluster"),
    drainTimeout: durationMs(0).default(DEFAULTS.config.drainTimeoutMs),
    workers: count(LIMITS.workers).default(DEFAULTS.config.workers),
    logLevel: logLevel.default(DEFAULTS.config.logLevel),
    accessLog: flag.default(DEFAULTS.config.accessLog),
    journal: count({ min: 0, max: 100000 }).default(DEFAULTS.config.journal),
    shrinkHeapWhenIdle: durationMs(0).default(DEFAULTS.config.shrinkHeapWhenIdleMs),
    concurrentMarking: concurrentMarking.default(DEFAULTS.config.concurrentMarking),
    memory: z
      .strictObject({ limit: sizeBytes(LIMITS.memoryLimit).nullable().default(null) }, { error: expected("a mapping with limit") })
      .default({ limit: null }),
    faultInjection: z.unknown().optional(),
    watchConfig: flag.default(DEFAULTS.config.watchConfig),
  },
  { error: expected("a mapping with listeners and clusters") },
);

/** Renames the `*Ms` fields, so the file says `timeout: 30s` and the code reads `timeoutMs`. */
export const CONFIG_SCHEMA: z.ZodType<Config> = document
  .superRefine((d, ctx) => {
    // each worker's share must hold the plan's floors (src/config/memory.ts)
    const min = minimumLimitBytes(d.workers);
    if (d.memory.limit !== null && d.memory.limit < min) {
      ctx.addIssue({ code: "custom", path: ["memory", "limit"], message: `${d.memory.limit} bytes is too small for ${d.workers} workers: at least ${min} bytes (${min / MiB}MiB)` });
    }
  })
  .transform(
  (d): Config => ({
    admin: d.admin,
    listeners: d.listeners.map((l) => ({
      name: l.name,
      address: l.address,
      routes: l.routes.map((r) => ({
        match: r.match,
        cluster: r.cluster,
        timeoutMs: r.timeout,
        maxRequestMessageBytes: r.maxRequestMessageBytes,
        maxResponseMessageBytes: r.maxResponseMessageBytes,
        // Raw here; parse.ts replaces them with parsed rules before the Config is frozen.
        faults: r.faults as unknown as readonly FaultRule[],
        streamIdleTimeoutMs: r.streamIdleTimeout,
        retry: r.retry,
        rateLimit: r.rateLimit,
        headers: r.headers,
        rewriteAuthority: r.rewriteAuthority,
        rewritePrefix: r.rewritePrefix,
      })),
      maxConcurrentStreams: l.maxConcurrentStreams,
      maxHeaderListPairs: l.maxHeaderListPairs,
      maxHeaderListSize: l.maxHeaderListSize,
      initialWindowSize: l.initialWindowSize,
      connectionWindowSize: l.connectionWindowSize,
      maxSessionMemoryMiB: l.maxSessionMemoryMiB,
      faults: l.faults as unknown as readonly FaultRule[],
      faultHeaders: l.faultHeaders,
      faultTrailer: l.faultTrailer,
      streamIdleTimeoutMs: l.streamIdleTimeout,
      maxConnectionAgeMs: l.maxConnectionAge,
      maxConnectionAgeGraceMs: l.maxConnectionAgeGrace,
      idleTimeoutMs: l.idleTimeout,
      maxConnections: l.maxConnections,
      requestHeadersTimeoutMs: l.requestHeadersTimeout,
      healthService: l.healthService,
      attemptsHeader: l.attemptsHeader,
      tls: l.tls,
      grpcWeb: l.grpcWeb,
      cors: l.cors,
      http1Address: l.http1Address,
    })),
    clusters: d.clusters.map((c) => ({
      name: c.name,
      endpoints: (c.endpoints ?? []).map((e) => e.hp),
      endpointWeights: (c.endpoints ?? []).map((e) => e.weight),
      dns: c.dns === undefined ? null : { host: c.dns.host, port: c.dns.port, refreshIntervalMs: c.refreshInterval },
      lb: c.lb,
      healthCheck:
        c.healthCheck === null
          ? null
          : {
              service: c.healthCheck.service,
              intervalMs: c.healthCheck.interval,
              timeoutMs: c.healthCheck.timeout,
              unhealthyThreshold: c.healthCheck.unhealthyThreshold,
              healthyThreshold: c.healthCheck.healthyThreshold,
            },
      outlierDetection:
        c.outlierDetection === null
          ? null
          : {
              consecutiveFailures: c.outlierDetection.consecutiveFailures,
              baseEjectionMs: c.outlierDetection.baseEjection,
              maxEjectionMs: c.outlierDetection.maxEjection,
              maxEjectionPercent: c.outlierDetection.maxEjectionPercent,
            },
      circuitBreaker: c.circuitBreaker,
      retryBudget: c.retryBudget,
      keepalive: c.keepalive === null ? null : { intervalMs: c.keepalive.interval, timeoutMs: c.keepalive.timeout },
      connectTimeoutMs: c.connectTimeout,
      maxConcurrentStreamsPerSession: c.maxConcurrentStreamsPerSession,
      maxSessionsPerEndpoint: c.maxSessionsPerEndpoint,
      initialWindowSize: c.initialWindowSize,
      connectionWindowSize: c.connectionWindowSize,
      tls: c.tls,
    })),
    drainTimeoutMs: d.drainTimeout,
    workers: d.workers,
    logLevel: d.logLevel,
    accessLog: d.accessLog,
    journal: d.journal,
    shrinkHeapWhenIdleMs: d.shrinkHeapWhenIdle,
    concurrentMarking: d.concurrentMarking,
    memory: { limitBytes: d.memory.limit },
    faultInjection: d.faultInjection as unknown as FaultSetSettings,
    watchConfig: d.watchConfig,
  }),
);

/** The document-level (pre-rename) schema, for walking to the known keys at a path. */
export const DOCUMENT_SCHEMA: z.ZodType = document;
