// The CPU the windowed stats (GET /stats; src/proxy/observe/windows.ts) cost one call, without the
// proxy around it (bench/run.mjs measures the whole proxy, on a shared machine too noisy to see a
// few ns): what call/record.ts's countWindows does per ended call (the status pair, the latency
// bin, and one add into each of three rows: method, route, endpoint), at a given call rate, the
// clock moving as it would (rows turn their second once a second). Needs `npm run build` (dist/).
//   node bench/stats-cost.mjs [--calls 5000000] [--rate 20000] [--methods 50]
// Prints ns per call and, beside dojang's CPU per call at 10×10 (--call-us, default 60 µs:
// docs/contributing/benchmarks.md), the share of it.
import { parseArgs } from "node:util";
import { Stats, pairIndex } from "../dist/proxy/observe/windows.js";
import { latencyBin, finishStats } from "../dist/proxy/observe/stats.js";

const { values: a } = parseArgs({ options: { calls: { type: "string", default: "5000000" }, rate: { type: "string", default: "20000" }, methods: { type: "string", default: "50" }, "call-us": { type: "string", default: "60" } } });
const calls = Number(a.calls);
const rate = Number(a.rate);
let clockMs = 0;
const st = new Stats(100, () => clockMs);
const methods = Array.from({ length: Number(a.methods) }, (_, i) => ({ service: "pkg.Svc", method: `M${i}`, statsRow: undefined }));
const route = { label: "prefix:/", statsRow: undefined };
const ep = { label: "127.0.0.1:50051", cluster: { name: "backend" }, statsRow: undefined };
const OK = pairIndex(0, "upstream");
const FAIL = pairIndex(14, "upstream_reset");

// exactly what countWindows does, one call
function count(i) {
  const end = clockMs;
  const sec = Math.floor(end / 1000);
  const pair = i % 50 === 0 ? FAIL : OK;
  const bin = latencyBin(((i * 7919) % 5000 + 200) * 1000 / 1000);
  const s = methods[i % methods.length];
  (s.statsRow ?? st.methodRow(s)).add(sec, pair, bin);
  (route.statsRow ?? st.routeRow(route, "main")).add(sec, pair, bin);
  (ep.statsRow ?? st.endpointRow(ep)).add(sec, pair, bin);
}
function run(from, n) {
  for (let i = from; i < from + n; i++) {
    clockMs = (i / rate) * 1000;
    count(i);
  }
}
// (the clock assignment is measured alone and subtracted: a call has its end time already)
function clockOnly(from, n) {
  let x = 0;
  for (let i = from; i < from + n; i++) {
    clockMs = (i / rate) * 1000;
    x += clockMs > 1e15 ? 1 : 0;
  }
  return x;
}
run(0, 200_000); // warm-up: rows allocated, JIT done
clockOnly(0, 200_000);
const t0 = process.cpuUsage();
run(200_000, calls);
const t1 = process.cpuUsage(t0);
const t2 = process.cpuUsage();
clockOnly(200_000, calls);
const t3 = process.cpuUsage(t2);
const ns = ((t1.user + t1.system - (t3.user + t3.system)) * 1000) / calls;
finishStats(st.read("10m")); // (the first read compiles the reading code)
const r0 = process.cpuUsage();
const view = finishStats(st.read("10m"));
const readUs = process.cpuUsage(r0);
const callUs = Number(a["call-us"]);
console.log(`windows: ${ns.toFixed(1)} ns per call (${calls} calls, ${rate}/s, ${methods.length} methods, 3 rows each)`);
console.log(`         ${((ns / 1000 / callUs) * 100).toFixed(3)} % of ${callUs} µs, dojang's CPU per call at 10×10`);
console.log(`GET /stats?window=10m with ${view.methods.length} method rows: ${((readUs.user + readUs.system) / 1000).toFixed(1)} ms (paid only when asked)`);
// warm: reading the rings, and turning them into the view (quantiles, sorting), each 20 times
{
  const a0 = process.cpuUsage();
  for (let i = 0; i < 20; i++) st.read("10m");
  const a1 = process.cpuUsage(a0);
  const raw = st.read("10m");
  const b0 = process.cpuUsage();
  for (let i = 0; i < 20; i++) finishStats(raw);
  const b1 = process.cpuUsage(b0);
  console.log(`         warm: reading the rings ${((a1.user + a1.system) / 20000).toFixed(2)} ms, the view ${((b1.user + b1.system) / 20000).toFixed(2)} ms`);
}
