// h2load (nghttp2-client) for throughput: fixed duration with warm-up, framed gRPC body (-d),
// gRPC headers, -c connections × -m streams, one thread (it is pinned to one CPU anyway).
// Per-request latencies come from --log-file (h2load itself prints no percentiles).
import { readFileSync } from "node:fs";
import * as hdr from "hdr-histogram-js";
import { startProcess } from "./proc.mjs";

const UNITS = { s: 1, ms: 1e-3, us: 1e-6 };

/** Parses h2load's summary (nghttp2 1.52 wording). */
export function parseH2loadOutput(text) {
  const r = {};
  let m = /finished in ([\d.]+)(s|ms|us), ([\d.]+) req\/s, ([\d.]+)(B|KB|MB|GB)\/s/.exec(text);
  if (m) {
    r.seconds = Number(m[1]) * UNITS[m[2]];
    r.reqPerSec = Number(m[3]);
  }
  m = /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(text);
  if (m) {
    [r.total, r.started, r.done, r.succeeded, r.failed, r.errored, r.timeout] = m.slice(1).map(Number);
  }
  m = /status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/.exec(text);
  if (m) [r.s2xx, r.s3xx, r.s4xx, r.s5xx] = m.slice(1).map(Number);
  m = /traffic: .*?\((\d+)\) total, .*?\((\d+)\) headers.*?, .*?\((\d+)\) data/.exec(text);
  if (m) [r.bytesTotal, r.bytesHeaders, r.bytesData] = m.slice(1).map(Number);
  return r;
}

/** p50/p90/p99/p99.9 (µs) of the requests that started at or after `fromEpochUs`. */
export function latencyFromLog(file, fromEpochUs) {
  let text;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
  const h = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 600_000_000, numberOfSignificantValueDigits: 3 });
  let n = 0;
  let start = 0;
  for (;;) {
    const nl = text.indexOf("\n", start);
    if (nl < 0) break;
    const line = text.slice(start, nl);
    start = nl + 1;
    const t1 = line.indexOf("\t");
    const t2 = line.indexOf("\t", t1 + 1);
    if (t1 < 0 || t2 < 0) continue;
    const st = Number(line.slice(0, t1));
    const status = line.slice(t1 + 1, t2);
    if (st < fromEpochUs || status !== "200") continue;
    h.recordValue(Math.max(1, Number(line.slice(t2 + 1))));
    n++;
  }
  if (n === 0) return undefined;
  return {
    samples: n,
    p50: h.getValueAtPercentile(50),
    p90: h.getValueAtPercentile(90),
    p99: h.getValueAtPercentile(99),
    p999: h.getValueAtPercentile(99.9),
    max: h.maxValue,
    mean: h.mean,
  };
}

/**
 * Runs h2load once. `onMeasureStart` is called when the warm-up should be over (the harness
 * samples /proc and the upstream's counters there); the returned promise resolves after h2load
 * has exited with { ok, error, parsed, latencyUs, args, stdout }.
 */
export async function runH2load({ bin, url, dataFile, clients, streams, durationS, warmupS, headers, logFile, cpus, logDir, name, onMeasureStart }) {
  const args = [
    "-c", String(clients),
    "-m", String(streams),
    "-t", "1",
    "-D", `${Math.round(durationS * 1000)}ms`,
    "--warm-up-time", `${Math.round(warmupS * 1000)}ms`,
    "-d", dataFile,
    "--log-file", logFile,
  ];
  for (const h of headers) args.push("-H", h);
  args.push(url);
  const p = startProcess(name, bin, args, { cpus, logDir, pipeStdout: true });
  let stdout = "";
  p.child.stdout.setEncoding("utf8");
  p.child.stdout.on("data", (d) => (stdout += d));
  const spawnedUs = Date.now() * 1000;
  // h2load connects, then starts its warm-up timer; a little slack for process start-up.
  const markDelay = warmupS * 1000 + 30;
  let marked;
  const timer = setTimeout(() => {
    marked = onMeasureStart?.();
  }, markDelay);
  const killer = setTimeout(() => {
    try {
      process.kill(p.pid, "SIGKILL");
    } catch {
      /* gone */
    }
  }, (durationS + warmupS) * 1000 + 20_000);
  const exit = await p.exited;
  clearTimeout(timer);
  clearTimeout(killer);
  await marked;
  const parsed = parseH2loadOutput(stdout);
  const latencyUs = latencyFromLog(logFile, spawnedUs + markDelay * 1000);
  let error;
  if (exit.code !== 0) error = `h2load exited ${exit.code ?? exit.signal}`;
  else if (parsed.reqPerSec === undefined) error = "h2load printed no summary";
  else if (parsed.done === 0) error = "h2load finished no request";
  else if (parsed.failed > 0 || parsed.errored > 0 || parsed.timeout > 0) error = `h2load: ${parsed.failed} failed, ${parsed.errored} errored, ${parsed.timeout} timeout`;
  else if (parsed.s3xx + parsed.s4xx + parsed.s5xx > 0) error = `h2load: ${parsed.s3xx} 3xx, ${parsed.s4xx} 4xx, ${parsed.s5xx} 5xx responses`;
  return { ok: error === undefined, error, parsed, latencyUs, args: ["h2load", ...args], stdout, marked: marked !== undefined };
}
