// The zod schema that turns an (env-expanded) unknown value into the normalized Config, and the
// renaming into it. The types, DEFAULTS and LIMITS live in types.ts (re-exported here); the
// scalar, route, listener, cluster and TLS schemas in schema/. Cross-references (unknown cluster,
// duplicate names and addresses) are checked in parse.ts, which sees the whole document.
// Must not import anything from src/proxy (imports run translate ← config ← proxy).

import { z } from "zod";
import { minimumLimitBytes } from "./memory.js";
import type { FaultRule } from "./faults/model.js";
import type { FaultSetSettings } from "./faults/parse.js";
import { DEFAULTS, LIMITS, REDACTABLE_FIELDS, type Config } from "./types.js";
import { concurrentMarking, count, durationMs, expected, flag, hostPort, logLevel, name, oneOf, sizeBytes } from "./schema/scalars.js";
import { listener } from "./schema/listener.js";
import { cluster } from "./schema/cluster.js";
import { tracing } from "./schema/tracing.js";
import { isLoopbackHost } from "./loopback.js";

export * from "./types.js";

const MiB = 1_048_576;

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

export { isLoopbackHost } from "./loopback.js";

/**
 * The whole document. Keys later versions will add (tls, faults, rateLimits, per-route filters)
 * are not accepted yet: an unknown key is always an error, never silently ignored.
 */
const document = z.strictObject(
  {
    admin: admin.nullable().default(DEFAULTS.config.admin),
    // empty lists only with xds (a sidecar driven by a control plane): checked below
    listeners: z.array(listener, { error: expected("a list of listeners") }),
    clusters: z.array(cluster, { error: expected("a list of clusters") }),
    drainTimeout: durationMs(0).default(DEFAULTS.config.drainTimeoutMs),
    workers: count(LIMITS.workers).default(DEFAULTS.config.workers),
    logLevel: logLevel.default(DEFAULTS.config.logLevel),
    accessLog: flag.default(DEFAULTS.config.accessLog),
    accessLogRedact: z.array(oneOf(REDACTABLE_FIELDS, "access record field"), { error: expected("a list of access record fields") }).default([...DEFAULTS.config.accessLogRedact]),
    journal: count({ min: 0, max: 100000 }).default(DEFAULTS.config.journal),
    shrinkHeapWhenIdle: durationMs(0).default(DEFAULTS.config.shrinkHeapWhenIdleMs),
    concurrentMarking: concurrentMarking.default(DEFAULTS.config.concurrentMarking),
    memory: z
      .strictObject({ limit: sizeBytes(LIMITS.memoryLimit).nullable().default(null) }, { error: expected("a mapping with limit") })
      .default({ limit: null }),
    faultInjection: z.unknown().optional(),
    watchConfig: flag.default(DEFAULTS.config.watchConfig),
    tracing: tracing.nullable().default(null),
    xds: z
      .strictObject(
        { bootstrap: z.string({ error: expected("the path of an Envoy-shaped bootstrap file") }).min(1, "must not be empty") },
        { error: expected("a mapping like { bootstrap: xds-bootstrap.yaml }") },
      )
      .nullable()
      .default(DEFAULTS.config.xds),
    failedCalls: count(LIMITS.failedCalls).default(DEFAULTS.config.failedCalls),
    stats: z
      .strictObject({ maxRows: count(LIMITS.statsRows).default(DEFAULTS.config.stats.maxRows) }, { error: expected("a mapping like { maxRows: 100 }, or null (off)") })
      .nullable()
      .default(DEFAULTS.config.stats),
  },
  { error: expected("a mapping with listeners and clusters") },
);

/** Renames the `*Ms` fields, so the file says `timeout: 30s` and the code reads `timeoutMs`. */
export const CONFIG_SCHEMA: z.ZodType<Config> = document
  .superRefine((d, ctx) => {
    // without a control plane there must be something to serve
    if (d.xds === null && d.listeners.length === 0) ctx.addIssue({ code: "custom", path: ["listeners"], message: "needs at least one listener (or xds, a control plane that sends them)" });
    if (d.xds === null && d.clusters.length === 0) ctx.addIssue({ code: "custom", path: ["clusters"], message: "needs at least one cluster (or xds, a control plane that sends them)" });
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
        jwt: r.jwt,
        rbac: r.rbac,
        extAuthz: r.extAuthz,
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
      jsonTranscoding: l.jsonTranscoding,
      connect: l.connect,
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
    accessLogRedact: [...new Set(d.accessLogRedact)],
    journal: d.journal,
    shrinkHeapWhenIdleMs: d.shrinkHeapWhenIdle,
    concurrentMarking: d.concurrentMarking,
    memory: { limitBytes: d.memory.limit },
    faultInjection: d.faultInjection as unknown as FaultSetSettings,
    watchConfig: d.watchConfig,
    tracing:
      d.tracing === null
        ? null
        : {
            endpoint: d.tracing.endpoint,
            serviceName: d.tracing.serviceName,
            sampleRatio: d.tracing.sampleRatio,
            maxQueueSize: d.tracing.maxQueueSize,
            exportIntervalMs: d.tracing.exportInterval,
            exportTimeoutMs: d.tracing.exportTimeout,
            protocol: d.tracing.protocol,
          },
    xds: d.xds,
    failedCalls: d.failedCalls,
    stats: d.stats,
  }),
);

/** The document-level (pre-rename) schema, for walking to the known keys at a path. */
export const DOCUMENT_SCHEMA: z.ZodType = document;
