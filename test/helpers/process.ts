// Real dojang processes for process-level tests: `node dist/cli.js ...` spawned with the test's
// own Node (process.execPath), free loopback ports, bounded waits. Every process a test starts
// (dojang, npm, tsc, a child vitest, `node -e`) goes through spawnGroup(): it runs in a process
// group of its own (detached), so what it starts in turn (cluster workers, npm's children) is in
// that group too, and the group is SIGKILLed and waited for when the test ends, passed, failed
// or timed out (onTestFinished; a group started outside a test, in a beforeAll, at the file's
// afterAll; and at the latest when the test file's fork exits). Cleanup only ever signals the
// groups spawned here.
import { spawn, type ChildProcess, type SpawnOptions } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net, { type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type * as grpc from "@grpc/grpc-js";
import { afterAll, afterEach, beforeAll, onTestFinished } from "vitest";
import { echoClient, type EchoClient } from "./peers.js";
import { startBackend, type Backend } from "./backends.js";

export const REPO_ROOT = resolve(import.meta.dirname, "..", "..");
export const CLI = join(REPO_ROOT, "dist", "cli.js");

/** Throws a clear message when dist/ has not been built (npm test builds it before vitest). */
export function assertDistBuilt(): void {
  if (!existsSync(CLI)) {
    throw new Error(`${CLI} does not exist: build first (npm run build, or npm test which builds then runs vitest)`);
  }
}

/**
 * A port that was free a moment ago, for a process that binds it later (a config's address).
 * Not the kernel's port 0: that hands out a port of the ephemeral range, which every outbound
 * connection of every test running beside this one draws its local port from too, so the port
 * could be taken as a connection's source port before its process binds it (a dojang that then
 * failed to bind its admin port and stopped: test/docs/xds-guide.test.ts under the full suite).
 * The ports come from below the ephemeral range instead, a block of PORT_BLOCK per vitest pool
 * slot (VITEST_POOL_ID), in turn from a random start, each one checked by binding it; the test
 * files running at once never draw from the same block.
 */
export async function freePort(): Promise<number> {
  const block = portBlock();
  if (block === undefined) return kernelPort();
  for (let i = 0; i < PORT_BLOCK; i++) {
    const port = block.base + (block.next++ % PORT_BLOCK);
    if (await canBind(port)) return port;
  }
  return kernelPort();
}

/** ports per vitest pool slot */
const PORT_BLOCK = 500;
let ports: { base: number; next: number } | null | undefined;

function portBlock(): { base: number; next: number } | undefined {
  if (ports !== undefined) return ports ?? undefined;
  ports = null;
  let low = 32768;
  try {
    low = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
  } catch {
    // not Linux: the common default
  }
  const slot = Number(process.env["VITEST_POOL_ID"] ?? "1");
  const base = low - PORT_BLOCK * (1 + (Number.isInteger(slot) && slot > 0 ? slot : 1));
  if (!(base >= 1024)) return undefined;
  ports = { base, next: Math.floor(Math.random() * PORT_BLOCK) };
  return ports;
}

function canBind(port: number): Promise<boolean> {
  const srv = net.createServer();
  return new Promise<boolean>((r) => {
    srv.once("error", () => r(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => r(true)));
  });
}

/** The kernel's pick (bind 127.0.0.1:0, read the port, close): where no block is available. */
async function kernelPort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r, j) => {
    srv.once("error", j);
    srv.listen(0, "127.0.0.1", () => r());
  });
  const { port } = srv.address() as AddressInfo;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

/** Holds 127.0.0.1:port (or a fresh one) until close(): for "port already in use". */
export async function occupyPort(port = 0): Promise<{ port: number; close(): Promise<void> }> {
  const srv = net.createServer((s) => s.destroy());
  await new Promise<void>((r, j) => {
    srv.once("error", j);
    srv.listen(port, "127.0.0.1", () => r());
  });
  return { port: (srv.address() as AddressInfo).port, close: () => new Promise<void>((r) => srv.close(() => r())) };
}

/** A temporary directory for config files; remove() deletes it. */
export function tempDir(): { dir: string; write(name: string, text: string): string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), "dojang-proc-"));
  return {
    dir,
    write: (name, text) => {
      const p = join(dir, name);
      writeFileSync(p, text);
      return p;
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** The test runner's environment without DOJANG_CONFIG (so a stray one never leaks in), plus `extra`. */
export function childEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env["DOJANG_CONFIG"];
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface DojangProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit; rejects if it has not exited within `ms`. */
  exited(ms: number): Promise<Exit>;
  /** Whether the process has exited already. */
  readonly hasExited: boolean;
}

/** process group id (the leader's pid) -> the leader's close, for every group spawned here and not yet gone */
const groups = new Map<number, Promise<void>>();

/** Whether any process of group `pgid` still exists (EPERM: it exists, not ours to signal). */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * SIGKILLs process group `pgid` (one spawnGroup() started) and waits, up to `ms`, until its leader
 * has closed and no process of the group is left; throws if one still is then. A no-op for a
 * group already gone.
 */
export async function killGroup(pgid: number, ms = 5000): Promise<void> {
  const closed = groups.get(pgid);
  if (closed === undefined) return;
  try {
    process.kill(-pgid, "SIGKILL");
  } catch {
    /* all gone already */
  }
  const until = Date.now() + ms;
  await Promise.race([closed, sleep(ms)]);
  while (groupAlive(pgid) && Date.now() < until) await sleep(20);
  if (groupAlive(pgid)) throw new Error(`process group ${pgid} still has processes ${ms} ms after SIGKILL`);
  groups.delete(pgid);
}

/**
 * Spawns `cmd args` in a process group of its own (`detached`), registered for cleanup: the group
 * is SIGKILLed and waited for when the current test finishes, whatever its outcome (or, when
 * called outside a test, in the test file's afterAll). A test that wants to stop it earlier, or
 * with another signal, signals `-child.pid` (the group) itself.
 */
export function spawnGroup(cmd: string, args: readonly string[], opts: Omit<SpawnOptions, "detached"> = {}): ChildProcess {
  const child = spawn(cmd, [...args], { ...opts, detached: true });
  const pgid = child.pid;
  if (pgid === undefined) return child; // spawn failed: the child's 'error' event says why
  groups.set(
    pgid,
    new Promise<void>((r) => {
      child.once("close", () => {
        // a group that ended by itself is forgotten at once: its id may be reused by another
        // process group later, which cleanup must never signal
        if (!groupAlive(pgid)) groups.delete(pgid);
        r();
      });
      child.once("error", () => r());
    }),
  );
  try {
    onTestFinished(() => killGroup(pgid), 10_000);
  } catch {
    /* not inside a test (a beforeAll): the afterAll below, or the fork's exit */
  }
  return child;
}

export interface GroupRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/**
 * Runs `cmd args` (spawnGroup) to completion: resolves with its exit and output, or after `ms`
 * SIGKILLs its group, waits for it, and rejects with the output so far. Keep `ms` under the
 * test's own timeout, so that the test, not vitest, reports the hang.
 */
export function runGroup(cmd: string, args: readonly string[], opts: Omit<SpawnOptions, "detached" | "stdio">, ms: number): Promise<GroupRun> {
  const t0 = performance.now();
  const child = spawnGroup(cmd, args, { ...opts, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (err += d));
  return new Promise((resolve, reject) => {
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      const why = new Error(`${cmd} ${args.join(" ")} did not finish within ${ms}ms (its process group was killed)\nstdout:\n${out}\nstderr:\n${err}`);
      void (child.pid === undefined ? Promise.resolve() : killGroup(child.pid)).finally(() => reject(why));
    }, ms);
    child.once("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      if (!timedOut) resolve({ code, signal, stdout: out, stderr: err, ms: performance.now() - t0 });
    });
  });
}

/** SIGKILLs every process group spawned here that is still there, and waits for each to go. */
export async function killSpawned(): Promise<void> {
  const errors: unknown[] = [];
  await Promise.all([...groups.keys()].map((g) => killGroup(g).catch((err: unknown) => void errors.push(err))));
  if (errors.length > 0) throw errors[0];
}

// whatever a test file's own hooks did: nothing it started outlives the file
afterAll(() => killSpawned(), 10_000);
process.once("exit", () => {
  for (const pgid of groups.keys()) {
    try {
      process.kill(-pgid, "SIGKILL");
    } catch {
      /* gone */
    }
  }
});

/** Spawns `node dist/cli.js ...args` (or another copy of the CLI) in the repo root, in its own process group; stdout and stderr are collected. */
export function spawnDojang(args: readonly string[], env: NodeJS.ProcessEnv = childEnv(), cli: string = CLI): DojangProcess {
  const child = spawnGroup(process.execPath, [cli, ...args], { cwd: REPO_ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (err += d));
  let exit: Exit | undefined;
  // 'close' (not 'exit') so stdout/stderr are complete when the exit is reported.
  const done = new Promise<Exit>((r) =>
    child.once("close", (code, signal) => {
      exit = { code, signal };
      r(exit);
    }),
  );
  return {
    child,
    pid: child.pid ?? -1,
    stdout: () => out,
    stderr: () => err,
    get hasExited() {
      return exit !== undefined;
    },
    exited: (ms) =>
      new Promise<Exit>((resolve, reject) => {
        const t = setTimeout(
          () => reject(new Error(`dojang (pid ${child.pid}) did not exit within ${ms}ms\nstdout:\n${out}\nstderr:\n${err}`)),
          ms,
        );
        void done.then((e) => {
          clearTimeout(t);
          resolve(e);
        });
      }),
  };
}

/** Runs the CLI to completion (bounded) and returns its exit and output. */
export async function runCli(
  args: readonly string[],
  env: NodeJS.ProcessEnv = childEnv(),
  ms = 10_000,
): Promise<Exit & { stdout: string; stderr: string }> {
  const p = spawnDojang(args, env);
  const e = await p.exited(ms);
  return { ...e, stdout: p.stdout(), stderr: p.stderr() };
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls `probe` every `everyMs` until it returns a non-undefined value, or throws after `ms`. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, ms = 10_000, everyMs = 25): Promise<T> {
  const until = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > until) throw new Error(`timed out after ${ms}ms waiting for ${what}${last ? `: ${String(last)}` : ""}`);
    await sleep(everyMs);
  }
}

/** GET http://address/path with a short per-request timeout; { status, body } or throws. */
export async function httpGet(address: string, path: string, ms = 1000): Promise<{ status: number; body: string; type: string | null }> {
  const res = await fetch(`http://${address}${path}`, { signal: AbortSignal.timeout(ms) });
  return { status: res.status, body: await res.text(), type: res.headers.get("content-type") };
}

/** Waits until the child's admin /ready answers 200 (or the child exits, which fails with its output). */
export async function waitReady(p: DojangProcess, adminAddress: string, ms = 10_000): Promise<void> {
  await waitFor(`dojang ${adminAddress}/ready`, async () => {
    if (p.hasExited) throw new Error(`dojang exited before it was ready\nstdout:\n${p.stdout()}\nstderr:\n${p.stderr()}`);
    const r = await httpGet(adminAddress, "/ready", 500).catch(() => undefined);
    return r?.status === 200 ? true : undefined;
  }, ms).catch((err: unknown) => {
    throw new Error(`${(err as Error).message}\nstdout:\n${p.stdout()}\nstderr:\n${p.stderr()}`);
  });
}

/** Whether a TCP connection to 127.0.0.1:port is accepted (false on refusal or timeout). */
export function canConnect(port: number, ms = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1");
    const t = setTimeout(() => {
      s.destroy();
      resolve(false);
    }, ms);
    s.once("connect", () => {
      clearTimeout(t);
      s.destroy();
      resolve(true);
    });
    s.once("error", () => {
      clearTimeout(t);
      resolve(false);
    });
  });
}

/** A minimal valid config (YAML) for a child process. */
export function configYaml(o: {
  listenPort: number | string;
  adminPort?: number | string;
  upstream?: string;
  clusterName?: string;
  routeCluster?: string;
  drainTimeout?: string;
  logLevel?: string;
  extraRoute?: string;
  extraTop?: string;
}): string {
  const cluster = o.clusterName ?? "backend";
  return [
    ...(o.adminPort !== undefined ? ["admin:", `  address: 127.0.0.1:${o.adminPort}`] : []),
    "listeners:",
    "  - name: main",
    `    address: 127.0.0.1:${o.listenPort}`,
    "    routes:",
    '      - match: { prefix: "/" }',
    `        cluster: ${o.routeCluster ?? cluster}`,
    ...(o.extraRoute !== undefined ? [`        ${o.extraRoute}`] : []),
    "clusters:",
    `  - name: ${cluster}`,
    `    endpoints: ["${o.upstream ?? "127.0.0.1:1"}"]`,
    `drainTimeout: ${o.drainTimeout ?? "5s"}`,
    `logLevel: ${o.logLevel ?? "info"}`,
    ...(o.extraTop !== undefined ? [o.extraTop] : []),
    "",
  ].join("\n");
}

/** pino's JSON lines from the process's stdout. */
export function logLines(p: DojangProcess): Record<string, any>[] {
  return p
    .stdout()
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, any>);
}

/**
 * The first of the process's log lines that `pred` takes, waited for (up to `ms`): a line is
 * logged before what the test saw through another channel (an ACK, an HTTP answer), but reaches
 * the test through the process's stdout pipe, which a loaded machine may deliver later.
 */
export function logLine(p: DojangProcess, pred: (l: Record<string, any>) => boolean, what: string, ms = 10_000): Promise<Record<string, any>> {
  return waitFor(`log line: ${what}`, () => logLines(p).find(pred), ms);
}

/**
 * A Unary handler that answers after n ms, n being the request payload (a cancelled call stops
 * its timer); the answer is `reply(n, request)`, "done:<n>" unless told.
 */
export function answerAfterPayloadMs(
  reply: (ms: number, request: Buffer) => Buffer = (ms) => Buffer.from(`done:${ms}`),
): (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => void {
  return (call, cb) => {
    const ms = Number(call.request.toString());
    const t = setTimeout(() => cb(null, reply(ms, call.request)), ms);
    call.on("cancelled", () => clearTimeout(t));
  };
}

/**
 * A client on a channel of its own (its own connection, so a `workers: N` primary hands each to
 * the next worker), pushed onto `clients` for the test's afterEach to close.
 */
export function ownConnectionClient(address: string, clients: EchoClient[]): EchoClient {
  const c = echoClient(address, { "grpc.use_local_subchannel_pool": 1 });
  clients.push(c);
  return c;
}

/**
 * What a process test starts besides dojang, closed after each test together with the spawned
 * dojang processes: Echo backends (`backend(name)`), clients (push to `clients`) and temp dirs
 * (`dir()`). Registers the vitest hooks (and checks that dist is built) when called at the top of
 * a test file.
 */
export function processTestKit(): {
  readonly clients: EchoClient[];
  readonly dirs: { remove(): void }[];
  backend(name: string): Promise<Backend>;
  dir(): ReturnType<typeof tempDir>;
} {
  const backends: Backend[] = [];
  const clients: EchoClient[] = [];
  const dirs: { remove(): void }[] = [];
  beforeAll(() => assertDistBuilt());
  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    await killSpawned();
    for (const b of backends.splice(0)) await b.close();
    for (const d of dirs.splice(0)) d.remove();
  });
  return {
    clients,
    dirs,
    backend: async (name) => {
      const b = await startBackend(name);
      backends.push(b);
      return b;
    },
    dir: () => {
      const d = tempDir();
      dirs.push(d);
      return d;
    },
  };
}
