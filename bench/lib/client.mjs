// The harness's own load clients (run as child processes, pinned next to the upstream).
// Each prints JSON lines on stdout: {"event":"mark"} when its measured window starts (the harness
// samples /proc then), {"event":"opened"} when held streams/connections are up (the harness then
// samples RSS and writes "release" on stdin), and finally {"event":"result", ...}.
//
//   latency  sequential unary calls on one connection, 1 stream; warm-up, then hdr-histogram
//            p50/p90/p99/p99.9 of each call's time (µs), echo and grpc-status checked
//   hold     N unary calls held open (request not ended, so the upstream does not answer yet)
//            over N/perConn connections; on "release" ends them and checks every answer
//   idle     N idle HTTP/2 connections (SETTINGS exchanged, no stream)
//   admin    autocannon (HTTP/1.1) on dojang's admin /metrics
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import * as hdr from "hdr-histogram-js";
import { UNARY_PATH, connect, frame, grpcRequestHeaders, waitConnect } from "./grpc.mjs";

const { values: a, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    url: { type: "string" },
    path: { type: "string", default: UNARY_PATH },
    size: { type: "string", default: "100" },
    "warmup-ms": { type: "string", default: "500" },
    "duration-ms": { type: "string", default: "2500" },
    streams: { type: "string", default: "1000" },
    "per-conn": { type: "string", default: "100" },
    conns: { type: "string", default: "100" },
    batch: { type: "string", default: "100" },
    "timeout-ms": { type: "string", default: "30000" },
  },
});
const mode = positionals[0];
const url = a.url;
const emit = (o) => process.stdout.write(JSON.stringify(o) + "\n");
const hardStop = setTimeout(() => {
  emit({ event: "result", ok: false, error: `client ${mode} gave up after ${a["timeout-ms"]}ms` });
  process.exit(3);
}, Number(a["timeout-ms"]) + Number(a["warmup-ms"]) + Number(a["duration-ms"]));
hardStop.unref();

function waitRelease() {
  return new Promise((resolve) => {
    const rl = createInterface({ input: process.stdin });
    rl.on("line", (l) => {
      if (l.trim() === "release") {
        rl.close();
        resolve();
      }
    });
    rl.on("close", resolve);
  });
}

/** One unary call, resolved with the time it took in µs (or rejected). Minimal allocations. */
function unary(session, headers, body) {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const req = session.request(headers, { endStream: false });
    let len = 0;
    let gs;
    req.on("response", (h) => {
      if (h["grpc-status"] !== undefined) gs = h["grpc-status"];
    });
    req.on("trailers", (h) => {
      gs = h["grpc-status"];
    });
    req.on("data", (c) => {
      len += c.length;
    });
    req.on("error", reject);
    req.on("close", () => {
      const us = Number(process.hrtime.bigint() - t0) / 1000;
      if (gs !== "0") return reject(new Error(`grpc-status ${gs} (rst ${req.rstCode})`));
      if (len !== body.length) return reject(new Error(`echo of ${len} bytes, sent ${body.length}`));
      resolve(us);
    });
    req.end(body);
  });
}

async function latency() {
  const s = connect(url);
  await waitConnect(s);
  const body = frame(Number(a.size));
  const headers = grpcRequestHeaders(a.path, "bench");
  const warmEnd = Date.now() + Number(a["warmup-ms"]);
  while (Date.now() < warmEnd) await unary(s, headers, body);
  const h = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3 });
  emit({ event: "mark" });
  const t0 = process.hrtime.bigint();
  const end = Date.now() + Number(a["duration-ms"]);
  let calls = 0;
  let errors = 0;
  let firstError;
  while (Date.now() < end) {
    try {
      h.recordValue(Math.max(1, Math.round(await unary(s, headers, body))));
      calls++;
    } catch (err) {
      errors++;
      firstError ??= err.message;
      if (errors > 100) break;
    }
  }
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  emit({
    event: "result",
    ok: errors === 0,
    error: firstError,
    calls,
    errors,
    seconds,
    callsPerSec: calls / seconds,
    latencyUs: {
      p50: h.getValueAtPercentile(50),
      p90: h.getValueAtPercentile(90),
      p99: h.getValueAtPercentile(99),
      p999: h.getValueAtPercentile(99.9),
      max: h.maxValue,
      mean: h.mean,
    },
  });
  s.close();
}

async function openSessions(n, batch) {
  const sessions = [];
  for (let i = 0; i < n; i += batch) {
    const group = [];
    for (let j = i; j < Math.min(n, i + batch); j++) {
      const s = connect(url);
      s.on("error", () => {});
      sessions.push(s);
      group.push(
        new Promise((resolve, reject) => {
          s.once("remoteSettings", resolve);
          s.once("error", reject);
          s.once("close", () => reject(new Error("session closed while connecting")));
        }),
      );
    }
    await Promise.all(group);
  }
  return sessions;
}

async function hold() {
  const n = Number(a.streams);
  const perConn = Number(a["per-conn"]);
  const t0 = Date.now();
  const sessions = await openSessions(Math.ceil(n / perConn), Number(a.batch));
  const body = frame(Number(a.size));
  const headers = grpcRequestHeaders(a.path, "bench");
  const reqs = [];
  const results = [];
  for (let i = 0; i < n; i++) {
    const s = sessions[Math.floor(i / perConn)];
    const req = s.request(headers, { endStream: false });
    const r = { gs: undefined, len: 0, rst: 0 };
    results.push(
      new Promise((resolve) => {
        req.on("response", (h) => {
          if (h["grpc-status"] !== undefined) r.gs = h["grpc-status"];
        });
        req.on("trailers", (h) => (r.gs = h["grpc-status"]));
        req.on("data", (c) => (r.len += c.length));
        req.on("error", () => {});
        req.on("close", () => {
          r.rst = req.rstCode;
          resolve(r);
        });
      }),
    );
    req.write(body);
    reqs.push(req);
  }
  emit({ event: "opened", streams: n, connections: sessions.length, openMs: Date.now() - t0 });
  await waitRelease();
  const t1 = Date.now();
  for (const r of reqs) r.end();
  const done = await Promise.all(results);
  const ok = done.filter((r) => r.gs === "0" && r.len === body.length).length;
  const bad = done.find((r) => !(r.gs === "0" && r.len === body.length));
  emit({
    event: "result",
    ok: ok === n,
    okCalls: ok,
    failed: n - ok,
    error: bad ? `grpc-status ${bad.gs}, ${bad.len} bytes, rst ${bad.rst}` : undefined,
    releaseMs: Date.now() - t1,
  });
  for (const s of sessions) s.close();
}

async function idle() {
  const n = Number(a.conns);
  const t0 = Date.now();
  const sessions = await openSessions(n, Number(a.batch));
  emit({ event: "opened", connections: sessions.length, openMs: Date.now() - t0 });
  await waitRelease();
  const alive = sessions.filter((s) => !s.closed && !s.destroyed).length;
  emit({ event: "result", ok: alive === n, alive, error: alive === n ? undefined : `${n - alive} connections were closed while idle` });
  for (const s of sessions) s.destroy();
}

async function admin() {
  const { default: autocannon } = await import("autocannon");
  const conns = Number(a.conns);
  const warm = Math.max(1, Math.round(Number(a["warmup-ms"]) / 1000));
  const dur = Math.max(1, Math.round(Number(a["duration-ms"]) / 1000));
  await autocannon({ url, connections: conns, duration: warm });
  emit({ event: "mark" });
  const r = await autocannon({ url, connections: conns, duration: dur });
  const total = r.requests.total;
  emit({
    event: "result",
    ok: r.errors === 0 && r.non2xx === 0 && total > 0,
    error: r.errors || r.non2xx ? `${r.errors} errors, ${r.non2xx} non-2xx` : undefined,
    calls: total,
    seconds: r.duration,
    callsPerSec: total / r.duration,
    mbPerSec: r.throughput.total / r.duration / 1e6,
    latencyUs: {
      p50: r.latency.p50 * 1000,
      p90: r.latency.p90 * 1000,
      p99: r.latency.p99 * 1000,
      p999: r.latency.p99_9 * 1000,
      max: r.latency.max * 1000,
      mean: r.latency.mean * 1000,
    },
  });
}

const modes = { latency, hold, idle, admin };
if (!modes[mode] || !url) {
  process.stderr.write("usage: client.mjs latency|hold|idle|admin --url URL [options]\n");
  process.exit(2);
}
modes[mode]().then(
  () => {
    clearTimeout(hardStop);
    setTimeout(() => process.exit(0), 100).unref();
  },
  (err) => {
    emit({ event: "result", ok: false, error: err?.message ?? String(err) });
    process.exit(1);
  },
);
