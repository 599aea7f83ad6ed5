// The span export queue and its sender: ended spans wait in a bounded queue and leave in batches
// (up to 512 spans, at most `exportInterval` after the first of them ended), encoded and sent on a
// timer's turn, never on a call's. A span that finds the queue full is dropped and counted; a
// batch the collector refuses, that cannot be sent, or that has no answer within `exportTimeout`
// (its request is then ended) is lost and counted. At most four exports are in flight; while four
// are, ended spans wait in the queue (and past its bound are dropped), so a slow or absent
// collector costs a call nothing but the push.
//
// The sending is a transport's (ExportTransport): OTLP/HTTP's POST over node:http(s) here
// (HttpTransport, protocols http/protobuf and http/json), or OTLP/gRPC's unary Export over a
// cluster of dojang's own (src/proxy/upstream/otlp-grpc.ts, protocol grpc: the layers keep
// node:http2 out of observe/, so the process assembly hands it in).
import type http from "node:http";
import { createRequire } from "node:module";
import type { Logger } from "pino";
import type client from "prom-client";
import type { TracingConfig } from "../../config/types.js";
import { DojangError } from "../../errors.js";
import { BatchHead, PbWriter, encodeJson, encodeProtobuf, type SpanData } from "./otlp.js";

// node:http and node:https by require(), not an ES import: an ES import of node:http builds its
// namespace, whose WebSocket getter loads undici (test/architecture/served-imports.test.ts;
// src/proxy/downstream/node-http.ts does the same for the listener).
const require = createRequire(import.meta.url);

/** The most spans one export carries (the OpenTelemetry SDKs' maxExportBatchSize default). */
const BATCH_MAX = 512;
/** Exports in flight at once. */
const IN_FLIGHT_MAX = 4;

/** The endpoint URL's host (an IPv6 literal without its brackets) and port (the scheme's default when none is written). */
export function endpointAddress(u: URL): { host: string; port: number } {
  const host = u.hostname.startsWith("[") ? u.hostname.slice(1, -1) : u.hostname;
  return { host, port: u.port === "" ? (u.protocol === "https:" ? 443 : 80) : Number(u.port) };
}

/**
 * How a batch leaves: send() gets the encoded batch and calls `done` exactly once, with undefined
 * when the collector took it, else the reason, within the config's exportTimeout; close() ends
 * what is in flight (each reports its end) and what it holds open.
 */
export interface ExportTransport {
  /** the batch as protobuf behind gRPC's 5-byte prefix (OTLP/gRPC), else as the protocol's OTLP/HTTP body */
  readonly framed: boolean;
  send(body: Buffer, done: (err: Error | undefined) => void): void;
  close(): void;
}

/** OTLP/HTTP: one POST per batch on a keep-alive agent (node:http, or node:https for an https endpoint). */
export class HttpTransport implements ExportTransport {
  readonly framed = false;
  private readonly requests = new Set<http.ClientRequest>();
  private readonly agent: http.Agent;
  private readonly post: typeof http.request;
  private readonly target: { protocol: string; hostname: string; port: number; path: string };
  private readonly contentType: string;

  constructor(private readonly cfg: TracingConfig) {
    // (protocol grpc has its own transport; sending its batches as POSTs would lose every one)
    if (cfg.protocol === "grpc") throw new DojangError("DOJANG_ERR_INTERNAL", "tracing.protocol grpc needs the OTLP/gRPC transport (src/proxy/upstream/otlp-grpc.ts)");
    this.contentType = cfg.protocol === "http/json" ? "application/json" : "application/x-protobuf";
    const u = new URL(cfg.endpoint);
    const tls = u.protocol === "https:";
    const mod = (tls ? require("node:https") : require("node:http")) as typeof http;
    this.post = mod.request;
    this.agent = new mod.Agent({ keepAlive: true, maxSockets: IN_FLIGHT_MAX });
    const { host, port } = endpointAddress(u);
    this.target = { protocol: u.protocol, hostname: host, port, path: `${u.pathname}${u.search}` };
  }

  send(body: Buffer, done: (err: Error | undefined) => void): void {
    let settled = false;
    const req = this.post({
      ...this.target,
      method: "POST",
      agent: this.agent,
      headers: { "content-type": this.contentType, "content-length": body.length },
    });
    this.requests.add(req);
    const timer = setTimeout(() => req.destroy(new Error(`no answer within ${this.cfg.exportTimeoutMs} ms (tracing.exportTimeout)`)), this.cfg.exportTimeoutMs);
    timer.unref();
    const end = (err: Error | undefined): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      this.requests.delete(req);
      done(err);
    };
    req.on("response", (res) => {
      const status = res.statusCode ?? 0;
      res.on("error", (e) => end(e));
      res.on("end", () => end(status >= 200 && status < 300 ? undefined : new Error(`the collector answered HTTP ${status}`)));
      res.resume();
    });
    req.on("error", (e) => end(e));
    req.end(body);
  }

  close(): void {
    for (const req of this.requests) req.destroy(new Error("shutting down"));
    this.agent.destroy();
  }
}

/** The counters the queue and the sender move (registered by observe/tracing.ts). */
export interface ExportCounters {
  readonly exported: client.Counter;
  /** dojang_trace_spans_dropped_total{reason="queue_full"} */
  readonly queueFull: client.Counter.Internal;
  /** dojang_trace_spans_dropped_total{reason="export_failed"} */
  readonly exportFailed: client.Counter.Internal;
}

export class SpanExporter {
  /** ended spans waiting, from `head` on (the array is compacted now and then) */
  private queue: SpanData[] = [];
  private head = 0;
  private timer: NodeJS.Timeout | null = null;
  private immediate: NodeJS.Immediate | null = null;
  private inFlight = 0;
  /** flush()/shutdown() waiting for the queue and the exports in flight to empty */
  private idleWaiters: (() => void)[] = [];
  private stopped = false;
  private lastWarn = -Infinity;
  private readonly batchMax: number;
  private readonly pb: PbWriter | null;
  private readonly batchHead: BatchHead;

  constructor(
    private readonly cfg: TracingConfig,
    private readonly counters: ExportCounters,
    private readonly log: Logger,
    /** how batches leave (protocol grpc: handed in by the process assembly) */
    private readonly transport: ExportTransport = new HttpTransport(cfg),
  ) {
    this.batchMax = Math.min(BATCH_MAX, cfg.maxQueueSize);
    this.batchHead = new BatchHead(cfg.serviceName, "dojang");
    this.pb = cfg.protocol === "http/json" ? null : new PbWriter(64 * 1024);
  }

  /** An ended span: queued for export, or dropped (counted) when the queue is full. */
  add(s: SpanData): void {
    const q = this.queue;
    const waiting = q.length - this.head;
    if (waiting >= this.cfg.maxQueueSize || this.stopped) {
      this.counters.queueFull.inc();
      return;
    }
    q.push(s);
    if (waiting === 0 || waiting + 1 >= this.batchMax) this.schedule();
  }

  /** spans waiting for export */
  get waiting(): number {
    return this.queue.length - this.head;
  }

  /** A full batch goes on the next turn; a partial one when the interval is up. */
  private schedule(): void {
    const waiting = this.queue.length - this.head;
    if (waiting === 0 || this.inFlight >= IN_FLIGHT_MAX) return;
    if (waiting >= this.batchMax) {
      if (this.immediate === null) this.immediate = setImmediate(this.onFull);
    } else if (this.timer === null) {
      this.timer = setTimeout(this.onInterval, this.cfg.exportIntervalMs);
      this.timer.unref();
    }
  }

  private readonly onFull = (): void => {
    this.immediate = null;
    while (this.queue.length - this.head >= this.batchMax && this.inFlight < IN_FLIGHT_MAX) this.sendBatch();
    this.schedule();
  };

  private readonly onInterval = (): void => {
    this.timer = null;
    while (this.queue.length > this.head && this.inFlight < IN_FLIGHT_MAX) this.sendBatch();
    this.schedule();
  };

  private take(): SpanData[] {
    const q = this.queue;
    const n = Math.min(q.length - this.head, this.batchMax);
    if (this.head === 0 && n === q.length) {
      this.queue = [];
      return q;
    }
    const batch = q.slice(this.head, this.head + n);
    this.head += n;
    if (this.head === q.length) {
      this.queue = [];
      this.head = 0;
    } else if (this.head >= 4096 && this.head * 2 >= q.length) {
      this.queue = q.slice(this.head);
      this.head = 0;
    }
    return batch;
  }

  private sendBatch(): void {
    const batch = this.take();
    const n = batch.length;
    let body: Buffer;
    try {
      body = this.pb !== null ? encodeProtobuf(this.pb, this.batchHead, batch, this.transport.framed) : encodeJson(this.batchHead, batch);
    } catch (err) {
      this.failed(n, err as Error);
      return;
    }
    this.inFlight++;
    this.transport.send(body, (err) => {
      this.inFlight--;
      if (err === undefined) this.counters.exported.inc(n);
      else this.failed(n, err);
      this.schedule();
      if (this.inFlight === 0 && this.queue.length === this.head) this.wakeIdle();
      else if (this.idleWaiters.length > 0) this.drainNow();
    });
  }

  /** An export that failed or timed out: its spans are lost (logged at most once a minute). */
  private failed(n: number, err: Error | undefined): void {
    this.counters.exportFailed.inc(n);
    const now = performance.now();
    if (now - this.lastWarn >= 60_000) {
      this.lastWarn = now;
      this.log.warn({ spans: n, err: err?.message }, "tracing: span export failed; its spans are dropped (dojang_trace_spans_dropped_total)");
    }
  }

  /** Sends what waits now, as far as the in-flight bound allows. */
  private drainNow(): void {
    while (this.queue.length > this.head && this.inFlight < IN_FLIGHT_MAX) this.sendBatch();
  }

  private wakeIdle(): void {
    const ws = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of ws) w();
  }

  /** Exports everything queued now and resolves when nothing waits or is in flight. */
  flush(): Promise<void> {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    this.drainNow();
    if (this.inFlight === 0 && this.queue.length === this.head) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  /** Exports what is queued, waiting at most `timeoutMs`; then drops what is left and stops. */
  async shutdown(timeoutMs: number): Promise<void> {
    let t: NodeJS.Timeout | undefined;
    await Promise.race([this.flush(), new Promise<void>((r) => (t = setTimeout(r, timeoutMs)))]);
    clearTimeout(t);
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    if (this.immediate !== null) clearImmediate(this.immediate);
    this.transport.close();
    this.wakeIdle();
  }
}
