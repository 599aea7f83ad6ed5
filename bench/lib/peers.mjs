// The peers the harness compares, each started by the harness itself on 127.0.0.1 with its own
// config, pid and log files under the run's temp folder, pinned to the proxy CPU(s), stopped by
// pid. A peer that cannot run here is skipped with a reason (binary missing, config rejected).
//
//   direct     no proxy: the load goes straight to the upstream (the physical limit)
//   dojang     dojang, access log off (logLevel warn)
//   dojang-log dojang with its defaults for logging: logLevel info + accessLog true (stdout to a file)
//   dojang-2w  dojang with `workers: 2` (skipped if `--check` rejects the key)
//   dojang-alt dojang + the --dojang-config-extra fragment and/or --dojang-alt-node-args flags
//              (skipped without either)
//   node-naive the straightforward node:http2 proxy (lib/naive-proxy.mjs: one session, pipe), the
//              yardstick, and node:http2's own cost per connection
//   nginx      nginx grpc_pass, one process (daemon off, master_process off), access_log off
//   haproxy    HAProxy, proto h2 on both sides, one thread, foreground (-db), no logging
import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import { join } from "node:path";
import YAML from "yaml";
import { STREAM_COUNT_HEADER, STREAM_MESSAGE_BYTES, STREAM_PATH, UNARY_PATH, call, connect, frame, waitConnect } from "./grpc.mjs";
import { deepMerge } from "./merge.mjs";
import { isAlive, sleep, startProcess, stopProcess, tail, which } from "./proc.mjs";

export const ALL_PEERS = ["direct", "dojang", "dojang-log", "dojang-2w", "dojang-alt", "node-naive", "nginx", "haproxy"];

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

export function httpGet(url, timeoutMs = 2000) {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { timeout: timeoutMs, agent: false }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode, body }));
    });
    req.on("timeout", () => req.destroy(new Error(`GET ${url} timed out`)));
    req.on("error", reject);
  });
}

/** Ready = a 100 B unary echo comes back whole with grpc-status 0. */
async function readyCall(url) {
  const s = connect(url);
  s.on("error", () => {});
  try {
    await waitConnect(s, 2000);
    const small = frame(100);
    const r = await call(s, UNARY_PATH, small, { timeoutMs: 3000 });
    if (r.grpcStatus !== "0" || !r.body.equals(small)) throw new Error(`unary echo: HTTP ${r.status}, grpc-status ${r.grpcStatus} ${r.grpcMessage ?? ""}, ${r.body.length} bytes back`);
  } finally {
    s.destroy();
  }
}

/**
 * What every peer should get right before its numbers mean anything, checked once per peer
 * (not a gate: a peer that fails is still measured, and the report says what it got wrong).
 * Each check: calls made, how many came back wrong, and the first wrong answer.
 */
export async function correctnessProbe(url) {
  const s = connect(url);
  s.on("error", () => {});
  const checks = [];
  const run = async (name, n, fn) => {
    const c = { name, calls: n, bad: 0, example: undefined };
    for (let i = 0; i < n; i++) {
      try {
        const why = await fn();
        if (why) {
          c.bad++;
          c.example ??= why;
        }
      } catch (err) {
        c.bad++;
        c.example ??= err.message;
      }
    }
    checks.push(c);
  };
  try {
    await waitConnect(s, 2000);
    const small = frame(100);
    await run("unary 100 B echo", 50, async () => {
      const r = await call(s, UNARY_PATH, small);
      return r.grpcStatus === "0" && r.body.equals(small) ? undefined : `grpc-status ${r.grpcStatus}, ${r.body.length} of ${small.length} bytes`;
    });
    const big = frame(1 << 20, 0x63);
    await run("unary 1 MiB echo", 10, async () => {
      const r = await call(s, UNARY_PATH, big);
      return r.grpcStatus === "0" && r.body.equals(big) ? undefined : `grpc-status ${r.grpcStatus}, ${r.body.length} of ${big.length} bytes`;
    });
    for (const n of [1, 4, 32]) {
      const want = n * (5 + STREAM_MESSAGE_BYTES);
      await run(`server stream ${n} × 64 KiB`, 20, async () => {
        const r = await call(s, STREAM_PATH, frame(8), { headers: { [STREAM_COUNT_HEADER]: String(n) } });
        return r.grpcStatus === "0" && r.body.length === want && r.messages === n
          ? undefined
          : `grpc-status ${r.grpcStatus} ${r.grpcMessage ?? ""}with ${r.body.length} of ${want} bytes (${r.messages < 0 ? "last message cut" : r.messages + " messages"})`;
      });
    }
  } finally {
    s.destroy();
  }
  return checks;
}

class Peer {
  constructor(name, env) {
    this.name = name;
    this.env = env;
    this.skipReason = undefined;
    this.proc = undefined;
    this.port = undefined;
    this.adminPort = undefined;
    this.dir = join(env.tmp, name);
    this.restarts = 0;
  }
  get proxied() {
    return true;
  }
  get url() {
    return `http://127.0.0.1:${this.port}`;
  }
  get pid() {
    return this.proc?.pid;
  }
  get alive() {
    return isAlive(this.proc);
  }
  /** Returns the reason to skip, or undefined; writes the config. */
  async prepare() {
    mkdirSync(this.dir, { recursive: true });
    this.port = await freePort();
    return undefined;
  }
  command() {
    throw new Error("abstract");
  }
  async start() {
    const [cmd, args, opts = {}] = this.command();
    this.proc = startProcess(this.name, cmd, args, { cpus: this.env.proxyCpus, logDir: this.dir, cwd: opts.cwd ?? this.dir });
    try {
      await this.waitReady();
    } catch (err) {
      await this.stop();
      throw err;
    }
  }
  async waitReady(timeoutMs = 15_000) {
    const deadline = Date.now() + timeoutMs;
    let last;
    while (Date.now() < deadline) {
      if (!this.alive) {
        const why = this.proc.exitInfo;
        throw new Error(`${this.name} exited (${why.code ?? why.signal}) during start-up: ${tail(this.proc.stderrFile, 8) || tail(this.proc.stdoutFile, 8)}`);
      }
      try {
        await this.readyExtra();
        await readyCall(this.url);
        return;
      } catch (err) {
        last = err;
        if (process.env.BENCH_DEBUG) process.stderr.write(`${this.name} not ready yet: ${err.message}\n`);
        await sleep(100);
      }
    }
    throw new Error(`${this.name} not ready after ${timeoutMs}ms: ${last?.message}`);
  }
  async readyExtra() {}
  async stop() {
    if (this.proc !== undefined) await stopProcess(this.proc, 5000);
  }
  async restart() {
    await this.stop();
    this.restarts++;
    await this.start();
  }
  describe() {
    return "";
  }
}

class DirectPeer extends Peer {
  get proxied() {
    return false;
  }
  async prepare() {
    this.port = this.env.upstreamPort;
    return undefined;
  }
  async start() {
    await readyCall(this.url);
  }
  get alive() {
    return true;
  }
  get pid() {
    return undefined;
  }
  async stop() {}
  describe() {
    return "no proxy: h2load and the clients call the upstream directly";
  }
}

class DojangPeer extends Peer {
  constructor(name, env, { logLevel = "warn", accessLog = false, workers, extra, nodeArgs = [], dist } = {}) {
    super(name, env);
    this.opts = { logLevel, accessLog, workers, extra, nodeArgs, dist };
  }
  /** dist/cli.js, or the --dojang-alt-dist build's (an earlier build kept inside the repo, so
   * that its imports resolve to the same node_modules) */
  get cli() {
    return join(this.opts.dist === undefined ? join(this.env.repo, "dist") : this.opts.dist, "cli.js");
  }
  async prepare() {
    await super.prepare();
    this.adminPort = await freePort();
    const { logLevel, accessLog, workers, extra } = this.opts;
    if (extra === null && this.opts.nodeArgs.length === 0 && this.opts.dist === undefined) {
      return "none of --dojang-config-extra FILE, --dojang-alt-node-args, --dojang-alt-dist given (dojang-alt is dojang plus those)";
    }
    let cfg = {
      admin: { address: `127.0.0.1:${this.adminPort}` },
      drainTimeout: "1s",
      logLevel,
      accessLog,
      listeners: [{ name: "main", address: `127.0.0.1:${this.port}`, routes: [{ match: { prefix: "/" }, cluster: "backend" }] }],
      // held-10k opens 10,000 calls at once: above the default circuit breaker (1,024 calls per
      // cluster), which nginx and HAProxy do not have
      clusters: [{ name: "backend", endpoints: [`127.0.0.1:${this.env.upstreamPort}`], circuitBreaker: { maxCalls: 20000, maxPendingCalls: 20000 } }],
    };
    if (workers !== undefined) cfg.workers = workers;
    if (extra !== undefined && extra !== null) cfg = deepMerge(cfg, extra);
    this.configFile = join(this.dir, "dojang.yaml");
    writeFileSync(this.configFile, `# generated by bench/run.mjs for peer ${this.name}\n` + YAML.stringify(cfg));
    const cli = this.cli;
    const r = spawnSync(this.env.nodeBin, [cli, "--config", this.configFile, "--check"], { encoding: "utf8", cwd: this.env.repo, timeout: 20_000 });
    if (r.status !== 0) {
      const msg = (r.stderr || r.stdout || r.error?.message || "").trim().split("\n").slice(0, 4).join(" / ");
      return `dojang --check rejected its config (exit ${r.status}): ${msg}`;
    }
    return undefined;
  }
  command() {
    const node = [...this.opts.nodeArgs];
    if (this.env.cpuProfDir) {
      this.profileDir = join(this.env.cpuProfDir, this.name);
      mkdirSync(this.profileDir, { recursive: true });
      // cluster workers inherit execArgv, so dojang-2w's workers write their own profiles
      node.push("--cpu-prof", `--cpu-prof-dir=${this.profileDir}`);
    }
    return [this.env.nodeBin, [...node, this.cli, "--config", this.configFile], { cwd: this.env.repo }];
  }
  async readyExtra() {
    const r = await httpGet(`http://127.0.0.1:${this.adminPort}/ready`);
    if (r.status !== 200) throw new Error(`/ready answered ${r.status}`);
  }
  /** Finished calls by grpc_code, summed over methods (from dojang_calls_total). */
  async callCodes() {
    const r = await httpGet(`http://127.0.0.1:${this.adminPort}/metrics`, 5000);
    const codes = {};
    for (const line of r.body.split("\n")) {
      if (!line.startsWith("dojang_calls_total{")) continue;
      const m = /grpc_code="([^"]+)".*\}\s+([\d.e+]+)$/.exec(line);
      if (m) codes[m[1]] = (codes[m[1]] ?? 0) + Number(m[2]);
    }
    return codes;
  }
  describe() {
    const { logLevel, accessLog, workers, extra } = this.opts;
    const parts = [`logLevel ${logLevel}`, `accessLog ${accessLog}`];
    if (workers) parts.push(`workers ${workers}`);
    if (extra) parts.push(`+ ${this.env.extraFile}`);
    if (this.opts.nodeArgs.length > 0) parts.push(`node ${this.opts.nodeArgs.join(" ")}`);
    if (this.opts.dist !== undefined) parts.push(`build ${this.env.altDistLabel}`);
    return `dojang (node ${process.version}), ${parts.join(", ")}, circuitBreaker 20,000 calls, other keys default`;
  }
}

class NaivePeer extends Peer {
  command() {
    const w = this.env.naiveWindow === undefined ? [] : [String(this.env.naiveWindow)];
    return [this.env.nodeBin, [join(this.env.repo, "bench", "lib", "naive-proxy.mjs"), String(this.port), `http://127.0.0.1:${this.env.upstreamPort}`, ...w]];
  }
  describe() {
    const settings = this.env.naiveWindow === undefined ? "default settings" : `stream and connection windows ${this.env.naiveWindow} bytes both ways (--naive-window)`;
    return `the straightforward node:http2 proxy (bench/lib/naive-proxy.mjs: one upstream session, pipe both ways, trailers copied; node ${process.version}, ${settings})`;
  }
}

class NginxPeer extends Peer {
  async prepare() {
    await super.prepare();
    this.bin = which("nginx");
    if (this.bin === undefined) return "nginx binary not found (bench/setup installs it: apt-get install -y nginx)";
    for (const d of ["tmp/body", "tmp/proxy", "tmp/fastcgi", "tmp/uwsgi", "tmp/scgi", "logs"]) mkdirSync(join(this.dir, d), { recursive: true });
    const p = this.dir;
    this.configFile = join(p, "nginx.conf");
    writeFileSync(
      this.configFile,
      `# generated by bench/run.mjs: one nginx process, no daemon, everything under ${p}
daemon off;
master_process off;
worker_processes 1;
worker_rlimit_nofile 19000;
pid ${p}/nginx.pid;
error_log ${p}/error.log warn;
events {
  worker_connections 18000;
}
http {
  access_log off;
  client_body_temp_path ${p}/tmp/body;
  proxy_temp_path ${p}/tmp/proxy;
  fastcgi_temp_path ${p}/tmp/fastcgi;
  uwsgi_temp_path ${p}/tmp/uwsgi;
  scgi_temp_path ${p}/tmp/scgi;
  client_max_body_size 0;            # 1 MiB messages (the default limit is 1m)
  keepalive_timeout 300s;
  keepalive_requests 100000000;      # a client connection is never closed for its call count
  http2_max_concurrent_streams 1000; # as dojang's default (nginx's own is 128)
  upstream backend {
    server 127.0.0.1:${this.env.upstreamPort};
    keepalive 1000;                  # reuse upstream connections (nginx sends one call per connection)
    keepalive_requests 100000000;
    keepalive_timeout 300s;
  }
  server {
    listen 127.0.0.1:${this.port} http2 backlog=4096;
    location / {
      grpc_pass grpc://backend;
      grpc_read_timeout 300s;
      grpc_send_timeout 300s;
    }
  }
}
`,
    );
    const r = spawnSync(this.bin, ["-t", "-p", p, "-c", this.configFile, "-e", join(p, "error.log")], { encoding: "utf8", timeout: 10_000 });
    if (r.status !== 0) return `nginx -t rejected the config: ${(r.stderr || "").trim().split("\n").slice(0, 3).join(" / ")}`;
    return undefined;
  }
  command() {
    return [this.bin, ["-p", this.dir, "-c", this.configFile, "-e", join(this.dir, "error.log")]];
  }
  describe() {
    return "nginx grpc_pass, daemon off + master_process off (one process), upstream keepalive 1000, access_log off";
  }
}

class HaproxyPeer extends Peer {
  async prepare() {
    await super.prepare();
    this.bin = which("haproxy");
    if (this.bin === undefined) return "haproxy binary not found (bench/setup installs it: apt-get install -y haproxy)";
    this.configFile = join(this.dir, "haproxy.cfg");
    writeFileSync(
      this.configFile,
      `# generated by bench/run.mjs: HAProxy in the foreground (-db), one thread, h2c both sides
global
  nbthread 1
  maxconn 9000                          # two fds each: must fit the machine's open-files limit
  tune.h2.initial-window-size 1048576   # as dojang's default per-stream window (HAProxy's own: 65535)
  tune.h2.max-concurrent-streams 1000   # as dojang's default (HAProxy's own: 100)

defaults
  mode http
  maxconn 9000
  timeout connect 5s
  timeout client 300s
  timeout server 300s

frontend fe
  bind 127.0.0.1:${this.port} proto h2
  default_backend be

backend be
  http-reuse always
  server up 127.0.0.1:${this.env.upstreamPort} proto h2
`,
    );
    const r = spawnSync(this.bin, ["-c", "-f", this.configFile], { encoding: "utf8", timeout: 10_000 });
    if (r.status !== 0) return `haproxy -c rejected the config: ${(r.stderr || r.stdout || "").trim().split("\n").slice(0, 3).join(" / ")}`;
    return undefined;
  }
  command() {
    return [this.bin, ["-db", "-f", this.configFile]];
  }
  describe() {
    return "HAProxy, proto h2 front and back, nbthread 1, http-reuse always, no logging";
  }
}

export function makePeer(name, env) {
  switch (name) {
    case "direct":
      return new DirectPeer(name, env);
    case "dojang":
      return new DojangPeer(name, env);
    case "dojang-log":
      return new DojangPeer(name, env, { logLevel: "info", accessLog: true });
    case "dojang-2w":
      return new DojangPeer(name, env, { workers: 2 });
    case "dojang-alt":
      return new DojangPeer(name, env, { extra: env.extraConfig ?? null, nodeArgs: env.altNodeArgs ?? [], dist: env.altDist });
    case "node-naive":
      return new NaivePeer(name, env);
    case "nginx":
      return new NginxPeer(name, env);
    case "haproxy":
      return new HaproxyPeer(name, env);
    default:
      throw new Error(`unknown peer "${name}" (known: ${ALL_PEERS.join(", ")})`);
  }
}

export function isDojang(peer) {
  return peer instanceof DojangPeer;
}
