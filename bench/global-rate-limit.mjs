// The global rate limit's cost per call: starts redis-server and envoyproxy/ratelimit (the engine
// scripts/engines.mjs builds, .engines/bin/ratelimit) on free loopback ports, pinned with the load
// (not on the proxy's CPU), then runs bench/run.mjs with dojang (no limit) beside dojang-alt
// (bench/examples/global-rate-limit.yaml: every call asks the service), and stops both by pid.
//
//   node bench/global-rate-limit.mjs [run.mjs options]   e.g. --shapes unary-c1,unary-10x10 --rounds 3
//
// Results go to bench/results/global-rate-limit/ unless --results-dir says otherwise.
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const loadCpus = (() => {
  const i = process.argv.indexOf("--load-cpus");
  return i > 0 ? process.argv[i + 1] : "1";
})();

const freePort = () =>
  new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

const tmp = mkdtempSync(join(tmpdir(), "dojang-bench-rls-"));
const children = [];
function start(cmd, args, env) {
  // stderr dropped: with USE_STATSD=false the service logs every stat it would have sent
  const c = spawn("taskset", ["-c", loadCpus, cmd, ...args], { env: { ...process.env, ...env }, stdio: "ignore" });
  children.push(c);
  return c;
}
function stop() {
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
  rmSync(tmp, { recursive: true, force: true });
}
process.on("exit", stop);
process.on("SIGINT", () => process.exit(130));

async function waitHttp(url, ms) {
  const until = Date.now() + ms;
  for (;;) {
    try {
      const r = await fetch(url, { signal: AbortSignal.timeout(1000) });
      if (r.status === 200) return;
    } catch {
      /* not yet */
    }
    if (Date.now() > until) throw new Error(`${url} did not answer within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const redisPort = await freePort();
start("redis-server", ["--port", String(redisPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", tmp]);
mkdirSync(join(tmp, "rl", "config"), { recursive: true });
writeFileSync(
  join(tmp, "rl", "config", "bench.yaml"),
  "domain: bench\ndescriptors:\n  - key: generic_key\n    value: bench\n    rate_limit:\n      unit: second\n      requests_per_unit: 1000000000\n",
);
const [grpcPort, port, debugPort] = [await freePort(), await freePort(), await freePort()];
start(join(root, ".engines", "bin", "ratelimit"), [], {
  HOST: "127.0.0.1",
  GRPC_HOST: "127.0.0.1",
  DEBUG_HOST: "127.0.0.1",
  GRPC_PORT: String(grpcPort),
  PORT: String(port),
  DEBUG_PORT: String(debugPort),
  RUNTIME_ROOT: tmp,
  RUNTIME_SUBDIRECTORY: "rl",
  RUNTIME_WATCH_ROOT: "false",
  RUNTIME_IGNOREDOTFILES: "true",
  REDIS_SOCKET_TYPE: "tcp",
  REDIS_URL: `127.0.0.1:${redisPort}`,
  USE_STATSD: "false",
  LOG_LEVEL: "warn",
});
await waitHttp(`http://127.0.0.1:${port}/healthcheck`, 60_000);
console.log(`global-rate-limit bench: ratelimit on 127.0.0.1:${grpcPort} (redis ${redisPort}), pinned to CPU ${loadCpus}`);

const args = process.argv.slice(2);
const r = spawnSync(
  process.execPath,
  [
    join(root, "bench", "run.mjs"),
    "--peers",
    "dojang,dojang-alt",
    "--dojang-config-extra",
    join(root, "bench", "examples", "global-rate-limit.yaml"),
    ...(args.includes("--results-dir") ? [] : ["--results-dir", join(root, "bench", "results", "global-rate-limit")]),
    ...args,
  ],
  { stdio: "inherit", env: { ...process.env, DOJANG_BENCH_RLS: `127.0.0.1:${grpcPort}` } },
);
stop();
process.exit(r.status ?? 1);
