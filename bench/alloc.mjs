// What one unary call costs dojang inside: V8 heap bytes allocated per call, event-loop turns
// per call, CPU per call, and (with --profile) which functions allocate. Runs a fixed number of
// 100 B unary calls through a dojang process (dist/ of this checkout, and with --alt-dist a
// second build for an A/B table), after a warm-up, with a probe preloaded into dojang
// (lib/alloc-probe.mjs, node --import) that measures between two SIGWINCH signals.
//
//   node bench/alloc.mjs                                 # c1 and 10x10, 20,000 calls each
//   node bench/alloc.mjs --alt-dist .bench-alt-dist      # before (alt) / after (dist) table
//   node bench/alloc.mjs --profile --shapes c1           # + the top allocating functions
//
// Loopback only; every process it starts is stopped by pid; a hard stop ends a run that hangs.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { UNARY_PATH, connect, frame, grpcRequestHeaders, waitConnect } from "./lib/grpc.mjs";
import { freePort } from "./lib/peers.mjs";
import { startFastUpstream, waitPort } from "./lib/standalone.mjs";

const REPO = resolve(fileURLToPath(new URL("..", import.meta.url)));
const PROBE = fileURLToPath(new URL("./lib/alloc-probe.mjs", import.meta.url));

const { values: a } = parseArgs({
  options: {
    calls: { type: "string", default: "20000" },
    warmup: { type: "string", default: "5000" },
    shapes: { type: "string", default: "c1,10x10" },
    "alt-dist": { type: "string" },
    profile: { type: "boolean", default: false },
    survivors: { type: "boolean", default: false },
    top: { type: "string", default: "20" },
    "node-args": { type: "string", default: "" },
    "grpc-timeout": { type: "string" },
    out: { type: "string" },
    "max-minutes": { type: "string", default: "10" },
    help: { type: "boolean", default: false },
  },
});
if (a.help) {
  console.log(`usage: node bench/alloc.mjs [--calls N] [--warmup N] [--shapes c1,10x10] [--alt-dist DIR]
       [--profile] [--top N] [--node-args "..."] [--grpc-timeout 5S] [--out DIR] [--max-minutes M]
  --alt-dist DIR  a second build (a copy of dist/ inside the repo): measured first, as "before"
  --survivors     as --profile, but only the objects that outlived a young-generation GC (those
                  V8 promotes to the old space, live or collected by a later major GC): what
                  makes the old space grow under load
  --profile       V8 sampling heap profile over the window (objects collected later included):
                  the top allocating functions, bytes per call (slower: measure bytes without it)
  --grpc-timeout  send this grpc-timeout with every call (a deadline timer per call in dojang)
  --out DIR       also write result.json and result.md there`);
  process.exit(0);
}
const CALLS = Number(a.calls);
const WARMUP = Number(a.warmup);
const SHAPES = a.shapes.split(",").filter(Boolean);
for (const s of SHAPES) if (s !== "c1" && !/^\d+x\d+$/.test(s)) throw new Error(`--shapes: ${s} is neither c1 nor CONNSxSTREAMS`);
const hardStop = setTimeout(() => {
  console.error(`alloc.mjs: hard stop after ${a["max-minutes"]} min`);
  cleanup();
  process.exit(3);
}, Number(a["max-minutes"]) * 60_000);
hardStop.unref();

const children = [];
const tmp = mkdtempSync(join(tmpdir(), "dojang-alloc-"));
function cleanup() {
  for (const p of children) if (p.exitCode === null && p.signalCode === null) p.kill("SIGTERM");
  rmSync(tmp, { recursive: true, force: true });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function httpGet(url) {
  return new Promise((res, rej) => {
    const req = http.get(url, (r) => {
      r.resume();
      r.on("end", () => res(r.statusCode));
    });
    req.setTimeout(2000, () => req.destroy(new Error("timeout")));
    req.on("error", rej);
  });
}

/** Starts dojang from `dist` with the probe preloaded; { p, port, out }. */
async function startDojang(name, dist, upstreamPort) {
  const port = await freePort();
  const admin = await freePort();
  const dir = join(tmp, name);
  mkdirSync(dir);
  const cfg = {
    admin: { address: `127.0.0.1:${admin}` },
    drainTimeout: "1s",
    logLevel: "warn",
    accessLog: false,
    listeners: [{ name: "main", address: `127.0.0.1:${port}`, routes: [{ match: { prefix: "/" }, cluster: "backend" }] }],
    clusters: [{ name: "backend", endpoints: [`127.0.0.1:${upstreamPort}`] }],
  };
  const cfgFile = join(dir, "dojang.yaml");
  writeFileSync(cfgFile, JSON.stringify(cfg, null, 2)); // JSON is YAML
  const out = join(dir, "probe.json");
  const nodeArgs = a["node-args"].split(" ").filter(Boolean);
  const p = spawn(process.execPath, [...nodeArgs, "--import", PROBE, join(dist, "cli.js"), "--config", cfgFile], {
    stdio: ["ignore", "ignore", "inherit"],
    cwd: REPO,
    env: { ...process.env, DOJANG_ALLOC_OUT: out, DOJANG_ALLOC_SAMPLE: a.profile || a.survivors ? "1" : "0", DOJANG_ALLOC_SURVIVORS: a.survivors ? "1" : "0" },
  });
  children.push(p);
  await waitPort(port);
  for (let i = 0; i < 100; i++) {
    if ((await httpGet(`http://127.0.0.1:${admin}/ready`).catch(() => 0)) === 200) break;
    await sleep(50);
  }
  return { p, port, out };
}

const BODY = frame(100);

/** One unary call on `s`; resolves when its trailers say grpc-status 0 and the echo is whole. */
function unary(s, headers) {
  return new Promise((res, rej) => {
    const req = s.request(headers, { endStream: false });
    let len = 0;
    let gs;
    req.on("data", (c) => (len += c.length));
    req.on("trailers", (t) => (gs = t["grpc-status"]));
    req.on("response", (h) => {
      if (h["grpc-status"] !== undefined) gs = h["grpc-status"];
    });
    req.on("error", rej);
    req.on("close", () => (gs === "0" && len === BODY.length ? res() : rej(new Error(`call failed: grpc-status ${gs}, ${len} bytes`))));
    req.end(BODY);
  });
}

/** `n` calls: c1 = one after another on one connection; CxS = C connections × S streams each. */
async function load(port, shape, n) {
  const url = `http://127.0.0.1:${port}`;
  const headers = grpcRequestHeaders(UNARY_PATH, `127.0.0.1:${port}`, a["grpc-timeout"] === undefined ? {} : { "grpc-timeout": a["grpc-timeout"] });
  const [conns, streams] = shape === "c1" ? [1, 1] : shape.split("x").map(Number);
  const sessions = [];
  for (let i = 0; i < conns; i++) {
    const s = connect(url);
    await waitConnect(s);
    sessions.push(s);
  }
  let left = n;
  const worker = async (s) => {
    while (left > 0) {
      left--;
      await unary(s, headers);
    }
  };
  const t0 = performance.now();
  const ws = [];
  for (const s of sessions) for (let j = 0; j < streams; j++) ws.push(worker(s));
  await Promise.all(ws);
  const ms = performance.now() - t0;
  for (const s of sessions) s.close();
  return ms;
}

async function waitFile(f, ms) {
  for (let i = 0; i < ms / 10; i++) {
    if (existsSync(f)) return;
    await sleep(10);
  }
  throw new Error(`${f} never written`);
}

/** One measured window on a running dojang: warm-up, SIGWINCH, the calls, SIGWINCH, the probe's result. */
async function measure(d, shape) {
  await load(d.port, shape, WARMUP);
  await sleep(200);
  rmSync(d.out, { force: true });
  rmSync(d.out + ".started", { force: true });
  d.p.kill("SIGWINCH");
  await waitFile(d.out + ".started", 5000);
  const ms = await load(d.port, shape, CALLS);
  d.p.kill("SIGWINCH");
  await waitFile(d.out, 60_000);
  const r = JSON.parse(readFileSync(d.out, "utf8"));
  if (r.error) throw new Error(`probe: ${r.error}`);
  r.calls = CALLS;
  r.clientMs = ms;
  return r;
}

const builds = [];
if (a["alt-dist"] !== undefined) {
  const alt = resolve(a["alt-dist"]);
  if (!existsSync(join(alt, "cli.js"))) throw new Error(`--alt-dist ${alt}: no cli.js there`);
  builds.push({ name: "before", label: relative(REPO, alt) || ".", dist: alt });
}
builds.push({ name: builds.length > 0 ? "after" : "dojang", label: "dist", dist: join(REPO, "dist") });

const per = (x, n) => x / n;

/** Where an allocating function lives (its "name place" key from the probe). */
function area(key) {
  const at = key.slice(key.lastIndexOf(" ") + 1);
  if (at.startsWith("node:internal/http2")) return "node:http2 (JS side)";
  if (at.startsWith("node:internal/streams") || at.startsWith("node:internal/stream_base")) return "node streams";
  if (/^node:(internal\/)?(timers|process\/task_queues)/.test(at)) return "node timers, immediates, nextTick";
  if (at.startsWith("node:async_hooks") || at.startsWith("node:internal/util")) return "node async_hooks (AsyncResource.bind in http2 request())";
  if (at.startsWith("node:")) return "node (other)";
  if (at.startsWith("src/")) return "dojang (src/)";
  if (at.startsWith("node_modules/")) return at.split("/").slice(0, 2).join("/");
  if (at.includes("alloc-probe")) return "the probe itself";
  return "native / V8 builtins (no script)";
}
const fmt = (x, d = 0) => x.toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: d });

const results = [];
try {
  const up = await startFastUpstream();
  children.push(up.p);
  for (const b of builds) {
    for (const shape of SHAPES) {
      // a fresh process per shape, so one shape's warm heap does not carry into the next
      const d = await startDojang(`${b.name}-${shape}`, b.dist, up.port);
      const r = await measure(d, shape);
      d.p.kill("SIGTERM");
      results.push({ build: b.name, dist: b.label, shape, ...r });
      console.error(`${b.name} ${shape}: ${fmt(per(r.allocatedBytes, CALLS))} B/call, ${fmt(per(r.loopTurns, CALLS), 2)} turns/call`);
    }
  }
} finally {
  cleanup();
}

const lines = [];
lines.push(`# bench/alloc.mjs — ${new Date().toISOString()}`, "");
lines.push(`- node ${process.version}; ${CALLS.toLocaleString("en-US")} unary calls of 100 B per window after ${WARMUP.toLocaleString("en-US")} warm-up calls, a fresh dojang per row (logLevel warn, accessLog false)`);
lines.push(`- builds: ${builds.map((b) => `${b.name} = ${b.label}`).join(", ")}${a["node-args"] ? `; node ${a["node-args"]}` : ""}${a["grpc-timeout"] ? `; grpc-timeout ${a["grpc-timeout"]} on every call` : ""}${a.profile ? "; with the sampling heap profiler on (CPU figures inflated)" : ""}`);
lines.push("- B/call: V8 heap growth between GCs summed over the window ÷ calls (off-heap Buffers not included); turns/call: libuv loop iterations ÷ calls; events/call: libuv events handed out ÷ calls", "");
lines.push("| shape | build | B/call | turns/call | events/call | CPU µs/call | GCs | GC ms | calls/s (client) |");
lines.push("|---|---|---:|---:|---:|---:|---:|---:|---:|");
for (const r of results) {
  lines.push(
    `| ${r.shape} | ${r.build} | ${fmt(per(r.allocatedBytes, r.calls))} | ${fmt(per(r.loopTurns, r.calls), 2)} | ${fmt(per(r.events, r.calls), 2)} | ${fmt(per(r.cpuUs, r.calls), 1)} | ${r.gcs} | ${fmt(r.gcMs, 1)} | ${fmt(r.calls / (r.clientMs / 1000))} |`,
  );
}
if (builds.length === 2) {
  lines.push("", "| shape | B/call before → after | turns/call before → after | CPU µs/call before → after |", "|---|---:|---:|---:|");
  for (const shape of SHAPES) {
    const b = results.find((r) => r.build === "before" && r.shape === shape);
    const f = results.find((r) => r.build === "after" && r.shape === shape);
    if (!b || !f) continue;
    const pct = (x, y) => `${y >= x ? "+" : ""}${fmt(((y - x) / x) * 100, 0)} %`;
    lines.push(
      `| ${shape} | ${fmt(per(b.allocatedBytes, b.calls))} → ${fmt(per(f.allocatedBytes, f.calls))} (${pct(b.allocatedBytes, f.allocatedBytes)}) | ${fmt(per(b.loopTurns, b.calls), 2)} → ${fmt(per(f.loopTurns, f.calls), 2)} | ${fmt(per(b.cpuUs, b.calls), 1)} → ${fmt(per(f.cpuUs, f.calls), 1)} |`,
    );
  }
}
if (a.profile || a.survivors) {
  const top = Number(a.top);
  for (const r of results) {
    lines.push("", `## ${r.build} ${r.shape}: top allocating functions (sampled ${fmt(per(r.sampledBytes, r.calls))} B/call)`, "");
    const areas = new Map();
    for (const [k, v] of Object.entries(r.byFunction)) areas.set(area(k), (areas.get(area(k)) ?? 0) + v);
    lines.push("| B/call | allocated in |", "|---:|---|");
    for (const [k, v] of [...areas].sort((x, y) => y[1] - x[1])) lines.push(`| ${fmt(per(v, r.calls))} | ${k} |`);
    lines.push("");
    lines.push("| B/call | function (and its two nearest callers) |", "|---:|---|");
    const rows = Object.entries(r.byStack).sort((x, y) => y[1] - x[1]).slice(0, top);
    for (const [k, v] of rows) lines.push(`| ${fmt(per(v, r.calls))} | ${k.replaceAll("|", "\\|")} |`);
  }
}
const md = lines.join("\n") + "\n";
console.log(md);
if (a.out !== undefined) {
  mkdirSync(a.out, { recursive: true });
  writeFileSync(join(a.out, "result.md"), md);
  writeFileSync(join(a.out, "result.json"), JSON.stringify(results.map(({ byFunction, byStack, ...r }) => r), null, 2) + "\n");
}
process.exit(0);
