// The cost of authentication and authorization (issue 21): one dojang process, one raw node:http2
// upstream in this process, and (when .engines/bin/ext-authz is built) Istio's sample ext_authz
// server; shapes measured in turn, round after round, so their ratios come from one run:
//   bare      listener "bare": no route of it has auth (no auth filter at all)
//   none      listener "auth", route /bench.*: no auth on this route, beside routes that have it
//             (what a route without auth pays on a listener with auth: should be nothing)
//   jwt       /jwt.*   jwt (ES256 token, JWKS file), claimsHeader
//   rbac      /rbac.*  rbac: three rules (a deny by method, an allow by method and address, default deny)
//   ext_authz /ext.*   extAuthz against Istio's server (x-ext-authz: allow)
//   all       /all.*   jwt + rbac + extAuthz
// For each: calls/s at a fixed concurrency and dojang's CPU per call (utime+stime of its process
// from /proc). ext_authz's own CPU (the Go server) is not in dojang's figure. Medians over rounds.
//
//   npm run build && node scripts/engines.mjs --only ext-authz && node bench/auth-cost.mjs [--rounds 3] [--seconds 3] [--concurrency 16]
import http2 from "node:http2";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
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
const EXT_BIN = join(ROOT, ".engines", "bin", "ext-authz");

// The upstream: echoes the request once it has ended.
const upstream = http2.createServer({ settings: { initialWindowSize: 2 ** 31 - 1 } });
upstream.on("stream", (s) => {
  s.on("error", () => {});
  const chunks = [];
  s.on("data", (c) => chunks.push(c));
  s.on("end", () => {
    s.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
    s.once("wantTrailers", () => s.sendTrailers({ "grpc-status": "0" }));
    s.end(Buffer.concat(chunks));
  });
});
await new Promise((r) => upstream.listen(0, "127.0.0.1", r));
const upPort = upstream.address().port;

// Istio's ext_authz server on a kernel-chosen port (its start-up line names it)
let authz;
let authzAddr;
if (existsSync(EXT_BIN)) {
  authz = spawn(EXT_BIN, ["-http", "0", "-grpc", "0"], { stdio: ["ignore", "ignore", "pipe"] });
  let out = "";
  authzAddr = await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`ext-authz did not start: ${out}`)), 20_000);
    authz.stderr.on("data", (d) => {
      out += d;
      const m = /Starting gRPC server at \S*:(\d+)/.exec(out);
      if (m) {
        clearTimeout(t);
        resolve(`127.0.0.1:${m[1]}`);
      }
    });
  });
  authz.stderr.resume();
} else process.stderr.write("no .engines/bin/ext-authz (node scripts/engines.mjs --only ext-authz): the ext_authz and all shapes are skipped\n");

const tmp = mkdtempSync(join(tmpdir(), "dojang-auth-cost-"));
const { privateKey, publicKey } = await generateKeyPair("ES256");
const jwksFile = join(tmp, "jwks.json");
writeFileSync(jwksFile, JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: "bench", alg: "ES256", use: "sig" }] }));
const token = await new SignJWT({ sub: "bench", role: "admin" })
  .setProtectedHeader({ alg: "ES256", kid: "bench" })
  .setIssuer("https://issuer.bench")
  .setAudience("bench")
  .setIssuedAt()
  .setExpirationTime("2h")
  .sign(privateKey);

const jwt = { issuer: "https://issuer.bench", audiences: ["bench"], jwks: { file: jwksFile }, claimsHeader: "x-jwt-claims" };
const rbac = (svc) => ({
  rules: [
    { name: "no-deletes", action: "deny", methods: [`${svc}/Delete`] },
    { name: "reads", action: "allow", methods: [`${svc}/*`], clientAddresses: ["127.0.0.0/8", "::1"] },
  ],
  default: "deny",
});
const extAuthz = authzAddr === undefined ? undefined : { address: authzAddr, timeout: "2s" };

const [barePort, authPort, adminPort] = [await freePort(), await freePort(), await freePort()];
const cfg = {
  admin: { address: `127.0.0.1:${adminPort}` },
  logLevel: "warn",
  accessLog: false,
  listeners: [
    { name: "bare", address: `127.0.0.1:${barePort}`, routes: [{ match: { prefix: "/" }, cluster: "up" }] },
    {
      name: "auth",
      address: `127.0.0.1:${authPort}`,
      routes: [
        { match: { prefix: "/jwt." }, cluster: "up", jwt },
        { match: { prefix: "/rbac." }, cluster: "up", rbac: rbac("rbac.Echo") },
        ...(extAuthz ? [{ match: { prefix: "/ext." }, cluster: "up", extAuthz }, { match: { prefix: "/all." }, cluster: "up", jwt, rbac: rbac("all.Echo"), extAuthz }] : []),
        { match: { prefix: "/" }, cluster: "up" },
      ],
    },
  ],
  clusters: [{ name: "up", endpoints: [`127.0.0.1:${upPort}`] }],
};
const cfgFile = join(tmp, "dojang.json");
writeFileSync(cfgFile, JSON.stringify(cfg));
const d = startProcess("dojang", process.execPath, [join(args.dist, "cli.js"), "--config", cfgFile], { logDir: tmp });
const auth = { authorization: `Bearer ${token}` };
const SHAPES = [
  { id: "bare", port: barePort, path: "/bench.Echo/Unary" },
  { id: "none", port: authPort, path: "/bench.Echo/Unary" },
  { id: "jwt", port: authPort, path: "/jwt.Echo/Unary", headers: auth },
  { id: "rbac", port: authPort, path: "/rbac.Echo/Unary" },
  ...(extAuthz
    ? [
        { id: "ext_authz", port: authPort, path: "/ext.Echo/Unary", headers: { "x-ext-authz": "allow" } },
        { id: "all", port: authPort, path: "/all.Echo/Unary", headers: { ...auth, "x-ext-authz": "allow" } },
      ]
    : []),
];
try {
  for (let t = 0; ; t++) {
    try {
      if ((await httpGet(`http://127.0.0.1:${adminPort}/ready`, 500)).status === 200) break;
    } catch {
      /* not yet */
    }
    if (t > 800) throw new Error("dojang did not start");
    await sleep(25);
  }
  const sessions = new Map();
  for (const port of [barePort, authPort]) sessions.set(port, [await waitConnect(connect(`http://127.0.0.1:${port}`)), await waitConnect(connect(`http://127.0.0.1:${port}`))]);
  const body = frame(100);

  async function run(s, seconds) {
    let calls = 0;
    let failed = 0;
    const ss = sessions.get(s.port);
    const until = performance.now() + seconds * 1000;
    const c0 = cpuTicks(d.pid);
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: CONC }, async (_, w) => {
        while (performance.now() < until) {
          const r = await call(ss[w % 2], s.path, body, { headers: s.headers ?? {} });
          if (r.grpcStatus === "0") calls++;
          else if (failed++ < 3) process.stderr.write(`${s.id} failed: ${r.grpcStatus} ${r.grpcMessage}\n`);
        }
      }),
    );
    const secs = (performance.now() - t0) / 1000;
    const cpuUs = ((cpuTicks(d.pid) - c0) * 1e6) / CLK_TCK;
    return { callsPerSecond: calls / secs, cpuUsPerCall: cpuUs / Math.max(1, calls), failed };
  }

  for (const s of SHAPES) await run(s, 1); // warm-up
  const results = Object.fromEntries(SHAPES.map((s) => [s.id, []]));
  for (let r = 0; r < ROUNDS; r++) for (const s of SHAPES) results[s.id].push(await run(s, SECONDS));
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const out = {};
  process.stdout.write(`concurrency ${CONC}, ${ROUNDS} rounds × ${SECONDS} s per shape; medians (min–max)\n`);
  process.stdout.write("shape      calls/s               dojang CPU µs/call    CPU/bare (median, min)  failed\n");
  for (const s of SHAPES) {
    const rs = results[s.id];
    const cps = rs.map((x) => x.callsPerSecond);
    const cpu = rs.map((x) => x.cpuUsPerCall);
    out[s.id] = { callsPerSecond: median(cps), cpuUsPerCall: median(cpu), cpuMin: Math.min(...cpu), failed: rs.reduce((a, x) => a + x.failed, 0) };
  }
  for (const s of SHAPES) {
    const rs = results[s.id];
    const cps = rs.map((x) => x.callsPerSecond);
    const cpu = rs.map((x) => x.cpuUsPerCall);
    process.stdout.write(
      `${s.id.padEnd(10)} ${median(cps).toFixed(0).padStart(6)} (${Math.min(...cps).toFixed(0)}–${Math.max(...cps).toFixed(0)})`.padEnd(33) +
        `${median(cpu).toFixed(1).padStart(6)} (${Math.min(...cpu).toFixed(1)}–${Math.max(...cpu).toFixed(1)})`.padEnd(22) +
        `${(out[s.id].cpuUsPerCall / out.bare.cpuUsPerCall).toFixed(2).padStart(8)} ${(out[s.id].cpuMin / out.bare.cpuMin).toFixed(2).padStart(6)}           ${out[s.id].failed}\n`,
    );
  }
  for (const ss of sessions.values()) for (const s of ss) s.close();
} finally {
  await stopProcess(d, 3000);
  if (authz !== undefined) authz.kill("SIGTERM");
  upstream.close();
  rmSync(tmp, { recursive: true, force: true });
}
