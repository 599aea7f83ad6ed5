#!/usr/bin/env node
// dojang's benchmark harness: dojang against the upstream alone (direct), nginx and HAProxy, all
// started here on 127.0.0.1, measured in one run, A B A B interleaved. See bench/README.md.
//
//   npm run bench          the whole comparison (< 10 minutes)
//   npm run bench:quick    direct vs dojang, unary 10×10, c=1 latency, streaming, 1 round (< 1 minute)
//   node bench/run.mjs --help
import { spawn, spawnSync, execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import YAML from "yaml";
import { frame } from "./lib/grpc.mjs";
import { parseH2loadOutput, runH2load } from "./lib/h2load.mjs";
import { ALL_PEERS, correctnessProbe, httpGet, isDojang, makePeer } from "./lib/peers.mjs";
import { CLK_TCK, cpuBusy, cpuStat, parseCpuList, sleep, startProcess, stopProcess, tail, treeCpuUs, treeRssKiB, which } from "./lib/proc.mjs";
import { QUICK_SHAPES, SHAPES, shapeById } from "./lib/shapes.mjs";
import { summarize, renderTable, renderMarkdown, renderSvg } from "./lib/report.mjs";
import { summarizeProfiles } from "./lib/profile.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(HERE, "..");
/** { proxy: [cpu...], load: [cpu...] } when pinned */
let ENV_CPUS;

const USAGE = `usage: node bench/run.mjs [options]        (npm run bench / npm run bench:quick)
  --quick                  direct vs dojang; unary-c1, unary-10x10, stream-64KiB; 1 round, short durations
  --peers a,b,...          peers to run (${ALL_PEERS.join(", ")})
                           default: direct,dojang,dojang-2w,node-naive,nginx,haproxy (+dojang-alt with an extra)
  --shapes a,b,...         shapes to run (${SHAPES.map((s) => s.id).join(", ")})
  --rounds N               rounds, each running every shape on every peer in turn (default 3; quick 1)
  --duration S             measured seconds per h2load run (default 2.5; quick 2)
  --warmup S               h2load warm-up seconds (default 1; quick 0.5)
  --dojang-config-extra F  YAML fragment merged into the dojang-alt peer's config (dojang stays the baseline)
  --dojang-alt-node-args=A  node flags for the dojang-alt peer only (write it with "="), e.g.
                           --dojang-alt-node-args="--max-semi-space-size=32"
  --dojang-alt-dist D       run dojang-alt from another build (a copy of dist/ kept inside the repo,
                           e.g. cp -r dist .bench-alt-dist, then change and rebuild): A/B of code
  --naive-window BYTES     the node-naive pipe's stream and connection windows (default node's 64 KiB):
                           node:http2's own cost per MiB with the window out of the way (a long stream's floor)
  --proxy-cpus L           taskset CPU list for the proxies (default 0)
  --load-cpus L            taskset CPU list for the upstream, load generators and harness (default 1)
  --results-dir D          where to write <date>.json, latest.json|md|svg (default bench/results)
  --cpu-prof               run the dojang peers under node --cpu-prof (profiles in bench/results/tmp/,
                           a self-time summary in the report; profiling slows dojang: compare nothing with it)
  --fresh                  restart every proxy (dojang, nginx, HAProxy) before each measurement, so
                           its RSS is that shape's alone (default: each proxy runs the whole run,
                           and its RSS is the most any shape so far made it hold); the latency
                           client's warm-up is then 2 s instead of 0.5 s (the JIT starts cold)
  --keep-tmp               keep the temp folder (configs, pids, logs) even on success
  --max-minutes M          hard stop for the whole run (default 14; quick 3)
  --render FILE            only re-render the table, latest.md and latest.svg from a results JSON`;

let args;
try {
  args = parseArgs({
    options: {
      quick: { type: "boolean", default: false },
      peers: { type: "string" },
      shapes: { type: "string" },
      rounds: { type: "string" },
      duration: { type: "string" },
      warmup: { type: "string" },
      "dojang-config-extra": { type: "string" },
      "dojang-alt-node-args": { type: "string" },
      "dojang-alt-dist": { type: "string" },
      "naive-window": { type: "string" },
      "proxy-cpus": { type: "string", default: "0" },
      "load-cpus": { type: "string", default: "1" },
      "results-dir": { type: "string", default: join(HERE, "results") },
      "keep-tmp": { type: "boolean", default: false },
      fresh: { type: "boolean", default: false },
      "cpu-prof": { type: "boolean", default: false },
      "max-minutes": { type: "string" },
      render: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  }).values;
} catch (err) {
  process.stderr.write(`bench: ${err.message}\n${USAGE}\n`);
  process.exit(2);
}
if (args.help) {
  process.stdout.write(USAGE + "\n");
  process.exit(0);
}

if (args.render !== undefined) {
  const report = JSON.parse(readFileSync(args.render, "utf8"));
  report.summary = summarize(report);
  const dir = args["results-dir"];
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "latest.md"), renderMarkdown(report));
  writeFileSync(join(dir, "latest.svg"), renderSvg(report));
  process.stdout.write(renderTable(report) + `\nwrote ${join(dir, "latest.md")} and latest.svg from ${args.render}\n`);
  process.exit(0);
}

// --- re-exec: Node 24 and the harness itself pinned next to the load generators ---
// os.cpus() lists every online CPU; availableParallelism() would only see the re-exec'd
// harness's own affinity (one CPU).
const nproc = os.cpus().length;
const canPin = which("taskset") !== undefined && nproc >= 2;
if (process.env.DOJANG_BENCH_CHILD !== "1") {
  let nodeBin = process.execPath;
  const major = Number(process.versions.node.split(".")[0]);
  const local = join(REPO, "node_modules", "node", "bin", "node");
  if (major < 24 && existsSync(local)) nodeBin = local;
  const argv = [join(HERE, "run.mjs"), ...process.argv.slice(2)];
  const cmd = canPin ? ["taskset", "-c", args["load-cpus"], nodeBin, ...argv] : [nodeBin, ...argv];
  const child = spawn(cmd[0], cmd.slice(1), { stdio: "inherit", env: { ...process.env, DOJANG_BENCH_CHILD: "1" } });
  for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => child.kill(sig));
  child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
} else {
  await main().then(
    (code) => process.exit(code),
    (err) => {
      process.stderr.write(`bench: ${err?.stack ?? err}\n`);
      process.exit(1);
    },
  );
}

function log(msg) {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
}

function versionOf(cmd, argv) {
  try {
    const r = spawnSync(cmd, argv, { encoding: "utf8", timeout: 5000 });
    return ((r.stdout || "") + (r.stderr || "")).trim().split("\n")[0] || undefined;
  } catch {
    return undefined;
  }
}

function machineInfo(proxyCpus, loadCpus) {
  let cpuModel = os.cpus()[0]?.model;
  try {
    const m = /model name\s*:\s*(.*)/.exec(readFileSync("/proc/cpuinfo", "utf8"));
    if (m) cpuModel = m[1].trim();
  } catch {
    /* not Linux */
  }
  let git;
  try {
    git = execFileSync("git", ["-C", REPO, "rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim();
    const dirty = execFileSync("git", ["-C", REPO, "status", "--porcelain", "--", "src"], { encoding: "utf8" }).trim();
    if (dirty) git += " (src modified)";
  } catch {
    /* no git */
  }
  const pkg = (p) => {
    try {
      return JSON.parse(readFileSync(join(REPO, "node_modules", p, "package.json"), "utf8")).version;
    } catch {
      return undefined;
    }
  };
  return {
    cpuModel,
    nproc,
    memTotalGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    kernel: `${os.type()} ${os.release()}`,
    node: process.version,
    nginx: which("nginx") ? versionOf(which("nginx"), ["-v"]) : "not installed",
    haproxy: which("haproxy") ? versionOf(which("haproxy"), ["-v"]) : "not installed",
    h2load: which("h2load") ? versionOf("h2load", ["--version"]) : "not installed",
    autocannon: pkg("autocannon"),
    hdrHistogramJs: pkg("hdr-histogram-js"),
    dojang: JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")).version,
    gitCommit: git,
    clkTck: CLK_TCK,
    pinning: canPin
      ? `proxy processes on CPU ${proxyCpus} (taskset -c ${proxyCpus}); upstream, load generators (h2load, own clients, autocannon) and the harness on CPU ${loadCpus} (taskset -c ${loadCpus})`
      : `not pinned (${which("taskset") ? `only ${nproc} CPU` : "taskset missing"}): figures are noisier`,
  };
}

/** A child client of bench/lib/client.mjs: JSON lines; callbacks on mark/opened. */
function runClient(env, name, mode, cliArgs, { onMark, onOpened } = {}) {
  const p = startProcess(name, env.nodeBin, [join(HERE, "lib", "client.mjs"), mode, ...cliArgs], {
    cpus: env.loadCpus,
    logDir: env.tmp,
    cwd: REPO,
    pipeStdout: true,
    pipeStdin: true,
  });
  return new Promise((resolve) => {
    let result;
    const pending = [];
    const rl = createInterface({ input: p.child.stdout });
    rl.on("line", (line) => {
      let ev;
      try {
        ev = JSON.parse(line);
      } catch {
        return;
      }
      if (ev.event === "mark") pending.push(Promise.resolve(onMark?.()));
      else if (ev.event === "opened") {
        const pr = Promise.resolve(onOpened?.(ev)).then(
            (r) => {
              p.child.stdin.write("release\n");
              return r;
            },
            (err) => {
              p.child.stdin.write("release\n");
              throw err;
            },
          );
        pr.catch(() => {}); // settled (and reported) after the client exits
        pending.push(pr);
      } else if (ev.event === "result") {
        result = ev;
        // sample as soon as the result is out, before the client tears its connections down
        pending.push(Promise.resolve(onMark?.("end")));
      }
    });
    p.exited.then(async (exit) => {
      let extraError;
      const settled = await Promise.allSettled(pending);
      for (const s of settled) if (s.status === "rejected") extraError ??= s.reason?.message ?? String(s.reason);
      if (result === undefined) result = { ok: false, error: `client ${mode} exited ${exit.code ?? exit.signal} without a result: ${tail(p.stderrFile, 5)}` };
      if (extraError) result = { ...result, ok: false, error: extraError };
      resolve({ result, samples: settled.map((s) => (s.status === "fulfilled" ? s.value : undefined)) });
    });
  });
}

async function main() {
  const quick = args.quick;
  const proxyCpus = args["proxy-cpus"];
  const loadCpus = args["load-cpus"];
  const rounds = Number(args.rounds ?? (quick ? 1 : 3));
  const durationS = Number(args.duration ?? (quick ? 2 : 2.5));
  const warmupS = Number(args.warmup ?? (quick ? 0.5 : 1));
  const maxMinutes = Number(args["max-minutes"] ?? (quick ? 3 : 14));
  // a fresh process (--fresh) has its JIT to warm before each latency window, not only before the first
  const latencyWarmMs = quick ? 300 : args.fresh ? 2000 : 500;
  const latencyMs = quick ? 2000 : 2500;

  let extraConfig;
  let extraFile = args["dojang-config-extra"];
  if (extraFile !== undefined) {
    extraFile = resolve(extraFile);
    extraConfig = YAML.parse(readFileSync(extraFile, "utf8")) ?? {};
    if (typeof extraConfig !== "object" || Array.isArray(extraConfig)) throw new Error(`${extraFile}: the fragment must be a YAML mapping`);
  }
  const defaultPeers = quick ? ["direct", "dojang"] : ["direct", "dojang", "dojang-2w", "node-naive", "nginx", "haproxy"];
  const altNodeArgs = args["dojang-alt-node-args"] ? args["dojang-alt-node-args"].split(/\s+/).filter(Boolean) : [];
  const altDist = args["dojang-alt-dist"] === undefined ? undefined : resolve(args["dojang-alt-dist"]);
  if (altDist !== undefined && !existsSync(join(altDist, "cli.js"))) throw new Error(`--dojang-alt-dist ${altDist}: no cli.js there`);
  if (extraConfig !== undefined || altNodeArgs.length > 0 || altDist !== undefined) defaultPeers.splice(2, 0, "dojang-alt");
  const peerNames = args.peers ? args.peers.split(",").map((s) => s.trim()).filter(Boolean) : defaultPeers;
  for (const n of peerNames) if (!ALL_PEERS.includes(n)) throw new Error(`unknown peer "${n}" (known: ${ALL_PEERS.join(", ")})`);
  const shapes = (args.shapes ? args.shapes.split(",").map((s) => s.trim()) : quick ? QUICK_SHAPES : SHAPES.map((s) => s.id)).map(shapeById);

  const tmp = mkdtempSync(join(os.tmpdir(), "dojang-bench-"));
  const started = new Date();
  const stamp = started.toISOString().replace(/[:]/g, "-").replace(/\..*/, "");
  const cpuProfDir = args["cpu-prof"] ? join(args["results-dir"], "tmp", `cpuprofile-${stamp}`) : undefined;
  const env = {
    tmp,
    repo: REPO,
    nodeBin: process.execPath,
    proxyCpus: canPin ? proxyCpus : undefined,
    loadCpus: canPin ? loadCpus : undefined,
    extraConfig,
    // Reported relative to the repo: results are committed, machine paths are not.
    extraFile: extraFile === undefined ? undefined : relative(REPO, extraFile),
    altNodeArgs,
    altDist,
    naiveWindow: args["naive-window"] === undefined ? undefined : Number(args["naive-window"]),
    altDistLabel: altDist === undefined ? undefined : relative(REPO, altDist),
    upstreamPort: undefined,
    proxyCpuList: parseCpuList(proxyCpus),
    loadCpuList: parseCpuList(loadCpus),
  };
  if (canPin) ENV_CPUS = { proxy: env.proxyCpuList, load: env.loadCpuList };
  env.cpuProfDir = cpuProfDir;
  const machine = machineInfo(proxyCpus, loadCpus);
  let failures = 0;
  let upstream;
  const peers = [];
  const skipped = [];
  const results = [];
  const notes = [];
  const correctness = {};

  const hardStop = setTimeout(() => {
    log(`hard stop: the run took longer than ${maxMinutes} minutes; logs kept in ${tmp}`);
    process.exit(1);
  }, maxMinutes * 60_000);
  hardStop.unref();
  let interrupted = false;
  for (const sig of ["SIGINT", "SIGTERM"]) {
    process.on(sig, () => {
      if (interrupted) process.exit(130);
      interrupted = true;
      log(`${sig}: stopping; logs kept in ${tmp}`);
      process.exit(130);
    });
  }

  const out = (s = "") => process.stdout.write(s + "\n");
  out(`dojang bench — ${started.toISOString()}${quick ? " (quick)" : ""}`);
  out(`machine: ${machine.cpuModel}, ${machine.nproc} CPUs, ${machine.memTotalGiB} GiB, ${machine.kernel}`);
  out(`versions: node ${machine.node}; ${machine.nginx}; ${machine.haproxy}; ${machine.h2load}; autocannon ${machine.autocannon}; dojang ${machine.dojang} ${machine.gitCommit ?? ""}`);
  out(`pinning: ${machine.pinning}`);
  out(`plan: ${rounds} round(s) × ${shapes.length} shape(s) × peers [${peerNames.join(", ")}], interleaved (each round: each shape, each peer in turn, order rotated per round); h2load ${warmupS}s warm-up + ${durationS}s`);
  out(`temp folder: ${tmp}`);

  try {
    // --- data files ---
    const dataFiles = {};
    for (const s of shapes) {
      if ((s.kind === "h2load" || s.kind === "soak") && dataFiles[s.size] === undefined) {
        dataFiles[s.size] = join(tmp, `req-${s.size}.bin`);
        writeFileSync(dataFiles[s.size], frame(s.size));
      }
    }
    const h2loadBin = which("h2load");
    if (h2loadBin === undefined && shapes.some((s) => s.kind === "h2load")) {
      notes.push("h2load not installed (bench/setup installs nghttp2-client): every h2load shape skipped");
    }

    // --- upstream ---
    upstream = startProcess("upstream", env.nodeBin, [join(HERE, "lib", "upstream.mjs")], { cpus: env.loadCpus, logDir: tmp, cwd: REPO, pipeStdout: true });
    const ready = await new Promise((res, rej) => {
      const t = setTimeout(() => rej(new Error(`upstream not ready: ${tail(upstream.stderrFile)}`)), 10_000);
      createInterface({ input: upstream.child.stdout }).once("line", (l) => {
        clearTimeout(t);
        res(JSON.parse(l));
      });
    });
    env.upstreamPort = ready.port;
    const controlUrl = `http://127.0.0.1:${ready.controlPort}/stats`;
    const upStats = async () => JSON.parse((await httpGet(controlUrl)).body);
    log(`upstream on 127.0.0.1:${ready.port} (pid ${upstream.pid})`);

    // --- peers ---
    for (const name of peerNames) {
      const p = makePeer(name, env);
      let why;
      try {
        why = await p.prepare();
      } catch (err) {
        why = `prepare failed: ${err.message}`;
      }
      if (why === undefined) {
        try {
          await p.start();
          log(`${name} ready on ${p.url}${p.pid ? ` (pid ${p.pid})` : ""}`);
        } catch (err) {
          why = `did not start: ${err.message}`;
          failures++;
        }
      }
      if (why !== undefined) {
        skipped.push({ peer: name, reason: why });
        out(`SKIPPED peer ${name}: ${why}`);
      } else {
        peers.push(p);
      }
    }
    // --- correctness, once per peer: numbers from a peer that answers wrongly need a caveat ---
    for (const p of peers) {
      try {
        correctness[p.name] = await correctnessProbe(p.url);
      } catch (err) {
        correctness[p.name] = [{ name: "probe", calls: 0, bad: 1, example: err.message }];
      }
      for (const c of correctness[p.name]) {
        if (c.bad > 0) out(`CORRECTNESS ${p.name}: ${c.bad}/${c.calls} ${c.name} calls wrong, e.g. ${c.example}`);
      }
    }
    for (const s of shapes) {
      for (const p of peers) {
        const why = shapeSkipReason(s, p, h2loadBin);
        if (why) skipped.push({ peer: p.name, shape: s.id, reason: why });
      }
    }
    const shapeSkips = new Map();
    for (const sk of skipped.filter((x) => x.shape)) {
      const k = `${sk.shape}: ${sk.reason}`;
      shapeSkips.set(k, [...(shapeSkips.get(k) ?? []), sk.peer]);
    }
    for (const [k, ps] of shapeSkips) out(`skipped ${ps.join(", ")} for ${k}`);

    // --- rounds ---
    const sample = async (peer, label) => ({
      label,
      t: performance.now(),
      sys: cpuStat(),
      cpuUs: peer.pid ? treeCpuUs(peer.pid) : undefined,
      upCpuUs: treeCpuUs(upstream.pid),
      up: await upStats(),
    });

    for (let round = 1; round <= rounds; round++) {
      for (const shape of shapes) {
        const order = peers.slice((round - 1) % Math.max(1, peers.length)).concat(peers.slice(0, (round - 1) % Math.max(1, peers.length)));
        for (const peer of order) {
          if (shapeSkipReason(shape, peer, h2loadBin)) continue;
          if (peer.broken) continue;
          const tag = `round ${round}/${rounds} ${shape.id} ${peer.name}`;
          let r;
          try {
            if (!peer.alive) {
              log(`${peer.name} is not running (${JSON.stringify(peer.proc?.exitInfo)}): restarting`);
              notes.push(`${peer.name} had exited before ${tag} and was restarted: ${tail(peer.proc?.stderrFile ?? "", 3)}`);
              await peer.restart();
            }
            if ((shape.fresh || args.fresh) && peer.proxied) await peer.restart();
            r = await measure(env, peer, shape, { sample, upStats, h2loadBin, dataFiles, durationS, warmupS, latencyWarmMs, latencyMs });
            interference(env, r);
          } catch (err) {
            r = { ok: false, error: err.message };
          }
          if (!peer.alive && peer.proxied) {
            r = { ...r, ok: false, error: `${peer.name} died during the run: ${JSON.stringify(peer.proc.exitInfo)} ${tail(peer.proc.stderrFile, 3)}` };
          }
          results.push({ peer: peer.name, shape: shape.id, round, ...r });
          if (!r.ok) failures++;
          log(`${tag}: ${r.ok ? brief(r) : "FAILED " + r.error}${r.warnings ? ` WARNING ${r.warnings.join("; ")}` : ""}`);
          if (!peer.alive && peer.proxied) {
            try {
              await peer.restart();
            } catch (err) {
              peer.broken = true;
              notes.push(`${peer.name} could not be restarted after ${tag}: ${err.message}; its remaining measurements were skipped`);
            }
          }
        }
      }
    }
  } finally {
    for (const p of peers) await p.stop().catch(() => {});
    if (upstream) await stopProcess(upstream, 3000);
  }

  // --- report ---
  const finished = new Date();
  const report = {
    schema: 1,
    startedAt: started.toISOString(),
    finishedAt: finished.toISOString(),
    seconds: Math.round((finished - started) / 100) / 10,
    quick,
    machine,
    plan: {
      rounds,
      fresh: args.fresh || undefined,
      h2load: { warmupS, durationS },
      latency: { warmupMs: latencyWarmMs, durationMs: latencyMs },
      peers: peerNames,
      shapes: shapes.map((s) => ({ ...s })),
      dojangConfigExtra: extraFile ? { file: relative(REPO, extraFile), fragment: extraConfig } : undefined,
      dojangAltNodeArgs: altNodeArgs.length > 0 ? altNodeArgs : undefined,
    },
    peers: Object.fromEntries(peers.map((p) => [p.name, p.describe()])),
    skipped,
    correctness,
    notes,
    failures,
    results,
  };
  report.summary = summarize(report);
  if (cpuProfDir) {
    report.cpuProfiles = {};
    for (const p of peers) if (p.profileDir) report.cpuProfiles[p.name] = { dir: p.profileDir, ...summarizeProfiles(p.profileDir) };
  }
  const table = renderTable(report);
  out("");
  out(table);

  const dir = args["results-dir"];
  mkdirSync(dir, { recursive: true });
  const json = JSON.stringify(report, null, 2) + "\n";
  writeFileSync(join(dir, `${stamp}${quick ? "-quick" : ""}.json`), json);
  writeFileSync(join(dir, "latest.json"), json);
  writeFileSync(join(dir, "latest.md"), renderMarkdown(report));
  writeFileSync(join(dir, "latest.svg"), renderSvg(report));
  out(`\nwrote ${join(dir, `${stamp}${quick ? "-quick" : ""}.json`)}, latest.json, latest.md, latest.svg (${report.seconds}s)`);

  if (failures > 0 || args["keep-tmp"]) {
    out(`${failures > 0 ? `${failures} failure(s): ` : ""}logs kept in ${tmp}`);
  } else {
    rmSync(tmp, { recursive: true, force: true });
  }
  return failures > 0 ? 1 : 0;
}

function shapeSkipReason(shape, peer, h2loadBin) {
  if ((shape.kind === "h2load" || shape.kind === "soak") && h2loadBin === undefined) return "h2load not installed";
  if (shape.only === "proxied" && !peer.proxied) return "no proxy process to measure (direct)";
  if (shape.only === "dojang" && !isDojang(peer)) return "admin /metrics is dojang's own HTTP/1.1 path";
  if (shape.skip?.[peer.name]) return shape.skip[peer.name];
  return undefined;
}

function brief(r) {
  const m = r.metrics ?? {};
  const f = (v, d = 0) => (v === undefined ? "-" : v.toFixed(d));
  const parts = [];
  if (m.callsPerSec !== undefined) parts.push(`${f(m.callsPerSec)} calls/s`);
  if (m.mbPerSec !== undefined) parts.push(`${f(m.mbPerSec, 1)} MB/s`);
  if (m.p99Us !== undefined) parts.push(`p99 ${f(m.p99Us)}µs`);
  if (m.cpuUsPerCall !== undefined) parts.push(`${f(m.cpuUsPerCall, 1)} µs CPU/call`);
  if (m.rssKiB !== undefined) parts.push(`RSS ${f(m.rssKiB / 1024, 1)} MiB`);
  if (m.memDeltaKiB !== undefined) parts.push(`Δ ${f(m.memDeltaKiB / 1024, 1)} MiB`);
  if (m.kibPerUnit !== undefined) parts.push(`${f(m.kibPerUnit, 1)} KiB/${m.unit}`);
  return parts.join(", ");
}

async function dojangCodes(peer) {
  if (!isDojang(peer)) return undefined;
  try {
    return await peer.callCodes();
  } catch {
    return undefined;
  }
}

function nonOkCalls(before, after) {
  if (before === undefined || after === undefined) return undefined;
  let n = 0;
  const byCode = {};
  for (const [code, v] of Object.entries(after)) {
    const d = v - (before[code] ?? 0);
    if (code !== "OK" && d > 0) {
      n += d;
      byCode[code] = d;
    }
  }
  return { n, byCode };
}

/**
 * Other processes on this machine (another session's tests, say) share the pinned CPUs: how
 * busy the proxy's CPU(s) were beyond the proxy itself, and the hypervisor's steal, per run.
 */
function interference(env, r) {
  const m = r.metrics;
  if (!m || m.proxyCpuBusyPercent === undefined) return;
  const foreign = m.proxyCpuBusyPercent - (m.cpuPercent ?? 0);
  m.foreignCpuPercent = Math.max(0, foreign);
  const warn = [];
  if (foreign > 10) warn.push(`other processes used ~${Math.round(foreign)}% of the proxy CPU (${env.proxyCpuList.join(",")}) during this run`);
  if (m.stealPercent > 5) warn.push(`hypervisor steal ${m.stealPercent.toFixed(0)}% on the pinned CPUs`);
  if (warn.length > 0) r.warnings = [...(r.warnings ?? []), ...warn];
}

function cpuFigures(s0, s1, bytesKey = false) {
  const calls = s1.up.calls - s0.up.calls;
  const m = { windowCalls: calls, windowSeconds: (s1.t - s0.t) / 1000 };
  if (s0.sys && s1.sys && ENV_CPUS) {
    const p = cpuBusy(s0.sys, s1.sys, ENV_CPUS.proxy);
    const l = cpuBusy(s0.sys, s1.sys, ENV_CPUS.load);
    if (p) m.proxyCpuBusyPercent = p.busyPercent;
    if (l) m.loadCpuBusyPercent = l.busyPercent;
    if (p && l) m.stealPercent = p.stealPercent + l.stealPercent;
  }
  if (s0.cpuUs !== undefined && s1.cpuUs !== undefined && calls > 0) {
    m.cpuUsPerCall = (s1.cpuUs - s0.cpuUs) / calls;
    m.cpuPercent = ((s1.cpuUs - s0.cpuUs) / ((s1.t - s0.t) * 1000)) * 100;
  }
  if (calls > 0) m.upstreamCpuUsPerCall = (s1.upCpuUs - s0.upCpuUs) / calls;
  if (bytesKey) {
    const mib = (s1.up.bytesOut - s0.up.bytesOut) / 2 ** 20;
    if (mib > 0 && m.cpuUsPerCall !== undefined) m.cpuUsPerMiB = (s1.cpuUs - s0.cpuUs) / mib;
  }
  return m;
}

async function measure(env, peer, shape, ctx) {
  const { sample, upStats } = ctx;
  const codes0 = await dojangCodes(peer);
  let r;
  if (shape.kind === "h2load") r = await measureH2load(env, peer, shape, ctx);
  else if (shape.kind === "latency") r = await measureLatency(env, peer, shape, ctx);
  else if (shape.kind === "hold") r = await measureHold(env, peer, shape, { sample, upStats });
  else if (shape.kind === "idle") r = await measureIdle(env, peer, shape);
  else if (shape.kind === "soak") r = await measureSoak(env, peer, shape, ctx);
  else if (shape.kind === "admin") r = await measureAdmin(env, peer, shape, ctx);
  else throw new Error(`unknown shape kind ${shape.kind}`);
  if (peer.pid && r.metrics && r.metrics.rssKiB === undefined) r.metrics.rssKiB = treeRssKiB(peer.pid);
  const bad = nonOkCalls(codes0, await dojangCodes(peer));
  if (bad !== undefined) {
    r.dojangNonOkCalls = bad.n;
    // h2load resets the streams still in flight when its duration ends: dojang counts those as
    // CANCELLED (client_cancel), at most one per concurrent stream.
    const inFlight = shape.kind === "h2load" ? shape.clients * shape.streams : 0;
    const cancelled = bad.byCode.CANCELLED ?? 0;
    if (cancelled > 0 && cancelled <= inFlight) {
      r.dojangCancelledAtEnd = cancelled;
      bad.n -= cancelled;
      delete bad.byCode.CANCELLED;
    }
    if (bad.n > 0 && r.ok) {
      r.ok = false;
      r.error = `dojang counted ${bad.n} non-OK call(s): ${JSON.stringify(bad.byCode)}`;
    }
  }
  return r;
}

async function measureH2load(env, peer, shape, { sample, h2loadBin, dataFiles, durationS, warmupS }) {
  let s0;
  const logFile = join(env.tmp, `h2load-${peer.name}-${shape.id}.log`);
  rmSync(logFile, { force: true });
  const headers = ["content-type: application/grpc", "te: trailers", ...(shape.headers ?? [])];
  const h = await runH2load({
    bin: h2loadBin,
    url: peer.url + shape.path,
    dataFile: dataFiles[shape.size],
    clients: shape.clients,
    streams: shape.streams,
    durationS,
    warmupS,
    headers,
    logFile,
    cpus: env.loadCpus,
    logDir: env.tmp,
    name: `h2load-${peer.name}-${shape.id}`,
    onMeasureStart: async () => (s0 = await sample(peer, "start")),
  });
  const s1 = await sample(peer, "end");
  rmSync(logFile, { force: true });
  const p = h.parsed;
  const metrics = {
    callsPerSec: p.reqPerSec,
    calls: p.done,
    ...(s0 ? cpuFigures(s0, s1, shape.bytes) : {}),
  };
  // h2load's "traffic ... total" is reset after the warm-up (its "data" figure is not): bytes
  // received in the measured window, headers included (a few hundred bytes per call).
  if (shape.bytes && p.bytesTotal !== undefined) metrics.mbPerSec = p.bytesTotal / durationS / 1e6;
  if (h.latencyUs) Object.assign(metrics, { p50Us: h.latencyUs.p50, p90Us: h.latencyUs.p90, p99Us: h.latencyUs.p99, p999Us: h.latencyUs.p999, maxUs: h.latencyUs.max });
  let error = h.error;
  const warnings = [];
  if (!error && s0 === undefined) error = "h2load ended before its warm-up was over";
  // h2load checks no gRPC status and no body: compare what arrived with what the upstream sends.
  if (p.bytesTotal !== undefined && p.done > 0) {
    metrics.bytesPerCall = p.bytesTotal / p.done;
    metrics.bodyBytesRatio = metrics.bytesPerCall / shape.responseBytes;
    if (metrics.bodyBytesRatio < 0.97) {
      warnings.push(`responses short: ${Math.round(metrics.bytesPerCall)} bytes received per call, the upstream sends ${shape.responseBytes} of messages`);
    }
  }
  // h2load only sees HTTP 200; the upstream's own count says whether the calls reached it.
  if (!error && metrics.windowCalls !== undefined && p.done > 0) {
    const expected = (p.done * (metrics.windowSeconds ?? durationS)) / (p.seconds || durationS);
    if (metrics.windowCalls < expected * 0.9) error = `the upstream answered ${metrics.windowCalls} calls in the window, h2load counted ${p.done}`;
  }
  return { ok: !error, error, warnings: warnings.length > 0 ? warnings : undefined, metrics, h2load: { args: h.args.join(" "), ...p } };
}

async function measureLatency(env, peer, shape, { sample, latencyWarmMs, latencyMs }) {
  const { result, samples } = await runClient(
    env,
    `latency-${peer.name}`,
    "latency",
    ["--url", peer.url, "--path", shape.path, "--size", String(shape.size), "--warmup-ms", String(latencyWarmMs), "--duration-ms", String(latencyMs)],
    { onMark: (label) => sample(peer, label ?? "start") },
  );
  const s0 = samples.find((s) => s?.label === "start");
  const s1 = samples.find((s) => s?.label === "end");
  const metrics = { callsPerSec: result.callsPerSec, calls: result.calls };
  if (s0 && s1) Object.assign(metrics, cpuFigures(s0, s1));
  if (result.latencyUs) {
    const l = result.latencyUs;
    Object.assign(metrics, { p50Us: l.p50, p90Us: l.p90, p99Us: l.p99, p999Us: l.p999, maxUs: l.max, meanUs: l.mean });
  }
  return { ok: result.ok === true, error: result.error, metrics };
}

async function measureAdmin(env, peer, shape, { sample, durationS }) {
  const { result, samples } = await runClient(
    env,
    `admin-${peer.name}`,
    "admin",
    ["--url", `http://127.0.0.1:${peer.adminPort}/metrics`, "--conns", String(shape.conns), "--warmup-ms", "1000", "--duration-ms", String(Math.max(1, Math.round(durationS - 1)) * 1000)],
    { onMark: (label) => sample(peer, label ?? "start") },
  );
  const s0 = samples.find((s) => s?.label === "start");
  const s1 = samples.find((s) => s?.label === "end");
  const metrics = { callsPerSec: result.callsPerSec, calls: result.calls, mbPerSec: result.mbPerSec };
  if (s0 && s1) {
    const f = cpuFigures(s0, s1);
    for (const k of ["proxyCpuBusyPercent", "loadCpuBusyPercent", "stealPercent"]) if (f[k] !== undefined) metrics[k] = f[k];
  }
  if (s0 && s1 && result.calls > 0) {
    metrics.cpuUsPerCall = (s1.cpuUs - s0.cpuUs) / result.calls;
    metrics.cpuPercent = ((s1.cpuUs - s0.cpuUs) / ((s1.t - s0.t) * 1000)) * 100;
  }
  if (result.latencyUs) {
    const l = result.latencyUs;
    Object.assign(metrics, { p50Us: l.p50, p90Us: l.p90, p99Us: l.p99, p999Us: l.p999, maxUs: l.max });
  }
  return { ok: result.ok === true, error: result.error, metrics };
}

async function measureHold(env, peer, shape, { upStats }) {
  /** the second after-sample: this long after the held calls ended */
  const AFTER_LONG_MS = 10_000;
  await sleep(300);
  const base = treeRssKiB(peer.pid);
  const active0 = (await upStats()).active;
  let held;
  let upstreamSaw;
  const { result } = await runClient(
    env,
    `hold-${peer.name}`,
    "hold",
    ["--url", peer.url, "--streams", String(shape.streams), "--per-conn", String(shape.perConn), "--size", "100", "--timeout-ms", "60000"],
    {
      onOpened: async (ev) => {
        // the calls are held when the upstream has them all open
        const deadline = Date.now() + 20_000;
        for (;;) {
          upstreamSaw = (await upStats()).active - active0;
          if (upstreamSaw >= shape.streams || Date.now() > deadline) break;
          await sleep(50);
        }
        await sleep(500);
        held = { rssKiB: treeRssKiB(peer.pid), openMs: ev.openMs, connections: ev.connections };
        if (upstreamSaw < shape.streams) throw new Error(`only ${upstreamSaw} of ${shape.streams} calls reached the upstream within 20s`);
      },
    },
  );
  const metrics = {};
  if (held) {
    metrics.rssKiB = held.rssKiB;
    metrics.rssBaseKiB = base;
    metrics.memDeltaKiB = held.rssKiB - base;
    metrics.kibPerUnit = (held.rssKiB - base) / shape.streams;
    metrics.unit = "call";
    metrics.openMs = held.openMs;
    metrics.upstreamSaw = upstreamSaw;
    metrics.clientConnections = held.connections;
    if (shape.afterMs !== undefined && result.ok === true) {
      // Back to baseline? The calls have ended (afterMs later, then 10 s after they ended).
      await sleep(shape.afterMs);
      metrics.rssAfterKiB = treeRssKiB(peer.pid);
      metrics.rssAfterOverBasePct = ((metrics.rssAfterKiB - base) / base) * 100;
      // issue 13 asks for "back under 128 MiB within 10 s": sample again 10 s after the calls ended
      if (shape.afterMs < AFTER_LONG_MS) {
        await sleep(AFTER_LONG_MS - shape.afterMs);
        metrics.rssAfter10sKiB = treeRssKiB(peer.pid);
      }
    }
  }
  return { ok: result.ok === true && held !== undefined, error: result.error, metrics };
}

/** h2load -n N (a count, not a duration) against the peer; resolves with the parsed summary. */
async function h2loadCount(env, peer, shape, h2loadBin, dataFile, n) {
  const args = ["-c", String(shape.clients), "-m", String(shape.streams), "-t", "1", "-n", String(n), "-d", dataFile, "-H", "content-type: application/grpc", "-H", "te: trailers", peer.url + shape.path];
  const p = startProcess(`soak-${peer.name}`, h2loadBin, args, { cpus: env.loadCpus, logDir: env.tmp, pipeStdout: true });
  let stdout = "";
  p.child.stdout.setEncoding("utf8");
  p.child.stdout.on("data", (d) => (stdout += d));
  const killer = setTimeout(() => {
    try {
      process.kill(p.pid, "SIGKILL");
    } catch {
      /* gone */
    }
  }, 600_000);
  const exit = await p.exited;
  clearTimeout(killer);
  const parsed = parseH2loadOutput(stdout);
  let error;
  if (exit.code !== 0) error = `h2load exited ${exit.code ?? exit.signal}`;
  else if (parsed.succeeded !== n) error = `h2load: ${parsed.succeeded ?? 0} of ${n} succeeded`;
  return { error, parsed };
}

/** RSS after `first` calls and after `total`, each `settleMs` after the load stops (a leak grows the second). */
async function measureSoak(env, peer, shape, { h2loadBin, dataFiles }) {
  await sleep(300);
  const base = treeRssKiB(peer.pid);
  const t0 = performance.now();
  const a = await h2loadCount(env, peer, shape, h2loadBin, dataFiles[shape.size], shape.first);
  if (a.error) return { ok: false, error: a.error, metrics: {} };
  const loadedFirst = treeRssKiB(peer.pid);
  await sleep(shape.settleMs);
  const first = treeRssKiB(peer.pid);
  const b = await h2loadCount(env, peer, shape, h2loadBin, dataFiles[shape.size], shape.total - shape.first);
  if (b.error) return { ok: false, error: b.error, metrics: {} };
  const loadedTotal = treeRssKiB(peer.pid);
  await sleep(shape.settleMs);
  const total = treeRssKiB(peer.pid);
  const seconds = (performance.now() - t0) / 1000 - (2 * shape.settleMs) / 1000;
  return {
    ok: true,
    metrics: {
      callsPerSec: shape.total / seconds,
      rssBaseKiB: base,
      rssLoadedFirstKiB: loadedFirst,
      rssFirstKiB: first,
      rssLoadedTotalKiB: loadedTotal,
      rssKiB: total,
      rssAfterKiB: total,
      soakGrowthPct: ((total - first) / first) * 100,
    },
  };
}

async function measureIdle(env, peer, shape) {
  await sleep(300);
  const base = treeRssKiB(peer.pid);
  const anonBase = treeRssKiB(peer.pid, "RssAnon");
  let held;
  const { result } = await runClient(env, `idle-${peer.name}`, "idle", ["--url", peer.url, "--conns", String(shape.conns), "--timeout-ms", "60000"], {
    onOpened: async (ev) => {
      await sleep(500);
      held = { rssKiB: treeRssKiB(peer.pid), openMs: ev.openMs };
    },
  });
  const metrics = {};
  if (held) {
    metrics.rssKiB = held.rssKiB;
    metrics.rssBaseKiB = base;
    metrics.rssAnonBaseKiB = anonBase;
    metrics.memDeltaKiB = held.rssKiB - base;
    metrics.kibPerUnit = (held.rssKiB - base) / shape.conns;
    metrics.unit = "conn";
    metrics.openMs = held.openMs;
  }
  return { ok: result.ok === true && held !== undefined, error: result.error, metrics };
}
