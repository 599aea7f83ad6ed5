// A cluster's schema: endpoints or dns, balancing, health checks, outlier detection, breakers,
// retry budget, keepalive, sessions and TLS.

import { z } from "zod";
import { DEFAULTS, LB_POLICIES, LIMITS } from "../types.js";
import { count, durationMs, expected, hostPort, name, oneOf, sizeBytes } from "./scalars.js";
import { clusterTls } from "./tls.js";
import type { HostPort } from "../units.js";

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

export const cluster = z
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
