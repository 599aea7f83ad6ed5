// dojang's OTLP encodings (src/proxy/observe/otlp.ts) judged by decoders that are not dojang's:
// `otelsink -decode` (test/engines/otelsink) reads a batch with the OpenTelemetry Collector's own
// unmarshalers (the ones its OTLP/HTTP receiver runs for application/x-protobuf and
// application/json), and a protobuf batch also with the official Go bindings of
// opentelemetry-proto, refusing any field the .proto files do not define. What they decode must be
// every span field and attribute dojang meant, strings of any length and script included.
import { spawnSync } from "node:child_process";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { HttpTransport } from "../../src/proxy/observe/otlp-export.js";
import { BatchHead, KIND_CLIENT, KIND_SERVER, MethodSpans, PbWriter, encodeJson, encodeProtobuf, unixTime, type CallEndFacts, type ClientSpanData, type ServerSpanData, type SpanData } from "../../src/proxy/observe/otlp.js";
import { engineBinary } from "../helpers/engines.js";

type Value = { stringValue?: string; intValue?: string; doubleValue?: number; arrayValue?: { values?: Value[] } };
interface Decoded {
  resourceSpans: {
    resource: { attributes: { key: string; value: Value }[] };
    scopeSpans: {
      scope: { name: string };
      spans: {
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        traceState?: string;
        flags?: number;
        name: string;
        kind: number;
        startTimeUnixNano: string;
        endTimeUnixNano: string;
        attributes?: { key: string; value: Value }[];
        status?: { code?: number; message?: string };
      }[];
    }[];
  }[];
}

/** The batch as the collector (and, for protobuf, the official bindings) decodes it. */
function decode(format: "protobuf" | "json", body: Buffer): Decoded {
  const r = spawnSync(engineBinary("otelsink"), ["-decode", format], { input: body, timeout: 20_000 });
  if (r.status !== 0) throw new Error(`otelsink -decode ${format}: ${String(r.stderr)}`);
  return JSON.parse(String(r.stdout)) as Decoded;
}

function attrs(list: { key: string; value: Value }[] | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const v = (x: Value): unknown => (x.stringValue !== undefined ? x.stringValue : x.intValue !== undefined ? Number(x.intValue) : x.doubleValue !== undefined ? x.doubleValue : x.arrayValue !== undefined ? (x.arrayValue.values ?? []).map(v) : undefined);
  for (const kv of list ?? []) out[kv.key] = v(kv.value);
  return out;
}

const T0 = 1000.25;

function server(over: Partial<ServerSpanData> = {}, facts: Partial<CallEndFacts> = {}): ServerSpanData {
  return {
    kind: KIND_SERVER,
    traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
    spanId: "00f067aa0ba902b7",
    parentSpanId: "",
    tracestate: undefined,
    method: new MethodSpans("test.Echo/Unary", "test.Echo", "Unary"),
    clientAddress: "127.0.0.1",
    start: T0,
    end: T0 + 12.5,
    facts: { code: 0, message: undefined, decidedBy: "upstream", route: "prefix:/", requestId: "r-1", attempts: 1, budgetInMs: 1000, budgetOutMs: 999.5, faults: undefined, faultKinds: undefined, ...facts },
    ...over,
  };
}

function attempt(call: ServerSpanData, over: Partial<ClientSpanData> = {}): ClientSpanData {
  return { kind: KIND_CLIENT, call, spanId: "a3ce929d0e0e4736", n: 1, host: "::1", port: 50051, grpcTimeout: "999m", start: T0 + 0.5, end: T0 + 12.5, code: 0, statusMessage: "", ...over };
}

/** The expected decimal nanoseconds of a performance.now() time (exact, with BigInt). */
function nanos(perfMs: number): string {
  const [s, ns] = unixTime(perfMs);
  return String(BigInt(s) * 1_000_000_000n + BigInt(ns));
}

const head = new BatchHead("edge-gateway", "dojang");

describe.each(["protobuf", "json"] as const)("OTLP %s: a batch as the collector decodes it", (format) => {
  const encode = (spans: SpanData[]): Buffer => (format === "protobuf" ? encodeProtobuf(new PbWriter(64), head, spans) : encodeJson(head, spans));

  it("a call's SERVER span and its attempt's CLIENT span: ids, parent, kind, times, every attribute, the resource and scope", () => {
    const s = server({ parentSpanId: "b7ad6b7169203331", tracestate: "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE" });
    const d = decode(format, encode([s, attempt(s)]));
    expect(d.resourceSpans).toHaveLength(1);
    expect(attrs(d.resourceSpans[0]!.resource.attributes)).toEqual({ "service.name": "edge-gateway" });
    const ss = d.resourceSpans[0]!.scopeSpans;
    expect(ss).toHaveLength(1);
    expect(ss[0]!.scope.name).toBe("dojang");
    const [sv, cl] = ss[0]!.spans;
    expect(sv).toMatchObject({
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
      spanId: "00f067aa0ba902b7",
      parentSpanId: "b7ad6b7169203331",
      traceState: "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
      flags: 0x301, // sampled; the parent is known to be remote
      name: "test.Echo/Unary",
      kind: 2,
      startTimeUnixNano: nanos(T0),
      endTimeUnixNano: nanos(T0 + 12.5),
    });
    expect(sv!.status?.code ?? 0).toBe(0);
    expect(attrs(sv!.attributes)).toEqual({
      "rpc.system": "grpc",
      "rpc.service": "test.Echo",
      "rpc.method": "Unary",
      "client.address": "127.0.0.1",
      "rpc.grpc.status_code": 0,
      "dojang.decided_by": "upstream",
      "dojang.request_id": "r-1",
      "dojang.attempts": 1,
      "dojang.route": "prefix:/",
      "dojang.budget_in_ms": 1000,
      "dojang.budget_out_ms": 999.5,
    });
    expect(cl).toMatchObject({
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
      spanId: "a3ce929d0e0e4736",
      parentSpanId: "00f067aa0ba902b7",
      traceState: "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
      flags: 0x101, // sampled; the parent is known to be local
      name: "test.Echo/Unary",
      kind: 3,
      startTimeUnixNano: nanos(T0 + 0.5),
      endTimeUnixNano: nanos(T0 + 12.5),
    });
    expect(attrs(cl!.attributes)).toEqual({
      "rpc.system": "grpc",
      "rpc.service": "test.Echo",
      "rpc.method": "Unary",
      "dojang.attempt": 1,
      "server.address": "::1",
      "server.port": 50051,
      "dojang.grpc_timeout": "999m",
      "rpc.grpc.status_code": 0,
    });
  });

  it("error statuses, fault lists, a root span, an attempt without a status, and a path that is not a gRPC method", () => {
    const s = server({ method: new MethodSpans("/healthz", undefined, undefined) }, { code: 14, message: "injected", decidedBy: "fault", faults: ["down", "slow"], faultKinds: ["abort", "delay"], route: undefined, budgetInMs: undefined, budgetOutMs: undefined });
    const a = attempt(s, { code: -1, statusMessage: "no status: no stream reached the upstream", grpcTimeout: undefined });
    const d = decode(format, encode([a, s]));
    const [cl, sv] = d.resourceSpans[0]!.scopeSpans[0]!.spans;
    expect(sv!.parentSpanId ?? "").toBe("");
    expect(sv!.flags).toBe(0x101);
    expect(sv!.name).toBe("/healthz");
    expect(sv!.status).toEqual({ code: 2, message: "UNAVAILABLE: injected" });
    expect(attrs(sv!.attributes)).toEqual({
      "rpc.system": "grpc",
      "client.address": "127.0.0.1",
      "rpc.grpc.status_code": 14,
      "dojang.decided_by": "fault",
      "dojang.request_id": "r-1",
      "dojang.attempts": 1,
      "dojang.faults": ["down", "slow"],
      "dojang.fault_kinds": ["abort", "delay"],
    });
    expect(cl!.status).toEqual({ code: 2, message: "no status: no stream reached the upstream" });
    expect(attrs(cl!.attributes)).not.toHaveProperty("rpc.grpc.status_code");
    expect(attrs(cl!.attributes)).not.toHaveProperty("dojang.grpc_timeout");
  });

  it("strings of any script and length (past one-byte lengths), and any timing, decode as written", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            requestId: fc.string({ unit: "binary", maxLength: 300 }),
            route: fc.string({ unit: "grapheme", maxLength: 80 }),
            faults: fc.array(fc.string({ unit: "binary", maxLength: 60 }), { maxLength: 12 }),
            start: fc.double({ min: 0, max: 1e10, noNaN: true }),
            took: fc.double({ min: 0, max: 1e7, noNaN: true }),
            budget: fc.oneof(fc.integer({ min: 0, max: 2 ** 40 }), fc.double({ min: 0, max: 1e9, noNaN: true })),
          }),
          { minLength: 1, maxLength: 8 },
        ),
        (cases) => {
          const spans = cases.map((c) => server({ start: c.start, end: c.start + c.took }, { requestId: c.requestId, route: c.route, faults: c.faults, budgetInMs: c.budget }));
          const got = decode(format, encode(spans)).resourceSpans[0]!.scopeSpans[0]!.spans;
          expect(got).toHaveLength(cases.length);
          cases.forEach((c, i) => {
            const a = attrs(got[i]!.attributes);
            // (a lone surrogate cannot be UTF-8: both encodings write U+FFFD for it, as Buffer does)
            const utf8 = (x: string) => Buffer.from(x, "utf8").toString("utf8");
            expect(a["dojang.request_id"]).toBe(utf8(c.requestId));
            expect(a["dojang.route"]).toBe(utf8(c.route));
            expect(a["dojang.faults"] ?? []).toEqual(c.faults.map(utf8));
            expect(a["dojang.budget_in_ms"]).toBe(c.budget);
            expect(got[i]!.startTimeUnixNano).toBe(nanos(c.start));
            expect(got[i]!.endTimeUnixNano).toBe(nanos(c.start + c.took));
          });
        },
      ),
      { numRuns: 25 },
    );
  }, 120_000);

  it("512 spans in one batch (the batch bound): every one decodes, in order", () => {
    const spans: SpanData[] = [];
    for (let i = 0; i < 256; i++) {
      const s = server({ spanId: i.toString(16).padStart(16, "1") });
      spans.push(attempt(s, { n: i + 1 }), s);
    }
    const got = decode(format, encode(spans)).resourceSpans[0]!.scopeSpans[0]!.spans;
    expect(got).toHaveLength(512);
    expect(got.filter((s) => s.kind === 3).map((s) => Number(attrs(s.attributes)["dojang.attempt"]))).toEqual(Array.from({ length: 256 }, (_, i) => i + 1));
    expect(got.filter((s) => s.kind === 2).map((s) => s.spanId)).toEqual(Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(16, "1")));
  });
});

describe("OTLP/gRPC's message: the same ExportTraceServiceRequest behind gRPC's 5-byte prefix", () => {
  it("flag 0 (uncompressed), the big-endian length of what follows, and what follows decodes as the OTLP/HTTP body does", () => {
    const s = server();
    const bare = encodeProtobuf(new PbWriter(64), head, [s, attempt(s)]);
    const framed = encodeProtobuf(new PbWriter(64), head, [s, attempt(s)], true);
    expect(framed.length).toBe(bare.length + 5);
    expect(framed[0]).toBe(0);
    expect(framed.readUInt32BE(1)).toBe(bare.length);
    expect(framed.subarray(5).equals(bare)).toBe(true);
    expect(decode("protobuf", framed.subarray(5)).resourceSpans[0]!.scopeSpans[0]!.spans.map((x) => x.kind)).toEqual([2, 3]);
  });
});

describe("OTLP/HTTP's transport refuses protocol grpc", () => {
  it("made for a grpc config (whose batches must go as gRPC calls), it throws instead of POSTing them where none would be taken", () => {
    const cfg = { endpoint: "http://127.0.0.1:4317/", serviceName: "dojang", sampleRatio: 1, maxQueueSize: 2048, exportIntervalMs: 5000, exportTimeoutMs: 10_000, protocol: "grpc" as const };
    expect(() => new HttpTransport(cfg)).toThrow(/tracing\.protocol grpc needs the OTLP\/gRPC transport/);
    expect(() => new HttpTransport({ ...cfg, endpoint: "http://127.0.0.1:4318/v1/traces", protocol: "http/protobuf" }).close()).not.toThrow();
  });
});

describe("unixTime: performance.now() milliseconds as Unix time", () => {
  it("counts from performance.timeOrigin, to the nanosecond", () => {
    const [s, ns] = unixTime(0);
    expect(Math.abs(s * 1000 + ns / 1e6 - performance.timeOrigin)).toBeLessThan(0.001);
    const [s2, ns2] = unixTime(1500.000001);
    expect(BigInt(s2) * 1_000_000_000n + BigInt(ns2) - (BigInt(s) * 1_000_000_000n + BigInt(ns))).toBe(1_500_000_001n);
    expect(ns2).toBeLessThan(1e9);
  });
});
