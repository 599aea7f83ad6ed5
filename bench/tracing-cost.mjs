// The CPU one call's tracing costs in dojang's own code and the OpenTelemetry SDK, without the
// proxy around it (bench/run.mjs measures the whole proxy, on a shared machine too noisy to see a
// few µs): Tracing.begin() + attemptStart() + end() per call, as a call runs them, at a given
// sampleRatio, exporting to `--endpoint` (start an OTLP receiver there first, e.g.
// `.engines/bin/otelsink -http 127.0.0.1:14318 ...`), with the export's own work (serializing,
// sending) counted, since it runs in the same process. Needs `npm run build` (dist/).
//   node bench/tracing-cost.mjs [--ratio 1] [--calls 200000] [--rate 5000] [--endpoint http://127.0.0.1:14318/v1/traces]
import { parseArgs } from "node:util";
import client from "prom-client";
import pino from "pino";
import { Tracing } from "../dist/proxy/observe/tracing.js";

const { values: a } = parseArgs({ options: { ratio: { type: "string", default: "1" }, calls: { type: "string", default: "200000" }, endpoint: { type: "string", default: "http://127.0.0.1:14318/v1/traces" }, rate: { type: "string", default: "5000" } } });
const ratio = Number(a.ratio);
const calls = Number(a.calls);
const registry = new client.Registry();
const t = new Tracing({ endpoint: a.endpoint, serviceName: "bench", sampleRatio: ratio, maxQueueSize: 100_000, exportIntervalMs: 200, exportTimeoutMs: 10_000, protocol: process.env.BENCH_PROTOCOL ?? "http/protobuf" }, registry, pino({ level: process.env.BENCH_LOG ?? "silent" }, pino.destination(2)));
const headers = { ":path": "/test.Echo/Unary", "content-type": "application/grpc" };
const facts = { code: 0, message: undefined, decidedBy: "upstream", route: "prefix:/", requestId: "r", attempts: 1, budgetInMs: 1000, budgetOutMs: 1000, faults: undefined, faultKinds: undefined };

function run(n) {
  for (let i = 0; i < n; i++) {
    const ct = t.begin(headers, "/test.Echo/Unary", performance.now(), "127.0.0.1");
    const head = { ":path": "/test.Echo/Unary", "grpc-timeout": "1000m" };
    t.attemptStart(ct, 1, "127.0.0.1", 50051, head);
    t.end(ct, facts);
  }
}
// at most --rate calls a second (slices of rate/100 calls, 10 ms apart), so the batch exports run
// between them as they would between a proxy's calls (waiting costs no CPU)
const slice = Math.max(1, Math.round(Number(a.rate) / 100));
async function paced(n) {
  for (let done = 0; done < n; done += slice) {
    run(slice);
    await new Promise((r) => setTimeout(r, 10));
  }
}
await paced(Math.min(10_000, calls)); // warm-up
await t.flush();
const c0 = process.cpuUsage();
const w0 = performance.now();
await paced(calls);
await t.flush();
const c1 = process.cpuUsage(c0);
const wall = performance.now() - w0;
const m = await registry.getSingleMetricAsString("dojang_trace_spans_dropped_total");
const ex = await registry.getSingleMetricAsString("dojang_trace_spans_exported_total");
console.log(JSON.stringify({ ratio, calls, cpuUsPerCall: +((c1.user + c1.system) / calls).toFixed(2), wallMs: Math.round(wall), exported: ex.split("\n").at(-1), dropped: m.split("\n").filter((l) => l.startsWith("dojang_")) }));
await t.shutdown(2000);
