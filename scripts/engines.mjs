// Builds and installs the real engines the tests talk to, before vitest starts (npm test runs this;
// .ci/run too). Nothing here is dojang: each is a registry package or a small test-only Go fixture.
//
//  - test/engines/<name>/ is a Go module (go.mod + go.sum committed). Its engine.json, if present,
//    names the binaries to build: {"binaries": {"<bin>": "<package path>"}}; without it the module's
//    own main package becomes .engines/bin/<name>. Modules come from the Go module proxy at the
//    versions go.sum pins; go's build cache makes a rebuild cheap, and a stamp skips it entirely
//    when nothing under the folder (and nothing it names in generate.inputs) changed.
//  - engine.json's "generate" runs protoc before the build, for an engine made of generated code:
//    {"plugins": {"<x>": "<package>"}, "out": "<dir>", "inputs": [paths], "protoc": [args]}. Each
//    plugin is built from the module (so go.sum pins it too) and handed to protoc as
//    protoc-gen-<x>; protoc runs in the engine's folder with `args`, into `out` (emptied first,
//    ignored by git and by the stamp); `inputs` (files or folders, relative to the engine's
//    folder) are the .proto files it reads, hashed into the stamp.
//  - docs/examples/<name>/ Go modules the docs tell users to `go run .` are built the same way,
//    under the same name, so a test runs the very program a guide runs (EXAMPLES below).
//  - Debian packages the tests start (redis-server; prometheus and its promtool, for the rules in
//    deploy/prometheus; tmux, the terminal `dojang top` is tested in) or import (python3-grpcio,
//    gRPC's C-core) are installed with apt-get when missing.
//
// Usage: node scripts/engines.mjs [--only name,name]   Prints one line per engine.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { createHash } from "node:crypto";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const enginesDir = join(root, "test", "engines");
const binDir = join(root, ".engines", "bin");
const stampDir = join(root, ".engines", "stamps");

/**
 * Debian packages whose programs the tests run, by program (a list when the program needs more:
 * protoc reads the well-known types' .proto files from libprotobuf-dev's /usr/include).
 */
/** Examples under docs/examples that the tests run as engines, by engine name. */
const EXAMPLES = { "xds-control-plane": join(root, "docs", "examples", "xds-control-plane") };

const APT = { "redis-server": "redis-server", protoc: ["protobuf-compiler", "libprotobuf-dev"], prometheus: "prometheus", promtool: "prometheus", tmux: "tmux" };
/**
 * Debian packages of Python modules the tests import with the system's python3, by module:
 * grpcio is gRPC's C-core (libgrpc) under Python, the C-core client of the upgrade test
 * (test/helpers/ccore-client.py).
 */
const APT_PYTHON = { grpc: "python3-grpcio" };

const only = (() => {
  const i = process.argv.indexOf("--only");
  return i > 0 ? new Set(process.argv[i + 1].split(",")) : undefined;
})();

function haveCommand(cmd) {
  return spawnSync("sh", ["-c", `command -v ${cmd}`], { stdio: "ignore" }).status === 0;
}

function havePythonModule(m) {
  return spawnSync("/usr/bin/python3", ["-c", `import ${m}`], { stdio: "ignore" }).status === 0;
}

function ensureApt() {
  const missing = [
    ...Object.entries(APT).filter(([cmd]) => !haveCommand(cmd) && !existsSync(`/usr/sbin/${cmd}`) && !existsSync(`/usr/bin/${cmd}`)),
    ...Object.entries(APT_PYTHON).filter(([m]) => !havePythonModule(m)),
  ];
  if (missing.length === 0) return;
  const pkgs = [...new Set(missing.flatMap(([, p]) => p))];
  const sudo = process.getuid?.() === 0 ? [] : ["sudo"];
  console.log(`engines: installing ${pkgs.join(" ")} with apt-get`);
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  for (const args of [["apt-get", "-qq", "update"], ["apt-get", "-qq", "install", "-y", "--no-install-recommends", ...pkgs]]) {
    const argv = [...sudo, ...args];
    const r = spawnSync(argv[0], argv.slice(1), { stdio: "inherit", env });
    if (r.status !== 0) throw new Error(`engines: ${argv.join(" ")} failed (exit ${r.status}); install ${pkgs.join(" ")} and run again`);
  }
}

/** A digest of `dir`'s files (but `skip`, a folder in it) and of the `extra` files or folders. */
function hashTree(dir, skip, extra = []) {
  const h = createHash("sha256");
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const p = join(d, e.name);
      if (p === skip) continue;
      if (e.isDirectory()) walk(p);
      else h.update(relative(dir, p)).update(readFileSync(p));
    }
  };
  walk(dir);
  for (const x of extra) {
    if (statSync(x).isDirectory()) walk(x);
    else h.update(relative(dir, x)).update(readFileSync(x));
  }
  return h.digest("hex");
}

function run(cmd, args, cwd) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, stdio: ["ignore", "inherit", "inherit"], env: { ...process.env, CGO_ENABLED: process.env.CGO_ENABLED ?? "0" } });
    child.on("error", reject);
    child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} ${args.join(" ")} (in ${cwd}) exited ${code}`))));
  });
}

async function buildEngine(name, dir) {
  const spec = existsSync(join(dir, "engine.json")) ? JSON.parse(readFileSync(join(dir, "engine.json"), "utf8")) : {};
  const binaries = spec.binaries ?? { [name]: "." };
  const gen = spec.generate;
  const stamp = join(stampDir, name);
  const digest = hashTree(dir, gen ? join(dir, gen.out) : undefined, (gen?.inputs ?? []).map((p) => join(dir, p)));
  const outs = Object.keys(binaries).map((b) => join(binDir, b));
  if (existsSync(stamp) && readFileSync(stamp, "utf8") === digest && outs.every((o) => existsSync(o))) {
    console.log(`engines: ${name} up to date`);
    return;
  }
  const t0 = Date.now();
  if (gen) await generate(name, dir, gen);
  for (const [bin, pkg] of Object.entries(binaries)) await run("go", ["build", "-trimpath", "-o", join(binDir, bin), pkg], dir);
  writeFileSync(stamp, digest);
  console.log(`engines: ${name} built in ${((Date.now() - t0) / 1000).toFixed(1)} s (${Object.keys(binaries).join(", ")})`);
}

/** engine.json's "generate": the plugins built from the module, then protoc into `out`. */
async function generate(name, dir, gen) {
  const tools = join(root, ".engines", "tools", name);
  mkdirSync(tools, { recursive: true });
  const plugins = [];
  for (const [x, pkg] of Object.entries(gen.plugins ?? {})) {
    const bin = join(tools, `protoc-gen-${x}`);
    await run("go", ["build", "-trimpath", "-o", bin, pkg], dir);
    plugins.push(`--plugin=protoc-gen-${x}=${bin}`);
  }
  const out = join(dir, gen.out);
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  await run("protoc", [...plugins, ...gen.protoc], dir);
}

async function main() {
  mkdirSync(binDir, { recursive: true });
  mkdirSync(stampDir, { recursive: true });
  ensureApt();
  const dirs = { ...EXAMPLES };
  if (existsSync(enginesDir)) for (const n of readdirSync(enginesDir)) if (statSync(join(enginesDir, n)).isDirectory() && existsSync(join(enginesDir, n, "go.mod"))) dirs[n] = join(enginesDir, n);
  const names = Object.keys(dirs).filter((n) => !only || only.has(n)).sort();
  if (names.length && !haveCommand("go")) throw new Error("engines: the tests need Go (the go command) to build test/engines/* and docs/examples/*; install Go 1.26");
  // Two at a time: the CI machine has two cores.
  const queue = [...names];
  await Promise.all([0, 1].map(async () => { for (let n = queue.shift(); n; n = queue.shift()) await buildEngine(n, dirs[n]); }));
}

main().catch((err) => { console.error(err.message); process.exit(1); });
