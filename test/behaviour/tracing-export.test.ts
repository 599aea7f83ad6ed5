// tracing.exportInterval and tracing.exportTimeout shown doing what they say, judged from outside
// dojang: by the trace backend (test/engines/otelsink, the OpenTelemetry Collector's OTLP receiver:
// when a call's spans arrive) and by a collector that takes the export and never answers (when
// dojang gives the connection up). Each has a control with another value of the key, run at the
// same time, so what is measured is the key's doing and not a default's.
import * as grpc from "@grpc/grpc-js";
import { createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { echoClient, sample, scrape, startGrpcServer, startProxy, unary, type GrpcServer } from "../helpers/peers.js";
import { startOtelSink } from "../helpers/otelsink.js";
import { sleep, waitFor } from "../helpers/process.js";
import type { DojangHandle } from "../../src/index.js";

/** a loaded 2-core machine: timers fire late and a process may wait for a CPU */
const LATE_MS = 1500;

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => {});
});

async function echoUpstream(): Promise<GrpcServer> {
  const up = await startGrpcServer({ Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, call.request) });
  cleanups.push(() => up.close());
  return up;
}

async function proxy(upstream: string, tracing: Record<string, unknown>): Promise<DojangHandle> {
  const px = await startProxy(upstream, { top: { tracing: { sampleRatio: 1, ...tracing } } });
  cleanups.push(() => px.close(0));
  return px;
}

/** One call through `px`; its trace id (the traceparent dojang sent upstream names it) and when it started and ended. */
async function tracedCall(px: DojangHandle): Promise<{ traceId: string; start: number; end: number }> {
  const c = echoClient(px.address);
  cleanups.push(async () => c.close());
  const start = performance.now();
  const r = await unary(c, Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 10_000 });
  const end = performance.now();
  expect(r.err).toBeNull();
  await waitFor("the access record", () => (px.calls.length > 0 ? true : undefined), 5000);
  const traceId = px.calls.at(-1)!.trace_id!;
  expect(traceId).toMatch(/^[0-9a-f]{32}$/);
  return { traceId, start, end };
}

describe("tracing.exportInterval: the longest an ended span waits before its batch is sent", () => {
  it("200ms: a call's two spans reach the backend within the interval; 3s (the control): not before 3 s", async () => {
    const sink = await startOtelSink();
    const up = await echoUpstream();
    const fast = await proxy(up.address, { endpoint: sink.otlpHttp, exportInterval: "200ms" });
    const slow = await proxy(up.address, { endpoint: sink.otlpHttp, exportInterval: "3s" });
    const arrived = async (traceId: string, from: number): Promise<number> => {
      await waitFor(`the spans of ${traceId}`, async () => ((await sink.spansOf(traceId)) >= 2 ? true : undefined), 20_000, 20);
      return performance.now() - from;
    };
    const f = await tracedCall(fast);
    const fastArrived = arrived(f.traceId, f.end); // watched from now on, while the control's call runs
    const s = await tracedCall(slow);
    const [fastAfter, slowAfter] = await Promise.all([fastArrived, arrived(s.traceId, s.start)]);
    // the batch's timer starts when the first span ends (before the call's end): at most the interval after it
    expect(fastAfter).toBeLessThan(200 + LATE_MS);
    // and never before the interval: the first span ended after the call started
    expect(slowAfter).toBeGreaterThanOrEqual(3000);
    expect(await sink.spansOf(f.traceId)).toBe(2);
    expect(await sink.spansOf(s.traceId)).toBe(2);
  }, 60_000);
});

describe("tracing.exportTimeout: one export may take this long; then it is given up and its spans counted", () => {
  it("400ms: the collector that never answers sees the connection closed after it, and the call's 2 spans count as export_failed; 10s (the control) still holds its export", async () => {
    // a collector that takes the connection and the request, and never answers
    const held: { at: number; closedAt?: number; port: number }[] = [];
    const sockets: Socket[] = [];
    const silent: Server = createServer((sock) => {
      sockets.push(sock);
      sock.on("error", () => {});
      let h: { at: number; closedAt?: number; port: number } | undefined;
      sock.on("data", () => {
        if (h === undefined) held.push((h = { at: performance.now(), port: sock.remotePort! }));
      });
      sock.once("close", () => {
        if (h !== undefined) h.closedAt = performance.now();
      });
    });
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    cleanups.push(async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => silent.close(() => r()));
    });
    const endpoint = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/v1/traces`;
    const up = await echoUpstream();
    const quick = await proxy(up.address, { endpoint, exportInterval: "20ms", exportTimeout: "400ms" });
    const patient = await proxy(up.address, { endpoint, exportInterval: "20ms", exportTimeout: "10s" });

    const failed = async (px: DojangHandle) => sample(await scrape(px.adminAddress), "dojang_trace_spans_dropped_total", { reason: "export_failed" });
    const q = await tracedCall(quick);
    await waitFor("the quick proxy's export to be given up", async () => ((await failed(quick)) > 0 ? true : undefined), 20_000, 20);
    const givenUpAfter = performance.now() - q.start;
    expect(await failed(quick)).toBe(2); // the call's SERVER and CLIENT spans
    // its timer starts with the export, after the call started: not before 400 ms
    expect(givenUpAfter).toBeGreaterThanOrEqual(400);
    // the collector saw the request and, within the timeout (and a loaded machine's lateness), the close
    await waitFor("the first held export's connection to close", () => (held.some((h) => h.closedAt !== undefined) ? true : undefined), 10_000, 10);
    const closed = held.find((h) => h.closedAt !== undefined)!;
    expect(closed.closedAt! - closed.at).toBeLessThan(400 + LATE_MS);

    // the control: the same silent collector, asked the same way with 10s, still waits
    const p = await tracedCall(patient);
    const mine = await waitFor("the patient proxy's export to reach the collector", () => held.find((h) => h.at > p.start), 10_000, 10);
    await sleep(Math.max(0, mine.at + 400 + LATE_MS + 100 - performance.now()));
    expect(mine.closedAt).toBeUndefined();
    expect(await failed(patient)).toBe(0);
    expect(p.traceId).not.toBe(q.traceId);
  }, 60_000);
});
