// The config's normalized types (what the proxy is coded against), every default and every limit.
// No zod here: the served process and the proxy import these types and values without loading the
// schema (src/config/schema.ts re-exports all of it).
// Must not import anything from src/proxy (imports run translate ← config ← proxy).

import type { HostPort } from "./units.js";
import { MIN_PROCESS_BYTES } from "./memory.js";
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
  /** `jwt`: bearer tokens verified before anything else (src/proxy/filters/auth); null = none */
  readonly jwt: JwtConfig | null;
  /** `rbac`: per-method allow/deny rules, after jwt; null = none */
  readonly rbac: RbacConfig | null;
  /** `extAuthz`: Envoy's Authorization/Check asked after the rules; null = none */
  readonly extAuthz: ExtAuthzConfig | null;
}

/** Where a route's JWT verification keys come from: a JWKS file (read at load) or an HTTPS URL (fetched, cached). */
export type JwksSource =
  | { readonly file: string }
  | {
      readonly url: string;
      /** CA bundle (PEM) the JWKS server's certificate is verified against; null = the system CAs */
      readonly caFile: string | null;
      /** keys are fetched again this long after the last good fetch (and at once for an unknown kid, at most once a second) */
      readonly refreshIntervalMs: number;
      /** after a failed refresh the last good keys stay usable this long past refreshInterval; then calls fail */
      readonly staleWhileErrorMs: number;
      /** one fetch's time limit */
      readonly timeoutMs: number;
    };

/** A route's `jwt` block: failures end the call 16 UNAUTHENTICATED (decided_by jwt). */
export interface JwtConfig {
  /** the `iss` a token must carry */
  readonly issuer: string;
  /** `aud` must name one of these; empty = any audience */
  readonly audiences: readonly string[];
  /** signature algorithms accepted */
  readonly algorithms: readonly string[];
  /** leeway for exp / nbf / iat */
  readonly clockSkewMs: number;
  readonly jwks: JwksSource;
  /** upstream request header carrying the verified claims (base64url JSON); null = none */
  readonly claimsHeader: string | null;
  /** keep the client's authorization header on the upstream request (default: removed) */
  readonly forwardToken: boolean;
}

/**
 * Access record fields an operator may have redacted (`accessLogRedact`): those that carry what a
 * client sent or who it is (a credential in an authority or a request id, an address that is
 * personal data, an upstream's message echoing a token). Their value becomes "<redacted>" in the
 * access log, the journal behind GET /calls and the call's span. (A request target's query is
 * always redacted: src/translate/grpc-path.ts.)
 */
export const REDACTABLE_FIELDS = ["authority", "request_id", "client_address", "tls_identity", "tls_sni", "grpc_message"] as const;
export type RedactableField = (typeof REDACTABLE_FIELDS)[number];

export const RBAC_ACTIONS = ["allow", "deny"] as const;
export type RbacAction = (typeof RBAC_ACTIONS)[number];

/** One rule of a route's `rbac`: every condition given must hold (within a list, any entry). */
export interface RbacRuleConfig {
  readonly name: string;
  readonly action: RbacAction;
  /** "pkg.Svc/Method", "pkg.Svc/*" or "*"; empty = any */
  readonly methods: readonly string[];
  /** the verified client certificate's URI or DNS SANs ("spiffe://td/ns/x/sa/y", a trailing "*" matches a prefix); empty = any */
  readonly identities: readonly string[];
  /** claim (dotted path) → accepted values (a claim that is a list matches when it holds one); empty = any */
  readonly claims: Readonly<Record<string, readonly string[]>>;
  /** client addresses or CIDR blocks; empty = any */
  readonly clientAddresses: readonly string[];
}

/** A route's `rbac` block: the first rule that matches decides; `default` when none does. */
export interface RbacConfig {
  readonly rules: readonly RbacRuleConfig[];
  readonly default: RbacAction;
  /** only count and log what would have been denied */
  readonly shadow: boolean;
}

/** A route's `extAuthz` block: Envoy's envoy.service.auth.v3.Authorization/Check over gRPC. */
export interface ExtAuthzConfig {
  /** the service's "host:port" (h2c, a cluster of its own); null when `cluster` names one */
  readonly address: HostPort | null;
  /** the cluster of `clusters:` the checks ride (its health checks, outlier detection, breakers, TLS); null when `address` is given */
  readonly cluster: string | null;
  readonly timeoutMs: number;
  /** a failed or timed-out check lets the call through (default: denied, 7 PERMISSION_DENIED) */
  readonly failOpen: boolean;
  /** send the verified client certificate (PEM, URL-encoded) as attributes.source.certificate */
  readonly includePeerCertificate: boolean;
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
  /** tokens added per second; null = no local limit (only `global`) */
  readonly callsPerSecond: number | null;
  /** the most calls at once above the rate (the bucket's size); default: callsPerSecond rounded up (0 without a local limit) */
  readonly burst: number;
  /** "route" (one bucket), "client_address", or "metadata:<name>" (one bucket per value; calls without it share one) */
  readonly key: string;
  /** a refusal carries x-ratelimit-limit/-remaining/-reset and grpc-retry-pushback-ms (default true) */
  readonly responseHeaders: boolean;
  /** `global`: the limit an Envoy RateLimitService keeps for every replica; null = none */
  readonly global: GlobalRateLimitConfig | null;
}

/** One entry of a global descriptor: its key and where its value comes from (src/translate/rate-limit-global.ts). */
export interface GlobalDescriptorEntry {
  readonly key: string;
  readonly source:
    | { readonly kind: "client_address" }
    | { readonly kind: "header"; readonly name: string }
    | { readonly kind: "service" }
    | { readonly kind: "method" }
    | { readonly kind: "literal"; readonly value: string };
}

/** `rateLimit.global`: ask an Envoy RateLimitService (ShouldRateLimit) about each call, after the local limit. */
export interface GlobalRateLimitConfig {
  /** the service's "host:port" (h2c, a cluster of its own per distinct address); null when `cluster` names one */
  readonly service: HostPort | null;
  /** the cluster of `clusters:` the questions ride (its health checks, outlier detection, breakers, TLS); null when `service` is given */
  readonly cluster: string | null;
  readonly domain: string;
  /** the longest a call waits for the service's answer */
  readonly timeoutMs: number;
  /** a failed or late answer refuses the call (14, rate_limit_service_failed) instead of admitting it */
  readonly failureModeDeny: boolean;
  /** descriptors, each a list of entries */
  readonly descriptors: readonly (readonly GlobalDescriptorEntry[])[];
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

/** A listener's `jsonTranscoding` (src/translate/transcode.ts, src/proxy/downstream/transcode.ts). */
export interface JsonTranscodingConfig {
  /** `descriptorSet`: a FileDescriptorSet file (protoc --include_imports --descriptor_set_out) */
  readonly descriptorSet: string;
  /** `unknownPaths`: a request no rule matches goes on as if transcoding were off ("passthrough") or gets 404 ("notFound") */
  readonly unknownPaths: "passthrough" | "notFound";
  /** `streamFormat`: a server-streaming response as one JSON array ("array") or one JSON object a line ("ndjson") */
  readonly streamFormat: "array" | "ndjson";
  /** `emitDefaults`: print fields at their default values */
  readonly emitDefaults: boolean;
  /** `ignoreUnknownFields`: unknown JSON fields and query parameters are ignored rather than refused (400) */
  readonly ignoreUnknownFields: boolean;
  /** `maxBodyBytes`: the largest JSON request body taken (larger: 413, no call made) */
  readonly maxBodyBytes: number;
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
  /** `jsonTranscoding`: JSON/HTTP requests matching a google.api.http rule become gRPC calls; null = off */
  readonly jsonTranscoding: JsonTranscodingConfig | null;
  /** `connect`: also take Connect requests (unary POST and GET, streaming) and translate them to gRPC upstream */
  readonly connect: boolean;
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

/**
 * `tracing`: OpenTelemetry traces (src/proxy/observe/tracing.ts): a SERVER span per sampled call,
 * a CLIENT span per attempt, exported as OTLP/HTTP in bounded batches.
 */
export interface TracingConfig {
  /** the OTLP/HTTP traces URL (http or https), e.g. http://127.0.0.1:4318/v1/traces; for grpc the collector's origin, e.g. http://127.0.0.1:4317 */
  readonly endpoint: string;
  /** the resource's service.name */
  readonly serviceName: string;
  /** the share of new traces (calls without a parent) sampled, 0 to 1; a parent's flag is followed */
  readonly sampleRatio: number;
  /** spans waiting for export at most; more are dropped (counted) */
  readonly maxQueueSize: number;
  /** a batch goes out this long after its first span at the latest (or when 512 are waiting) */
  readonly exportIntervalMs: number;
  /** one export may take this long; then it is given up (its spans are lost, counted) */
  readonly exportTimeoutMs: number;
  /** OTLP/HTTP with a protobuf (application/x-protobuf) or JSON (application/json) body, or OTLP/gRPC */
  readonly protocol: TracingProtocol;
}

/** `tracing.protocol`: OTLP/HTTP's two encodings and OTLP/gRPC, named as OTEL_EXPORTER_OTLP_PROTOCOL names them. */
export type TracingProtocol = "http/protobuf" | "http/json" | "grpc";

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
  /** access record fields shown as "<redacted>" (access log, GET /calls, spans); empty: none */
  readonly accessLogRedact: readonly RedactableField[];
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
  /** `tracing`: OpenTelemetry traces; null = off (the default: nothing is paid per call) */
  readonly tracing: TracingConfig | null;
  /** `xds`: listeners and clusters also come from an xDS control plane (src/xds); null = none */
  readonly xds: XdsConfig | null;
  /** `failedCalls`: the last calls that did not end 0 OK, kept for GET /calls?failed (0 = none); a reload resizes it */
  readonly failedCalls: number;
  /** `stats`: windowed per-method, per-route and per-endpoint stats (GET /stats, `dojang stat`/`top`, /ui); null = off */
  readonly stats: StatsConfig | null;
}

/** The `stats` block. */
export interface StatsConfig {
  /** rows per kind (methods, routes, endpoints) before new keys fold into that kind's "other" row */
  readonly maxRows: number;
}

/** The `xds` block: where the Envoy-shaped bootstrap file is (node, ads_config, the control plane's cluster). */
export interface XdsConfig {
  /** `bootstrap`: the bootstrap file's path (YAML or JSON, Envoy's shape) */
  readonly bootstrap: string;
}

// === defaults ===

const MiB = 1_048_576;

/** Every default, one place. config/example-full.yaml shows each of them. */
export const DEFAULTS = Object.freeze({
  // rateLimit.global.timeout: Envoy's rate limit filter waits 20 ms by default
  rateLimitGlobal: Object.freeze({ timeoutMs: 20 }),
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
    jsonTranscoding: null,
    connect: false,
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
    // What a paused upstream stream may still send while its client does not read (issue 22:
    // a stalled reader costs what dojang has promised): HTTP/2's own 64 KiB, as nginx's and
    // HAProxy's; the connection window stays large, so many streams still flow at once.
    initialWindowSize: 64 * 1024,
    connectionWindowSize: 16 * MiB,
    tls: null,
  }),
  config: Object.freeze({
    admin: null,
    drainTimeoutMs: 10_000,
    workers: 1,
    logLevel: "info" as LogLevel,
    accessLog: true,
    accessLogRedact: Object.freeze([]) as readonly RedactableField[],
    journal: 0,
    shrinkHeapWhenIdleMs: 0,
    concurrentMarking: "auto" as ConcurrentMarkingMode,
    memory: Object.freeze({ limitBytes: null }) as MemoryConfig,
    watchConfig: false,
    xds: null,
    // the last 1,000 failed calls: a record is kept only for a call that failed (issue 0.6 item 3)
    failedCalls: 1000,
    stats: Object.freeze({ maxRows: 100 }) as StatsConfig,
  }),
  tracing: Object.freeze({
    serviceName: "dojang",
    sampleRatio: 1,
    maxQueueSize: 2048,
    exportIntervalMs: 5000,
    exportTimeoutMs: 10_000,
    protocol: "http/protobuf" as TracingProtocol,
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
  // Ours: spans held for export (each a few hundred bytes); the SDK's default is 2048.
  traceQueue: { min: 1, max: 1_000_000 },
  // Names show up in logs and metric labels.
  nameLength: { min: 1, max: 64 },
  // Ours: each row's windows take about 53 KiB once it has had a call (src/proxy/observe/windows.ts)
  statsRows: { min: 1, max: 2000 },
  // the same bound as `journal`
  failedCalls: { min: 0, max: 100_000 },
});

/**
 * A header name a header rule may touch: lower-case token; not a pseudo-header, nor one HTTP/2 or
 * gRPC framing owns. The YAML schema (schema/route.ts) and the xDS mapping both check it.
 */
export const RULE_HEADER_RE = /^[0-9a-z!#$%&'*+.^_`|~-]+$/;
export const RULE_FORBIDDEN: ReadonlySet<string> = new Set(["content-type", "te", "connection", "transfer-encoding", "keep-alive", "upgrade", "host", "grpc-status", "grpc-message", "content-length"]);

/**
 * A cluster with dojang's defaults and no endpoints, DNS, health check, outlier detection,
 * keepalive or TLS: what an xDS cluster starts from (xds/map/cluster.ts) and what xds/compose.ts fills a
 * missing cluster with. It lives beside DEFAULTS, not in xds/, so that map/ and compose.ts do
 * not import each other (house review 3, §3); not in default.ts, which parses YAML and stays out
 * of the served process's start-up imports.
 */
export function defaultCluster(name: string): ClusterConfig {
  const d = DEFAULTS.cluster;
  return {
    name,
    endpoints: [],
    endpointWeights: [],
    dns: null,
    lb: d.lb,
    healthCheck: null,
    outlierDetection: null,
    circuitBreaker: { ...d.circuitBreaker },
    retryBudget: { ...d.retryBudget },
    keepalive: null,
    connectTimeoutMs: d.connectTimeoutMs,
    maxConcurrentStreamsPerSession: d.maxConcurrentStreamsPerSession,
    maxSessionsPerEndpoint: d.maxSessionsPerEndpoint,
    initialWindowSize: d.initialWindowSize,
    connectionWindowSize: d.connectionWindowSize,
    tls: null,
  };
}
