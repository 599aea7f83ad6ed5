// What a side call costs a call: dojang's CPU per call with a global rate limit (envoyproxy/ratelimit
// on redis-server) and with ext_authz (Istio's sample server), over the same call without either,
// in one run. One dojang per build (dist/, and --alt-dist DIR: a build of another commit, e.g. main's
// in .bench-alt-dist/), each with three listeners on the fast upstream (bench/lib/upstream.mjs):
//   bare   no route with a side call (no such filter at all)
//   rls    every call asks the rate-limit service (generic_key=bench, a limit no run reaches)
//   ext    every call asks ext_authz (x-ext-authz: allow)
// Rounds alternate the builds and rotate the shapes; each window runs --calls 100 B unary calls at
// --concurrency streams over two connections and reads the dojang's CPU time from /proc (every
// thread's schedstat, in ns). The figure is the ratio rls/bare and ext/bare within one build and
// round: a loaded machine moves both sides of a ratio together, so keep the windows short and the
// rounds many. Medians (and min-max) over the rounds. Beside them, node:http2's own floor for each
// side call: a plain node:http2 client making the same call (bench/lib/unary-floor.mjs).
//
// --callgrind DIR: instead, the instructions per call under valgrind's callgrind, immune to load:
// per build, a run that only warms up (--cg-warmup calls of every shape) and one per shape that
// then makes --cg-calls calls of it; the difference of their counts per call, by function
// (bench/callgrind-diff.mjs); the floors the same way. Slow: minutes per run on a loaded machine.
//
//   npm run build && node scripts/engines.mjs --only ratelimit,ext-authz
//   node bench/side-call-cost.mjs [--alt-dist .bench-alt-dist] [--rounds 5] [--calls 4000] [--concurrency 16]
//   node bench/side-call-cost.mjs --callgrind /tmp/cg [--alt-dist .bench-alt-dist] [--cg-calls 400] [--cg-warmup 600]
//
// Loopback only; every process it starts is stopped by pid.
import { spawn, execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { connect, frame, grpcRequestHeaders, waitConnect } from "./lib/grpc.mjs";
import { freePort, httpGet } from "./lib/peers.mjs";
import { cpuNs, sleep } from "./lib/proc.mjs";
import { LAUNCHER_NODE_FLAGS, startFastUpstream, waitPort, waitPortOf } from "./lib/standalone.mjs";

const ROOT = resolve(fileURLToPath(new URL("..", import.meta.url)));
const { values: a } = parseArgs({
  options: {
    dist: { type: "string", default: join(ROOT, "dist") },
    "alt-dist": { type: "string" },
    rounds: { type: "string", default: "5" },
    calls: { type: "string", default: "4000" },
    concurrency: { type: "string", default: "16" },
    callgrind: { type: "string" },
    "cg-calls": { type: "string", default: "400" },
    "cg-warmup": { type: "string", default: "600" },
    "no-floor": { type: "boolean", default: false },
    "cg-concurrency": { type: "string", default: "1" },
    shapes: { type: "string", default: "bare,rls,ext" },
    // node flags for the dojangs, e.g. "--cpu-prof --cpu-prof-dir=DIR" (bench/cpu-prof-window.mjs reads it)
    "node-args": { type: "string", default: "" },
    "load-cpus": { type: "string", default: "1" },
  },
});
const SHAPES = a.shapes.split(",");
const BUILDS = [{ id: "after", dist: resolve(a.dist) }, ...(a["alt-dist"] ? [{ id: "before", dist: resolve(a["alt-dist"]) }] : [])];
const tmp = mkdtempSync(join(tmpdir(), "dojang-side-call-cost-"));
const children = [];
const hardStop = setTimeout(() => {
  console.error("side-call-cost.mjs: hard stop after 120 min");
  stopAll();
  process.exit(3);
}, 120 * 60_000);
hardStop.unref();
function stopAll() {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
}
process.on("exit", () => {
  stopAll();
  rmSync(tmp, { recursive: true, force: true });
});
process.on("SIGINT", () => process.exit(130));
process.on("SIGTERM", () => process.exit(143));

/** CPU time of `pid` in µs, every thread's (lib/proc.mjs cpuNs: schedstat's ns). */
function cpuUs(pid) {
  return cpuNs(pid) / 1000;
}

function start(cmd, args, env = {}) {
  const c = spawn("taskset", ["-c", a["load-cpus"], cmd, ...args], { env: { ...process.env, ...env }, stdio: ["ignore", "ignore", "pipe"] });
  c.stderr.resume();
  children.push(c);
  return c;
}

// === the services ===

const redisPort = await freePort();
start("redis-server", ["--port", String(redisPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", tmp]);
mkdirSync(join(tmp, "rl", "config"), { recursive: true });
writeFileSync(join(tmp, "rl", "config", "bench.yaml"), "domain: bench\ndescriptors:\n  - key: generic_key\n    value: bench\n    rate_limit:\n      unit: second\n      requests_per_unit: 1000000000\n");
const [rlsPort, rlsHttp, rlsDebug] = [await freePort(), await freePort(), await freePort()];
start(join(ROOT, ".engines", "bin", "ratelimit"), [], {
  HOST: "127.0.0.1", GRPC_HOST: "127.0.0.1", DEBUG_HOST: "127.0.0.1",
  GRPC_PORT: String(rlsPort), PORT: String(rlsHttp), DEBUG_PORT: String(rlsDebug),
  RUNTIME_ROOT: tmp, RUNTIME_SUBDIRECTORY: "rl", RUNTIME_WATCH_ROOT: "false", RUNTIME_IGNOREDOTFILES: "true",
  REDIS_SOCKET_TYPE: "tcp", REDIS_URL: `127.0.0.1:${redisPort}`, USE_STATSD: "false", LOG_LEVEL: "warn",
});
const authzPort = await freePort();
start(join(ROOT, ".engines", "bin", "ext-authz"), ["-http", String(await freePort()), "-grpc", String(authzPort)]);
for (let i = 0; ; i++) {
  try {
    if ((await httpGet(`http://127.0.0.1:${rlsHttp}/healthcheck`, 1000)).status === 200) break;
  } catch {
    /* not yet */
  }
  if (i > 600) throw new Error("ratelimit did not start");
  await sleep(100);
}
await waitPort(authzPort);
const up = await startFastUpstream();
children.push(up.p);

// === the dojangs ===

async function dojangConfig() {
  const ports = { bare: await freePort(), rls: await freePort(), ext: await freePort(), admin: await freePort() };
  const l = (name, route) => ({ name, address: `127.0.0.1:${ports[name]}`, routes: [{ match: { prefix: "/" }, cluster: "up", ...route }] });
  const cfg = {
    admin: { address: `127.0.0.1:${ports.admin}` },
    logLevel: process.env.SIDE_CALL_COST_LOG ?? "warn",
    accessLog: false,
    listeners: [
      l("bare", {}),
      l("rls", { rateLimit: { global: { service: `127.0.0.1:${rlsPort}`, domain: "bench", timeout: "2s", descriptors: [[{ key: "generic_key", value: "bench" }]] } } }),
      l("ext", { extAuthz: { address: `127.0.0.1:${authzPort}`, timeout: "2s" } }),
    ],
    clusters: [{ name: "up", endpoints: [`127.0.0.1:${up.port}`] }],
  };
  return { cfg, ports };
}

async function startDojang(b, cg) {
  const { cfg, ports } = await dojangConfig();
  const file = join(tmp, `${b.id}-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, JSON.stringify(cfg));
  let cmd = process.execPath;
  let argv = [...a["node-args"].split(" ").filter(Boolean), join(b.dist, "cli.js"), "--config", file];
  let env = process.env;
  if (cg !== undefined) {
    // as bench/cpu-profile.mjs: node's flags given here, so the launcher does not re-execute node
    // (callgrind follows one process image from start to exit)
    argv = ["--tool=callgrind", `--callgrind-out-file=${cg}.%p`, process.execPath, ...LAUNCHER_NODE_FLAGS, ...argv];
    cmd = "valgrind";
    env = { ...process.env, DOJANG_MEMORY_PLAN: "" };
  }
  const p = spawn(cmd, argv, { stdio: ["ignore", process.env.SIDE_CALL_COST_LOG ? "inherit" : "ignore", "inherit"], env });
  children.push(p);
  p.on("exit", (code, sig) => stopping || console.error(`${b.id}: dojang exited (${code ?? sig})`));
  await waitPortOf(p, ports.bare, 61);
  for (const s of SHAPES) await waitPort(ports[s]);
  const d = { b, p, ports, sessions: {} };
  for (const s of SHAPES) d.sessions[s] = [await session(d, s), await session(d, s)];
  return d;
}

/**
 * A client connection to the listener of `shape`, with one call made at once (a connection that
 * sends no request within requestHeadersTimeout is closed); logged if it goes away.
 */
async function session(d, shape) {
  const s = await waitConnect(connect(`http://127.0.0.1:${d.ports[shape]}`), 120_000);
  await unary(s, headersOf(shape));
  s.on("error", (err) => console.error(`${d.b.id} ${shape}: connection error ${err.message}`));
  s.on("goaway", (code) => console.error(`${d.b.id} ${shape}: GOAWAY ${code}`));
  s.on("close", () => d.p.exitCode === null && !stopping && console.error(`${d.b.id} ${shape}: connection closed`));
  return s;
}

const BODY = frame(100);
function unary(session, headers) {
  return new Promise((res, rej) => {
    const req = session.request(headers, { endStream: false });
    let len = 0;
    let gs;
    req.on("response", (h) => (gs = h["grpc-status"] ?? gs));
    req.on("data", (c) => (len += c.length));
    req.on("trailers", (t) => (gs = t["grpc-status"]));
    req.on("error", rej);
    req.on("close", () => (gs === "0" && len === BODY.length ? res() : rej(new Error(`call failed: grpc-status ${gs}, ${len} bytes`))));
    req.end(BODY);
  });
}

/** `n` calls of `shape` at `conc` streams over the two connections; ms. */
function headersOf(shape) {
  return grpcRequestHeaders("/bench.Echo/Unary", "bench", shape === "ext" ? { "x-ext-authz": "allow" } : {});
}

async function load(d, shape, n, conc) {
  const headers = headersOf(shape);
  let left = n;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: conc }, async (_, w) => {
      const s = d.sessions[shape][w % 2];
      while (left > 0) {
        left--;
        await unary(s, headers);
      }
    }),
  );
  return performance.now() - t0;
}

let stopping = false;
async function stopDojang(d) {
  stopping = true;
  for (const ss of Object.values(d.sessions)) for (const s of ss) s.close();
  d.p.kill("SIGTERM");
  await new Promise((r) => (d.p.exitCode !== null || d.p.signalCode !== null ? r() : d.p.once("exit", r)));
}

const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
const fmt = (xs) => `${median(xs).toFixed(2)} (${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)})`;

/**
 * node:http2's floor for each side call (bench/lib/unary-floor.mjs): a plain client making the same
 * call with the request dojang would send, encoded once by the build's own encoders.
 */
async function startFloors(dist, cgDir) {
  const { compileRlsRequest, encodeRlsRequest, RLS_PATH } = await import(join(dist, "translate", "rls-wire.js"));
  const { encodeCheckRequest, CHECK_PATH } = await import(join(dist, "translate", "ext-authz-wire.js"));
  const rlsMsg = encodeRlsRequest(compileRlsRequest("bench", [[{ key: "generic_key", source: { kind: "literal", value: "bench" } }]]), { clientAddress: "127.0.0.1", head: {} });
  const head = { ":method": "POST", ":scheme": "http", ":path": "/bench.Echo/Unary", ":authority": "bench", "content-type": "application/grpc", te: "trailers", "x-ext-authz": "allow", "x-request-id": "0123456789abcdef0123456789abcdef" };
  const extMsg = encodeCheckRequest({ head, scheme: "http", requestId: head["x-request-id"], clientAddress: "127.0.0.1", clientPort: 40000, principal: "", certificatePem: "", nowMs: Date.now() });
  const floor = (target, path, msg, cgPrefix) => {
    const argv = [join(ROOT, "bench", "lib", "unary-floor.mjs"), target, path, Buffer.from(msg).toString("hex")];
    const p =
      cgPrefix === undefined
        ? spawn(process.execPath, argv, { stdio: ["pipe", "pipe", "inherit"] })
        : spawn("valgrind", ["--tool=callgrind", `--callgrind-out-file=${join(cgDir, cgPrefix)}.%p`, process.execPath, ...argv], { stdio: ["pipe", "pipe", "ignore"] });
    children.push(p);
    let buf = "";
    const waiters = [];
    p.stdout.on("data", (d) => {
      buf += d;
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        waiters.shift()?.(line);
      }
    });
    const next = () => new Promise((r) => waiters.push(r));
    const ready = next();
    return {
      p,
      ready,
      async run(n, conc) {
        const done = next();
        p.stdin.write(`${n} ${conc}\n`);
        const line = await done;
        if (line !== "done 0") throw new Error(`unary-floor ${path}: ${line}`);
      },
    };
  };
  const rls = [`127.0.0.1:${rlsPort}`, RLS_PATH, rlsMsg];
  const ext = [`127.0.0.1:${authzPort}`, CHECK_PATH, extMsg];
  if (cgDir !== undefined) {
    // one process per run, each started when its turn comes (floor() spawns at once: keep them lazy)
    const lazy = (args, prefix) => {
      let f;
      const get = () => (f ??= floor(...args, prefix));
      return { get ready() { return get().ready; }, get p() { return get().p; }, run: (n, c) => get().run(n, c) };
    };
    return { "rls-warm-up": lazy(rls, "floor-rls-warm-up"), "rls-calls": lazy(rls, "floor-rls-calls"), "ext-warm-up": lazy(ext, "floor-ext-warm-up"), "ext-calls": lazy(ext, "floor-ext-calls") };
  }
  const f = { rls: floor(...rls), ext: floor(...ext) };
  await f.rls.ready;
  await f.ext.ready;
  return f;
}

if (a.callgrind === undefined) {
  const CALLS = Number(a.calls);
  const CONC = Number(a.concurrency);
  const ds = [];
  for (const b of BUILDS) ds.push(await startDojang(b));
  const floors = await startFloors(BUILDS[0].dist);
  for (const d of ds) for (const s of SHAPES) await load(d, s, 2000, CONC); // warm-up
  for (const f of Object.values(floors)) await f.run(2000, CONC);
  const floorUs = { rls: [], ext: [] };
  const us = Object.fromEntries(BUILDS.map((b) => [b.id, Object.fromEntries(SHAPES.map((s) => [s, []]))]));
  const ratios = Object.fromEntries(BUILDS.map((b) => [b.id, Object.fromEntries(SHAPES.map((s) => [s, []]))]));
  for (let r = 0; r < Number(a.rounds); r++) {
    const order = r % 2 === 0 ? ds : [...ds].reverse();
    for (const d of order) {
      const shapes = SHAPES.map((_, i) => SHAPES[(i + r) % SHAPES.length]);
      const round = {};
      for (const s of shapes) {
        const c0 = cpuUs(d.p.pid);
        await load(d, s, CALLS, CONC);
        round[s] = (cpuUs(d.p.pid) - c0) / CALLS;
        us[d.b.id][s].push(round[s]);
      }
      for (const s of SHAPES) ratios[d.b.id][s].push(round[s] / round.bare);
    }
    for (const k of ["rls", "ext"]) {
      const f = floors[k];
      const c0 = cpuUs(f.p.pid);
      await f.run(CALLS, CONC);
      floorUs[k].push((cpuUs(f.p.pid) - c0) / CALLS);
    }
  }
  console.log(`side-call-cost: ${a.rounds} rounds × ${CALLS} calls per shape at ${CONC} streams; dojang CPU µs/call and its ratio to bare within the round, medians (min–max)`);
  for (const b of BUILDS) {
    console.log(`\n${b.id} (${b.dist})`);
    for (const s of SHAPES) console.log(`  ${s.padEnd(5)} ${fmt(us[b.id][s]).padEnd(28)} ×${fmt(ratios[b.id][s])}`);
  }
  const bare = us[BUILDS[0].id].bare;
  console.log("\nnode:http2's floor for the side call alone (bench/lib/unary-floor.mjs), and the ratio it allows: (bare + floor) / bare");
  for (const k of ["rls", "ext"]) console.log(`  ${k.padEnd(5)} ${fmt(floorUs[k]).padEnd(28)} ×${fmt(floorUs[k].map((x, i) => (bare[i] + x) / bare[i]))}`);
  console.log(`\nJSON ${JSON.stringify({ calls: CALLS, concurrency: CONC, rounds: Number(a.rounds), us, ratios, floorUs })}`);
  for (const d of ds) await stopDojang(d);
} else {
  // Instructions per call: per build, a run that only warms up (every shape, --cg-warmup calls
  // each) and a run per shape that warms up the same way and then makes --cg-calls calls of it;
  // (count(shape) - count(warm-up only)) / calls, by function (bench/callgrind-diff.mjs). The
  // floors the same way: unary-floor.mjs under valgrind, warmed up, then the calls.
  const N = Number(a["cg-calls"]);
  const WARM = Number(a["cg-warmup"]);
  const CONC = Number(a["cg-concurrency"]);
  const dir = resolve(a.callgrind);
  mkdirSync(dir, { recursive: true });
  const annotate = (prefix) => {
    const f = readdirSync(dir).filter((x) => x.startsWith(`${prefix}.`) && !x.endsWith(".txt")).map((x) => join(dir, x))[0];
    const txt = join(dir, `${prefix}.txt`);
    writeFileSync(txt, execFileSync("callgrind_annotate", ["--threshold=100", "--inclusive=no", f], { maxBuffer: 1 << 28 }));
    return txt;
  };
  const diff = (base, more, label) => {
    const out = execFileSync(process.execPath, [join(ROOT, "bench", "callgrind-diff.mjs"), base, more, String(N), "30"], { encoding: "utf8" });
    writeFileSync(join(dir, `${label}.diff.txt`), out);
    return Number(/instructions per call: (-?[\d,]+)/.exec(out)[1].replaceAll(",", ""));
  };
  const result = {};
  for (const b of BUILDS) {
    const runs = {};
    for (const shape of ["warm-up", ...SHAPES]) {
      const prefix = `${b.id}-${shape}`;
      const d = await startDojang(b, join(dir, prefix));
      for (const s of SHAPES) await load(d, s, WARM, CONC);
      if (shape !== "warm-up") await load(d, shape, N, CONC);
      await stopDojang(d);
      stopping = false;
      runs[shape] = annotate(prefix);
    }
    for (const s of SHAPES) {
      result[`${b.id} ${s}`] = diff(runs["warm-up"], runs[s], `${b.id}-${s}`);
      console.log(`${b.id} ${s}: ${result[`${b.id} ${s}`].toLocaleString("en-US")} instructions per call`);
    }
    for (const s of SHAPES) if (s !== "bare") console.log(`${b.id} ${s}/bare: ×${(result[`${b.id} ${s}`] / result[`${b.id} bare`]).toFixed(2)}`);
  }
  if (!a["no-floor"]) {
    const floors = await startFloors(BUILDS[0].dist, dir);
    for (const k of ["rls", "ext"]) {
      const runs = {};
      for (const what of ["warm-up", "calls"]) {
        const f = floors[`${k}-${what}`];
        await f.ready;
        await f.run(WARM, CONC);
        if (what === "calls") await f.run(N, CONC);
        f.p.stdin.end();
        await new Promise((r) => (f.p.exitCode !== null ? r() : f.p.once("exit", r)));
        runs[what] = annotate(`floor-${k}-${what}`);
      }
      result[`floor ${k}`] = diff(runs["warm-up"], runs.calls, `floor-${k}`);
      console.log(`node:http2 floor ${k}: ${result[`floor ${k}`].toLocaleString("en-US")} instructions per call; (bare + floor) / bare: ×${((result[`${BUILDS[0].id} bare`] + result[`floor ${k}`]) / result[`${BUILDS[0].id} bare`]).toFixed(2)}`);
    }
  }
  console.log(`JSON ${JSON.stringify(result)}`);
}
process.exit(0);
