// The config file's JSON Schema, derived from the zod schema (src/config/schema.ts) and the fault
// filter's rule schema, so editors complete and check keys (`# yaml-language-server: $schema=...`).
// `npm run build` writes it to config/dojang.schema.json (scripts/config-schema.mjs); a test
// regenerates it and compares. Not part of the serving bundle: nothing in src/main.ts imports it.
//
// zod's `z.toJSONSchema(…, { io: "input" })` gives the shape: keys, required keys, strict objects
// (additionalProperties false), the fault actions as a oneOf on `kind`. It cannot see inside a
// `.transform()`, so a duration, a size or a log level comes out as a bare `string | number` with
// no default. Those are filled in here from one table per key (KEYS, FAULT_KEYS): a description,
// the default, and a pattern or enum that says what the transform accepts. A filter's keys are
// documented beside its zod schema (config/schema/auth.ts, rate-limit.ts, headers.ts; the fault
// rules' in config/faults/schema/keys.ts) and spread or read in here, so a key is written and
// documented in one place; the value kinds are in schema/key-doc.ts. Every string value with a
// pattern or enum also accepts a `${VAR}` reference, since expansion happens before validation.
// A test checks that every property has a description, so a new key cannot arrive undocumented.

import { z } from "zod";
import { FAULT_RULE_INPUT_SCHEMA, FAULT_SET_SETTINGS_INPUT_SCHEMA } from "./faults/parse.js";
import { FAULT_KEYS, FAULT_SET_KEYS } from "./faults/schema/keys.js";
import { CONCURRENT_MARKING_MODES, DEFAULTS, DOCUMENT_SCHEMA, LB_POLICIES, LIMITS, LOG_LEVELS } from "./schema.js";
import { formatSize } from "./units.js";
import { AUTH_KEYS } from "./schema/auth.js";
import { HEADER_RULES_KEYS } from "./schema/headers.js";
import { RATE_LIMIT_KEYS } from "./schema/rate-limit.js";
import {
  ADDRESS,
  countKind,
  dur,
  DURATION_RE,
  durationKind,
  enumKind,
  FILE,
  FLAG,
  GRPC_CODE_KIND,
  HOST_PORT_RE,
  NAME,
  NULLABLE_FILE,
  SERVER_NAME,
  SERVER_NAME_RE,
  sizeKind,
  withEnv,
  type JsonSchema,
  type KeyDoc,
} from "./schema/key-doc.js";
import { REDACTABLE_FIELDS } from "./types.js";

export type { JsonSchema } from "./schema/key-doc.js";


/**
 * Config keys, by path: property names joined with ".", "[]" for a list's items. The key name
 * alone is the fallback (for keys that mean the same wherever they appear).
 */
const KEYS: Readonly<Record<string, KeyDoc>> = {
  admin: {
    description: "The admin listener: /metrics, /ready, /live, /config, /faults, /calls. Leave it out (or null) for none.",
    default: null,
  },
  "admin.address": { description: 'Where the admin listener binds, "host:port" (port 0 = any free port).', kind: ADDRESS },
  "admin.mutations": {
    description: "Allow admin requests that change traffic (POST/DELETE /faults, ...). Off unless set; a non-loopback address then also needs token.",
    kind: FLAG,
    default: false,
  },
  "admin.token": {
    description: "Bearer token every admin mutation must carry (at least 16 characters), typically ${DOJANG_ADMIN_TOKEN}. Never logged or shown on /config.",
    kind: { type: ["string", "null"], pattern: withEnv("[\\s\\S]{16,}") },
    default: null,
  },
  "admin.readyClusters": {
    description: "/ready answers 200 only while each named cluster has a healthy endpoint (so a pod is not Ready before its app answers).",
    default: [],
  },
  "admin.readyClusters[]": { description: "A cluster name.", kind: NAME },
  listeners: { description: "The h2c (plain-text HTTP/2) listeners gRPC clients connect to. At least one." },
  "listeners[].name": { description: "The listener's name, in logs and metric labels.", kind: NAME },
  "listeners[].address": { description: '"host:port" to listen on; IPv6 as "[::1]:8080"; port 0 = any free port.', kind: ADDRESS },
  "listeners[].routes": { description: "Routes, tried in order; the first that matches wins. No match: 12 UNIMPLEMENTED (decided_by no_route)." },
  "listeners[].routes[].match": { description: "Exactly one of prefix, path or service; optionally authority." },
  "listeners[].routes[].match.prefix": { description: ':path prefix, starting with "/".' },
  "listeners[].routes[].match.path": { description: 'Exact :path, "/pkg.Svc/Method".' },
  "listeners[].routes[].match.service": { description: 'Fully-qualified service, "pkg.Svc": every method of it.' },
  "listeners[].routes[].match.authority": { description: "Limit the route to this :authority (case-insensitive)." },
  "listeners[].routes[].cluster": { description: "The cluster (by name) the route's calls go to." },
  "listeners[].routes[].timeout": {
    description: 'Cap on the whole call: a duration like "30s", or "none"/null for no cap beyond the client\'s grpc-timeout.',
    kind: { ...durationKind(1, true), pattern: withEnv(`${DURATION_RE}|\\s*[Nn][Oo][Nn][Ee]\\s*`) },
    default: dur(DEFAULTS.route.timeoutMs),
  },
  "listeners[].routes[].maxRequestMessageBytes": {
    description: 'Largest client message; a larger one ends the call with 8 RESOURCE_EXHAUSTED. Bytes or "4MiB".',
    kind: sizeKind(LIMITS.messageBytes),
    default: formatSize(DEFAULTS.route.maxRequestMessageBytes),
  },
  "listeners[].routes[].maxResponseMessageBytes": {
    description: 'Largest upstream message; a larger one ends the call with 8 RESOURCE_EXHAUSTED. Bytes or "4MiB".',
    kind: sizeKind(LIMITS.messageBytes),
    default: formatSize(DEFAULTS.route.maxResponseMessageBytes),
  },
  "listeners[].routes[].faults": { description: "Fault rules for calls on this route.", default: [] },
  // the filters' keys live beside their schemas (config/schema/<filter>.ts)
  ...RATE_LIMIT_KEYS,
  ...HEADER_RULES_KEYS,
  "listeners[].routes[].rewriteAuthority": { description: "The :authority sent upstream instead of the client's. null = the client's.", default: null },
  "listeners[].routes[].rewritePrefix": {
    description: 'Replaces the part of :path the route matched (its prefix, "/<service>/" for a service match, or the whole path for a path match), e.g. "/shop.v2.Catalog/". null = none.',
    default: null,
  },
  ...AUTH_KEYS,
  "listeners[].routes[].retry": {
    description: "The route's retry policy (null = none; transparent retries of attempts the upstream never processed happen anyway).",
    default: null,
  },
  "listeners[].routes[].retry.retryOn": { description: "gRPC codes that are retried, from Trailers-Only or trailers after headers with no message.", default: ["UNAVAILABLE"] },
  "listeners[].routes[].retry.retryOn[]": { description: 'A gRPC code: its name ("UNAVAILABLE") or number.', kind: GRPC_CODE_KIND },
  "listeners[].routes[].retry.maxAttempts": { description: "Attempts in all, the first included.", kind: countKind(LIMITS.maxAttempts), default: DEFAULTS.retry.maxAttempts },
  "listeners[].routes[].retry.perTryTimeout": {
    description: "Each attempt's own time limit (null = only the call's deadline); a timed-out attempt is retried.",
    kind: durationKind(1, true),
    default: null,
  },
  "listeners[].routes[].retry.backoff": { description: "Retry n waits random(0, min(base × 2^(n−1), max)); grpc-retry-pushback-ms overrides it." },
  "listeners[].routes[].retry.backoff.base": { description: "The first retry's ceiling.", kind: durationKind(1), default: dur(DEFAULTS.retry.backoffBaseMs) },
  "listeners[].routes[].retry.backoff.max": { description: "The largest ceiling.", kind: durationKind(1), default: dur(DEFAULTS.retry.backoffMaxMs) },
  "listeners[].routes[].retry.bufferBytes": {
    description: "Request bytes kept for replay; a request larger than this commits to its attempt (no retry).",
    kind: sizeKind({ min: 0, max: 64 * 1024 * 1024 }),
    default: formatSize(DEFAULTS.retry.bufferBytes),
  },
  "listeners[].routes[].retry.retryResetAfterRequest": {
    description: "Also retry attempts reset after the whole request was sent (the upstream may have done the work: only for idempotent calls).",
    kind: FLAG,
    default: false,
  },
  "listeners[].routes[].streamIdleTimeout": {
    description: "A call on this route on which nothing moves for this long ends with 14 UNAVAILABLE (decided_by stream_idle); null = the listener's.",
    kind: durationKind(0, true),
    default: null,
  },
  "listeners[].maxConcurrentStreams": {
    description: "Streams per client connection; more are refused with RST_STREAM REFUSED_STREAM (nghttp2 is told limit + max(limit, 100), so a client over the limit loses only its extra streams).",
    kind: countKind(LIMITS.maxConcurrentStreams),
    default: DEFAULTS.listener.maxConcurrentStreams,
  },
  "listeners[].maxHeaderListPairs": {
    description: "node's maxHeaderListPairs (its own default of 128 resets calls with much metadata).",
    kind: countKind(LIMITS.maxHeaderListPairs),
    default: DEFAULTS.listener.maxHeaderListPairs,
  },
  "listeners[].maxHeaderListSize": {
    description: "SETTINGS_MAX_HEADER_LIST_SIZE, bytes or a size.",
    kind: sizeKind(LIMITS.maxHeaderListSize),
    default: formatSize(DEFAULTS.listener.maxHeaderListSize),
  },
  "listeners[].initialWindowSize": {
    description: "SETTINGS_INITIAL_WINDOW_SIZE (per stream) advertised to clients.",
    kind: sizeKind(LIMITS.initialWindowSize),
    default: formatSize(DEFAULTS.listener.initialWindowSize),
  },
  "listeners[].connectionWindowSize": {
    description: "Connection-level receive window for each client connection.",
    kind: sizeKind(LIMITS.connectionWindowSize),
    default: formatSize(DEFAULTS.listener.connectionWindowSize),
  },
  "listeners[].maxSessionMemoryMiB": {
    description: "node's maxSessionMemory per client connection, MiB.",
    kind: countKind(LIMITS.maxSessionMemoryMiB),
    default: DEFAULTS.listener.maxSessionMemoryMiB,
  },
  "listeners[].faults": { description: "Fault rules for every call on this listener.", default: [] },
  "listeners[].faultHeaders": {
    description: "Honour fault-injection request headers (x-envoy-fault-*, x-dojang-fault). A test feature: any client may then inject faults.",
    kind: FLAG,
    default: false,
  },
  "listeners[].faultTrailer": { description: "Name the fault rule(s) that fired in an x-dojang-fault response trailer.", kind: FLAG, default: false },
  "listeners[].streamIdleTimeout": {
    description: "A call on which no frame moves either way for this long ends with 14 UNAVAILABLE (decided_by stream_idle); 0 = never.",
    kind: durationKind(0),
    default: dur(DEFAULTS.listener.streamIdleTimeoutMs),
  },
  "listeners[].maxConnectionAge": {
    description: "A client connection older than this gets GOAWAY, so clients behind an L4 balancer rebalance (grpc-go's MaxConnectionAge); null = never.",
    kind: durationKind(1, true),
    default: null,
  },
  "listeners[].maxConnectionAgeGrace": {
    description: "How long calls may still run on a connection after its maxConnectionAge GOAWAY.",
    kind: durationKind(0),
    default: dur(DEFAULTS.listener.maxConnectionAgeGraceMs),
  },
  "listeners[].idleTimeout": {
    description: "A client connection with no open stream for this long is closed (GOAWAY); null = never.",
    kind: durationKind(1, true),
    default: null,
  },
  "listeners[].maxConnections": {
    description: "Client connections open at once on this listener; a connection over the limit is closed as it is accepted. null = no limit.",
    kind: { ...countKind(LIMITS.maxConnections), type: ["integer", "null"] },
    default: DEFAULTS.listener.maxConnections,
  },
  "listeners[].requestHeadersTimeout": {
    description: "A client connection that has not sent its first request (HEADERS) this long after it was accepted is closed (slowloris: TCP only, or the preface and nothing). null = never.",
    kind: durationKind(1, true),
    default: dur(DEFAULTS.listener.requestHeadersTimeoutMs),
  },
  "listeners[].healthService": { description: "Answer grpc.health.v1 Check on this listener from the clusters' health.", kind: FLAG, default: false },
  "listeners[].attemptsHeader": { description: "Add x-dojang-attempts (upstream attempts made) to every response.", kind: FLAG, default: false },
  "listeners[].grpcWeb": {
    description: "Also take gRPC-Web calls (application/grpc-web, +proto, -text) from browsers, over HTTP/2 here and over HTTP/1.1 on http1Address (or the TLS port), translated to gRPC upstream.",
    kind: FLAG,
    default: false,
  },
  "listeners[].jsonTranscoding": {
    description: "Transcode JSON/HTTP requests (HTTP/2 here, HTTP/1.1 on http1Address) that match a google.api.http rule of the descriptor set into gRPC calls, routed by their /pkg.Service/Method path (null = off).",
    default: null,
  },
  "listeners[].jsonTranscoding.descriptorSet": { description: "A FileDescriptorSet file (protoc --include_imports --descriptor_set_out=FILE), read when the listener starts or its config changes.", kind: FILE },
  "listeners[].jsonTranscoding.unknownPaths": {
    description: '"notFound": a request that matches no rule gets 404 with a google.rpc.Status body; "passthrough": it is handled as if transcoding were off (gRPC, gRPC-Web, other protocols).',
    kind: enumKind(["passthrough", "notFound"]),
    default: "notFound",
  },
  "listeners[].jsonTranscoding.streamFormat": { description: 'A server-streaming response as one JSON array ("array") or one JSON object a line ("ndjson").', kind: enumKind(["array", "ndjson"]), default: "array" },
  "listeners[].jsonTranscoding.emitDefaults": { description: "Print fields at their default values (0, \"\", false, [], {}) in responses.", kind: FLAG, default: false },
  "listeners[].jsonTranscoding.ignoreUnknownFields": { description: "Ignore unknown JSON fields and query parameters instead of refusing the request with 400.", kind: FLAG, default: false },
  "listeners[].jsonTranscoding.maxBodyBytes": { description: "The largest JSON request body taken; a larger one gets 413 and no call is made.", kind: sizeKind({ min: 1, max: 64 * 1_048_576 }), default: 4 * 1_048_576 },
  "listeners[].connect": {
    description: "Also take Connect calls (unary POST application/proto or application/json, GET with the message in the query, streaming application/connect+proto/json), over HTTP/2 here and over HTTP/1.1 on http1Address (or the TLS port), translated to gRPC upstream (JSON goes upstream as application/grpc+json).",
    kind: FLAG,
    default: false,
  },
  "listeners[].cors": { description: "CORS for gRPC-Web: the origins a browser page may call from (null = no CORS headers: same-origin pages only). Needs grpcWeb or connect.", default: null },
  "listeners[].cors.allowOrigins": { description: 'Origins allowed: exact ("https://app.example.com"), wildcard ("https://*.example.com" or "*.example.com", any scheme), or "*". A refused origin gets no CORS headers.' },
  "listeners[].cors.allowOrigins[]": { description: "An origin, a wildcard origin, or \"*\".", kind: { type: "string", minLength: 1 } },
  "listeners[].http1Address": {
    description:
      '"host:port" of an HTTP/1.1 socket for gRPC-Web, Connect and JSON beside the listener\'s own (node\'s h2c server speaks only HTTP/2); null = none. Needs grpcWeb, connect or jsonTranscoding. On a listener with tls it serves HTTPS/1.1 with that listener\'s certificates and client-certificate rule (requireClientCert holds there too).',
    kind: { type: ["string", "null"], pattern: withEnv(HOST_PORT_RE) },
    default: null,
  },
  "listeners[].tls": { description: "Serve TLS (ALPN h2) instead of h2c (null = plaintext). File paths are relative to the working directory; the files are re-read when they change.", default: null },
  "listeners[].tls.certFile": { description: "The default certificate chain (PEM), served when no certificates entry matches the client's SNI name.", kind: FILE },
  "listeners[].tls.keyFile": { description: "The default certificate's private key (PEM). Never shown on /config (only the path).", kind: FILE },
  "listeners[].tls.caFile": { description: "CA bundle (PEM) that client certificates are verified against (null = no client certificates asked for). A verified identity goes upstream in x-forwarded-client-cert.", kind: NULLABLE_FILE, default: null },
  "listeners[].tls.requireClientCert": { description: "Refuse the handshake of a client without a certificate that caFile verifies (mTLS).", kind: FLAG, default: false },
  "listeners[].tls.certificates": { description: "More certificates, chosen by the SNI name the client sends.", default: [] },
  "listeners[].tls.certificates[]": { description: "A certificate and the server names it is served for." },
  "listeners[].tls.certificates[].serverNames": { description: 'Names this certificate is served for: exact ("api.example.com") or one-label wildcards ("*.example.com").' },
  "listeners[].tls.certificates[].serverNames[]": { description: 'A server name, "api.example.com" or "*.example.com".', kind: SERVER_NAME },
  "listeners[].tls.certificates[].certFile": { description: "Its certificate chain (PEM).", kind: FILE },
  "listeners[].tls.certificates[].keyFile": { description: "Its private key (PEM).", kind: FILE },
  clusters: { description: "Upstream gRPC servers (h2c), by name. At least one." },
  "clusters[].name": { description: "The cluster's name, used by routes and in metric labels.", kind: NAME },
  "clusters[].endpoints": { description: 'The servers, "host:port" each (a real port, not 0), or { address, weight }. Give endpoints or dns.' },
  "clusters[].endpoints[]": {
    description: 'An upstream "host:port" (IPv6 as "[::1]:50051"), or { address: "host:port", weight: 2 }.',
    kind: {
      anyOf: [
        ADDRESS,
        {
          type: "object",
          properties: { address: ADDRESS, weight: { ...countKind(LIMITS.weight), default: 1 } },
          required: ["address"],
          additionalProperties: false,
        },
      ],
    },
  },
  "clusters[].endpoints[].address": { description: 'The endpoint, "host:port".', kind: ADDRESS },
  "clusters[].endpoints[].weight": { description: "Its share of the calls, relative to the others (1..1000).", kind: countKind(LIMITS.weight), default: 1 },
  "clusters[].dns": { description: 'A DNS name and port, "backend.default.svc:50051": its A/AAAA records are the endpoints (a headless Service).', kind: ADDRESS },
  "clusters[].refreshInterval": { description: "How often dns is resolved again.", kind: durationKind(100), default: dur(DEFAULTS.cluster.dnsRefreshIntervalMs) },
  "clusters[].lb": { description: "How calls are spread: round_robin, least_request (power of two choices) or random; weights apply to each.", kind: enumKind(LB_POLICIES), default: DEFAULTS.cluster.lb },
  "clusters[].healthCheck": { description: "Active grpc.health.v1 Check of every endpoint (null = none); unhealthy endpoints get no calls unless all are.", default: null },
  "clusters[].healthCheck.service": { description: 'The service asked about ("" = the server as a whole).', default: "" },
  "clusters[].healthCheck.interval": { description: "Time between checks.", kind: durationKind(1), default: dur(DEFAULTS.cluster.healthCheck.intervalMs) },
  "clusters[].healthCheck.timeout": { description: "A check not answered in this time fails.", kind: durationKind(1), default: dur(DEFAULTS.cluster.healthCheck.timeoutMs) },
  "clusters[].healthCheck.unhealthyThreshold": { description: "Failed checks in a row that make an endpoint unhealthy.", kind: countKind(LIMITS.thresholds), default: DEFAULTS.cluster.healthCheck.unhealthyThreshold },
  "clusters[].healthCheck.healthyThreshold": { description: "Passed checks in a row that make it healthy again.", kind: countKind(LIMITS.thresholds), default: DEFAULTS.cluster.healthCheck.healthyThreshold },
  "clusters[].outlierDetection": { description: "Eject an endpoint after consecutive failures (null = off).", default: null },
  "clusters[].outlierDetection.consecutiveFailures": { description: "Failures in a row (error statuses, resets, connect failures) that eject.", kind: countKind(LIMITS.thresholds), default: DEFAULTS.cluster.outlierDetection.consecutiveFailures },
  "clusters[].outlierDetection.baseEjection": { description: "Ejection time = this × times ejected.", kind: durationKind(1), default: dur(DEFAULTS.cluster.outlierDetection.baseEjectionMs) },
  "clusters[].outlierDetection.maxEjection": { description: "The longest ejection.", kind: durationKind(1), default: dur(DEFAULTS.cluster.outlierDetection.maxEjectionMs) },
  "clusters[].outlierDetection.maxEjectionPercent": { description: "At most this share of the endpoints is ejected at once (never all).", kind: countKind(LIMITS.percent), default: DEFAULTS.cluster.outlierDetection.maxEjectionPercent },
  "clusters[].circuitBreaker": { description: "Limits per cluster; a call over one ends at once with 14 UNAVAILABLE (decided_by overflow)." },
  "clusters[].circuitBreaker.maxConnections": { description: "Upstream connections.", kind: countKind(LIMITS.breaker), default: DEFAULTS.cluster.circuitBreaker.maxConnections },
  "clusters[].circuitBreaker.maxPendingCalls": { description: "Calls waiting for a connection or a stream slot.", kind: countKind(LIMITS.breaker), default: DEFAULTS.cluster.circuitBreaker.maxPendingCalls },
  "clusters[].circuitBreaker.maxCalls": { description: "Calls in flight.", kind: countKind(LIMITS.breaker), default: DEFAULTS.cluster.circuitBreaker.maxCalls },
  "clusters[].circuitBreaker.maxRetries": { description: "Retries in flight.", kind: countKind(LIMITS.breaker), default: DEFAULTS.cluster.circuitBreaker.maxRetries },
  "clusters[].retryBudget": { description: "Retries are at most percent of the calls of the last 10 s, with a floor; kept across reloads." },
  "clusters[].retryBudget.percent": { description: "Retries as a percentage of calls.", kind: countKind(LIMITS.budgetPercent), default: DEFAULTS.cluster.retryBudget.percent },
  "clusters[].retryBudget.minRetriesPerSecond": { description: "Retries always allowed per second.", kind: countKind(LIMITS.retriesPerSecond), default: DEFAULTS.cluster.retryBudget.minRetriesPerSecond },
  "clusters[].keepalive": { description: "PING each upstream connection (null = off); one not answered in timeout drops the connection.", default: null },
  "clusters[].keepalive.interval": { description: "Time between PINGs.", kind: durationKind(1), default: dur(DEFAULTS.cluster.keepalive.intervalMs) },
  "clusters[].keepalive.timeout": { description: "A PING not answered in this time drops the connection.", kind: durationKind(1), default: dur(DEFAULTS.cluster.keepalive.timeoutMs) },
  "clusters[].connectTimeout": {
    description: "How long connecting to an endpoint may take.",
    kind: durationKind(1),
    default: dur(DEFAULTS.cluster.connectTimeoutMs),
  },
  "clusters[].maxConcurrentStreamsPerSession": {
    description: "Open another connection beyond min(this, the peer's SETTINGS_MAX_CONCURRENT_STREAMS) calls.",
    kind: countKind(LIMITS.maxConcurrentStreamsPerSession),
    default: DEFAULTS.cluster.maxConcurrentStreamsPerSession,
  },
  "clusters[].maxSessionsPerEndpoint": {
    description: "At most this many connections to one endpoint.",
    kind: countKind(LIMITS.maxSessionsPerEndpoint),
    default: DEFAULTS.cluster.maxSessionsPerEndpoint,
  },
  "clusters[].initialWindowSize": {
    description:
      "SETTINGS_INITIAL_WINDOW_SIZE (per stream) advertised to the upstream: the window every stream opens at, and what a stream whose client does not read may be sent. Grown from a bandwidth-delay estimate while every stream of the session reads (up to 4 MiB a stream), lowered again before a new stream opens.",
    kind: sizeKind(LIMITS.initialWindowSize),
    default: formatSize(DEFAULTS.cluster.initialWindowSize),
  },
  "clusters[].connectionWindowSize": {
    description: "Connection-level receive window for each upstream connection.",
    kind: sizeKind(LIMITS.connectionWindowSize),
    default: formatSize(DEFAULTS.cluster.connectionWindowSize),
  },
  "clusters[].tls": { description: "Connect to the endpoints over TLS (ALPN h2), verifying their certificates (null = h2c; {} = TLS with the system CAs).", default: null },
  "clusters[].tls.caFile": { description: "CA bundle (PEM) the upstream's certificate is verified against (null = the system CAs).", kind: NULLABLE_FILE, default: null },
  "clusters[].tls.serverName": { description: "SNI name sent, and the name the upstream's certificate must carry (null = the endpoint's host).", kind: { type: ["string", "null"], pattern: withEnv(SERVER_NAME_RE) }, default: null },
  "clusters[].tls.certFile": { description: "Client certificate chain (PEM) for mTLS to the upstream (with keyFile).", kind: NULLABLE_FILE, default: null },
  "clusters[].tls.keyFile": { description: "The client certificate's private key (PEM).", kind: NULLABLE_FILE, default: null },
  drainTimeout: {
    description: "After SIGTERM, how long open calls may finish before they end with 14 UNAVAILABLE (decided_by shutdown).",
    kind: durationKind(0),
    default: dur(DEFAULTS.config.drainTimeoutMs),
  },
  workers: { description: "Processes sharing the listeners (a core each).", kind: countKind(LIMITS.workers), default: DEFAULTS.config.workers },
  logLevel: { description: "Log level (case-insensitive).", kind: enumKind(LOG_LEVELS), default: DEFAULTS.config.logLevel },
  accessLog: { description: "One JSON log line per call.", kind: FLAG, default: DEFAULTS.config.accessLog },
  accessLogRedact: { description: 'Access record fields shown as "<redacted>" in the access log, GET /calls and spans (a query is always redacted).', default: [] },
  "accessLogRedact[]": { description: "An access record field.", kind: enumKind(REDACTABLE_FIELDS) },
  journal: {
    description: "Recent calls kept for GET /calls (0 = none; the library's startDojang keeps 1000).",
    kind: countKind({ min: 0, max: 100000 }),
    default: DEFAULTS.config.journal,
  },
  shrinkHeapWhenIdle: {
    description: "After this long with no call, one memory-reducing GC gives memory back; 0 = never.",
    kind: durationKind(0),
    default: dur(DEFAULTS.config.shrinkHeapWhenIdleMs),
  },
  concurrentMarking: {
    description: "V8's concurrent GC marking: auto (off on one CPU while bytes flow fast), on, off.",
    kind: enumKind(CONCURRENT_MARKING_MODES),
    default: DEFAULTS.config.concurrentMarking,
  },
  memory: { description: "The memory budget: V8's young and old generation sizes and the overload manager's buffer budgets are derived from it at start (README, Memory)." },
  "memory.limit": {
    description: "Bytes all of dojang's processes may use (the container's limit); null = the cgroup's memory limit if there is one, else none. With workers: N, each worker gets (limit − 80MiB) / N (at least 96MiB each). Needs a restart.",
    kind: { ...sizeKind(LIMITS.memoryLimit), type: ["string", "integer", "null"] },
    default: null,
  },
  faultInjection: { description: "The fault rule set: seed (percentages replay identically) and maxActiveFaults." },
  watchConfig: { description: "Reload the whole config when its file changes (CLI only), as SIGHUP and POST /reload do.", kind: FLAG, default: false },
  tracing: {
    description: "OpenTelemetry traces: a SERVER span per sampled call and a CLIENT span per attempt, exported as OTLP (HTTP or gRPC) in bounded batches (null = off, the default). Needs a restart.",
    default: null,
  },
  "tracing.endpoint": { description: "The OTLP/HTTP traces URL spans are POSTed to (http or https), e.g. http://127.0.0.1:4318/v1/traces; with protocol grpc the collector's origin, e.g. http://127.0.0.1:4317 (https: TLS).", kind: { type: "string", pattern: withEnv("https?://\\S+") } },
  "tracing.serviceName": { description: "The service.name of dojang's spans.", kind: NAME, default: DEFAULTS.tracing.serviceName },
  "tracing.sampleRatio": {
    description: "The share of new traces sampled (calls that arrive without a traceparent or B3 parent), 0 to 1; a parent's sampled flag is always followed.",
    kind: { type: ["number", "string"], minimum: 0, maximum: 1, pattern: withEnv("\\s*\\d+(?:\\.\\d+)?\\s*") },
    default: DEFAULTS.tracing.sampleRatio,
  },
  "tracing.maxQueueSize": {
    description: "Ended spans waiting for export at most; a span beyond it is dropped and counted (dojang_trace_spans_dropped_total), never waited for.",
    kind: countKind(LIMITS.traceQueue),
    default: DEFAULTS.tracing.maxQueueSize,
  },
  "tracing.protocol": {
    description: "How spans are sent: OTLP/HTTP with a protobuf (http/protobuf, application/x-protobuf) or JSON (http/json, application/json) body, or OTLP/gRPC (grpc: TraceService/Export over HTTP/2); an OpenTelemetry Collector's OTLP receiver takes all three.",
    kind: enumKind(["http/protobuf", "http/json", "grpc"]),
    default: DEFAULTS.tracing.protocol,
  },
  "tracing.exportInterval": { description: "The longest a span waits before its batch is sent (a batch also goes when 512 spans wait).", kind: durationKind(1), default: dur(DEFAULTS.tracing.exportIntervalMs) },
  "tracing.exportTimeout": { description: "How long one export may take before it is given up (its spans are counted as dropped).", kind: durationKind(1), default: dur(DEFAULTS.tracing.exportTimeoutMs) },
  failedCalls: {
    description: "The last calls that did not end 0 OK, with their access records, kept for GET /calls?failed (0 = none). A reload resizes it, keeping the newest.",
    kind: countKind(LIMITS.failedCalls),
    default: DEFAULTS.config.failedCalls,
  },
  stats: {
    description: "Windowed stats per method, route and upstream endpoint over the last 10s, 1m and 10m (GET /stats, dojang stat and top, the /ui page); null = off. Needs a restart.",
    default: { maxRows: DEFAULTS.config.stats.maxRows },
  },
  "stats.maxRows": {
    description: "Rows per kind (methods, routes, endpoints); further keys count in that kind's \"other\" row (GET /stats says how many). Each row with calls takes about 53KiB.",
    kind: countKind(LIMITS.statsRows),
    default: DEFAULTS.config.stats.maxRows,
  },
  xds: { description: "Listeners and clusters also come from an xDS control plane (ADS), beside the ones written here (docs/guides/xds.md). Needs a restart.", default: null },
  "xds.bootstrap": { description: "The bootstrap file (YAML or JSON, Envoy's shape): node, dynamic_resources.ads_config, the control plane's cluster under static_resources." },
};

// === generation ===

const asObject = (v: unknown): JsonSchema | undefined =>
  typeof v === "object" && v !== null && !Array.isArray(v) ? (v as JsonSchema) : undefined;

function generate(schema: z.ZodType): JsonSchema {
  const out = z.toJSONSchema(schema, { io: "input", unrepresentable: "any", target: "draft-2020-12" }) as JsonSchema;
  delete out["$schema"];
  return out;
}

/** Applies `docs` to every property below `node`; `path` names it as the tables do. Returns the keys it found no doc for. */
function annotate(node: JsonSchema, path: string, docs: Readonly<Record<string, KeyDoc>>, missing: string[]): void {
  const props = asObject(node["properties"]);
  if (props !== undefined) {
    // A fault action: name its keys by kind (action<abort>.code).
    const kindConst = asObject(props["kind"])?.["const"];
    const base = typeof kindConst === "string" ? `${path}<${kindConst}>` : path;
    for (const [key, value] of Object.entries(props)) {
      const child = asObject(value);
      if (child === undefined) continue;
      const full = base === "" ? key : `${base}.${key}`;
      const doc = docs[full] ?? docs[key];
      if (doc === undefined) missing.push(full);
      else applyDoc(child, doc);
      annotate(child, full, docs, missing);
    }
  }
  const items = asObject(node["items"]);
  if (items !== undefined) visitItem(items, `${path}[]`, docs, missing);
  const prefix = node["prefixItems"];
  if (Array.isArray(prefix)) for (const p of prefix) if (asObject(p) !== undefined) visitItem(p as JsonSchema, `${path}[]`, docs, missing);
  for (const k of ["anyOf", "oneOf"] as const) {
    const alts = node[k];
    if (Array.isArray(alts)) for (const a of alts) if (asObject(a) !== undefined) annotate(a as JsonSchema, path, docs, missing);
  }
}

function visitItem(item: JsonSchema, path: string, docs: Readonly<Record<string, KeyDoc>>, missing: string[]): void {
  const doc = docs[path];
  if (doc !== undefined) applyDoc(item, doc);
  annotate(item, path, docs, missing);
}

/** Replaces zod's bare `string | number` for a transformed scalar with the table's kind, and adds description and default. */
function applyDoc(node: JsonSchema, doc: KeyDoc): void {
  if (doc.kind !== undefined) {
    for (const k of ["type", "anyOf", "oneOf", "enum", "pattern", "minimum", "maximum", "minLength", "maxLength"]) delete node[k];
    Object.assign(node, structuredClone(doc.kind));
  }
  node["description"] = doc.kind?.["description"] !== undefined ? `${doc.description} ${String(doc.kind["description"])}` : doc.description;
  if (doc.default !== undefined) node["default"] = doc.default;
  else if (node["default"] !== undefined && doc.kind !== undefined) delete node["default"];
}

/** The whole schema, as committed in config/dojang.schema.json. Deterministic. */
export function configJsonSchema(): JsonSchema {
  const missing: string[] = [];
  const doc = generate(DOCUMENT_SCHEMA);
  annotate(doc, "", KEYS, missing);

  const rule = generate(FAULT_RULE_INPUT_SCHEMA);
  annotate(rule, "", FAULT_KEYS, missing);
  rule["description"] = "A fault rule: { id?, match?, fire?, action: { kind, ... } }. The README's \"dojang as a test harness\" lists every kind.";
  const settings = generate(FAULT_SET_SETTINGS_INPUT_SCHEMA);
  annotate(settings, "", FAULT_SET_KEYS, missing);

  // The document schema has z.unknown() where the fault filter parses by itself: point those at $defs.
  const props = asObject(doc["properties"]) ?? {};
  const listenerProps = asObject(asObject(asObject(props["listeners"])?.["items"])?.["properties"]) ?? {};
  const routeProps = asObject(asObject(asObject(listenerProps["routes"])?.["items"])?.["properties"]) ?? {};
  for (const faults of [asObject(listenerProps["faults"]), asObject(routeProps["faults"])]) {
    if (faults !== undefined) faults["items"] = { $ref: "#/$defs/faultRule" };
  }
  const fi = asObject(props["faultInjection"]);
  if (fi !== undefined) {
    const description = fi["description"];
    for (const k of Object.keys(fi)) delete fi[k];
    Object.assign(fi, { $ref: "#/$defs/faultInjection", description });
  }

  // listeners and clusters may be empty only when a control plane sends them (xds)
  doc["anyOf"] = [{ required: ["xds"] }, {
      properties: {
        listeners: { description: "Without xds: at least one listener.", minItems: 1 },
        clusters: { description: "Without xds: at least one cluster.", minItems: 1 },
      },
    },
  ];

  if (missing.length > 0) throw new Error(`config JSON Schema: no description for ${missing.join(", ")}`);
  return {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    title: "dojang config",
    description:
      "dojang's config file (YAML or JSON). Generated from src/config/schema.ts by `npm run build` (scripts/config-schema.mjs); do not edit by hand. dojang itself checks more than this schema can say (cross-references, ranges inside units), so `dojang --check` has the last word.",
    ...doc,
    $defs: { faultRule: rule, faultInjection: settings },
  };
}

/**
 * The schema of a config fragment (bench/run.mjs --dojang-config-extra: YAML merged into a full
 * config, lists by index), as committed in config/dojang.fragment.schema.json: the same keys and
 * values, nothing required.
 */
export function configFragmentJsonSchema(): JsonSchema {
  const strip = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(strip);
    const o = asObject(v);
    if (o === undefined) return v;
    const out: JsonSchema = {};
    for (const [k, x] of Object.entries(o)) if (k !== "required" && k !== "minItems") out[k] = strip(x);
    return out;
  };
  const full = strip(configJsonSchema()) as JsonSchema;
  return {
    ...full,
    title: "dojang config fragment",
    description:
      "A part of a dojang config, merged into a full one (bench/run.mjs --dojang-config-extra; lists merge by index): dojang.schema.json with no key required. Generated by `npm run build`; do not edit by hand.",
  };
}

const text = (schema: JsonSchema) => `${JSON.stringify(schema, null, 2)}\n`;

/** The committed files' text (2-space JSON, a final newline), by file name under config/. */
export function configJsonSchemaFiles(): Readonly<Record<string, string>> {
  return {
    "dojang.schema.json": text(configJsonSchema()),
    "dojang.fragment.schema.json": text(configFragmentJsonSchema()),
  };
}
