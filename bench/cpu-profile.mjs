// One proxy's CPU per unary call, attributed: runs a fixed number of 100 B unary calls through
// dojang (dist/, or --dist DIR) or the naive node:http2 proxy (bench/lib/naive-proxy.mjs) on the
// fast upstream, after a warm-up, and reports the proxy's user and system CPU per call over the
// window (/proc). With --callgrind FILE the proxy runs under valgrind's callgrind from its start
// (callgrind_control's toggles did not reach a node process here): run it twice with the same
// --warmup and different --calls; the difference of the two files' counts per function
// (bench/callgrind-diff.mjs) is the cost of the extra calls, exact and repeatable on a loaded
// machine. With --node-args="--cpu-prof --cpu-prof-dir=D" the V8 profile is written when the
// proxy stops (bench/cpu-prof-window.mjs summarises its measured part).
// See docs/contributing/cpu-profile.md.
//
//   node bench/cpu-profile.mjs [--target dojang|naive] [--dist DIR] [--shape c1|CxS]
//        [--calls N] [--warmup N] [--node-args "..."] [--callgrind FILE] [--config-extra FILE]
//
// --config-extra: a YAML fragment merged into dojang's config (bench/lib/merge.mjs), e.g.
// bench/examples/tracing-1.yaml to profile a traced call.
//
// Loopback only; every process it starts is stopped by pid.
import { spawn } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { UNARY_PATH, connect, frame, grpcRequestHeaders, waitConnect } from "./lib/grpc.mjs";
import { parse as parseYaml } from "yaml";
import { deepMerge } from "./lib/merge.mjs";
import { freePort } from "./lib/peers.mjs";
import { CLK_TCK } from "./lib/proc.mjs";
import { LAUNCHER_NODE_FLAGS, startFastUpstream, waitPortOf } from "./lib/standalone.mjs";

const REPO = resolve(fileURLToPath(new URL("..", import.meta.url)));
const { values: a } = parseArgs({
  options: {
    target: { type: "string", default: "dojang" },
    dist: { type: "string", default: join(REPO, "dist") },
    shape: { type: "string", default: "c1" },
    calls: { type: "string", default: "5000" },
    warmup: { type: "string", default: "2000" },
    "node-args": { type: "string", default: "" },
    callgrind: { type: "string" },
    "config-extra": { type: "string" },
    // the proxy's stdout to this file (e.g. with --node-args="--trace-deopt"); ignored otherwise
    stdout: { type: "string" },
  },
});
const CALLS = Number(a.calls);
const WARMUP = Number(a.warmup);
const tmp = mkdtempSync(join(tmpdir(), "dojang-cpuprof-"));
const children = [];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const hardStop = setTimeout(() => {
  console.error("cpu-profile.mjs: hard stop after 20 min");
  for (const p of children) if (p.exitCode === null) p.kill("SIGKILL");
  process.exit(3);
}, 20 * 60_000);
hardStop.unref();

/** utime and stime of pid and its children threads, µs (the process's own /proc/pid/stat). */
function cpu(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8");
  const rest = f.slice(f.lastIndexOf(")") + 2).split(" ");
  return { user: (Number(rest[11]) * 1e6) / CLK_TCK, sys: (Number(rest[12]) * 1e6) / CLK_TCK };
}

async function startProxy(upstreamPort) {
  const port = await freePort();
  const nodeArgs = a["node-args"].split(" ").filter(Boolean);
  let argv;
  if (a.target === "naive") {
    argv = [...nodeArgs, join(REPO, "bench/lib/naive-proxy.mjs"), String(port), `http://127.0.0.1:${upstreamPort}`];
  } else {
    const admin = await freePort();
    let cfg = {
      admin: { address: `127.0.0.1:${admin}` },
      drainTimeout: "1s",
      logLevel: "warn",
      accessLog: false,
      listeners: [{ name: "main", address: `127.0.0.1:${port}`, routes: [{ match: { prefix: "/" }, cluster: "backend" }] }],
      clusters: [{ name: "backend", endpoints: [`127.0.0.1:${upstreamPort}`] }],
    };
    if (a["config-extra"] !== undefined) cfg = deepMerge(cfg, parseYaml(readFileSync(a["config-extra"], "utf8")));
    const cfgFile = join(tmp, "dojang.yaml");
    writeFileSync(cfgFile, JSON.stringify(cfg)); // JSON is YAML
    // the launcher's own flags, given here so that it does not re-execute node (one process
    // image from start to end, which callgrind_control can reach)
    argv = [...LAUNCHER_NODE_FLAGS, ...nodeArgs, join(resolve(a.dist), "cli.js"), "--config", cfgFile];
  }
  let cmd = process.execPath;
  if (a.callgrind !== undefined) {
    argv = ["--tool=callgrind", `--callgrind-out-file=${resolve(a.callgrind)}.%p`, process.execPath, ...argv];
    cmd = "valgrind";
  }
  const out = a.stdout === undefined ? "ignore" : openSync(a.stdout, "w");
  const p = spawn(cmd, argv, { stdio: ["ignore", out, "inherit"], cwd: REPO, env: { ...process.env, DOJANG_MEMORY_PLAN: "" } });
  children.push(p);
  // valgrind starts node slowly: wait up to two minutes (ten under callgrind, on a loaded machine)
  const tries = a.callgrind !== undefined ? 60 : 12;
  await waitPortOf(p, port, tries);
  return { p, port };
}

const BODY = frame(100);
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
  const lat = [];
  const worker = async (s) => {
    while (left > 0) {
      left--;
      const t = performance.now();
      await unary(s, headers);
      lat.push(performance.now() - t);
    }
  };
  const t0 = performance.now();
  const ws = [];
  for (const s of sessions) for (let j = 0; j < streams; j++) ws.push(worker(s));
  await Promise.all(ws);
  const ms = performance.now() - t0;
  for (const s of sessions) s.close();
  lat.sort((x, y) => x - y);
  return { ms, p50us: lat[lat.length >> 1] * 1000 };
}

try {
  const up = await startFastUpstream();
  children.push(up.p);
  const d = await startProxy(up.port);
  await load(d.port, WARMUP);
  await sleep(200);
  const c0 = cpu(d.p.pid);
  const r = await load(d.port, CALLS);
  const c1 = cpu(d.p.pid);
  const per = (x) => Math.round((x / CALLS) * 10) / 10;
  console.log(
    JSON.stringify({
      target: a.target,
      dist: a.target === "dojang" ? a.dist : undefined,
      shape: a.shape,
      calls: CALLS,
      nodeArgs: a["node-args"],
      userUsPerCall: per(c1.user - c0.user),
      sysUsPerCall: per(c1.sys - c0.sys),
      cpuUsPerCall: per(c1.user - c0.user + c1.sys - c0.sys),
      p50us: Math.round(r.p50us),
      callsPerS: Math.round(CALLS / (r.ms / 1000)),
    }),
  );
  d.p.kill("SIGTERM");
  await new Promise((res) => (d.p.exitCode !== null ? res() : d.p.once("exit", res)));
} finally {
  for (const p of children) if (p.exitCode === null && p.signalCode === null) p.kill("SIGTERM");
  rmSync(tmp, { recursive: true, force: true });
}
process.exit(0);
