// JSON transcoding's cost, in one run through one dojang with two listeners on the same fast
// upstream (bench/lib/upstream.mjs, whose /bench.Echo/Unary echoes the request message):
//   grpc/off  native gRPC to the listener WITHOUT jsonTranscoding          (the baseline)
//   grpc/on   native gRPC to the listener WITH jsonTranscoding              (what "on" costs a gRPC call)
//   json      POST /v1/items/{id}:archive (body "*", Item → Item) as JSON to the listener with
//             jsonTranscoding, transcoded to /dojang.test.shop.v1.Shop/ArchiveItem, which the route
//             rewrites to /bench.Echo/Unary; the echoed Item comes back as JSON
//   connect   the same Item as a Connect unary call (application/proto, the bare message) to a
//             third listener with `connect: true` (Connect beside gRPC in one run)
// All four with h2load over h2c (same connections and streams), in interleaved rounds; each
// line gives calls/s and dojang's CPU per call (utime+stime of the served process from /proc),
// and the ratios to grpc/off with their spread over the rounds (each round's own ratio).
// --cpu-prof DIR runs dojang under node --cpu-prof (one profile per process, written at its
// exit; profile one shape with --shapes json: a profiled run's figures are not comparable).
// The descriptor set is compiled by protoc (scripts/engines.mjs installs it) from the tests' shop.proto.
//
// usage: npm run build && node bench/json-transcoding.mjs [--connections 20] [--streams 5] [--duration 8] [--rounds 2]
//        [--shapes grpc/off,grpc/on,json,connect] [--cpu-prof DIR] [--alt-dist DIR]
// --alt-dist DIR: a second dojang from another build's dist/ (its node_modules beside it), with the
// same listeners, measured in the same rounds (shapes suffixed @alt): a before/after in one run.
// --alloc: dojang runs with bench/lib/alloc-probe.mjs (node --import), opened and closed by SIGWINCH
// around each h2load run: the V8 heap bytes allocated per call (what the machine's load does not
// change) and the process's own CPU over exactly that window. --alloc-profile (with --alloc): V8's
// sampling heap profiler too, and each shape's top allocating functions (its last round) printed.
// --callgrind DIR [--cg-calls 3000,9000] [--cg-warmup 2000] [--cg-node-flags=--single-threaded]:
// instead, each shape's instructions per call under valgrind's callgrind (the machine's load does
// not move them; callgrindRun below), the node flags given after the launcher's.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { create, createFileRegistry, fromBinary, toBinary } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { freePort } from "./lib/peers.mjs";
import { parseH2loadOutput } from "./lib/h2load.mjs";
import { ITEM, compileShop } from "./lib/shop.mjs";
import { LAUNCHER_NODE_FLAGS, startFastUpstream, waitPort, waitPortOf } from "./lib/standalone.mjs";

const { values: args } = parseArgs({
  options: {
    connections: { type: "string", default: "20" },
    streams: { type: "string", default: "5" },
    duration: { type: "string", default: "8" },
    rounds: { type: "string", default: "2" },
    shapes: { type: "string", default: "grpc/off,grpc/on,json,connect" },
    "cpu-prof": { type: "string" },
    "alt-dist": { type: "string" },
    alloc: { type: "boolean", default: false },
    "alloc-profile": { type: "boolean", default: false },
    callgrind: { type: "string" },
    "cg-calls": { type: "string", default: "3000,9000" },
    "cg-warmup": { type: "string", default: "2000" },
    "cg-node-flags": { type: "string", default: "" },
  },
});
const repo = join(dirname(fileURLToPath(import.meta.url)), "..");
const tmp = mkdtempSync(join(tmpdir(), "dojang-json-bench-"));
const setFile = compileShop(tmp);

// the same Item both ways: as JSON for the transcoded call, as a framed message for the gRPC ones
const item = ITEM;
const json = JSON.stringify(item);
const reg = createFileRegistry(fromBinary(FileDescriptorSetSchema, readFileSync(setFile)));
const itemDesc = reg.getMessage("dojang.test.shop.v1.Item");
const { fromJson } = await import("@bufbuild/protobuf");
const bin = toBinary(itemDesc, fromJson(itemDesc, item));
const framed = Buffer.alloc(5 + bin.length);
framed.writeUInt32BE(bin.length, 1);
framed.set(bin, 5);
void create;

const { p: up, port: upPort } = await startFastUpstream();
const routes = `
    routes:
      - match: { path: /dojang.test.shop.v1.Shop/ArchiveItem }
        cluster: backend
        rewritePrefix: /bench.Echo/Unary
      - match: { prefix: "/" }
        cluster: backend`;
// (--cpu-prof: through NODE_OPTIONS, so the served process the launcher starts is profiled too)
const env = args["cpu-prof"] === undefined ? process.env : { ...process.env, NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${args["cpu-prof"]}` };

/** The config of one dojang with the three listeners (its file, and its ports). */
async function writeConfig(tag) {
  const ports = { off: await freePort(), on: await freePort(), connect: await freePort() };
  const cfgFile = join(tmp, `dojang${tag}.yaml`);
  writeFileSync(
    cfgFile,
    `logLevel: warn
accessLog: false
listeners:
  - name: off
    address: 127.0.0.1:${ports.off}${routes}
  - name: on
    address: 127.0.0.1:${ports.on}
    jsonTranscoding: { descriptorSet: ${JSON.stringify(setFile)} }${routes}
  - name: connect
    address: 127.0.0.1:${ports.connect}
    connect: true${routes}
clusters:
  - name: backend
    endpoints: ["127.0.0.1:${upPort}"]
`,
  );
  return { cfgFile, ports };
}

/** One dojang (dist/, or --alt-dist's build) with the three listeners; checked with one JSON and one Connect call. */
async function startBuild(tag, dist) {
  const { cfgFile, ports } = await writeConfig(tag);
  const probeOut = join(tmp, `probe${tag.replace("@", "-")}.json`);
  const probe = args.alloc ? ["--import", join(repo, "bench/lib/alloc-probe.mjs")] : [];
  const px = spawn(process.execPath, [...probe, join(dist, "cli.js"), "--config", cfgFile], { stdio: ["ignore", "ignore", "inherit"], env: args.alloc ? { ...env, DOJANG_ALLOC_OUT: probeOut, DOJANG_ALLOC_SAMPLE: args["alloc-profile"] ? "1" : "0" } : env });
  px.probeOut = probeOut;
  for (const port of Object.values(ports)) await waitPort(port);
  // the JSON answer is the Item sent
  {
    const r = spawnSync("curl", ["-s", "--http2-prior-knowledge", "-X", "POST", "-H", "content-type: application/json", "-d", json, `http://127.0.0.1:${ports.on}/v1/items/item-1:archive`], { encoding: "utf8" });
    const got = JSON.parse(r.stdout || "null");
    if (JSON.stringify(got) !== json) throw new Error(`JSON probe failed (${dist}): ${r.stdout} ${r.stderr}`);
  }
  // a Connect call: the bare Item echoed
  {
    const f = join(tmp, "connect-probe.bin");
    writeFileSync(f, bin);
    const r = spawnSync("curl", ["-s", "--http2-prior-knowledge", "-X", "POST", "-H", "content-type: application/proto", "-H", "connect-protocol-version: 1", "--data-binary", `@${f}`, `http://127.0.0.1:${ports.connect}/dojang.test.shop.v1.Shop/ArchiveItem`]);
    if (!Buffer.from(r.stdout).equals(Buffer.from(bin))) throw new Error(`Connect probe failed (${dist}): ${r.stdout.length} bytes ${r.stderr}`);
  }
  return { tag, px, ports };
}

const builds = [];
// whatever happens next, the children go with this process
const stop = () => {
  for (const b of builds) b.px.kill("SIGTERM");
  up.kill("SIGTERM");
};
process.on("exit", stop);
process.on("uncaughtException", (err) => {
  console.error(err);
  process.exit(1);
});
// the same calls, by port: [path, body, content type, extra h2load arguments]
const callOf = {
  "grpc/off": (p) => [p.off, "/dojang.test.shop.v1.Shop/ArchiveItem", framed, "application/grpc", ["-H", "te: trailers"]],
  "grpc/on": (p) => [p.on, "/dojang.test.shop.v1.Shop/ArchiveItem", framed, "application/grpc", ["-H", "te: trailers"]],
  json: (p) => [p.on, "/v1/items/item-1:archive", Buffer.from(json), "application/json", []],
  connect: (p) => [p.connect, "/dojang.test.shop.v1.Shop/ArchiveItem", Buffer.from(bin), "application/proto", ["-H", "connect-protocol-version: 1"]],
};
if (args.callgrind !== undefined) await callgrindRun();
builds.push(await startBuild("", join(repo, "dist")));
if (args["alt-dist"] !== undefined) builds.push(await startBuild("@alt", args["alt-dist"]));

/** utime+stime (clock ticks) of the launcher and every process under it. */
function cpuTicks(root) {
  const kids = new Map();
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const f = readFileSync(`/proc/${d}/stat`, "utf8").slice(readFileSync(`/proc/${d}/stat`, "utf8").lastIndexOf(")") + 2).split(" ");
      kids.set(Number(d), { ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]) });
    } catch {
      /* gone */
    }
  }
  let sum = 0;
  const walk = (pid) => {
    const k = kids.get(pid);
    if (k !== undefined) sum += k.ticks;
    for (const [c, v] of kids) if (v.ppid === pid) walk(c);
  };
  walk(root);
  return sum;
}
const TICK_US = 1e6 / Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim());

/** Waits (busy, at most `ms`) for a file the probe writes. */
function waitFile(f, ms) {
  const end = Date.now() + ms;
  while (!existsSync(f)) {
    if (Date.now() > end) throw new Error(`the alloc probe did not write ${f}`);
    spawnSync("sleep", ["0.05"]);
  }
}

function run(px, name, port, path, data, contentType, extra = []) {
  const dataFile = join(tmp, `${name.replace(/[/@]/g, "-")}.bin`);
  writeFileSync(dataFile, data);
  if (args.alloc) {
    rmSync(px.probeOut, { force: true });
    rmSync(px.probeOut + ".started", { force: true });
    px.kill("SIGWINCH");
    waitFile(px.probeOut + ".started", 5000);
  }
  const t0 = cpuTicks(px.pid);
  const h = spawnSync(
    "h2load",
    ["-c", args.connections, "-m", args.streams, "-D", args.duration, "-d", dataFile, "-H", `content-type: ${contentType}`, ...extra, `http://127.0.0.1:${port}${path}`],
    { encoding: "utf8", timeout: (Number(args.duration) + 30) * 1000 },
  );
  let cpu = (cpuTicks(px.pid) - t0) * TICK_US;
  const r = parseH2loadOutput(h.stdout);
  const calls = Math.max(1, r.succeeded ?? 1);
  let bytesPerCall;
  if (args.alloc) {
    px.kill("SIGWINCH");
    waitFile(px.probeOut, 60_000);
    const p = JSON.parse(readFileSync(px.probeOut, "utf8"));
    bytesPerCall = p.allocatedBytes / calls;
    cpu = p.cpuUs;
    if (p.byFunction !== undefined) {
      const top = Object.entries(p.byFunction).sort((a, b) => b[1] - a[1]).slice(0, 20);
      console.log(`-- ${name}: sampled heap B/call by function`);
      for (const [fn, b] of top) console.log(`${(b / calls).toFixed(0).padStart(7)}  ${fn}`);
    }
  }
  return { name, rps: r.reqPerSec, ok: r.succeeded, failed: (r.failed ?? 0) + (r.errored ?? 0), cpuPerCall: cpu / calls, bytesPerCall };
}

const wanted = args.shapes.split(",").filter((n) => callOf[n] !== undefined);
const shapes = builds.flatMap((b) => wanted.map((n) => [b.px, n + b.tag, ...callOf[n](b.ports)]));
const results = {};
for (let round = 0; round < Number(args.rounds); round++) {
  // the order rotates each round, so no shape always follows the same one
  for (let i = 0; i < shapes.length; i++) {
    const s = shapes[(i + round) % shapes.length];
    (results[s[1]] ??= []).push(run(...s));
  }
}
if (args["cpu-prof"] !== undefined) {
  // the profile is written as the process exits
  for (const b of builds) {
    const gone = new Promise((r) => b.px.once("exit", r));
    b.px.kill("SIGTERM");
    await gone;
  }
}
stop();
rmSync(tmp, { recursive: true, force: true });

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const line = {};
for (const [name, rs] of Object.entries(results)) {
  line[name] = { rps: median(rs.map((r) => r.rps)), cpu: median(rs.map((r) => r.cpuPerCall)), failed: rs.reduce((a, r) => a + r.failed, 0) };
  const cpuMin = Math.min(...rs.map((r) => r.cpuPerCall));
  const bytes = args.alloc ? `   heap ${median(rs.map((r) => r.bytesPerCall)).toFixed(0).padStart(6)} B/call` : "";
  console.log(`${name.padEnd(13)} ${line[name].rps.toFixed(0).padStart(7)} calls/s   CPU ${line[name].cpu.toFixed(1).padStart(6)} µs/call (min ${cpuMin.toFixed(1)})${bytes}   failed ${line[name].failed}   (rounds: ${rs.map((r) => r.rps.toFixed(0)).join(", ")})`);
}
// each round's ratio (the shapes of one round ran minutes apart at most, under the same neighbours)
function ratio(a, b) {
  if (results[a] === undefined || results[b] === undefined) return;
  const rs = results[a].map((r, i) => r.cpuPerCall / results[b][i].cpuPerCall);
  const qs = results[a].map((r, i) => r.rps / results[b][i].rps);
  // the least-disturbed round of each: on a shared machine the minimum is the steadiest figure
  const minRatio = Math.min(...results[a].map((r) => r.cpuPerCall)) / Math.min(...results[b].map((r) => r.cpuPerCall));
  const bytes = args.alloc ? `, heap B/call ${(median(results[a].map((r) => r.bytesPerCall)) / median(results[b].map((r) => r.bytesPerCall))).toFixed(2)}` : "";
  console.log(
    `${(a + " ÷ " + b).padEnd(28)} CPU per call ${median(rs).toFixed(2)} (rounds ${Math.min(...rs).toFixed(2)}–${Math.max(...rs).toFixed(2)}; min ÷ min ${minRatio.toFixed(2)})${bytes}, calls/s ${median(qs).toFixed(2)} (${Math.min(...qs).toFixed(2)}–${Math.max(...qs).toFixed(2)})`,
  );
}
for (const { tag } of builds) {
  ratio("grpc/on" + tag, "grpc/off" + tag);
  ratio("json" + tag, "grpc/on" + tag);
  ratio("json" + tag, "grpc/off" + tag);
  ratio("connect" + tag, "grpc/off" + tag);
}
if (builds.length > 1) for (const n of wanted) ratio(n, n + "@alt");
process.exit(0);

/**
 * --callgrind DIR: each shape's instructions per call under valgrind's callgrind, which the
 * machine's load does not move. Per build and shape, two fresh dojang processes (the launcher's
 * flags given, so that it runs in one process image), each warmed up with --cg-warmup calls of the
 * shape, then the first N1 and the second N2 calls (--cg-calls N1,N2); the difference of their
 * counts ÷ (N2 − N1) is the per-call figure (bench/callgrind-diff.mjs), given whole and without
 * V8's GC and compilers (which land in one window or the other by chance). The two processes of a
 * shape run at once. Ratios to grpc/off of the same build.
 * --cg-node-flags=--single-threaded: V8 compiles and collects on the main thread, so what its
 * optimizing compiler makes of the code no longer depends on when a background job finished. The
 * same code in two processes of one run then differs by 1–2 % (grpc/off against the build before,
 * which did not change it: ×1.01 and ×1.02), where with the default flags it differed by up to 8 %
 * (×0.93); across runs a shape's count still moves by up to 7 %, so compare within a run.
 */
async function callgrindRun() {
  const dir = args.callgrind;
  mkdirSync(dir, { recursive: true });
  const [n1, n2] = args["cg-calls"].split(",").map(Number);
  const warm = Number(args["cg-warmup"]);
  const cgNodeFlags = args["cg-node-flags"].split(/\s+/).filter((f) => f !== "");
  const dists = [["", join(repo, "dist")], ...(args["alt-dist"] === undefined ? [] : [["@alt", args["alt-dist"]]])];
  const names = args.shapes.split(",").filter((n) => callOf[n] !== undefined);
  const one = async (tag, dist, name, n, prefix) => {
    const { cfgFile, ports } = await writeConfig(`${tag}-${prefix}`);
    const out = join(dir, `${prefix}.out`);
    const px = spawn("valgrind", ["--tool=callgrind", `--callgrind-out-file=${out}`, process.execPath, ...LAUNCHER_NODE_FLAGS, ...cgNodeFlags, join(dist, "cli.js"), "--config", cfgFile], {
      stdio: ["ignore", "ignore", "ignore"],
      env: { ...process.env, DOJANG_MEMORY_PLAN: "" },
    });
    try {
      await waitPortOf(px, ports.off, 31);
      for (const port of Object.values(ports)) await waitPort(port);
      const [port, path, data, contentType, extra] = callOf[name](ports);
      const dataFile = join(tmp, `${prefix}.bin`);
      writeFileSync(dataFile, data);
      const h2load = (k) => {
        // one connection, four streams: under callgrind a call takes ~50x its time, and more at once ran into timeouts
        const r = spawnSync("h2load", ["-n", String(k), "-c", "1", "-m", "4", "-d", dataFile, "-H", `content-type: ${contentType}`, ...extra, `http://127.0.0.1:${port}${path}`], { encoding: "utf8" });
        const got = parseH2loadOutput(r.stdout);
        if (got.succeeded !== k) throw new Error(`${prefix}: ${got.succeeded} of ${k} calls succeeded`);
      };
      h2load(warm);
      h2load(n);
    } finally {
      const gone = new Promise((r) => (px.exitCode !== null ? r() : px.once("exit", r)));
      px.kill("SIGTERM");
      await gone;
    }
    const txt = join(dir, `${prefix}.txt`);
    writeFileSync(txt, execFileSync("callgrind_annotate", ["--threshold=100", "--inclusive=no", out], { maxBuffer: 1 << 28 }));
    return txt;
  };
  const res = {};
  for (const [tag, dist] of dists) {
    for (const name of names) {
      const id = `${name.replace("/", "-")}${tag.replace("@", "-")}`;
      // both to their end (each stops its own process), then the first failure, if any
      const runs = await Promise.allSettled([one(tag, dist, name, n1, `${id}-lo`), one(tag, dist, name, n2, `${id}-hi`)]);
      for (const r of runs) if (r.status === "rejected") throw r.reason;
      const [lo, hi] = runs.map((r) => r.value);
      const diff = execFileSync(process.execPath, [join(repo, "bench", "callgrind-diff.mjs"), lo, hi, String(n2 - n1), "30"], { encoding: "utf8" });
      writeFileSync(join(dir, `${id}.diff.txt`), diff);
      const num = (re) => Number((re.exec(diff) ?? [, "0"])[1].replaceAll(",", ""));
      const total = num(/instructions per call: (-?[\d,]+)/);
      const gc = num(/^\s*(-?[\d,]+)\s+[-\d.]+ %\s+V8 GC$/m);
      const comp = num(/^\s*(-?[\d,]+)\s+[-\d.]+ %\s+V8 compilers \/ parser$/m);
      res[name + tag] = { total, work: total - gc - comp };
      console.log(`${(name + tag).padEnd(13)} ${total.toLocaleString("en-US").padStart(9)} instructions per call, ${(total - gc - comp).toLocaleString("en-US").padStart(9)} without V8's GC and compilers`);
    }
  }
  for (const [tag] of dists) {
    const base = res["grpc/off" + tag];
    if (base === undefined) continue;
    for (const name of names) {
      if (name === "grpc/off" || res[name + tag] === undefined) continue;
      const r = res[name + tag];
      console.log(`${(name + tag + " ÷ grpc/off" + tag).padEnd(28)} ×${(r.total / base.total).toFixed(2)} whole, ×${(r.work / base.work).toFixed(2)} without GC and compilers`);
    }
  }
  if (dists.length > 1) {
    for (const name of names) {
      const a = res[name], b = res[name + "@alt"];
      if (a !== undefined && b !== undefined) console.log(`${(name + " ÷ " + name + "@alt").padEnd(28)} ×${(a.total / b.total).toFixed(2)} whole, ×${(a.work / b.work).toFixed(2)} without GC and compilers`);
    }
  }
  up.kill("SIGTERM");
  rmSync(tmp, { recursive: true, force: true });
  process.exit(0);
}
