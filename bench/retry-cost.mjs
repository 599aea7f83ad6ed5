// The cost of a retried call (issue 11): one dojang process, one raw node:http2 upstream in this
// process, three routes on the same cluster, measured in turn, round after round:
//   plain     /bench.Echo/Unary   no retry policy: the success path
//   policy    /policy.Echo/Unary  retry { retryOn: [UNAVAILABLE] }, every first attempt succeeds:
//                                 what the policy alone costs (retry buffer, held response head)
//   retried   /retry.Echo/Unary   the same policy; the upstream answers 14 (Trailers-Only) to every
//                                 first attempt (no grpc-previous-rpc-attempts) and echoes the retry
// For each: calls/s at a fixed concurrency and dojang's CPU per call (utime+stime of its process
// from /proc, over the calls of that run). Medians over the rounds. Everything on 127.0.0.1,
// bounded by --rounds × --seconds; the dojang process is stopped by pid.
//
//   npm run build && node bench/retry-cost.mjs [--rounds 3] [--seconds 3] [--concurrency 16]
import http2 from "node:http2";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { call, connect, frame, waitConnect } from "./lib/grpc.mjs";
import { freePort, httpGet } from "./lib/peers.mjs";
import { CLK_TCK, cpuTicks, sleep, startProcess, stopProcess } from "./lib/proc.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const { values: args } = parseArgs({
  options: {
    rounds: { type: "string", default: "3" },
    seconds: { type: "string", default: "3" },
    concurrency: { type: "string", default: "16" },
    dist: { type: "string", default: join(ROOT, "dist") },
  },
});
const ROUNDS = Number(args.rounds);
const SECONDS = Number(args.seconds);
const CONC = Number(args.concurrency);
const SHAPES = [
  { id: "plain", path: "/bench.Echo/Unary" },
  { id: "policy", path: "/policy.Echo/Unary" },
  { id: "retried", path: "/retry.Echo/Unary" },
];

// The upstream: echoes the request once it has ended; /retry.* first attempts get 14.
const upstream = http2.createServer({ settings: { initialWindowSize: 2 ** 31 - 1 } });
upstream.on("stream", (s, h) => {
  s.on("error", () => {});
  const chunks = [];
  s.on("data", (c) => chunks.push(c));
  s.on("end", () => {
    if (h[":path"].startsWith("/retry.") && h["grpc-previous-rpc-attempts"] === undefined) {
      s.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": "14", "grpc-message": "try again" }, { endStream: true });
      return;
    }
    s.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
    s.once("wantTrailers", () => s.sendTrailers({ "grpc-status": "0" }));
    s.end(Buffer.concat(chunks));
  });
});
await new Promise((r) => upstream.listen(0, "127.0.0.1", r));
const upPort = upstream.address().port;

const tmp = mkdtempSync(join(tmpdir(), "dojang-retry-cost-"));
const listenPort = await freePort();
const adminPort = await freePort();
const retry = { retryOn: ["UNAVAILABLE"], maxAttempts: 3, backoff: { base: "1ms", max: "1ms" } };
const cfg = {
  admin: { address: `127.0.0.1:${adminPort}` },
  logLevel: "warn",
  accessLog: false,
  listeners: [
    {
      name: "bench",
      address: `127.0.0.1:${listenPort}`,
      routes: [
        { match: { prefix: "/policy." }, cluster: "up", retry },
        { match: { prefix: "/retry." }, cluster: "up", retry },
        { match: { prefix: "/" }, cluster: "up" },
      ],
    },
  ],
  // the budget and breaker out of the way: this measures the work of a retry, not its limits
  clusters: [{ name: "up", endpoints: [`127.0.0.1:${upPort}`], retryBudget: { percent: 1000, minRetriesPerSecond: 100000 }, circuitBreaker: { maxRetries: 100000 } }],
};
const cfgFile = join(tmp, "dojang.json");
writeFileSync(cfgFile, JSON.stringify(cfg));
const d = startProcess("dojang", process.execPath, [join(args.dist, "cli.js"), "--config", cfgFile], { logDir: tmp });
try {
  for (let t = 0; ; t++) {
    try {
      if ((await httpGet(`http://127.0.0.1:${adminPort}/ready`, 500)).status === 200) break;
    } catch {
      /* not yet */
    }
    if (t > 200) throw new Error("dojang did not start");
    await sleep(25);
  }
  const sessions = [await waitConnect(connect(`http://127.0.0.1:${listenPort}`)), await waitConnect(connect(`http://127.0.0.1:${listenPort}`))];
  const body = frame(100);

  async function run(path, seconds) {
    let calls = 0;
    let failed = 0;
    const until = performance.now() + seconds * 1000;
    const c0 = cpuTicks(d.pid);
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: CONC }, async (_, w) => {
        while (performance.now() < until) {
          const r = await call(sessions[w % 2], path, body);
          if (r.grpcStatus === "0") calls++;
          else if (failed++ < 3) process.stderr.write(`failed: ${r.grpcStatus} ${r.grpcMessage} (attempts ${r.attempts})\n`);
        }
      }),
    );
    const secs = (performance.now() - t0) / 1000;
    const cpuUs = ((cpuTicks(d.pid) - c0) * 1e6) / CLK_TCK;
    return { callsPerSecond: calls / secs, cpuUsPerCall: cpuUs / Math.max(1, calls), failed };
  }

  for (const s of SHAPES) await run(s.path, 1); // warm-up
  const results = Object.fromEntries(SHAPES.map((s) => [s.id, []]));
  for (let r = 0; r < ROUNDS; r++) for (const s of SHAPES) results[s.id].push(await run(s.path, SECONDS));
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const out = {};
  process.stdout.write(`concurrency ${CONC}, ${ROUNDS} rounds × ${SECONDS} s per shape; medians (min–max)\n`);
  process.stdout.write("shape     calls/s               dojang CPU µs/call    failed\n");
  for (const s of SHAPES) {
    const rs = results[s.id];
    const cps = rs.map((x) => x.callsPerSecond);
    const cpu = rs.map((x) => x.cpuUsPerCall);
    out[s.id] = { callsPerSecond: median(cps), cpuUsPerCall: median(cpu), failed: rs.reduce((a, x) => a + x.failed, 0) };
    process.stdout.write(
      `${s.id.padEnd(9)} ${median(cps).toFixed(0).padStart(6)} (${Math.min(...cps).toFixed(0)}–${Math.max(...cps).toFixed(0)})`.padEnd(32) +
        `${median(cpu).toFixed(1).padStart(6)} (${Math.min(...cpu).toFixed(1)}–${Math.max(...cpu).toFixed(1)})`.padEnd(22) +
        `${out[s.id].failed}\n`,
    );
  }
  process.stdout.write(
    `retried/plain CPU per call ${(out.retried.cpuUsPerCall / out.plain.cpuUsPerCall).toFixed(2)}; policy/plain ${(out.policy.cpuUsPerCall / out.plain.cpuUsPerCall).toFixed(2)}\n`,
  );
  for (const s of sessions) s.close();
} finally {
  await stopProcess(d, 3000);
  upstream.close();
  rmSync(tmp, { recursive: true, force: true });
}
