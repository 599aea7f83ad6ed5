// OpenTelemetry traces (config `tracing`): one SERVER span per sampled call and one CLIENT span
// per attempt (a retry's attempts are siblings under the call's span, each with its number, as
// Envoy's spawn_upstream_span), with the RPC semantic conventions' attributes and dojang's own
// (decided_by, the budget in and out, the fault applied), exported as OTLP/HTTP (protobuf or
// JSON) or OTLP/gRPC in bounded batches off the calls' turns (otlp-export.ts).
//
// No SDK, no auto-instrumentation and no context manager: the call's trace context is read from
// its headers with src/translate/trace-context.ts (pure), the sampling decision is made there
// before anything is made, and a sampled call's spans are two small fixed-shape records (the
// call's CallTrace is its SERVER span; otlp.ts): per-call values in fields, what is constant for a
// method (name, rpc.* attributes) encoded once and shared, ids from a pooled random buffer, and
// the encoding left to the export. With tracing off the call holds null and pays one branch per
// hook. An unsampled call (at sampleRatio 0.01, 99 % of calls) makes no span record: a small
// UnsampledTrace, and for a new trace its traceparent written in one piece from the pooled random
// bytes (no id strings of its own, no clock read, no attribute). (The OpenTelemetry JS SDK did the same work in ~40 µs of CPU per sampled call, most of it
// its span objects, attribute checks and JSON serialization; docs/contributing/benchmarks.md.)
import { randomFillSync } from "node:crypto";
import client from "prom-client";
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
import { KIND_CLIENT, KIND_SERVER, MethodSpans, statusMessage, type CallEndFacts, type ClientSpanData, type ServerSpanData } from "./otlp.js";
import { SpanExporter, type ExportTransport } from "./otlp-export.js";

export type { CallEndFacts } from "./otlp.js";

/** A request head as the call sends it upstream (call/headers.ts OutgoingHeaders). */
type Head = Record<string, string | string[] | number>;

/** How the client sent its parent: W3C (or none), B3 single header, B3 multi headers. */
const FROM_W3C = 0;
const FROM_B3_SINGLE = 1;
const FROM_B3_MULTI = 2;

const ZERO_SPAN = "0000000000000000";
const ZERO_TRACE = "00000000000000000000000000000000";

/**
 * An unsampled call's trace: all the call keeps of it (no span). With the client's parent, the
 * parent's trace id and nothing to send (its trace headers went upstream as they came: W3C Trace
 * Context §3.2, a vendor that does not record passes the parent on); a new trace, the traceparent
 * every attempt sends (flags 00, so that the upstream's parent-based sampler agrees).
 */
export class UnsampledTrace {
  readonly sampled = false;
  constructor(
    /** the access record's trace_id */
    readonly traceId: string,
    /** what the attempts send as traceparent; undefined: nothing (the client's went as it came) */
    readonly traceparent: string | undefined,
  ) {}
}

/** A call's trace (config `tracing` on): sampled, its SERVER span; else what little it sends. */
export type Trace = CallTrace | UnsampledTrace;

/**
 * A sampled call's trace, made at its start: also the call's SERVER span as exported
 * (ServerSpanData): one object, its fields set at the start and the end.
 */
export class CallTrace implements ServerSpanData {
  readonly kind = KIND_SERVER;
  readonly sampled = true;
  /** the call's span as exported: its facts at the end (record.ts), its end time */
  facts: CallEndFacts | undefined = undefined;
  end = 0;
  /** the running attempt's CLIENT span (sampled calls only) */
  attempt: AttemptSpan | null = null;
  constructor(
    /** the call's trace id (the parent's, or a new one): the access record's trace_id */
    readonly traceId: string,
    /** the SERVER span's id */
    readonly spanId: string,
    /** the client's span id ("" for a new trace) */
    readonly parentSpanId: string,
    /** tracestate forwarded as it came (checked); undefined: none */
    readonly tracestate: string | undefined,
    readonly from: number,
    /** the method's name and rpc.* attributes */
    readonly method: MethodSpans | null,
    readonly clientAddress: string | undefined,
    /** performance.now() ms: the call's t0 */
    readonly start: number,
  ) {}
}

/** An attempt's CLIENT span. */
class AttemptSpan implements ClientSpanData {
  readonly kind = KIND_CLIENT;
  end = 0;
  code = -1;
  statusMessage = "";
  constructor(
    readonly call: CallTrace,
    readonly spanId: string,
    readonly n: number,
    readonly host: string,
    readonly port: number,
    readonly grpcTimeout: string | undefined,
    readonly start: number,
  ) {}
}

/** Lower-case hex digits by nibble, as ASCII codes. */
const HEX_DIGITS = Buffer.from("0123456789abcdef", "latin1");

/**
 * Random ids: bytes from the OS's generator drawn 4 KiB at a time, each id read out as its own hex
 * string. (Not a slice of one hex text of the whole pool, though that is a little cheaper: V8
 * keeps a slice's parent alive, and a call's trace id lives on in its access record, e.g. in the
 * failed calls' journal, where each id would hold 8 KiB.) An all-zero id is invalid (W3C Trace
 * Context §3.2.2.3): drawn again.
 */
class Ids {
  private readonly pool = Buffer.allocUnsafe(4096);
  private off = 4096;
  private hex(bytes: number): string {
    if (this.off + bytes > 4096) {
      randomFillSync(this.pool);
      this.off = 0;
    }
    const s = this.pool.toString("hex", this.off, this.off + bytes);
    this.off += bytes;
    return s;
  }
  traceId(): string {
    const s = this.hex(16);
    return s === ZERO_TRACE ? this.traceId() : s;
  }
  spanId(): string {
    const s = this.hex(8);
    return s === ZERO_SPAN ? this.spanId() : s;
  }

  /** "00-": the traceparent line's fixed parts written once; the ids go between them */
  private readonly line = Buffer.from("00-00000000000000000000000000000000-0000000000000000-00", "latin1");

  /**
   * An unsampled new trace's traceparent (version 00, flags 00), its 24 random bytes written as
   * hex straight into one line and read out as one flat string: no id strings, no concatenation
   * (the trace id, when the call's record wants it, is a slice of it).
   */
  unsampledTraceparent(): string {
    if (this.off + 24 > 4096) {
      randomFillSync(this.pool);
      this.off = 0;
    }
    const p = this.pool;
    const l = this.line;
    let o = this.off;
    let zt = 0;
    let zs = 0;
    for (let i = 3; i < 35; i += 2) {
      const b = p[o++]!;
      zt |= b;
      l[i] = HEX_DIGITS[b >> 4]!;
      l[i + 1] = HEX_DIGITS[b & 15]!;
    }
    for (let i = 36; i < 52; i += 2) {
      const b = p[o++]!;
      zs |= b;
      l[i] = HEX_DIGITS[b >> 4]!;
      l[i + 1] = HEX_DIGITS[b & 15]!;
    }
    this.off = o;
    // an all-zero id is invalid (W3C Trace Context §3.2.2.3, 2^-64 at worst): drawn again
    return zt === 0 || zs === 0 ? this.unsampledTraceparent() : l.toString("latin1", 0, 55);
  }
}

/** Methods whose MethodSpans are kept (a client may send any :path; past this they are made per call). */
const METHODS_KEPT = 1024;

/** The process's tracer: made once at start from `tracing`; null when it is off. */
export class Tracing {
  private readonly ids = new Ids();
  private readonly methods = new Map<string, MethodSpans>();
  private readonly exporter: SpanExporter;

  constructor(
    readonly cfg: TracingConfig,
    registry: client.Registry,
    log: Logger,
    /** draws in [0, 1) for the ratio (injected for tests) */
    private readonly rand: () => number = Math.random,
    /** how batches leave; undefined: OTLP/HTTP (protocol grpc's is handed in: otlp-export.ts) */
    transport?: ExportTransport,
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
    this.exporter = new SpanExporter(cfg, { exported, queueFull, exportFailed }, log, transport);
  }

  /**
   * A call starts: its parent from `traceparent` (else B3), the sampling decision, and for a
   * sampled call its SERVER span, started at `t0` (performance.now() ms). `path`: the call's
   * gRPC method path as the call names it (the span's name and rpc.* attributes).
   */
  begin(headers: Readonly<Record<string, string | string[] | undefined>>, path: string, t0: number, clientAddress: string | undefined): Trace {
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
      if (parent !== undefined) return new UnsampledTrace(parent.traceId, undefined);
      // a new trace not sampled: the decision still travels upstream (flags 00), so the
      // upstream's parent-based sampler agrees with it
      const tp = this.ids.unsampledTraceparent();
      return new UnsampledTrace(tp.slice(3, 35), tp);
    }
    const traceId = parent === undefined ? this.ids.traceId() : parent.traceId;
    const client = clientAddress === "" ? undefined : clientAddress;
    return new CallTrace(traceId, this.ids.spanId(), parent === undefined ? "" : parent.spanId, tracestate, from, this.method(path), client, t0);
  }

  /** The name and rpc.* attributes of `path`'s spans, made once per method. */
  private method(path: string): MethodSpans {
    let m = this.methods.get(path);
    if (m === undefined) {
      const names = rpcNames(path);
      m = names === undefined ? new MethodSpans(path || "grpc", undefined, undefined) : new MethodSpans(`${names.service}/${names.method}`, names.service, names.method);
      if (this.methods.size < METHODS_KEPT) this.methods.set(path, m);
    }
    return m;
  }

  /**
   * Attempt `n` (1-based) of the call starts, to the endpoint `host` (IPv6 unbracketed) and `port`: a sampled call gets a
   * CLIENT span under its SERVER span, and `head` carries that span's id as the upstream's
   * parent (traceparent; B3 too when the client spoke B3). An unsampled call sends its decision.
   */
  attemptStart(t: Trace, n: number, host: string, port: number, head: Head): void {
    if (!t.sampled) {
      if (t.traceparent !== undefined) head["traceparent"] = t.traceparent;
      return; // with the client's parent: its headers went upstream as they came
    }
    const now = performance.now();
    const last = t.attempt;
    if (last !== null) {
      // (the call ends the last one when it abandons it; this is a guard, the span unset)
      last.end = now;
      this.exporter.add(last);
    }
    const gt = head["grpc-timeout"];
    const a = new AttemptSpan(t, this.ids.spanId(), n, host, port, typeof gt === "string" ? gt : undefined, now);
    t.attempt = a;
    const spanId = a.spanId;
    head["traceparent"] = formatTraceparent(t.traceId, spanId, true);
    if (t.tracestate !== undefined) head["tracestate"] = t.tracestate;
    if (t.from === FROM_B3_SINGLE) head["b3"] = formatB3Single(t.traceId, spanId, true);
    else if (t.from === FROM_B3_MULTI) {
      head["x-b3-traceid"] = t.traceId;
      head["x-b3-spanid"] = spanId;
      head["x-b3-sampled"] = "1";
      head["x-b3-parentspanid"] = t.spanId;
    }
  }

  /** The running attempt is given up for another (a retry): `code` its grpc-status (-1: none came), `why` otherwise. */
  attemptAbandoned(t: Trace, code: number, why: string): void {
    if (!t.sampled) return;
    const a = t.attempt;
    if (a === null) return;
    t.attempt = null;
    this.endAttempt(a, code, code >= 0 ? undefined : why, performance.now());
  }

  private endAttempt(a: AttemptSpan, code: number, message: string | undefined, at: number): void {
    a.code = code;
    if (spanStatusFor(code, "client") === "error") a.statusMessage = statusMessage(code, message);
    a.end = at;
    this.exporter.add(a);
  }

  /** The call ended: its last attempt's span and its SERVER span end with the final status. */
  end(t: Trace, f: CallEndFacts): void {
    if (!t.sampled) return;
    // (one instant for both: the last attempt ends as its call does, never after it)
    const now = performance.now();
    const a = t.attempt;
    if (a !== null) {
      t.attempt = null;
      this.endAttempt(a, f.code, f.message, now);
    }
    t.facts = f;
    t.end = now;
    this.exporter.add(t);
  }

  /** Exports what is queued, waiting at most `timeoutMs`; then stops. Never throws. */
  async shutdown(timeoutMs: number): Promise<void> {
    await this.exporter.shutdown(timeoutMs);
  }

  /** Exports what is queued now and waits for it (tests; benchmarks). */
  async flush(): Promise<void> {
    await this.exporter.flush();
  }
}

function str(v: string | string[] | undefined): string | undefined {
  return typeof v === "string" ? v : undefined;
}
