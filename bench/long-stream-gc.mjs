// One long stream through a fresh dojang process, and what V8's GC does meanwhile: per round, for
// each variant in turn, a new dojang (dist/cli.js through its launcher, plus the variant's node
// flags) pinned to one CPU, two warm-up calls, then N back-to-back calls of
// 1,024 × 64 KiB (h2load, one connection, one stream). Reported per variant: MB/s, the proxy's
// CPU per MiB (schedstat), its RSS after the calls and at its peak (/proc), and the
// mark-compacts and scavenges of the measured calls (node's --trace-gc lines). The variant "default" is dojang as its launcher starts it; --alt names the
// other's extra node flags. A fresh process is the point: which GC a stream meets depends on the
// heap limits V8 has derived so far, and a process that served other shapes first (bench/run.mjs)
// may not show what a sidecar that only streams does (docs/contributing/performance.md).
//
//   node bench/long-stream-gc.mjs [--alt="--no-external-memory-accounted-in-global-limit"]
//        [--calls 24] [--rounds 4] [--dist DIR] [--results-dir DIR]
//        [--proxy naive [--ballast N]]
//
// --proxy naive runs the plain node:http2 pipe (lib/naive-proxy.mjs, 4 MiB windows) in dojang's
// place, with the launcher's flags as they were before the heap-growing factor (below), plus
// --ballast N: N small objects kept alive (lib/ballast.mjs, a heap the size of dojang's, with a
// start-up GC as dojang's): whether a storm is dojang's code or V8's pacing of any such heap.
//
// Loopback only; every process it starts is stopped by pid.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { STREAM_COUNT_HEADER, STREAM_MESSAGE_BYTES, STREAM_PATH, frame } from "./lib/grpc.mjs";
import { freePort } from "./lib/peers.mjs";
import { cpuNs, rssKiB, startProcess, stopProcess, which } from "./lib/proc.mjs";
import { LAUNCHER_NODE_FLAGS, startFastUpstream, waitPortOf } from "./lib/standalone.mjs";

const REPO = fileURLToPath(new URL("..", import.meta.url));
const { values: a } = parseArgs({
  options: {
    alt: { type: "string", default: "--no-external-memory-accounted-in-global-limit" },
    calls: { type: "string", default: "24" },
    rounds: { type: "string", default: "4" },
    dist: { type: "string", default: join(REPO, "dist") },
    "results-dir": { type: "string" },
    proxy: { type: "string", default: "dojang" },
    ballast: { type: "string", default: "0" },
  },
});
const CALLS = Number(a.calls);
const ROUNDS = Number(a.rounds);
const MESSAGES = 1024;
const MIB_PER_CALL = (MESSAGES * STREAM_MESSAGE_BYTES) / 1048576;
const h2load = which("h2load");
if (h2load === undefined) throw new Error("h2load not found (bench/setup installs it: apt-get install -y nghttp2-client)");

const tmp = mkdtempSync(join(tmpdir(), "dojang-bench-lsgc-"));
// the dojang children are proc.mjs's (startProcess: killed at the harness's exit); the upstream is here
let upstream;
process.on("exit", () => {
  try {
    if (upstream !== undefined) process.kill(upstream.pid, "SIGKILL");
  } catch {
    /* gone */
  }
  rmSync(tmp, { recursive: true, force: true });
});
process.on("SIGINT", () => process.exit(130));

const reqFile = join(tmp, "req.bin");
writeFileSync(reqFile, frame(8, 0x61));
const variants = [
  { name: "default", flags: [] },
  { name: "alt", flags: a.alt.split(/\s+/).filter(Boolean) },
];

/** h2load -n calls on one stream (CPU 1); resolves with its MB/s. */
function load(port, calls) {
  const r = spawnSync(
    "taskset",
    ["-c", "1", h2load, "-n", String(calls), "-c", "1", "-m", "1", "-d", reqFile, "-H", "content-type: application/grpc", "-H", "te: trailers", "-H", `${STREAM_COUNT_HEADER}: ${MESSAGES}`, `http://127.0.0.1:${port}${STREAM_PATH}`],
    { encoding: "utf8", timeout: 300_000 },
  );
  const ok = /requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded/.exec(r.stdout);
  if (ok === null || Number(ok[2]) !== calls) throw new Error(`h2load: not every call succeeded\n${r.stdout}\n${r.stderr}`);
  const s = /finished in ([\d.]+)(ms|s),/.exec(r.stdout);
  const secs = Number(s[1]) / (s[2] === "ms" ? 1000 : 1);
  return (calls * MESSAGES * STREAM_MESSAGE_BYTES) / 1e6 / secs;
}

let started = 0;
if (a.proxy !== "dojang" && a.proxy !== "naive") throw new Error("--proxy is dojang or naive");
// dojang's launcher flags before the heap-growing factor (src/cli.ts), for the plain pipe
const NAIVE_FLAGS = LAUNCHER_NODE_FLAGS.filter((f) => !f.startsWith("--heap-growing-percent="));
const NAIVE = join(REPO, "bench", "lib", "naive-proxy.mjs");
const BALLAST = pathToFileURL(join(REPO, "bench", "lib", "ballast.mjs")).href;
async function measure(v, upstreamPort) {
  const port = await freePort();
  const cfg = join(tmp, `${v.name}.json`);
  writeFileSync(
    cfg,
    JSON.stringify({
      admin: { address: `127.0.0.1:${await freePort()}` },
      logLevel: "warn",
      accessLog: false,
      listeners: [{ name: "main", address: `127.0.0.1:${port}`, routes: [{ match: { prefix: "/" }, cluster: "backend" }] }],
      clusters: [{ name: "backend", endpoints: [`127.0.0.1:${upstreamPort}`] }],
    }),
  );
  // through the launcher, as dojang runs: it re-executes node (same pid) with its flags first and
  // these after them (they win), and hands the parsed config over, which keeps the config parsers
  // out of the heap (a heap ~7 MiB smaller; with DOJANG_MEMORY_PLAN "" and no re-exec, as the
  // callgrind benches run, the larger heap's limits hide the storm)
  const spawnedMs = performance.now();
  const env = { ...process.env };
  delete env["DOJANG_MEMORY_PLAN"];
  // --trace-gc goes to a file, not a pipe: the harness waits in spawnSync while h2load runs and
  // reads nothing, and a full pipe (a storm's lines) would block dojang's main thread on write
  const argv =
    a.proxy === "naive"
      ? [...NAIVE_FLAGS, "--expose-gc", `--import=${BALLAST}`, "--trace-gc", ...v.flags, NAIVE, String(port), `http://127.0.0.1:${upstreamPort}`, String(4 * 1048576)]
      : ["--trace-gc", ...v.flags, join(resolve(a.dist), "cli.js"), "--config", cfg];
  env["BALLAST_OBJECTS"] = a.ballast;
  const p = startProcess(`${a.proxy}-${v.name}-${++started}`, process.execPath, argv, { cpus: "0", logDir: tmp, cwd: REPO, env });
  const closed = p.exited;
  let m;
  try {
    await waitPortOf(p.child, port, 3);
    load(port, 2);
    // node writes --trace-gc to a pipe in blocks, read at exit: the lines carry ms since the
    // isolate started, a little after the spawn, so the measured calls' GCs are those from the
    // middle of a 500 ms pause on
    await new Promise((r) => setTimeout(r, 500));
    const fromMs = performance.now() - spawnedMs - 250;
    const cpu0 = cpuNs(p.pid);
    const mbs = load(port, CALLS);
    const cpuUsPerMiB = (cpuNs(p.pid) - cpu0) / 1000 / (CALLS * MIB_PER_CALL);
    m = { mbs, cpuUsPerMiB, fromMs, rssMiB: rssKiB(p.pid) / 1024, peakRssMiB: rssKiB(p.pid, "VmHWM") / 1024 };
  } finally {
    await stopProcess(p);
    await closed;
  }
  const out = readFileSync(p.stdoutFile, "utf8");
  const count = (kind) => [...out.matchAll(/\s(\d+) ms: (Mark-Compact|Scavenge)\b/g)].filter((x) => x[2] === kind && Number(x[1]) >= m.fromMs).length;
  return { mbs: m.mbs, cpuUsPerMiB: m.cpuUsPerMiB, rssMiB: m.rssMiB, peakRssMiB: m.peakRssMiB, markCompacts: count("Mark-Compact"), scavenges: count("Scavenge") };
}

const median = (xs) => {
  const s = [...xs].sort((x, y) => x - y);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const up = await startFastUpstream();
upstream = up.p;
spawnSync("taskset", ["-pc", "1", String(up.p.pid)], { stdio: "ignore" });
const rows = [];
for (let r = 0; r < ROUNDS; r++) {
  const order = r % 2 === 0 ? variants : [...variants].reverse();
  for (const v of order) {
    const m = await measure(v, up.port);
    rows.push({ round: r + 1, variant: v.name, ...m });
    console.log(`round ${r + 1} ${v.name}: ${m.mbs.toFixed(0)} MB/s, ${m.cpuUsPerMiB.toFixed(0)} µs CPU per MiB, RSS ${m.rssMiB.toFixed(0)} MiB (peak ${m.peakRssMiB.toFixed(0)}), ${m.markCompacts} mark-compacts, ${m.scavenges} scavenges`);
  }
}
const by = (name, k) => median(rows.filter((x) => x.variant === name).map((x) => x[k]));
const lines = [
  `# One long stream through a fresh ${a.proxy === "naive" ? `node:http2 pipe (${a.ballast} ballast objects)` : "dojang"}: ${CALLS} calls of 1,024 × 64 KiB per round, ${ROUNDS} rounds`,
  "",
  `- node ${process.version}; proxy on CPU 0, upstream and h2load on CPU 1; each measurement a new process after 2 warm-up calls`,
  `- default: ${a.proxy === "naive" ? `the pipe with \`${NAIVE_FLAGS.join(" ")}\`` : "dojang as its launcher starts it"}; alt: the same + \`${a.alt}\` (node flags on the command line come after the launcher's and win)`,
  "",
  "| variant | MB/s | µs CPU per MiB | RSS MiB after | peak RSS MiB | mark-compacts | scavenges |",
  "|---|---:|---:|---:|---:|---:|---:|",
  ...["default", "alt"].map((n) => `| ${n} | ${by(n, "mbs").toFixed(0)} | ${by(n, "cpuUsPerMiB").toFixed(0)} | ${by(n, "rssMiB").toFixed(0)} | ${by(n, "peakRssMiB").toFixed(0)} | ${by(n, "markCompacts")} | ${by(n, "scavenges")} |`),
  "",
  `Medians over the rounds. alt/default: MB/s ${(by("alt", "mbs") / by("default", "mbs")).toFixed(2)}, CPU per MiB ${(by("alt", "cpuUsPerMiB") / by("default", "cpuUsPerMiB")).toFixed(2)}, RSS after ${(by("alt", "rssMiB") / by("default", "rssMiB")).toFixed(2)}, peak RSS ${(by("alt", "peakRssMiB") / by("default", "peakRssMiB")).toFixed(2)}.`,
  "",
  "| round | variant | MB/s | µs CPU per MiB | RSS MiB after | peak RSS MiB | mark-compacts | scavenges |",
  "|---:|---|---:|---:|---:|---:|---:|---:|",
  ...rows.map((x) => `| ${x.round} | ${x.variant} | ${x.mbs.toFixed(0)} | ${x.cpuUsPerMiB.toFixed(0)} | ${x.rssMiB.toFixed(0)} | ${x.peakRssMiB.toFixed(0)} | ${x.markCompacts} | ${x.scavenges} |`),
];
console.log("\n" + lines.join("\n"));
if (a["results-dir"] !== undefined) {
  mkdirSync(a["results-dir"], { recursive: true });
  writeFileSync(join(a["results-dir"], "latest.md"), lines.join("\n") + "\n");
  writeFileSync(join(a["results-dir"], "latest.json"), JSON.stringify({ proxy: a.proxy, ballast: Number(a.ballast), calls: CALLS, rounds: ROUNDS, alt: a.alt, node: process.version, rows }, null, 2) + "\n");
}
process.exit(0);
