// The chaos run: three upstreams behind one dojang, one of them restarted every few seconds
// (alternating a graceful stop — GOAWAY, then the port closes — and SIGKILL), while a client
// makes N unary calls at a fixed concurrency. It reports what the client saw: failures by
// grpc-status and dojang's decided_by, retries by reason (from /metrics), the attempts
// histogram, p50/p99. Everything runs on 127.0.0.1, bounded by the call count and --max-seconds,
// and every process it started is stopped by pid.
//
//   node bench/chaos.mjs                         # both phases: retryResetAfterRequest true, then false
//   node bench/chaos.mjs --phases reset-ok --calls 40000 --concurrency 32 --restart-every-ms 500
//   node bench/chaos.mjs --no-retry              # no retry policy at all (the figure before retries)
//
// Phases: `reset-ok` routes with retry { retryOn: [UNAVAILABLE], retryResetAfterRequest: true }
// (the calls are idempotent echoes) and should show 0 failures; `reset-no` leaves
// retryResetAfterRequest false, and only calls reset after their request was fully sent may fail,
// each with its own decided_by.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { UNARY_PATH, call, connect, frame, waitConnect } from "./lib/grpc.mjs";
import { freePort, httpGet } from "./lib/peers.mjs";
import { isAlive, sleep, startProcess, stopProcess } from "./lib/proc.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const { values: args } = parseArgs({
  options: {
    calls: { type: "string", default: "20000" },
    concurrency: { type: "string", default: "32" },
    connections: { type: "string", default: "4" },
    "restart-every-ms": { type: "string", default: "1000" },
    "down-ms": { type: "string", default: "300" },
    phases: { type: "string", default: "reset-ok,reset-no" },
    "no-retry": { type: "boolean", default: false },
    dist: { type: "string", default: join(ROOT, "dist") },
    "max-seconds": { type: "string", default: "300" },
    "keep-tmp": { type: "boolean", default: false },
    help: { type: "boolean", default: false },
  },
});
if (args.help) {
  process.stdout.write(
    "usage: node bench/chaos.mjs [--calls N] [--concurrency C] [--connections K] [--restart-every-ms MS] [--down-ms MS]\n" +
      "                            [--phases reset-ok,reset-no] [--no-retry] [--dist DIR] [--max-seconds S] [--keep-tmp]\n",
  );
  process.exit(0);
}
const N = Number(args.calls);
const CONC = Number(args.concurrency);
const tmp = mkdtempSync(join(tmpdir(), "dojang-chaos-"));
const started = [];
const hardStop = setTimeout(() => {
  process.stderr.write(`chaos: hard stop after ${args["max-seconds"]} s\n`);
  void cleanup().then(() => process.exit(3));
}, Number(args["max-seconds"]) * 1000);
hardStop.unref();

async function cleanup() {
  await Promise.all(started.filter(isAlive).map((p) => stopProcess(p, 2000)));
  if (!args["keep-tmp"]) rmSync(tmp, { recursive: true, force: true });
}

async function startUpstream(i, port, controlPort) {
  const p = startProcess(`upstream-${i}`, process.execPath, [join(ROOT, "bench/lib/upstream.mjs"), "--port", String(port), "--control-port", String(controlPort), "--grace-ms", "1500"], {
    logDir: tmp,
  });
  started.push(p);
  for (let t = 0; t < 100; t++) {
    try {
      await httpGet(`http://127.0.0.1:${controlPort}/stats`, 500);
      return p;
    } catch {
      await sleep(20);
    }
  }
  throw new Error(`upstream ${i} did not start`);
}

function dojangConfig(listenPort, adminPort, ups, phase) {
  const route = { match: { prefix: "/" }, cluster: "chaos", timeout: "10s" };
  if (!args["no-retry"]) {
    route.retry = { retryOn: ["UNAVAILABLE"], maxAttempts: 3, perTryTimeout: "2s", backoff: { base: "25ms", max: "250ms" }, bufferBytes: "64KiB", retryResetAfterRequest: phase === "reset-ok" };
  }
  return {
    admin: { address: `127.0.0.1:${adminPort}` },
    logLevel: "warn",
    accessLog: false,
    listeners: [{ name: "chaos", address: `127.0.0.1:${listenPort}`, routes: [route] }],
    clusters: [{ name: "chaos", endpoints: ups.map((u) => `127.0.0.1:${u.port}`), connectTimeout: "500ms" }],
  };
}

function pct(sorted, q) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

function metricLines(text, name) {
  return text.split("\n").filter((l) => l.startsWith(name + "{") || l.startsWith(name + " "));
}

async function runPhase(phase) {
  const ups = [];
  for (let i = 0; i < 3; i++) ups.push({ port: await freePort(), control: await freePort(), proc: undefined });
  for (let i = 0; i < 3; i++) ups[i].proc = await startUpstream(i, ups[i].port, ups[i].control);
  const listenPort = await freePort();
  const adminPort = await freePort();
  const cfgFile = join(tmp, `dojang-${phase}.json`);
  writeFileSync(cfgFile, JSON.stringify(dojangConfig(listenPort, adminPort, ups, phase), null, 2));
  const d = startProcess(`dojang-${phase}`, process.execPath, [join(args.dist, "cli.js"), "--config", cfgFile], { logDir: tmp });
  started.push(d);
  for (let t = 0; ; t++) {
    try {
      const r = await httpGet(`http://127.0.0.1:${adminPort}/ready`, 500);
      if (r.status === 200) break;
    } catch {
      /* not yet */
    }
    if (!isAlive(d) || t > 200) throw new Error(`dojang did not start (see ${d.stderrFile})`);
    await sleep(25);
  }

  // The restarter: one upstream at a time, graceful and SIGKILL in turn.
  let restarting = true;
  const restarts = { graceful: 0, kill: 0 };
  const restarter = (async () => {
    let k = 0;
    while (restarting) {
      await sleep(Number(args["restart-every-ms"]));
      if (!restarting) break;
      const u = ups[k % 3];
      const graceful = k % 2 === 0;
      k++;
      if (graceful) {
        restarts.graceful++;
        process.kill(u.proc.pid, "SIGTERM");
      } else {
        restarts.kill++;
        process.kill(u.proc.pid, "SIGKILL");
      }
      await u.proc.exited;
      await sleep(Number(args["down-ms"]));
      u.proc = await startUpstream(k, u.port, u.control);
    }
  })();

  const sessions = [];
  for (let i = 0; i < Number(args.connections); i++) sessions.push(await waitConnect(connect(`http://127.0.0.1:${listenPort}`)));
  const body = frame(100);
  const lat = [];
  const failures = new Map();
  const attempts = new Map();
  let next = 0;
  let done = 0;
  const t0 = performance.now();
  const worker = async (w) => {
    while (next < N) {
      next++;
      const s = sessions[w % sessions.length];
      const c0 = performance.now();
      let key;
      let att;
      try {
        const r = await call(s, UNARY_PATH, body, { timeoutMs: 15_000 });
        if (r.grpcStatus !== "0") key = `grpc-status ${r.grpcStatus}: ${r.grpcMessage ?? ""}`;
        att = r.attempts;
      } catch (err) {
        key = `client error: ${err.message}`;
      }
      lat.push(performance.now() - c0);
      if (key !== undefined) failures.set(key, (failures.get(key) ?? 0) + 1);
      if (att !== undefined) attempts.set(att, (attempts.get(att) ?? 0) + 1);
      done++;
    }
  };
  await Promise.all(Array.from({ length: CONC }, (_, w) => worker(w)));
  const seconds = (performance.now() - t0) / 1000;
  restarting = false;
  await restarter;
  for (const s of sessions) s.close();
  const metrics = (await httpGet(`http://127.0.0.1:${adminPort}/metrics`, 2000)).body;
  await stopProcess(d, 5000);
  await Promise.all(ups.map((u) => stopProcess(u.proc, 2000)));
  lat.sort((a, b) => a - b);
  const decided = metricLines(metrics, "dojang_calls_total").filter((l) => !/code="OK"/.test(l) && !/ 0$/.test(l));
  return {
    phase,
    retryPolicy: !args["no-retry"],
    calls: done,
    seconds: Math.round(seconds * 10) / 10,
    callsPerSecond: Math.round(done / seconds),
    failed: [...failures.values()].reduce((a, b) => a + b, 0),
    failures: Object.fromEntries(failures),
    restarts,
    p50ms: Math.round(pct(lat, 0.5) * 100) / 100,
    p99ms: Math.round(pct(lat, 0.99) * 100) / 100,
    dojangNonOk: decided,
    retries: metricLines(metrics, "dojang_retries_total"),
    attemptsHistogram: metricLines(metrics, "dojang_call_attempts_bucket"),
  };
}

try {
  const results = [];
  for (const phase of args.phases.split(",")) results.push(await runPhase(phase));
  for (const r of results) {
    process.stdout.write(
      `\n== phase ${r.phase}${r.retryPolicy ? "" : " (no retry policy)"}: ${r.calls} calls in ${r.seconds} s (${r.callsPerSecond}/s), ` +
        `${r.restarts.graceful} graceful stops + ${r.restarts.kill} SIGKILLs\n` +
        `   client-visible failures: ${r.failed}; p50 ${r.p50ms} ms, p99 ${r.p99ms} ms\n`,
    );
    for (const [k, v] of Object.entries(r.failures)) process.stdout.write(`     ${v} × ${k}\n`);
    for (const l of r.dojangNonOk) process.stdout.write(`   ${l}\n`);
    for (const l of r.retries) process.stdout.write(`   ${l}\n`);
    for (const l of r.attemptsHistogram) process.stdout.write(`   ${l}\n`);
  }
  process.stdout.write("\n" + JSON.stringify(results) + "\n");
  await cleanup();
  process.exit(0);
} catch (err) {
  process.stderr.write(`chaos: ${err.stack ?? err}\n(temp folder kept: ${tmp})\n`);
  args["keep-tmp"] = true;
  await cleanup();
  process.exit(1);
}
