// The `tracing` block: where spans go (an OTLP/HTTP traces URL, or for OTLP/gRPC the collector's
// origin), the service name, the sampling ratio for new traces, the export queue's bounds, and the
// wire format (OTLP/HTTP protobuf or JSON, or OTLP/gRPC).

import { z } from "zod";
import { describeValue } from "../issues.js";
import { DEFAULTS, LIMITS } from "../types.js";
import { count, durationMs, expected, name } from "./scalars.js";

/** An http(s) URL (no credentials in it: /config shows the config). */
const otlpUrl = z.string({ error: expected('an OTLP traces URL like "http://127.0.0.1:4318/v1/traces" (or "http://127.0.0.1:4317" for protocol grpc)') }).transform((v, ctx) => {
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    ctx.issues.push({ code: "custom", message: `${describeValue(v)} is not a URL (expected one like "http://127.0.0.1:4318/v1/traces")`, input: v });
    return z.NEVER;
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") {
    ctx.issues.push({ code: "custom", message: `${describeValue(v)}: the OTLP exporter speaks http or https, not ${u.protocol.slice(0, -1)}`, input: v });
    return z.NEVER;
  }
  if (u.username !== "" || u.password !== "") {
    ctx.issues.push({ code: "custom", message: "the endpoint must not carry credentials (they would show on /config)", input: v });
    return z.NEVER;
  }
  return u.href;
});

/** A ratio 0..1 (a number, or a decimal string so `${TRACE_RATIO:-0.01}` works). */
const ratio = z.union([z.number(), z.string()], { error: expected("a number from 0 to 1") }).transform((v, ctx) => {
  const n = typeof v === "number" ? v : /^\s*\d+(\.\d+)?\s*$/.test(v) ? Number(v) : NaN;
  if (!Number.isFinite(n) || n < 0 || n > 1) {
    ctx.issues.push({ code: "custom", message: `expected a number from 0 to 1, got ${describeValue(v)}`, input: v });
    return z.NEVER;
  }
  return n;
});

export const tracing = z.strictObject(
  {
    endpoint: otlpUrl,
    serviceName: name.default(DEFAULTS.tracing.serviceName),
    sampleRatio: ratio.default(DEFAULTS.tracing.sampleRatio),
    maxQueueSize: count(LIMITS.traceQueue).default(DEFAULTS.tracing.maxQueueSize),
    exportInterval: durationMs(1).default(DEFAULTS.tracing.exportIntervalMs),
    exportTimeout: durationMs(1).default(DEFAULTS.tracing.exportTimeoutMs),
    protocol: z.enum(["http/protobuf", "http/json", "grpc"], { error: expected('"http/protobuf", "http/json" or "grpc"') }).default(DEFAULTS.tracing.protocol),
  },
  { error: expected("a mapping like { endpoint: http://127.0.0.1:4318/v1/traces }") },
).superRefine((t, ctx) => {
  // OTLP/gRPC calls /opentelemetry.proto.collector.trace.v1.TraceService/Export on the
  // collector's origin: a path or query given with it would be silently dropped, so it is refused
  if (t.protocol !== "grpc") return;
  const u = new URL(t.endpoint);
  if (u.pathname !== "/" || u.search !== "") {
    ctx.issues.push({ code: "custom", path: ["endpoint"], message: `${describeValue(t.endpoint)}: with protocol grpc the endpoint is the collector's origin, like "http://127.0.0.1:4317" (no path: the call's path is the OTLP service's)`, input: t.endpoint });
  }
});
