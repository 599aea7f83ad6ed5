// Config `tracing` (issue 20, OpenTelemetry traces), end to end against a real trace backend: the
// OpenTelemetry Collector's own OTLP receiver (test/engines/otelsink, built from the collector's Go
// modules), which keeps what it receives and shows a trace's spans over a small query API.
//
// A client with a span of its own calls through dojang; the route retries UNAVAILABLE; the
// upstream (a grpc-js server) continues the trace from the traceparent it receives and exports its
// own span to the same backend. The backend then shows: client span → dojang's SERVER span → two
// CLIENT spans (attempts 1 and 2, siblings) → the upstream's span under each, with their statuses.
import * as grpc from "@grpc/grpc-js";
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, isSpanContextValid, trace, type Context, type TextMapGetter, type TextMapSetter } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { createServer as createHttpServer } from "node:http";
import { createServer, type Server } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { engineBinary } from "../helpers/engines.js";
import { startTlsFront } from "../helpers/auth.js";
import { CertDir } from "../helpers/certs.js";
import { assertDistBuilt, childEnv, freePort, spawnDojang, spawnGroup, tempDir, waitFor, waitReady } from "../helpers/process.js";
import { echoClient, frame, okWithMessage, rawCall, sample, scrape, startGrpcServer, startProxy, startRawUpstream, statusOf, unary, type EchoClient, type GrpcServer } from "../helpers/peers.js";
import type { DojangHandle } from "../../src/index.js";

interface Sink {
  readonly otlpHttp: string;
  /** the receiver's OTLP/gRPC origin (protocol grpc) */
  readonly otlpGrpc: string;
  spans(traceId: string): Promise<FlatSpan[]>;
  total(): Promise<number>;
}

interface FlatSpan {
  service: string;
  name: string;
  kind: number;
  spanId: string;
  parentSpanId: string;
  attrs: Record<string, unknown>;
  status: { code?: number; message?: string };
  /** start and end as the backend received them, in nanoseconds since the epoch */
  start: bigint;
  end: bigint;
}

/** Starts the backend (otelsink) on free ports; killed when the test ends. */
async function startSink(): Promise<Sink> {
  const [g, h, a] = [await freePort(), await freePort(), await freePort()];
  const child = spawnGroup(engineBinary("otelsink"), ["-grpc", `127.0.0.1:${g}`, "-http", `127.0.0.1:${h}`, "-api", `127.0.0.1:${a}`], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (out += d));
  await waitFor("otelsink ready", () => (out.includes("otelsink ready") ? true : undefined), 20_000);
  const api = `http://127.0.0.1:${a}`;
  return {
    otlpHttp: `http://127.0.0.1:${h}/v1/traces`,
    otlpGrpc: `http://127.0.0.1:${g}`,
    async spans(traceId) {
      const r = await fetch(`${api}/api/traces/${traceId}`);
      return flatten((await r.json()) as OtlpJson);
    },
    async total() {
      const r = await fetch(`${api}/api/spans`);
      return ((await r.json()) as { spans: number }).spans;
    },
  };
}

type OtlpValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number; arrayValue?: { values?: OtlpValue[] } };
type OtlpJson = {
  resourceSpans?: {
    resource?: { attributes?: { key: string; value: OtlpValue }[] };
    scopeSpans?: {
      spans?: {
        name: string;
        kind?: number;
        spanId: string;
        parentSpanId?: string;
        startTimeUnixNano?: string;
        endTimeUnixNano?: string;
        attributes?: { key: string; value: OtlpValue }[];
        status?: { code?: number; message?: string };
      }[];
    }[];
  }[];
};

function value(v: OtlpValue): unknown {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.arrayValue !== undefined) return (v.arrayValue.values ?? []).map(value);
  return undefined;
}

/** The backend's OTLP JSON as one list of spans (ids as hex, as ptrace's JSON writes them). */
function flatten(j: OtlpJson): FlatSpan[] {
  const out: FlatSpan[] = [];
  for (const rs of j.resourceSpans ?? []) {
    const service = String(value(rs.resource?.attributes?.find((x) => x.key === "service.name")?.value ?? {}) ?? "");
    for (const ss of rs.scopeSpans ?? [])
      for (const s of ss.spans ?? []) {
        const attrs: Record<string, unknown> = {};
        for (const kv of s.attributes ?? []) attrs[kv.key] = value(kv.value);
        out.push({
          service,
          name: s.name,
          kind: s.kind ?? 0,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId ?? "",
          attrs,
          status: s.status ?? {},
          start: BigInt(s.startTimeUnixNano ?? "0"),
          end: BigInt(s.endTimeUnixNano ?? "0"),
        });
      }
  }
  return out;
}

// OTLP JSON's span kinds and status codes
const OTLP_SERVER = 2;
const OTLP_CLIENT = 3;
const OTLP_ERROR = 2;

const propagator = new W3CTraceContextPropagator();
const mdSetter: TextMapSetter<grpc.Metadata> = { set: (md, k, v) => md.set(k, v) };
const mdGetter: TextMapGetter<grpc.Metadata> = {
  keys: (md) => Object.keys(md.getMap()),
  get: (md, k) => {
    const v = md.get(k);
    return v.length === 0 ? undefined : v.map(String);
  },
};

/** A TracerProvider exporting each span at once to `url` (the client's and the upstream's own SDK). */
function sdk(service: string, url: string): TracerProvider {
  return new TracerProvider({
    resource: resourceFromAttributes({ "service.name": service }),
    spanProcessors: [new SimpleSpanProcessor({ exporter: new OTLPTraceExporter({ url }) })],
  });
}

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => {});
});

/** dojang with `tracing` on an upstream that answers every call OK, and a client of it; all closed after the test. */
async function tracedProxy(tracing: Record<string, unknown>): Promise<{ proxy: DojangHandle; client: EchoClient }> {
  const up = await startRawUpstream((s) => okWithMessage(s));
  cleanups.push(() => up.close());
  const proxy = await startProxy(up.address, { top: { tracing } });
  cleanups.push(() => proxy.close(0));
  const client = echoClient(proxy.address);
  cleanups.push(async () => client.close());
  return { proxy, client };
}

/** One call through `proxy` (it must succeed), and its SERVER and CLIENT spans as `sink` holds them. */
async function oneCallSpans(sink: Sink, proxy: DojangHandle, client: EchoClient): Promise<{ server: FlatSpan; attempt: FlatSpan }> {
  expect((await unary(client, Buffer.from("x"))).err).toBeNull();
  await waitFor("the access record", () => (proxy.calls.length > 0 ? true : undefined), 5000);
  const traceId = proxy.calls.at(-1)!.trace_id!;
  const spans = await waitFor("two spans", async () => {
    const ss = await sink.spans(traceId);
    return ss.length >= 2 ? ss : undefined;
  }, 20_000, 50);
  return { server: spans.find((s) => s.kind === OTLP_SERVER)!, attempt: spans.find((s) => s.kind === OTLP_CLIENT)! };
}

describe("tracing: spans in a real backend", () => {
  it(
    "client span → dojang's SERVER span → one CLIENT span per attempt (a retry's two are siblings) → the upstream's span under each",
    async () => {
      const sink = await startSink();
      const upstreamSdk = sdk("echo-upstream", sink.otlpHttp);
      const clientSdk = sdk("test-client", sink.otlpHttp);
      cleanups.push(() => upstreamSdk.shutdown(), () => clientSdk.shutdown());
      const upTracer = upstreamSdk.getTracer("upstream");
      let n = 0;
      const received: string[] = [];
      const up: GrpcServer = await startGrpcServer({
        Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
          received.push(String(call.metadata.get("traceparent")[0] ?? ""));
          const parent: Context = propagator.extract(ROOT_CONTEXT, call.metadata, mdGetter);
          const span = upTracer.startSpan("test.Echo/Unary", { kind: SpanKind.SERVER, attributes: { "rpc.system": "grpc" } }, parent);
          if (++n === 1) {
            span.setStatus({ code: SpanStatusCode.ERROR, message: "first attempt refused" });
            span.end();
            return cb({ code: grpc.status.UNAVAILABLE, details: "first attempt refused" });
          }
          span.end();
          cb(null, call.request);
        },
      });
      cleanups.push(() => up.close());
      const proxy: DojangHandle = await startProxy(up.address, {
        // sampleRatio 0: only the client's sampled flag makes this call traced (parent-based)
        top: { tracing: { endpoint: sink.otlpHttp, serviceName: "dojang-edge", sampleRatio: 0, exportInterval: "100ms" } },
        route: { retry: { retryOn: ["UNAVAILABLE"], maxAttempts: 3, backoff: { base: "5ms", max: "10ms" } } },
      });
      cleanups.push(() => proxy.close(0));

      const client = echoClient(proxy.address);
      cleanups.push(async () => client.close());
      const clientSpan = clientSdk.getTracer("client").startSpan("test.Echo/Unary", { kind: SpanKind.CLIENT });
      const md = new grpc.Metadata();
      propagator.inject(trace.setSpan(ROOT_CONTEXT, clientSpan), md, mdSetter);
      const r = await unary(client, Buffer.from("traced"), md, { deadline: Date.now() + 10_000 });
      clientSpan.end();
      expect(r.err).toBeNull();
      const traceId = clientSpan.spanContext().traceId;

      // the access record names the trace
      await waitFor("the access record", () => (proxy.calls.length > 0 ? true : undefined), 5000);
      expect(proxy.calls.at(-1)!.trace_id).toBe(traceId);

      let last: FlatSpan[] = [];
      const spans = await waitFor(
        "six spans in the backend",
        async () => {
          last = await sink.spans(traceId);
          return last.length >= 6 ? last : undefined;
        },
        20_000,
        100,
      ).catch((err: Error) => {
        throw new Error(`${err.message}; the backend has: ${JSON.stringify(last.map((s) => [s.service, s.kind, s.attrs["dojang.attempt"]]))}`);
      });
      expect(spans).toHaveLength(6);
      const [clientS] = spans.filter((s) => s.service === "test-client");
      const dojang = spans.filter((s) => s.service === "dojang-edge");
      const server = dojang.find((s) => s.kind === OTLP_SERVER)!;
      const attempts = dojang.filter((s) => s.kind === OTLP_CLIENT).sort((a, b) => Number(a.attrs["dojang.attempt"]) - Number(b.attrs["dojang.attempt"]));
      const ups = spans.filter((s) => s.service === "echo-upstream");
      expect(clientS).toBeDefined();
      expect(server.parentSpanId).toBe(clientS!.spanId);
      expect(server.name).toBe("test.Echo/Unary");
      expect(server.attrs).toMatchObject({
        "rpc.system": "grpc",
        "rpc.service": "test.Echo",
        "rpc.method": "Unary",
        "rpc.grpc.status_code": 0,
        "dojang.decided_by": "upstream",
        "dojang.attempts": 2,
      });
      expect(server.attrs["dojang.budget_in_ms"]).toBeGreaterThan(0);
      expect(server.attrs["dojang.budget_out_ms"]).toBeGreaterThan(0);
      expect(server.status.code ?? 0).not.toBe(OTLP_ERROR);

      expect(attempts.map((a) => a.attrs["dojang.attempt"])).toEqual([1, 2]);
      for (const a of attempts) {
        expect(a.parentSpanId).toBe(server.spanId);
        expect(a.attrs).toMatchObject({ "rpc.system": "grpc", "rpc.service": "test.Echo", "rpc.method": "Unary", "server.address": "127.0.0.1" });
      }
      expect(attempts[0]!.attrs["rpc.grpc.status_code"]).toBe(14);
      expect(attempts[0]!.status.code).toBe(OTLP_ERROR);
      expect(attempts[1]!.attrs["rpc.grpc.status_code"]).toBe(0);
      expect(attempts[1]!.status.code ?? 0).not.toBe(OTLP_ERROR);

      // each upstream span is its attempt's child: the attempt's traceparent reached it
      expect(ups).toHaveLength(2);
      expect(new Set(ups.map((u) => u.parentSpanId))).toEqual(new Set(attempts.map((a) => a.spanId)));
      expect(ups.find((u) => u.parentSpanId === attempts[0]!.spanId)!.status.code).toBe(OTLP_ERROR);
      expect(received).toEqual(attempts.map((a) => `00-${traceId}-${a.spanId}-01`));
    },
    60_000,
  );

  it(
    "spans nest in time: over 60 calls with a retry each, every attempt span starts no earlier than its SERVER span and ends no later (as the backend received them)",
    async () => {
      const sink = await startSink();
      // every first attempt is refused (14), the retry answers
      const up = await startRawUpstream((s, h) => {
        if (h["grpc-previous-rpc-attempts"] === undefined) s.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": "14", "grpc-message": "try again" }, { endStream: true });
        else okWithMessage(s);
      });
      cleanups.push(() => up.close());
      const proxy = await startProxy(up.address, {
        top: { tracing: { endpoint: sink.otlpHttp, serviceName: "dojang-edge", sampleRatio: 1, exportInterval: "100ms" } },
        route: { retry: { retryOn: ["UNAVAILABLE"], maxAttempts: 3, backoff: { base: "1ms", max: "2ms" } } },
        // every call retries once: a budget that allows it
        cluster: { retryBudget: { percent: 100, minRetriesPerSecond: 100 } },
      });
      cleanups.push(() => proxy.close(0));
      const client = echoClient(proxy.address);
      cleanups.push(async () => client.close());
      // three at a time: the cluster's maxRetries circuit breaker allows three retries at once
      for (let i = 0; i < 20; i++) {
        const rs = await Promise.all(Array.from({ length: 3 }, () => unary(client, Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 10_000 })));
        expect(rs.map((r) => r.err?.code ?? 0)).toEqual([0, 0, 0]);
      }
      await waitFor("60 access records", () => (proxy.calls.length >= 60 ? true : undefined), 5000);
      const traceIds = proxy.calls.map((c) => c.trace_id as string);
      expect(new Set(traceIds).size).toBe(60);
      const outside: string[] = [];
      let attemptsSeen = 0;
      for (const id of traceIds) {
        const spans = await waitFor(`the three spans of trace ${id}`, async () => {
          const ss = await sink.spans(id);
          return ss.length >= 3 ? ss : undefined;
        }, 20_000, 50);
        const server = spans.find((s) => s.kind === OTLP_SERVER)!;
        expect(server.start).toBeLessThan(server.end);
        for (const a of spans.filter((s) => s.kind === OTLP_CLIENT)) {
          attemptsSeen++;
          expect(a.parentSpanId).toBe(server.spanId);
          if (a.start < server.start || a.end > server.end || a.end < a.start) {
            outside.push(`${id} attempt ${String(a.attrs["dojang.attempt"])}: [${a.start}, ${a.end}] vs SERVER [${server.start}, ${server.end}]`);
          }
        }
      }
      expect(attemptsSeen).toBe(120);
      expect(outside).toEqual([]);
    },
    60_000,
  );

  it(
    "a call without a parent starts a trace when sampleRatio says so (1: always), and the upstream gets it sampled",
    async () => {
      const sink = await startSink();
      const up = await startRawUpstream((s) => {
        s.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
        s.on("wantTrailers", () => s.sendTrailers({ "grpc-status": "5", "grpc-message": "nope" }));
        s.end();
      });
      cleanups.push(() => up.close());
      const proxy = await startProxy(up.address, { top: { tracing: { endpoint: sink.otlpHttp, sampleRatio: 1, exportInterval: "50ms" } } });
      cleanups.push(() => proxy.close(0));
      const client = echoClient(proxy.address);
      cleanups.push(async () => client.close());
      const r = await unary(client, Buffer.from("x"));
      expect(r.err?.code).toBe(5);
      const tp = String(up.seen[0]!.headers["traceparent"]);
      expect(tp).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      const traceId = tp.slice(3, 35);
      await waitFor("the access record", () => (proxy.calls.length > 0 ? true : undefined), 5000);
      expect(proxy.calls.at(-1)!.trace_id).toBe(traceId);
      const spans = await waitFor("two spans", async () => {
        const s = await sink.spans(traceId);
        return s.length >= 2 ? s : undefined;
      }, 20_000, 100);
      const server = spans.find((s) => s.kind === OTLP_SERVER)!;
      const attempt = spans.find((s) => s.kind === OTLP_CLIENT)!;
      expect(server.service).toBe("dojang"); // serviceName's default
      expect(server.parentSpanId).toBe(""); // a root
      expect(attempt.parentSpanId).toBe(server.spanId);
      expect(tp.slice(36, 52)).toBe(attempt.spanId);
      // NOT_FOUND: the client's own mistake, not the server's (RPC conventions: unset on a SERVER span, error on a CLIENT span)
      expect(server.status.code ?? 0).not.toBe(OTLP_ERROR);
      expect(attempt.status.code).toBe(OTLP_ERROR);
      expect(server.attrs["rpc.grpc.status_code"]).toBe(5);
    },
    60_000,
  );
});

describe("tracing.protocol: the export's wire format, decoded by the backend", () => {
  it.each([
    ["(the default)", "application/x-protobuf", undefined],
    ["http/protobuf", "application/x-protobuf", "http/protobuf"],
    ["http/json", "application/json", "http/json"],
  ] as const)(
    "%s: every export goes as %s, and the backend decodes the call's two spans with their attributes",
    async (_label, contentType, protocol) => {
      const sink = await startSink();
      // in front of the backend: a pass-through that notes each export's content-type and hands
      // the body on as it came (the backend, the collector's OTLP receiver, decodes it by that type)
      const seen: string[] = [];
      const relay = createHttpServer((req, res) => {
        const parts: Buffer[] = [];
        req.on("data", (c: Buffer) => parts.push(c));
        req.on("end", () => {
          const ct = String(req.headers["content-type"]);
          seen.push(ct);
          fetch(sink.otlpHttp, { method: "POST", headers: { "content-type": ct }, body: Buffer.concat(parts) })
            .then(async (r) => res.writeHead(r.status, { "content-type": r.headers.get("content-type") ?? ct }).end(Buffer.from(await r.arrayBuffer())))
            .catch(() => res.writeHead(502).end());
        });
      });
      await new Promise<void>((r) => relay.listen(0, "127.0.0.1", r));
      cleanups.push(() => new Promise((r) => relay.close(r)));
      const port = (relay.address() as import("node:net").AddressInfo).port;
      let tracing: Record<string, unknown> = { endpoint: `http://127.0.0.1:${port}/v1/traces`, sampleRatio: 1, exportInterval: "50ms" };
      if (protocol !== undefined) tracing = { ...tracing, protocol: protocol };
      const { proxy, client } = await tracedProxy(tracing);
      const { server, attempt } = await oneCallSpans(sink, proxy, client);
      expect(server.attrs).toMatchObject({ "rpc.system": "grpc", "rpc.service": "test.Echo", "rpc.method": "Unary", "rpc.grpc.status_code": 0, "dojang.decided_by": "upstream", "dojang.attempts": 1 });
      expect(attempt.parentSpanId).toBe(server.spanId);
      expect(attempt.attrs).toMatchObject({ "dojang.attempt": 1, "server.address": "127.0.0.1", "rpc.grpc.status_code": 0 });
      expect(attempt.start).toBeGreaterThanOrEqual(server.start);
      expect(attempt.end).toBeLessThanOrEqual(server.end);
      expect(seen.length).toBeGreaterThan(0);
      expect(new Set(seen)).toEqual(new Set([contentType]));
    },
    60_000,
  );
});

describe("tracing.protocol grpc: OTLP/gRPC, judged by the collector's own gRPC receiver", () => {
  it("every export is one TraceService/Export call on the receiver's gRPC port, which decodes the call's two spans with their attributes; the exporter counts 2 spans exported", async () => {
    const sink = await startSink();
    const { proxy, client } = await tracedProxy({ endpoint: sink.otlpGrpc, protocol: "grpc", sampleRatio: 1, exportInterval: "50ms" });
    const { server, attempt } = await oneCallSpans(sink, proxy, client);
    expect(server.service).toBe("dojang");
    expect(server.attrs).toMatchObject({ "rpc.system": "grpc", "rpc.service": "test.Echo", "rpc.method": "Unary", "rpc.grpc.status_code": 0, "dojang.decided_by": "upstream", "dojang.attempts": 1 });
    expect(attempt.parentSpanId).toBe(server.spanId);
    expect(attempt.attrs).toMatchObject({ "dojang.attempt": 1, "server.address": "127.0.0.1", "rpc.grpc.status_code": 0 });
    const m = await waitFor("2 spans counted exported", async () => {
      const t = await scrape(proxy.adminAddress);
      return sample(t, "dojang_trace_spans_exported_total") >= 2 ? t : undefined;
    }, 10_000, 50);
    expect(sample(m, "dojang_trace_spans_exported_total")).toBe(2);
    expect(sample(m, "dojang_trace_spans_dropped_total", { reason: "export_failed" })).toBe(0);
    // one HTTP/2 connection to the collector, shown as the cluster named by its address
    expect(sample(m, "dojang_upstream_connects_total", { cluster: sink.otlpGrpc.slice("http://".length), result: "ok" })).toBe(1);
  }, 60_000);

  it("endpoint with a path: refused at start, naming the origin form it wants", async () => {
    const up = await startRawUpstream((s) => okWithMessage(s));
    cleanups.push(() => up.close());
    await expect(startProxy(up.address, { top: { tracing: { endpoint: "http://127.0.0.1:4317/v1/traces", protocol: "grpc" } } })).rejects.toThrow(/with protocol grpc the endpoint is the collector's origin, like "http:\/\/127\.0\.0\.1:4317"/);
  });

  it("a collector that answers UNAVAILABLE: the batch is lost and counted, never retried into a call; what it received was a framed Export call with the export's deadline", async () => {
    const collector = await startRawUpstream((st) => {
      st.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": "14", "grpc-message": "overloaded" }, { endStream: true });
    });
    cleanups.push(() => collector.close());
    const { proxy, client } = await tracedProxy({ endpoint: `http://${collector.address}`, protocol: "grpc", sampleRatio: 1, exportInterval: "20ms", exportTimeout: "3s" });
    expect((await unary(client, Buffer.from("x"))).err).toBeNull();
    const m = await waitFor("2 spans counted export_failed", async () => {
      const t = await scrape(proxy.adminAddress);
      return sample(t, "dojang_trace_spans_dropped_total", { reason: "export_failed" }) >= 2 ? t : undefined;
    }, 10_000, 50);
    expect(sample(m, "dojang_trace_spans_dropped_total", { reason: "export_failed" })).toBe(2);
    expect(sample(m, "dojang_trace_spans_exported_total")).toBe(0);
    expect(collector.seen.length).toBe(1);
    const h = collector.seen[0]!.headers;
    expect(h[":path"]).toBe("/opentelemetry.proto.collector.trace.v1.TraceService/Export");
    expect(h["content-type"]).toBe("application/grpc");
    expect(h["te"]).toBe("trailers");
    expect(h["grpc-timeout"]).toBe("3000m");
    expect(h[":authority"]).toBe(collector.address);
    const body = Buffer.concat(collector.seen[0]!.body);
    expect(body[0]).toBe(0); // uncompressed
    expect(body.readUInt32BE(1)).toBe(body.length - 5);
  }, 30_000);

  it("a collector that never answers: each export ends at exportTimeout with RST_STREAM(CANCEL) on the collector's side, its spans counted; calls never wait", async () => {
    const collector = await startRawUpstream(() => {
      /* takes the request, never answers */
    });
    cleanups.push(() => collector.close());
    const { proxy, client } = await tracedProxy({ endpoint: `http://${collector.address}`, protocol: "grpc", sampleRatio: 1, exportInterval: "20ms", exportTimeout: "300ms" });
    const t0 = performance.now();
    for (let i = 0; i < 3; i++) expect((await unary(client, Buffer.from("x"))).err).toBeNull();
    // three calls while the collector holds every export: none of them waited for it (generous on a loaded machine)
    expect(performance.now() - t0).toBeLessThan(3000);
    await waitFor("6 spans counted export_failed", async () => {
      const t = await scrape(proxy.adminAddress);
      return sample(t, "dojang_trace_spans_dropped_total", { reason: "export_failed" }) >= 6 ? true : undefined;
    }, 15_000, 50);
    await waitFor("the collector saw its streams reset", () => (collector.seen.length > 0 && collector.seen.every((r) => r.rstCode !== undefined) ? true : undefined), 5000, 20);
    // RST_STREAM CANCEL (RFC 9113 §7: 0x8)
    expect(new Set(collector.seen.map((r) => r.rstCode))).toEqual(new Set([8]));
    const m = await scrape(proxy.adminAddress);
    expect(sample(m, "dojang_trace_spans_exported_total")).toBe(0);
  }, 30_000);

  it("https: TLS to the collector (Go's crypto/tls in front of its gRPC receiver), verified against the trust store: with the test CA trusted the spans arrive; without it none do and they count as export_failed", async () => {
    assertDistBuilt();
    const sink = await startSink();
    const certs = new CertDir();
    cleanups.push(async () => certs.remove());
    const ca = certs.ca("collector-ca");
    const front = await startTlsFront(sink.otlpGrpc.slice("http://".length), certs.leaf(ca, "collector", { cn: "127.0.0.1", ip: ["127.0.0.1"] }));
    const up = await startRawUpstream((s) => okWithMessage(s));
    cleanups.push(() => up.close());
    const d = tempDir();
    cleanups.push(async () => d.remove());
    // two real dojang processes: the system's CAs and the test CA (NODE_EXTRA_CA_CERTS), and the system's alone
    const run = async (name: string, env: NodeJS.ProcessEnv): Promise<{ admin: string; traceId: string }> => {
      const [listen, admin] = [await freePort(), await freePort()];
      const file = d.write(`${name}.yaml`, JSON.stringify({
        admin: { address: `127.0.0.1:${admin}` },
        logLevel: "warn",
        listeners: [{ name: "main", address: `127.0.0.1:${listen}`, routes: [{ match: { prefix: "/" }, cluster: "backend" }] }],
        clusters: [{ name: "backend", endpoints: [up.address] }],
        tracing: { endpoint: `https://${front.address}`, protocol: "grpc", sampleRatio: 1, exportInterval: "50ms", exportTimeout: "3s" },
      }));
      const p = spawnDojang(["--config", file], env);
      cleanups.push(async () => {
        if (!p.hasExited) process.kill(-p.pid, "SIGKILL");
      });
      await waitReady(p, `127.0.0.1:${admin}`, 30_000);
      const client = echoClient(`127.0.0.1:${listen}`);
      cleanups.push(async () => client.close());
      const traceId = name === "trusted" ? "5b8efff798038103d269b633813fc60c" : "6c9f00a8a9149214e37ac744924ad71d";
      const m = new grpc.Metadata();
      m.set("traceparent", `00-${traceId}-eee19b7ec3c1b174-01`);
      expect((await unary(client, Buffer.from("x"), m)).err).toBeNull();
      return { admin: `127.0.0.1:${admin}`, traceId };
    };
    const trusted = await run("trusted", childEnv({ NODE_EXTRA_CA_CERTS: ca.certFile }));
    const spans = await waitFor("two spans through TLS", async () => {
      const ss = await sink.spans(trusted.traceId);
      return ss.length >= 2 ? ss : undefined;
    }, 20_000, 50);
    expect(spans.map((x) => x.kind).sort()).toEqual([OTLP_SERVER, OTLP_CLIENT]);
    const untrusted = await run("untrusted", childEnv({ NODE_EXTRA_CA_CERTS: undefined }));
    await waitFor("the untrusted process's 2 spans counted export_failed", async () => {
      const t = await scrape(untrusted.admin);
      return sample(t, "dojang_trace_spans_dropped_total", { reason: "export_failed" }) >= 2 ? true : undefined;
    }, 20_000, 100);
    expect(await sink.spans(untrusted.traceId)).toEqual([]);
    expect(sample(await scrape(untrusted.admin), "dojang_trace_spans_exported_total")).toBe(0);
  }, 90_000);

  it("a collector gone (nothing listens): every call succeeds and the lost spans are counted", async () => {
    const closed = await freePort();
    const { proxy, client } = await tracedProxy({ endpoint: `http://127.0.0.1:${closed}`, protocol: "grpc", sampleRatio: 1, exportInterval: "20ms", exportTimeout: "500ms" });
    const results = await Promise.all(Array.from({ length: 20 }, () => unary(client, Buffer.from("x"))));
    expect(results.filter((r) => r.err !== null)).toEqual([]);
    await waitFor("export_failed counted", async () => {
      const t = await scrape(proxy.adminAddress);
      return sample(t, "dojang_trace_spans_dropped_total", { reason: "export_failed" }) > 0 ? true : undefined;
    }, 15_000, 100);
  }, 30_000);
});

describe("tracing: a fault on the call's span", () => {
  it(
    "an injected abort: the SERVER span names the rule and its kind, decided_by fault, an error status; no attempt span",
    async () => {
      const sink = await startSink();
      const up = await startRawUpstream((s) => okWithMessage(s));
      cleanups.push(() => up.close());
      const proxy = await startProxy(up.address, { top: { tracing: { endpoint: sink.otlpHttp, sampleRatio: 1, exportInterval: "50ms" } } });
      cleanups.push(() => proxy.close(0));
      proxy.faults.add({ id: "down-for-tracing", action: { kind: "abort", code: "UNAVAILABLE", message: "injected" } });
      const client = echoClient(proxy.address);
      cleanups.push(async () => client.close());
      const r = await unary(client, Buffer.from("x"));
      expect(r.err?.code).toBe(14);
      expect(up.seen).toHaveLength(0);
      await waitFor("the access record", () => (proxy.calls.length > 0 ? true : undefined), 5000);
      const traceId = proxy.calls.at(-1)!.trace_id!;
      const spans = await waitFor("the call's span", async () => {
        const s = await sink.spans(traceId);
        return s.length >= 1 ? s : undefined;
      }, 20_000, 100);
      expect(spans).toHaveLength(1);
      expect(spans[0]!.kind).toBe(OTLP_SERVER);
      expect(spans[0]!.attrs).toMatchObject({ "dojang.decided_by": "fault", "dojang.faults": ["down-for-tracing"], "dojang.fault_kinds": ["abort"], "rpc.grpc.status_code": 14 });
      expect(spans[0]!.status).toMatchObject({ code: OTLP_ERROR, message: "UNAVAILABLE: injected" });
    },
    60_000,
  );
});

// Issue 0.5.1 items 1 and 3: a span is a record too. Its name is the call's method name (a :path
// that is not one names no method: the span is "grpc", never the client's path with its query),
// and what the operator names in accessLogRedact is not on it.
describe("tracing: no credential on a span", () => {
  it(
    "a refused path's query is not in the span's name; accessLogRedact's request_id, client_address and grpc_message are not on the span",
    async () => {
      const sink = await startSink();
      const up = await startRawUpstream((s) => {
        s.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
        s.on("wantTrailers", () => s.sendTrailers({ "grpc-status": "14", "grpc-message": "token S3CRET-message expired" }));
        s.end();
      });
      cleanups.push(() => up.close());
      const proxy = await startProxy(up.address, {
        top: { tracing: { endpoint: sink.otlpHttp, sampleRatio: 1, exportInterval: "50ms" }, accessLogRedact: ["request_id", "client_address", "grpc_message"] },
      });
      cleanups.push(() => proxy.close(0));
      const refused = await rawCall(proxy.address, { ":path": "/test.Echo/Unary?access_token=S3CRET-query" }, frame(Buffer.from("x")));
      expect(statusOf(refused)).toBe("12");
      const failed = await rawCall(proxy.address, { "x-request-id": "S3CRET-rid" }, frame(Buffer.from("x")));
      expect(statusOf(failed)).toBe("14");
      await waitFor("the access records", () => (proxy.calls.length >= 2 ? true : undefined), 5000);
      const [a, b] = proxy.calls;
      const spans = await waitFor("the spans", async () => {
        const s = [...(await sink.spans(a!.trace_id!)), ...(await sink.spans(b!.trace_id!))];
        return s.filter((x) => x.kind === OTLP_SERVER).length >= 2 ? s : undefined;
      }, 20_000, 100);
      expect(JSON.stringify(spans, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v))).not.toContain("S3CRET");
      const servers = spans.filter((x) => x.kind === OTLP_SERVER);
      expect(servers.map((x) => x.name).sort()).toEqual(["grpc", "test.Echo/Unary"]);
      const served = servers.find((x) => x.name === "test.Echo/Unary")!;
      expect(served.attrs["dojang.request_id"]).toBe("<redacted>");
      expect(served.attrs).not.toHaveProperty("client.address");
      expect(served.status).toMatchObject({ code: OTLP_ERROR, message: "UNAVAILABLE: <redacted>" });
    },
    60_000,
  );
});

describe("tracing: propagation without a backend in the way", () => {
  // "Nothing is exported" is judged by a real backend, after an export has provably happened:
  // the same proxy then carries a call whose client's parent is sampled (followed whatever the
  // ratio), and once that call's spans are in the backend, the exporter has run after the five
  // unsampled calls (spans leave in the order they ended). The backend must then hold exactly
  // that call's two spans. (It used to check dojang's drop counters against a closed port at
  // once, before a 20 ms export interval could pass: nothing could have been exported yet.)
  it("sampleRatio 0: a new trace is not sampled, the decision goes upstream (flags 00), and nothing is exported", async () => {
    const sink = await startSink();
    const up = await startRawUpstream((s) => okWithMessage(s));
    cleanups.push(() => up.close());
    const proxy = await startProxy(up.address, { top: { tracing: { endpoint: sink.otlpHttp, sampleRatio: 0, exportInterval: "100ms" } } });
    cleanups.push(() => proxy.close(0));
    const client = echoClient(proxy.address);
    cleanups.push(async () => client.close());
    for (let i = 0; i < 5; i++) expect((await unary(client, Buffer.from("x"))).err).toBeNull();
    const tps = up.seen.map((s) => String(s.headers["traceparent"]));
    for (const tp of tps) expect(tp).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
    expect(new Set(tps.map((t) => t.slice(3, 35))).size).toBe(5);
    expect(new Set(tps.map((t) => t.slice(36, 52))).size).toBe(5);
    // the judge of what the upstream's SDK makes of it: the OpenTelemetry W3C propagator reads
    // each as a valid remote parent, not sampled, so a parent-based sampler there drops its span
    for (const tp of tps) {
      const md = new grpc.Metadata();
      md.set("traceparent", tp);
      const sc = trace.getSpanContext(propagator.extract(ROOT_CONTEXT, md, mdGetter));
      expect(sc !== undefined && isSpanContextValid(sc)).toBe(true);
      expect(sc).toMatchObject({ traceId: tp.slice(3, 35), spanId: tp.slice(36, 52), traceFlags: 0, isRemote: true });
    }
    // the access records name the trace each call sent upstream (the unsampled call's only id)
    await waitFor("five access records", () => (proxy.calls.length >= 5 ? true : undefined), 5000);
    expect(proxy.calls.slice(0, 5).map((c) => c.trace_id)).toEqual(tps.map((t) => t.slice(3, 35)));
    // the control: a sampled parent, on the same proxy, after the five
    const md = new grpc.Metadata();
    md.set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    expect((await unary(client, Buffer.from("x"), md)).err).toBeNull();
    await waitFor("the sampled call's spans in the backend", async () => ((await sink.spans("0af7651916cd43dd8448eb211c80319c")).length >= 2 ? true : undefined), 20_000, 50);
    for (const tp of tps) expect(await sink.spans(tp.slice(3, 35))).toEqual([]);
    expect(await sink.total()).toBe(2);
    const m = await scrape(proxy.adminAddress);
    expect(sample(m, "dojang_trace_spans_dropped_total", { reason: "queue_full" })).toBe(0);
    expect(sample(m, "dojang_trace_spans_dropped_total", { reason: "export_failed" })).toBe(0);
  }, 60_000);

  it("a client's unsampled parent is followed and its headers pass as they came; tracestate is kept", async () => {
    const up = await startRawUpstream((s) => okWithMessage(s));
    cleanups.push(() => up.close());
    const closed = await freePort();
    const proxy = await startProxy(up.address, { top: { tracing: { endpoint: `http://127.0.0.1:${closed}/v1/traces`, sampleRatio: 1 } } });
    cleanups.push(() => proxy.close(0));
    const client = echoClient(proxy.address);
    cleanups.push(async () => client.close());
    const md = new grpc.Metadata();
    md.set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
    md.set("tracestate", "rojo=00f067aa0ba902b7");
    expect((await unary(client, Buffer.from("x"), md)).err).toBeNull();
    expect(up.seen[0]!.headers["traceparent"]).toBe("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
    expect(up.seen[0]!.headers["tracestate"]).toBe("rojo=00f067aa0ba902b7");
    // sampled parent: the attempt's span id replaces the client's, the trace and tracestate stay
    const md2 = new grpc.Metadata();
    md2.set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    md2.set("tracestate", "rojo=00f067aa0ba902b7");
    expect((await unary(client, Buffer.from("x"), md2)).err).toBeNull();
    const tp = String(up.seen[1]!.headers["traceparent"]);
    expect(tp).toMatch(/^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/);
    expect(tp).not.toContain("00f067aa0ba902b7");
    expect(up.seen[1]!.headers["tracestate"]).toBe("rojo=00f067aa0ba902b7");
  });

  it("B3: a client that speaks B3 (single header) gets its trace continued, in B3 and W3C both", async () => {
    const up = await startRawUpstream((s) => okWithMessage(s));
    cleanups.push(() => up.close());
    const closed = await freePort();
    const proxy = await startProxy(up.address, { top: { tracing: { endpoint: `http://127.0.0.1:${closed}/v1/traces`, sampleRatio: 0 } } });
    cleanups.push(() => proxy.close(0));
    const client = echoClient(proxy.address);
    cleanups.push(async () => client.close());
    const md = new grpc.Metadata();
    md.set("b3", "80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1");
    expect((await unary(client, Buffer.from("x"), md)).err).toBeNull();
    const h = up.seen[0]!.headers;
    const b3 = String(h["b3"]);
    expect(b3).toMatch(/^80f198ee56343ba864fe8b2a57d3eff7-[0-9a-f]{16}-1$/);
    expect(b3).not.toContain("e457b5a2e4d86bd1");
    expect(h["traceparent"]).toBe(`00-80f198ee56343ba864fe8b2a57d3eff7-${b3.slice(33, 49)}-01`);
    await waitFor("the access record", () => (proxy.calls.length > 0 ? true : undefined), 5000);
    expect(proxy.calls.at(-1)!.trace_id).toBe("80f198ee56343ba864fe8b2a57d3eff7");
  });
});

describe("tracing: a backend outage never fails a call", () => {
  async function echoUpstream(): Promise<GrpcServer> {
    const up = await startGrpcServer({ Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, call.request) });
    cleanups.push(() => up.close());
    return up;
  }

  it("collector gone (nothing listens): every call succeeds; the lost spans are counted as export_failed", async () => {
    const up = await echoUpstream();
    const closed = await freePort();
    const proxy = await startProxy(up.address, { top: { tracing: { endpoint: `http://127.0.0.1:${closed}/v1/traces`, sampleRatio: 1, exportInterval: "20ms", exportTimeout: "500ms" } } });
    cleanups.push(() => proxy.close(0));
    const client = echoClient(proxy.address);
    cleanups.push(async () => client.close());
    const results = await Promise.all(Array.from({ length: 50 }, () => unary(client, Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 10_000 })));
    expect(results.filter((r) => r.err !== null)).toEqual([]);
    await waitFor("export_failed counted", async () => {
      const m = await scrape(proxy.adminAddress);
      return sample(m, "dojang_trace_spans_dropped_total", { reason: "export_failed" }) > 0 ? true : undefined;
    }, 20_000, 100);
    const t0 = performance.now();
    await proxy.close(0);
    // the last spans are given at most 2 s at shutdown
    expect(performance.now() - t0).toBeLessThan(5000);
  }, 60_000);

  it("collector slow (accepts, never answers): calls go on at full speed; the bounded queue drops and counts (queue_full)", async () => {
    const up = await echoUpstream();
    // a collector that takes the connection and the request, and never answers
    const held: import("node:net").Socket[] = [];
    const slow: Server = createServer((s) => {
      held.push(s);
      s.on("error", () => {});
      s.resume();
    });
    await new Promise<void>((r) => slow.listen(0, "127.0.0.1", r));
    cleanups.push(async () => {
      for (const s of held) s.destroy();
      await new Promise<void>((r) => slow.close(() => r()));
    });
    const port = (slow.address() as import("node:net").AddressInfo).port;
    const proxy = await startProxy(up.address, {
      top: { tracing: { endpoint: `http://127.0.0.1:${port}/v1/traces`, sampleRatio: 1, maxQueueSize: 8, exportInterval: "10ms", exportTimeout: "30s" } },
    });
    cleanups.push(() => proxy.close(0));
    const client = echoClient(proxy.address);
    cleanups.push(async () => client.close());
    const t0 = performance.now();
    for (let round = 0; round < 10; round++) {
      const rs = await Promise.all(Array.from({ length: 20 }, () => unary(client, Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 10_000 })));
      expect(rs.filter((r) => r.err !== null)).toEqual([]);
    }
    // 200 calls while every export hangs: no call waited for the collector (a generous bound on a loaded machine)
    expect(performance.now() - t0).toBeLessThan(15_000);
    const m = await scrape(proxy.adminAddress);
    // 400 spans (a SERVER and a CLIENT span per call) against a queue of 8 and exports that never end
    expect(sample(m, "dojang_trace_spans_dropped_total", { reason: "queue_full" })).toBeGreaterThan(300);
    expect(held.length).toBeGreaterThan(0); // the exporter did reach the slow collector
  }, 60_000);
});
