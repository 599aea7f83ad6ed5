// Bytes V8 allocates per unary call: dojang against the plain node:http2 pipe
// (bench/lib/naive-proxy.mjs), by V8's own counter. Each proxy runs under `node --trace-gc-nvp`,
// which prints, at every GC, the bytes allocated since the one before (`allocated=`). The sum
// over a process's life is taken for N1 and for N2 calls at one stream (h2load -n, a fresh
// process each time), and (sum(N2) − sum(N1)) ÷ (N2 − N1) is the per-call figure: start-up and
// warm-up cancel out. Issue 22 item 2 asks whether ≤ 10,000 B per call is within reach of a proxy
// on node:http2; the pipe, which does nothing but forward, is the answer's floor.
//
//   node bench/alloc-vs-pipe.mjs [--n1 5000] [--n2 25000] [--alt-dist DIR]
//
// --alt-dist DIR: a third row, the same measure of another build's dist (e.g. the commit before
// a change), in the same run: the change's before/after ratio in bytes per call.
//
// Loopback only; every process it starts is stopped by pid; a hard stop ends a run that hangs.
import { spawn, spawnSync } from "node:child_process";
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { freePort } from "./lib/peers.mjs";
import { frame } from "./lib/grpc.mjs";
import { waitPort } from "./lib/standalone.mjs";

const { values: a } = parseArgs({ options: { n1: { type: "string", default: "5000" }, n2: { type: "string", default: "25000" }, "alt-dist": { type: "string" } } });
const N1 = Number(a.n1);
const N2 = Number(a.n2);
const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const hardStop = setTimeout(() => {
  console.error("alloc-vs-pipe: hard stop after 8 min");
  process.exit(3);
}, 8 * 60_000);
hardStop.unref();

const dir = mkdtempSync(join(tmpdir(), "dojang-alloc-pipe-"));
const dataFile = join(dir, "req.bin");
writeFileSync(dataFile, frame(100));

/** Runs one proxy for n calls; the sum of V8's `allocated=` over its GCs. */
async function allocatedOver(kind, n) {
  const upPort = await freePort();
  const port = await freePort();
  const up = spawn(process.execPath, [here("./lib/upstream.mjs"), "--port", String(upPort), "--control-port", String(await freePort())], { stdio: "ignore" });
  let argv;
  if (kind === "pipe") argv = ["--max-semi-space-size=2", "--trace-gc-nvp", here("./lib/naive-proxy.mjs"), String(port), `http://127.0.0.1:${upPort}`];
  else {
    const cfg = join(dir, `dojang-${n}.yaml`);
    writeFileSync(cfg, `logLevel: warn\naccessLog: false\nlisteners: [{ name: main, address: 127.0.0.1:${port}, routes: [{ match: { prefix: / }, cluster: backend }] }]\nclusters: [{ name: backend, endpoints: [127.0.0.1:${upPort}], circuitBreaker: { maxCalls: 20000, maxPendingCalls: 20000 } }]\n`);
    // the dojang command passes node flags through its launcher (--max-semi-space-size=2 is its own default)
    argv = ["--trace-gc-nvp", kind === "alt" ? resolve(a["alt-dist"], "cli.js") : here("../dist/cli.js"), "--config", cfg];
  }
  // to a file: the harness waits on h2load synchronously, and a pipe nobody reads would stall the proxy
  const logFile = join(dir, `${kind}-${n}.log`);
  const fd = openSync(logFile, "w");
  const p = spawn(process.execPath, argv, { stdio: ["ignore", fd, "inherit"] });
  closeSync(fd);
  try {
    await waitPort(upPort);
    await waitPort(port);
    const h = spawnSync("h2load", ["-c", "1", "-m", "1", "-t", "1", "-n", String(n), "-d", dataFile, "-H", "content-type: application/grpc", "-H", "te: trailers", `http://127.0.0.1:${port}/bench.Echo/Unary`], { encoding: "utf8", timeout: 120_000 });
    const ok = /(\d+) succeeded/.exec(h.stdout ?? "");
    if (ok === null || Number(ok[1]) !== n) throw new Error(`h2load: ${(h.stdout ?? "").split("\n").filter((l) => /requests:|status codes/.test(l)).join("; ") || h.error}`);
    await new Promise((r) => setTimeout(r, 300));
  } finally {
    p.kill("SIGTERM");
    up.kill("SIGTERM");
    await new Promise((r) => p.once("exit", r));
  }
  let sum = 0;
  for (const m of readFileSync(logFile, "utf8").matchAll(/\ballocated=(\d+)/g)) {
    const v = Number(m[1]);
    // a GC line now and then carries an unsigned wrap-around (2^64 − x): not a count
    if (v < 2 ** 40) sum += v;
  }
  return sum;
}

const rows = [];
for (const kind of ["pipe", "dojang", ...(a["alt-dist"] !== undefined ? ["alt"] : [])]) {
  const s1 = await allocatedOver(kind, N1);
  const s2 = await allocatedOver(kind, N2);
  rows.push({ kind, perCall: (s2 - s1) / (N2 - N1) });
}
rmSync(dir, { recursive: true, force: true });
console.log(`V8 bytes allocated per unary call (100 B, one stream; (sum over ${N2} calls − sum over ${N1}) ÷ ${N2 - N1}; node ${process.version}):`);
const NAMES = { pipe: "node:http2 pipe (bench/lib/naive-proxy.mjs)", dojang: "dojang (dist/cli.js)", alt: `dojang (${a["alt-dist"]}/cli.js)` };
for (const r of rows) console.log(`  ${NAMES[r.kind]}: ${Math.round(r.perCall).toLocaleString("en-US")} B`);
const by = Object.fromEntries(rows.map((r) => [r.kind, r.perCall]));
console.log(`  dojang ÷ pipe: ${(by.dojang / by.pipe).toFixed(3)}`);
if (by.alt !== undefined) console.log(`  alt ÷ pipe: ${(by.alt / by.pipe).toFixed(3)}; dojang ÷ alt (after ÷ before): ${(by.dojang / by.alt).toFixed(3)}`);
