// Summarises one --cpu-prof profile over the last FRACTION of its wall time (the measured calls,
// not start-up): busy time by owner and the top functions (docs/contributing/cpu-profile.md).
//   node bench/cpu-prof-window.mjs DIR [FRACTION=0.5] [TOP=25]
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
const [dir, fracS] = process.argv.slice(2);
const frac = Number(fracS ?? 0.5);
const f = readdirSync(dir).find((x) => x.endsWith(".cpuprofile"));
const prof = JSON.parse(readFileSync(join(dir, f), "utf8"));
const nodes = new Map(prof.nodes.map((n) => [n.id, n]));
const area = (fn, url) => {
  if (fn === "(garbage collector)") return "GC";
  if (fn === "(program)") return "(program): native C++ (nghttp2, node, V8, libuv) and syscalls";
  if (fn === "(idle)") return "(idle)";
  if (url === "") return "V8 builtins / native functions called from JS";
  if (/node:internal\/http2|node:http2/.test(url)) return "node:http2 JS layer";
  if (/node:internal\/(streams|stream_base_commons)|node:stream/.test(url)) return "node streams";
  if (/node:internal\/(timers|process\/task_queues)|node:timers/.test(url)) return "node timers / nextTick / microtasks";
  if (/node:internal\/(event_target|events)|node:events/.test(url)) return "node events";
  if (/node:async_hooks|node:internal\/util$|node:internal\/async_hooks/.test(url)) return "node async_hooks (request() bind)";
  if (url.startsWith("node:")) return "node (other)";
  if (url.includes("/dist/") || url.includes("naive-proxy")) return "proxy's own code";
  return "other: " + url;
};
let t = prof.startTime;
const t0 = prof.startTime + (prof.endTime - prof.startTime) * (1 - frac);
const by = new Map(); const byFn = new Map(); let busy = 0, idle = 0;
for (let i = 0; i < prof.samples.length; i++) {
  t += prof.timeDeltas[i];
  if (t < t0) continue;
  const dt = prof.timeDeltas[i + 1] ?? 0;
  const n = nodes.get(prof.samples[i]); const cf = n.callFrame;
  const a = area(cf.functionName, cf.url);
  if (a === "(idle)") { idle += dt; continue; }
  busy += dt; by.set(a, (by.get(a) ?? 0) + dt);
  const k = (cf.functionName || "(anon)") + " " + cf.url.replace(/^.*\/(dist|lib)\//, "$1/") + ":" + (cf.lineNumber + 1);
  byFn.set(k, (byFn.get(k) ?? 0) + dt);
}
console.log(`${dir}: window = last ${frac * 100}% of wall time, busy ${(busy / 1e6).toFixed(2)} s, idle ${(idle / 1e6).toFixed(2)} s`);
for (const [k, v] of [...by].sort((a, b) => b[1] - a[1])) console.log(`${(v / busy * 100).toFixed(1).padStart(5)} %  ${k}`);
console.log("top functions:");
for (const [k, v] of [...byFn].sort((a, b) => b[1] - a[1]).slice(0, Number(process.argv[4] ?? 25))) console.log(`${(v / busy * 100).toFixed(1).padStart(5)} %  ${k}`);
