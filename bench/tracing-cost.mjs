// What tracing costs, two ways (docs/contributing/benchmarks.md, Tracing). Needs `npm run build`
// (dist/) and `node scripts/engines.mjs` (.engines/bin/otelsink, the collector's OTLP receiver,
// which the bench starts on free ports and stops).
//
// --mode proxy (the default): the ratios, in one run. dojang processes side by side on the fast
// upstream: tracing off, on at each of --ratios (1 and 0.01; each `--protocols`), and with
// --base-dist DIR the same build before the change with tracing off (the plain path before/after)
// and, with --base-traced, on at the same --ratios. Every round runs --calls 100 B unary calls through
// each, in a rotated order (with --together: through all of them at once, each from its own
// connections, so that the machine's load falls on every process alike), and reads each
// process's CPU (every thread's time on a CPU, /proc/<pid>/task/*/schedstat, in ns) from its
// calls' start to its next round's (so the batches the export interval sends later are counted).
// The ratios are taken within a round (a round where the machine was busier counts for all shapes
// alike); their medians over rounds are
// printed with their spread (quartiles, extremes). Spans go to the real receiver.
//
//   node bench/tracing-cost.mjs [--base-dist DIR] [--base-traced [--base-protocol P]] [--together] [--threads] [--shape 10x10] [--ratios 1,0.01]
//        [--calls 3000] [--warmup 2000] [--rounds 7] [--protocols http/protobuf,http/json,grpc]
//
// --mode standalone: one Tracing without the proxy around it: begin() + attemptStart() + end()
// per call, paced at --rate calls/s so that the batch exports run between them, with the export's
// own work (encoding, sending) counted since it runs in the same process. --dist DIR measures
// another build's Tracing. Under callgrind (valgrind --tool=callgrind node bench/tracing-cost.mjs
// --mode standalone ...), two --calls give the instructions per call by difference.
//
//   node bench/tracing-cost.mjs --mode standalone [--ratio 1] [--calls 200000] [--warmup 2000] [--rate 5000] [--protocol http/protobuf]
//
// --mode parts: what a sampled call does on its own turn (begin, one attempt, end: two records
// filled and queued, nothing sent), in µs per call, and what encoding a batch of 512 of its spans
// costs, in µs per span, protobuf and JSON; five rounds each (medians are for the reader).
//
//   node bench/tracing-cost.mjs --mode parts [--ratio 1] [--calls 200000]
//
// (--ratio 0: an unsampled new trace's work: the decision and the traceparent it sends, no span record.)
//
// --mode header: a node:http2 client's CPU per unary request to the fast upstream, the head dojang
// sends (with its new x-request-id each request) without and with one `traceparent` more (a new
// value each request), and with it sent never-indexed (http2.sensitiveHeaders: no HPACK dynamic
// table entry), in rotated rounds: what propagating the decision costs the proxy's upstream side,
// sampled or not.
//
//   node bench/tracing-cost.mjs --mode header [--calls 4000] [--rounds 7]
//
// With --only without|with|withNeverIndexed, one variant alone (--warmup requests, then --calls):
// run it under valgrind's callgrind twice with two --calls and the difference is its instructions
// per request, load-independent (the floor the unsampled call's traceparent is judged against):
//   valgrind --tool=callgrind --callgrind-out-file=F node bench/tracing-cost.mjs --mode header --only with --warmup 3000 --calls 200
//
// Loopback only; every process it starts is stopped by pid; a hard stop ends a run that hangs.
import { spawn } from "node:child_process";
import { mkdtempSync, openSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { UNARY_PATH, connect, frame, grpcRequestHeaders, waitConnect } from "./lib/grpc.mjs";
import { freePort } from "./lib/peers.mjs";
import { cpuNs, cpuNsByThread } from "./lib/proc.mjs";
import { LAUNCHER_NODE_FLAGS, startFastUpstream, waitPort } from "./lib/standalone.mjs";

const REPO = resolve(fileURLToPath(new URL("..", import.meta.url)));
const { values: a } = parseArgs({
  options: {
    mode: { type: "string", default: "proxy" },
    // proxy mode
    "base-dist": { type: "string" },
    "base-traced": { type: "boolean", default: false },
    // with --base-traced: the base copy's tracing.protocol (left out: its default)
    "base-protocol": { type: "string" },
    shape: { type: "string", default: "10x10" },
    warmup: { type: "string", default: "2000" },
    rounds: { type: "string", default: "7" },
    protocols: { type: "string", default: "http/protobuf" },
    together: { type: "boolean", default: false },
    // also split each process's CPU by thread (the main thread, V8's workers, ...) and give the
    // main thread's ratios: work on the call's thread against work beside it (JIT, GC marking)
    threads: { type: "boolean", default: false },
    // the sampleRatios traced (0: every call unsampled, nothing exported)
    ratios: { type: "string", default: "1,0.01" },
    // node flags for every dojang, e.g. "--cpu-prof --cpu-prof-dir=DIR" (its pid is printed)
    "node-args": { type: "string", default: "" },
    // each dojang's stdout to <dir>/<name>.stdout (what --node-args' V8 traces print); else dropped
    "stdout-dir": { type: "string" },
    // both
    calls: { type: "string" },
    dist: { type: "string", default: join(REPO, "dist") },
    // standalone mode
    ratio: { type: "string", default: "1" },
    rate: { type: "string", default: "5000" },
    protocol: { type: "string", default: "http/protobuf" },
    endpoint: { type: "string" },
    // proxy mode, --protocols grpc with --endpoint: the collector's OTLP/gRPC origin
    "grpc-endpoint": { type: "string" },
    // header mode
    only: { type: "string" },
  },
});
const children = [];
const tmp = mkdtempSync(join(tmpdir(), "dojang-tracing-cost-"));
const hardStop = setTimeout(() => {
  console.error("tracing-cost.mjs: hard stop after 60 min");
  stopAll();
  process.exit(3);
}, 60 * 60_000);
hardStop.unref();
function stopAll() {
  for (const p of children) if (p.exitCode === null && p.signalCode === null) p.kill("SIGTERM");
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const median = (xs) => {
  const s = [...xs].sort((x, y) => x - y);
  return s.length % 2 === 1 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** The real OTLP receiver on free ports: its OTLP/HTTP traces URL (and in `sinkGrpc` its OTLP/gRPC origin). */
let sinkGrpc;
async function startSink() {
  const [g, h, api] = [await freePort(), await freePort(), await freePort()];
  const p = spawn(join(REPO, ".engines/bin/otelsink"), ["-grpc", `127.0.0.1:${g}`, "-http", `127.0.0.1:${h}`, "-api", `127.0.0.1:${api}`], { stdio: ["ignore", "pipe", "inherit"] });
  children.push(p);
  await new Promise((res, rej) => {
    let out = "";
    p.stdout.setEncoding("utf8").on("data", (d) => {
      out += d;
      if (out.includes("otelsink ready")) res();
    });
    p.on("exit", (c) => rej(new Error(`otelsink exited (${c})`)));
  });
  sinkGrpc = `http://127.0.0.1:${g}`;
  return `http://127.0.0.1:${h}/v1/traces`;
}

const BODY = frame(100);
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => (stopAll(), process.exit(130)));
try {
  if (a.mode === "standalone") await standalone();
  else if (a.mode === "parts") await parts();
  else if (a.mode === "header") await header();
  else if (a.mode === "proxy") await proxies();
  else throw new Error(`--mode ${a.mode}: proxy, standalone, parts or header`);
} catch (err) {
  console.error(err);
  process.exitCode = 1;
} finally {
  stopAll();
  rmSync(tmp, { recursive: true, force: true });
}
process.exit();

// === parts: a sampled call's work on its own turn, and a batch's encoding ===

async function parts() {
  const { default: client } = await import("prom-client");
  const { default: pino } = await import("pino");
  const dist = resolve(a.dist);
  const { Tracing } = await import(pathToFileURL(join(dist, "proxy/observe/tracing.js")).href);
  const o = await import(pathToFileURL(join(dist, "proxy/observe/otlp.js")).href);
  // (nothing is sent: the exporter's add() is replaced by one that keeps the last 512 spans)
  const cfg = { endpoint: "http://127.0.0.1:9/v1/traces", serviceName: "bench", sampleRatio: Number(a.ratio), maxQueueSize: 100_000, exportIntervalMs: 3_600_000, exportTimeoutMs: 10_000, protocol: "http/protobuf" };
  const t = new Tracing(cfg, new client.Registry(), pino({ level: "silent" }));
  let kept = [];
  let batch = [];
  t.exporter.add = (s) => {
    kept.push(s);
    if (kept.length === 512) [batch, kept] = [kept, []];
  };
  const headers = { ":path": UNARY_PATH, "content-type": "application/grpc" };
  const facts = { code: 0, message: undefined, decidedBy: "upstream", route: "prefix:/", requestId: "r", attempts: 1, budgetInMs: 1000, budgetOutMs: 999.5, faults: undefined, faultKinds: undefined };
  const N = Number(a.calls ?? 200_000);
  // the call's own work around the hooks (a head, a clock read, the facts), measured alone and taken off
  let sink = 0;
  const bare = (n) => {
    for (let i = 0; i < n; i++) {
      const head = { ":path": UNARY_PATH, "grpc-timeout": "1000m" };
      const f = { ...facts };
      sink += performance.now() + f.attempts + head[":path"].length;
    }
  };
  const traced = (n) => {
    for (let i = 0; i < n; i++) {
      const ct = t.begin(headers, UNARY_PATH, performance.now(), "127.0.0.1");
      const head = { ":path": UNARY_PATH, "grpc-timeout": "1000m" };
      t.attemptStart(ct, 1, "127.0.0.1", 50051, head);
      t.end(ct, { ...facts });
    }
  };
  const us = (f, n) => {
    const c0 = process.cpuUsage();
    f(n);
    const c = process.cpuUsage(c0);
    return (c.user + c.system) / n;
  };
  const out = { callTurnUsPerCall: [], protobufUsPerSpan: [], jsonUsPerSpan: [] };
  const head = new o.BatchHead("bench", "dojang");
  const w = new o.PbWriter(64 * 1024);
  for (let r = 0; r < 5; r++) {
    const b = us(bare, N);
    out.callTurnUsPerCall.push(+(us(traced, N) - b).toFixed(3));
    if (batch.length === 0) continue; // (--ratio 0: no span)
    out.protobufUsPerSpan.push(+(us((n) => { for (let i = 0; i < n; i++) o.encodeProtobuf(w, head, batch); }, 200) / batch.length).toFixed(3));
    out.jsonUsPerSpan.push(+(us((n) => { for (let i = 0; i < n; i++) o.encodeJson(head, batch); }, 50) / batch.length).toFixed(3));
  }
  if (batch.length === 0) return console.log(JSON.stringify(out), sink > 0 ? "" : "!");
  out.protobufBytesPerSpan = Math.round(o.encodeProtobuf(w, head, batch).length / batch.length);
  out.jsonBytesPerSpan = Math.round(o.encodeJson(head, batch).length / batch.length);
  console.log(JSON.stringify(out), sink > 0 ? "" : "!");
}

// === header: what one traceparent more costs a node:http2 client's request ===

async function header() {
  const { randomBytes } = await import("node:crypto");
  const { sensitiveHeaders } = await import("node:http2");
  const up = await startFastUpstream();
  children.push(up.p);
  const s = connect(`http://127.0.0.1:${up.port}`);
  await waitConnect(s, 10_000);
  // the head dojang sends upstream for the bench's calls: the client's fields, its grpc-timeout,
  // and the x-request-id dojang makes (new each call, as a traceparent is: both churn HPACK's
  // dynamic table, RFC 7541 §2.3.2, unless sent never-indexed)
  const base = grpcRequestHeaders(UNARY_PATH, `127.0.0.1:${up.port}`);
  // the values made beforehand (a new one per request, as a trace's are), so only the sending is measured
  const values = Array.from({ length: 50_000 }, () => `00-${randomBytes(16).toString("hex")}-${randomBytes(8).toString("hex")}-00`);
  const NEVER = [sensitiveHeaders, ["traceparent"]];
  let k = 0;
  let rid = 0;
  const one = (h) =>
    new Promise((res, rej) => {
      const r = s.request(h, { endStream: false });
      r.on("data", () => {});
      r.on("error", rej);
      r.on("close", res);
      r.end(BODY);
    });
  // variant 0: without; 1: with traceparent (indexed, as node sends a field by default); 2: with
  // it never-indexed (http2.sensitiveHeaders)
  const run = async (variant, n) => {
    const c0 = process.cpuUsage();
    for (let i = 0; i < n; i += 10) {
      const ps = [];
      for (let j = 0; j < 10; j++) {
        const h = { ...base, "grpc-timeout": "1000m", "x-request-id": `5f3a9c0d21e7-${(++rid).toString(36)}` };
        const v = values[k++ % values.length];
        if (variant > 0) h["traceparent"] = v;
        if (variant === 2) h[NEVER[0]] = NEVER[1];
        ps.push(one(h));
      }
      await Promise.all(ps);
    }
    const c = process.cpuUsage(c0);
    return (c.user + c.system) / n;
  };
  const n = Number(a.calls ?? 4000);
  const names = ["without", "with", "withNeverIndexed"];
  if (a.only !== undefined) {
    // one variant, for valgrind's callgrind: --warmup requests, then --calls more; two runs with
    // different --calls give the instructions per request by difference (bench/callgrind-diff.mjs)
    const v = names.indexOf(a.only);
    if (v < 0) throw new Error(`--only ${a.only}: ${names.join(", ")}`);
    await run(v, Number(a.warmup));
    await run(v, n);
    console.log(JSON.stringify({ only: a.only, warmup: Number(a.warmup), calls: n }));
    s.close();
    return;
  }
  const out = { without: [], with: [], withNeverIndexed: [] };
  for (let r = 0; r < Number(a.rounds); r++) {
    for (let i = 0; i < 3; i++) {
      const v = (i + r) % 3;
      out[names[v]].push(+(await run(v, n)).toFixed(1));
    }
  }
  const ratio = (x) => +median(out[x].map((v, i) => v / out.without[i])).toFixed(3);
  console.log(JSON.stringify({ usPerRequest: { without: median(out.without), with: median(out.with), withNeverIndexed: median(out.withNeverIndexed) }, ratio: ratio("with"), ratioNeverIndexed: ratio("withNeverIndexed"), raw: out }));
  s.close();
}

// === standalone: one Tracing, no proxy ===

async function standalone() {
  const { default: client } = await import("prom-client");
  const { default: pino } = await import("pino");
  const { Tracing } = await import(pathToFileURL(join(resolve(a.dist), "proxy/observe/tracing.js")).href);
  const endpoint = a.endpoint ?? (await startSink());
  const ratio = Number(a.ratio);
  const calls = Number(a.calls ?? 200_000);
  const registry = new client.Registry();
  const cfg = { endpoint, serviceName: "bench", sampleRatio: ratio, maxQueueSize: 100_000, exportIntervalMs: 200, exportTimeoutMs: 10_000, protocol: a.protocol };
  const t = new Tracing(cfg, registry, pino({ level: process.env.BENCH_LOG ?? "silent" }, pino.destination(2)));
  const headers = { ":path": UNARY_PATH, "content-type": "application/grpc" };
  const facts = { code: 0, message: undefined, decidedBy: "upstream", route: "prefix:/", requestId: "r", attempts: 1, budgetInMs: 1000, budgetOutMs: 1000, faults: undefined, faultKinds: undefined };
  const run = (n) => {
    for (let i = 0; i < n; i++) {
      const ct = t.begin(headers, UNARY_PATH, performance.now(), "127.0.0.1");
      const head = { ":path": UNARY_PATH, "grpc-timeout": "1000m" };
      t.attemptStart(ct, 1, "127.0.0.1", 50051, head);
      t.end(ct, { ...facts });
    }
  };
  // at most --rate calls a second (slices of rate/100 calls, 10 ms apart), so the batch exports
  // run between them as they would between a proxy's calls (waiting costs no CPU)
  const slice = Math.max(1, Math.round(Number(a.rate) / 100));
  const paced = async (n) => {
    for (let done = 0; done < n; done += slice) {
      run(slice);
      await sleep(10);
    }
  };
  await paced(Number(a.warmup)); // warm-up (the same for any --calls: callgrind's difference cancels it)
  await t.flush();
  const c0 = process.cpuUsage();
  const w0 = performance.now();
  await paced(calls);
  await t.flush();
  const c1 = process.cpuUsage(c0);
  const wall = performance.now() - w0;
  const metric = async (name) => (await registry.getSingleMetricAsString(name)).split("\n").filter((l) => l.startsWith("dojang_")).join("; ");
  console.log(JSON.stringify({ dist: a.dist, ratio, protocol: a.protocol, calls, cpuUsPerCall: +((c1.user + c1.system) / calls).toFixed(2), wallMs: Math.round(wall), exported: await metric("dojang_trace_spans_exported_total"), dropped: await metric("dojang_trace_spans_dropped_total") }));
  await t.shutdown(2000);
}

// === proxy: dojang processes side by side ===

/** CPU time of `pid` in µs, every thread's (lib/proc.mjs cpuNs: schedstat's ns, not /proc/<pid>/stat's 10 ms ticks). */
function cpuUs(pid) {
  return cpuNs(pid) / 1000;
}

async function startDojang(name, dist, upstreamPort, tracing) {
  const port = await freePort();
  const cfg = {
    drainTimeout: "1s",
    logLevel: "warn",
    accessLog: false,
    listeners: [{ name: "main", address: `127.0.0.1:${port}`, routes: [{ match: { prefix: "/" }, cluster: "backend" }] }],
    clusters: [{ name: "backend", endpoints: [`127.0.0.1:${upstreamPort}`] }],
    ...(tracing === null ? {} : { tracing }),
  };
  const file = join(tmp, `${name.replaceAll("/", "_")}.yaml`);
  writeFileSync(file, JSON.stringify(cfg)); // JSON is YAML
  // the launcher's own flags given here, so that it does not re-execute node (one process to read)
  const nodeArgs = a["node-args"] === "" ? [] : a["node-args"].split(" ");
  const out = a["stdout-dir"] === undefined ? "ignore" : openSync(join(a["stdout-dir"], `${name.replaceAll(/[/ ]/g, "_")}.stdout`), "w");
  const p = spawn(process.execPath, [...LAUNCHER_NODE_FLAGS, ...nodeArgs, join(resolve(dist), "cli.js"), "--config", file], { stdio: ["ignore", out, "inherit"], cwd: REPO, env: { ...process.env, DOJANG_MEMORY_PLAN: "" } });
  children.push(p);
  await waitPort(port);
  if (nodeArgs.length > 0) console.error(`${name}: pid ${p.pid}`);
  return { name, p, port };
}

function unary(s, headers) {
  return new Promise((res, rej) => {
    const req = s.request(headers, { endStream: false });
    let len = 0;
    let gs;
    req.on("data", (c) => (len += c.length));
    req.on("trailers", (t) => (gs = t["grpc-status"]));
    req.on("error", rej);
    req.on("close", () => (gs === "0" && len === BODY.length ? res() : rej(new Error(`call failed: grpc-status ${gs}, ${len} bytes`))));
    req.end(BODY);
  });
}

async function load(port, n) {
  const headers = grpcRequestHeaders(UNARY_PATH, `127.0.0.1:${port}`);
  const [conns, streams] = a.shape === "c1" ? [1, 1] : a.shape.split("x").map(Number);
  const sessions = [];
  for (let i = 0; i < conns; i++) {
    const s = connect(`http://127.0.0.1:${port}`);
    await waitConnect(s, 60_000);
    sessions.push(s);
  }
  let left = n;
  const worker = async (s) => {
    while (left > 0) {
      left--;
      await unary(s, headers);
    }
  };
  const ws = [];
  for (const s of sessions) for (let j = 0; j < streams; j++) ws.push(worker(s));
  await Promise.all(ws);
  for (const s of sessions) s.close();
}

async function proxies() {
  const calls = Number(a.calls ?? 3000);
  const rounds = Number(a.rounds);
  const endpoint = a.endpoint ?? (await startSink());
  const up = await startFastUpstream();
  children.push(up.p);
  // (exportInterval and maxQueueSize at their defaults: batches of 512 spans go as they fill)
  // (protocol grpc: the receiver's OTLP/gRPC origin, or --grpc-endpoint)
  const tr = (ratio, protocol) => ({ endpoint: protocol === "grpc" ? (a["grpc-endpoint"] ?? sinkGrpc) : endpoint, sampleRatio: ratio, protocol });
  // (the build before may not know a protocol: it gets one only with --base-protocol)
  const bp = a["base-protocol"];
  const trBase = (ratio) => (bp === undefined ? { endpoint, sampleRatio: ratio } : tr(ratio, bp));
  const shapes = [await startDojang("off", a.dist, up.port, null)];
  for (const proto of a.protocols.split(",")) {
    for (const r of a.ratios.split(",").map(Number)) shapes.push(await startDojang(`on-${r} ${proto}`, a.dist, up.port, tr(r, proto)));
  }
  if (a["base-dist"] !== undefined) {
    shapes.push(await startDojang("base off", a["base-dist"], up.port, null));
    if (a["base-traced"]) {
      for (const r of a.ratios.split(",").map(Number)) shapes.push(await startDojang(`base on-${r}`, a["base-dist"], up.port, trBase(r)));
    }
  }
  for (const s of shapes) await load(s.port, Number(a.warmup));
  await sleep(6000); // (the warm-up's last batches go out before the first round)
  // A process's CPU is read when its calls start, round after round, and once more at the end
  // (after the export interval): a round's figure is all it spent from its calls' start to its next
  // round's, so a span batch exported by the interval timer while the others run is counted with
  // the calls it carries (the idle work between rounds is in every process's figure alike).
  const per = new Map(shapes.map((s) => [s.name, []]));
  const mark = new Map();
  // --threads: the same, by thread group (µs per call), per process
  const perT = new Map(shapes.map((s) => [s.name, {}]));
  const markT = new Map();
  const count = (s, now) => {
    if (mark.has(s.name)) per.get(s.name).push((now - mark.get(s.name)) / calls);
    mark.set(s.name, now);
    if (!a.threads) return;
    const t = cpuNsByThread(s.p.pid);
    const m = markT.get(s.name);
    if (m !== undefined) {
      const into = perT.get(s.name);
      for (const k of new Set([...Object.keys(t), ...Object.keys(m)])) (into[k] ??= []).push(((t[k] ?? 0) - (m[k] ?? 0)) / 1000 / calls);
    }
    markT.set(s.name, t);
  };
  for (let r = 0; r < rounds; r++) {
    if (a.together) {
      // every process takes its calls at the same time, each from its own connections: the
      // machine's load, whatever it is, falls on all of them alike within the round
      await sleep(100);
      for (const s of shapes) count(s, cpuUs(s.p.pid));
      await Promise.all(shapes.map((s) => load(s.port, calls)));
    } else {
      const order = shapes.map((_, i) => shapes[(i + r) % shapes.length]);
      for (const s of order) {
        await sleep(100);
        count(s, cpuUs(s.p.pid));
        await load(s.port, calls);
      }
    }
    if (r > 0) console.error(`round ${r}/${rounds}: ${[...per].map(([n, v]) => `${n} ${v.at(-1).toFixed(1)}`).join(", ")}`);
  }
  await sleep(6000); // (the default exportInterval, 5 s, and a margin)
  for (const s of shapes) count(s, cpuUs(s.p.pid));
  console.error(`round ${rounds}/${rounds}: ${[...per].map(([n, v]) => `${n} ${v.at(-1).toFixed(1)}`).join(", ")}`);
  // a ratio: the median over rounds of the ratio within a round, and its spread (the rounds'
  // quartiles and extremes: on a loaded machine the spread is part of the figure)
  const within = (name, base) => per.get(name).map((v, i) => v / per.get(base)[i]).sort((x, y) => x - y);
  const q = (s, f) => s[Math.min(s.length - 1, Math.max(0, Math.round(f * (s.length - 1))))];
  const ratio = (name, base) => {
    const s = within(name, base);
    return { median: +median(s).toFixed(3), quartiles: [+q(s, 0.25).toFixed(3), +q(s, 0.75).toFixed(3)], range: [+s[0].toFixed(3), +s.at(-1).toFixed(3)] };
  };
  const out = { shape: a.shape, calls, rounds, cpuUsPerCall: Object.fromEntries([...per].map(([n, v]) => [n, +median(v).toFixed(1)])), ratios: {} };
  for (const [n] of per) if (n !== "off" && !n.startsWith("base")) out.ratios[`${n} / off`] = ratio(n, "off");
  if (per.has("base off")) out.ratios["off / base off"] = ratio("off", "base off");
  if (per.has("base off")) {
    for (const [n] of per) if (n.startsWith("base on-")) out.ratios[`${n} / base off`] = ratio(n, "base off");
  }
  if (a.threads) {
    out.threadsUsPerCall = Object.fromEntries([...perT].map(([n, g]) => [n, Object.fromEntries(Object.entries(g).map(([k, v]) => [k, +median(v).toFixed(2)]))]));
    out.mainThreadRatios = {};
    for (const [n, g] of perT) {
      if (n === "off") continue;
      const s = g.main.map((v, i) => v / perT.get("off").main[i]);
      out.mainThreadRatios[`${n} / off`] = +median(s).toFixed(3);
    }
  }
  out.rawUsPerCall = Object.fromEntries([...per].map(([n, v]) => [n, v.map((x) => +x.toFixed(1))]));
  console.log(JSON.stringify(out, null, 1));
}
