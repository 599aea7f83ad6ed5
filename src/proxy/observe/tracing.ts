// OpenTelemetry traces (config `tracing`): one SERVER span per sampled call and one CLIENT span
// per attempt (a retry's attempts are siblings under the call's span, each with its number, as
// Envoy's spawn_upstream_span), with the RPC semantic conventions' attributes and dojang's own
// (decided_by, the budget in and out, the fault applied). Exported with the OpenTelemetry JS
// SDK's OTLP/HTTP exporter through a bounded BatchSpanProcessor: an ended span is queued and
// never waited for; a span that finds the queue full is dropped and counted, and an export that
// fails or outlasts its timeout loses its batch (counted), so a slow or absent collector never
// touches a call.
//
// No auto-instrumentation and no context manager: the call's trace context is read from its
// headers with src/translate/trace-context.ts (pure), the sampling decision is made there before
// any SDK object exists, and spans are created only for sampled calls and handed around
// explicitly (the call keeps its CallTrace; parents are given as explicit contexts). With
// tracing off the call holds null and pays one branch per hook.
import client from "prom-client";
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, trace, type Attributes, type HrTime, type Span, type SpanContext, type Tracer } from "@opentelemetry/api";
import { BatchSpanProcessor, RandomIdGenerator, TracerProvider, type ReadableSpan, type SpanExporter, type SpanProcessor } from "@opentelemetry/sdk-trace";
import { ExportResultCode, type ExportResult } from "@opentelemetry/core";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import type { Logger } from "pino";
import type { TracingConfig } from "../../config/types.js";
import {
  checkTracestate,
  formatB3Single,
  formatTraceparent,
  parseB3Multi,
  parseB3Single,
  parseTraceparent,
  rpcNames,
  sampleCall,
  spanStatusFor,
  type TraceParent,
} from "../../translate/trace-context.js";
import { codeName } from "../../translate/index.js";

/** A request head as the call sends it upstream (call/headers.ts OutgoingHeaders). */
type Head = Record<string, string | string[] | number>;

/** How the client sent its parent: W3C (or none), B3 single header, B3 multi headers. */
/**
 * Every span's start and end comes from one clock: performance.now() (monotonic, finer than a
 * millisecond) counted from performance.timeOrigin, as the SDK's HrTime. Left to itself the SDK
 * mixes clocks: a span given a start time ends at Date.now() (whole milliseconds), a span given
 * none starts at Date.now() too, so a third of the attempt spans ended after their SERVER span.
 * With one clock a child starts no earlier than its parent and ends no later.
 */
const ORIGIN_S = Math.floor(performance.timeOrigin / 1000);
const ORIGIN_NS = Math.round((performance.timeOrigin - ORIGIN_S * 1000) * 1e6);

/** performance.now() milliseconds (the call's t0, or now) as an HrTime on the wall clock. */
export function hrTimeAt(perfMs: number): HrTime {
  const whole = Math.floor(perfMs / 1000);
  let sec = ORIGIN_S + whole;
  let ns = ORIGIN_NS + Math.round((perfMs - whole * 1000) * 1e6);
  if (ns >= 1e9) {
    sec += 1;
    ns -= 1e9;
  }
  return [sec, ns];
}

const FROM_W3C = 0;
const FROM_B3_SINGLE = 1;
const FROM_B3_MULTI = 2;

/** One call's trace: made at its start when tracing is on, whether it is sampled or not. */
export interface CallTrace {
  /** the call's trace id (the parent's, or a new one): the access record's trace_id */
  readonly traceId: string;
  readonly sampled: boolean;
  /** the SERVER span (sampled calls only) */
  readonly server: Span | null;
  /** the running attempt's CLIENT span (sampled calls only) */
  attempt: Span | null;
  /** the span id an unsampled new trace sends upstream as its parent (no span exists) */
  readonly unsampledSpanId: string | undefined;
  /** tracestate forwarded as it came (checked); undefined: none */
  readonly tracestate: string | undefined;
  readonly from: number;
  /** the spans' name ("pkg.Svc/Method") and the RPC names (sampled calls only) */
  readonly name: string;
  readonly names: { readonly service: string; readonly method: string } | undefined;
}

/** The call's facts at its end, for the SERVER span (record.ts gathers them). */
export interface CallEndFacts {
  readonly code: number;
  readonly message: string | undefined;
  readonly decidedBy: string;
  readonly route: string | undefined;
  readonly requestId: string;
  readonly attempts: number;
  readonly budgetInMs: number | undefined;
  readonly budgetOutMs: number | undefined;
  readonly faults: readonly string[] | undefined;
  readonly faultKinds: readonly string[] | undefined;
}

/** Counts what the exporter does with spans: handed over, exported, dropped (and why). */
class CountingExporter implements SpanExporter {
  /** spans the batch processor holds (accepted − handed to the exporter) */
  queued = 0;
  private lastWarn = -Infinity;
  constructor(
    private readonly inner: SpanExporter,
    private readonly exported: client.Counter,
    /** dojang_trace_spans_dropped_total{reason="export_failed"} (bound once) */
    private readonly exportFailed: client.Counter.Internal,
    private readonly log: Logger,
  ) {}
  export(spans: ReadableSpan[], done: (r: ExportResult) => void): void {
    this.queued -= spans.length;
    const n = spans.length;
    this.inner.export(spans, (r) => {
      if (r.code === ExportResultCode.SUCCESS) this.exported.inc(n);
      else this.failed(n, r.error);
      done(r);
    });
  }
  /** An export that failed or timed out: its spans are lost (logged at most once a minute). */
  failed(n: number, err: Error | undefined): void {
    this.exportFailed.inc(n);
    const now = performance.now();
    if (now - this.lastWarn >= 60_000) {
      this.lastWarn = now;
      this.log.warn({ spans: n, err: err?.message }, "tracing: span export failed; its spans are dropped (dojang_trace_spans_dropped_total)");
    }
  }
  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }
  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}

/**
 * The batch processor, with its queue counted: a span that ends while the queue holds
 * maxQueueSize spans is dropped by the processor (it never waits), and counted here.
 */
class CountingProcessor implements SpanProcessor {
  constructor(
    private readonly inner: BatchSpanProcessor,
    private readonly exporter: CountingExporter,
    private readonly max: number,
    /** dojang_trace_spans_dropped_total{reason="queue_full"} (bound once) */
    private readonly queueFull: client.Counter.Internal,
  ) {}
  onStart(): void {}
  onEnd(span: ReadableSpan): void {
    const e = this.exporter;
    if (e.queued >= this.max) this.queueFull.inc();
    else e.queued++;
    this.inner.onEnd(span);
  }
  forceFlush(): Promise<void> {
    return this.inner.forceFlush();
  }
  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }
}

/** The process's tracer: made once at start from `tracing`; null when it is off. */
export class Tracing {
  private readonly provider: TracerProvider;
  private readonly tracer: Tracer;
  private readonly ids = new RandomIdGenerator();

  constructor(
    readonly cfg: TracingConfig,
    registry: client.Registry,
    log: Logger,
    /** draws in [0, 1) for the ratio (injected for tests) */
    private readonly rand: () => number = Math.random,
  ) {
    const exported = new client.Counter({ name: "dojang_trace_spans_exported_total", help: "Spans the collector accepted.", registers: [registry] });
    const dropped = new client.Counter({
      name: "dojang_trace_spans_dropped_total",
      help: "Spans lost: queue_full (the export queue, tracing.maxQueueSize, was full when the span ended) or export_failed (the collector refused, was unreachable, or did not answer within tracing.exportTimeout).",
      labelNames: ["reason"],
      registers: [registry],
    });
    const queueFull = dropped.labels("queue_full");
    const exportFailed = dropped.labels("export_failed");
    queueFull.inc(0);
    exportFailed.inc(0);
    // The exporter's own timeout is the export's; the batch processor's a little longer, so
    // the exporter's answer (and its count) comes first.
    const otlp = new OTLPTraceExporter({ url: cfg.endpoint, timeoutMillis: cfg.exportTimeoutMs, concurrencyLimit: 4 });
    const counting = new CountingExporter(otlp, exported, exportFailed, log);
    const batch = new BatchSpanProcessor({
      exporter: counting,
      maxQueueSize: cfg.maxQueueSize,
      maxExportBatchSize: Math.min(512, cfg.maxQueueSize),
      scheduledDelayMillis: cfg.exportIntervalMs,
      exportTimeoutMillis: cfg.exportTimeoutMs + 1000,
    });
    this.provider = new TracerProvider({
      resource: resourceFromAttributes({ "service.name": cfg.serviceName }),
      spanProcessors: [new CountingProcessor(batch, counting, cfg.maxQueueSize, queueFull)],
      // (the sampling decision is made in begin(); a span is only made for a sampled call)
    });
    this.tracer = this.provider.getTracer("dojang");
  }

  /**
   * A call starts: its parent from `traceparent` (else B3), the sampling decision, and for a
   * sampled call its SERVER span, started at `t0` (performance.now() ms).
   */
  begin(headers: Readonly<Record<string, string | string[] | undefined>>, path: string, t0: number, clientAddress: string | undefined): CallTrace {
    const tp = headers["traceparent"];
    let parent: TraceParent | undefined = typeof tp === "string" ? parseTraceparent(tp) : undefined;
    let from = FROM_W3C;
    let tracestate: string | undefined;
    if (parent !== undefined) {
      const ts = headers["tracestate"];
      tracestate = checkTracestate(typeof ts === "string" ? ts : undefined);
    } else {
      const b3 = headers["b3"];
      if (typeof b3 === "string") {
        parent = parseB3Single(b3);
        from = FROM_B3_SINGLE;
      } else {
        const tid = headers["x-b3-traceid"];
        if (typeof tid === "string") {
          parent = parseB3Multi(tid, str(headers["x-b3-spanid"]), str(headers["x-b3-sampled"]), str(headers["x-b3-flags"]));
          from = FROM_B3_MULTI;
        }
      }
    }
    const sampled = sampleCall(parent, this.cfg.sampleRatio, this.rand());
    if (!sampled) {
      if (parent !== undefined) return { traceId: parent.traceId, sampled: false, server: null, attempt: null, unsampledSpanId: undefined, tracestate, from, name: "", names: undefined };
      // a new trace not sampled: the decision still travels upstream (flags 00), so the
      // upstream's parent-based sampler agrees with it
      return { traceId: this.ids.generateTraceId(), sampled: false, server: null, attempt: null, unsampledSpanId: this.ids.generateSpanId(), tracestate: undefined, from, name: "", names: undefined };
    }
    const names = rpcNames(path);
    const attrs: Attributes = { "rpc.system": "grpc" };
    if (names !== undefined) {
      attrs["rpc.service"] = names.service;
      attrs["rpc.method"] = names.method;
    }
    if (clientAddress !== undefined && clientAddress !== "") attrs["client.address"] = clientAddress;
    const ctx = parent === undefined ? ROOT_CONTEXT : trace.setSpanContext(ROOT_CONTEXT, remoteContext(parent, tracestate));
    const name = names === undefined ? path || "grpc" : `${names.service}/${names.method}`;
    const server = this.tracer.startSpan(name, { kind: SpanKind.SERVER, attributes: attrs, startTime: hrTimeAt(t0) }, ctx);
    return { traceId: server.spanContext().traceId, sampled: true, server, attempt: null, unsampledSpanId: undefined, tracestate, from, name, names };
  }

  /**
   * Attempt `n` (1-based) of the call starts, to the endpoint `host` (IPv6 unbracketed) and `port`: a sampled call gets a
   * CLIENT span under its SERVER span, and `head` carries that span's id as the upstream's
   * parent (traceparent; B3 too when the client spoke B3). An unsampled call sends its decision.
   */
  attemptStart(t: CallTrace, n: number, host: string, port: number, head: Head): void {
    let spanId: string;
    if (t.server !== null) {
      const now = hrTimeAt(performance.now());
      if (t.attempt !== null) t.attempt.end(now); // (the call ended the last one when it abandoned it)
      const attrs: Attributes = { "rpc.system": "grpc", "dojang.attempt": n };
      const names = t.names;
      if (names !== undefined) {
        attrs["rpc.service"] = names.service;
        attrs["rpc.method"] = names.method;
      }
      attrs["server.address"] = host;
      attrs["server.port"] = port;
      const gt = head["grpc-timeout"];
      if (typeof gt === "string") attrs["dojang.grpc_timeout"] = gt;
      const a = this.tracer.startSpan(t.name, { kind: SpanKind.CLIENT, attributes: attrs, startTime: now }, trace.setSpan(ROOT_CONTEXT, t.server));
      t.attempt = a;
      spanId = a.spanContext().spanId;
    } else if (t.unsampledSpanId !== undefined) spanId = t.unsampledSpanId;
    else return; // unsampled with the client's parent: its headers went upstream as they came
    head["traceparent"] = formatTraceparent(t.traceId, spanId, t.sampled);
    if (t.tracestate !== undefined) head["tracestate"] = t.tracestate;
    if (t.from === FROM_B3_SINGLE) head["b3"] = formatB3Single(t.traceId, spanId, t.sampled);
    else if (t.from === FROM_B3_MULTI) {
      head["x-b3-traceid"] = t.traceId;
      head["x-b3-spanid"] = spanId;
      head["x-b3-sampled"] = t.sampled ? "1" : "0";
      if (t.server !== null) head["x-b3-parentspanid"] = t.server.spanContext().spanId;
    }
  }

  /** The running attempt is given up for another (a retry): `code` its grpc-status (-1: none came), `why` otherwise. */
  attemptAbandoned(t: CallTrace, code: number, why: string): void {
    const a = t.attempt;
    if (a === null) return;
    t.attempt = null;
    endClient(a, code, code >= 0 ? undefined : why, hrTimeAt(performance.now()));
  }

  /** The call ended: its last attempt's span and its SERVER span end with the final status. */
  end(t: CallTrace, f: CallEndFacts): void {
    const s = t.server;
    if (s === null) return;
    // (one instant for both: the last attempt ends as its call does, never after it)
    const now = hrTimeAt(performance.now());
    const a = t.attempt;
    if (a !== null) {
      t.attempt = null;
      endClient(a, f.code, f.message, now);
    }
    const attrs: Attributes = {
      "rpc.grpc.status_code": f.code,
      "dojang.decided_by": f.decidedBy,
      "dojang.request_id": f.requestId,
      "dojang.attempts": f.attempts,
    };
    if (f.route !== undefined) attrs["dojang.route"] = f.route;
    if (f.budgetInMs !== undefined) attrs["dojang.budget_in_ms"] = f.budgetInMs;
    if (f.budgetOutMs !== undefined) attrs["dojang.budget_out_ms"] = f.budgetOutMs;
    if (f.faults !== undefined) attrs["dojang.faults"] = [...f.faults];
    if (f.faultKinds !== undefined) attrs["dojang.fault_kinds"] = [...f.faultKinds];
    s.setAttributes(attrs);
    if (spanStatusFor(f.code, "server") === "error") s.setStatus({ code: SpanStatusCode.ERROR, message: statusMessage(f.code, f.message) });
    s.end(now);
  }

  /** Exports what is queued, waiting at most `timeoutMs`; then stops. Never throws. */
  async shutdown(timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([this.provider.shutdown(), new Promise<void>((r) => (timer = setTimeout(r, timeoutMs)))]);
    } catch {
      // the collector is gone: what was queued is lost (counted by the exporter)
    } finally {
      if (timer !== undefined) clearTimeout(timer);
    }
  }

  /** Exports what is queued now (tests; shutdown). */
  async flush(): Promise<void> {
    try {
      await this.provider.forceFlush();
    } catch {
      // counted by the exporter
    }
  }
}

function str(v: string | string[] | undefined): string | undefined {
  return typeof v === "string" ? v : undefined;
}

function remoteContext(p: TraceParent, tracestate: string | undefined): SpanContext {
  const sc: SpanContext = { traceId: p.traceId, spanId: p.spanId, traceFlags: p.sampled ? TraceFlags.SAMPLED : TraceFlags.NONE, isRemote: true };
  if (tracestate !== undefined) (sc as { traceState?: unknown }).traceState = new TraceStateValue(tracestate);
  return sc;
}

/** The api's TraceState, read-only: serialize() gives back what the client sent (checked). */
class TraceStateValue {
  constructor(private readonly v: string) {}
  set(): this {
    return this;
  }
  unset(): this {
    return this;
  }
  get(key: string): string | undefined {
    for (const m of this.v.split(",")) {
      const t = m.trim();
      const eq = t.indexOf("=");
      if (t.slice(0, eq) === key) return t.slice(eq + 1);
    }
    return undefined;
  }
  serialize(): string {
    return this.v;
  }
}

function endClient(a: Span, code: number, message: string | undefined, at: HrTime): void {
  if (code >= 0) a.setAttribute("rpc.grpc.status_code", code);
  if (spanStatusFor(code, "client") === "error") a.setStatus({ code: SpanStatusCode.ERROR, message: statusMessage(code, message) });
  a.end(at);
}

function statusMessage(code: number, message: string | undefined): string {
  const name = code >= 0 ? codeName(code) : "no status";
  return message === undefined || message === "" ? name : `${name}: ${message}`;
}
