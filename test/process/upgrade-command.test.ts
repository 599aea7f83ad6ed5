// `dojang upgrade` and SIGUSR2 with real processes (0.7 item 1): what the command refuses before
// it sends anything (exit 2, 3), a new process that does not start (an invalid config, a listener
// on a port in use, a build that never becomes ready: exit 1 with the reason, the old one serving
// on with its pid file), a successful one (the pid file names the new process, the old one drains
// and exits, calls go on), `npm start` (npm's child stays as a thin supervisor, so npm keeps its
// child and its signals still reach dojang; the chain stays one process deep), and `workers: 2`
// (the primary's sockets go to a new primary and its workers). The load test is upgrade.test.ts.
import { existsSync, readFileSync, writeFileSync, cpSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { echoClient, unary, type EchoClient } from "../helpers/peers.js";
import {
  REPO_ROOT,
  childEnv,
  configYaml,
  freePort,
  httpGet,
  logLines,
  occupyPort,
  processTestKit,
  runCli,
  sleep,
  spawnDojang,
  spawnGroup,
  waitFor,
  waitReady,
} from "../helpers/process.js";

const kit = processTestKit();

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0] !== "Z";
  } catch {
    return false;
  }
}

function parentOf(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ")[1]);
}

const pidIn = (file: string): number => Number(readFileSync(file, "utf8").trim());

/** A client whose calls each may take a new connection's path (grpc-js's default transparent retry on, as shipped). */
function client(address: string): EchoClient {
  const c = echoClient(address, { "grpc.enable_retries": 1, "grpc.use_local_subchannel_pool": 1 });
  kit.clients.push(c);
  return c;
}

/** Calls `c` with `concurrency` in flight until `stop`, counting how each ended. */
async function callLoop(c: EchoClient, concurrency: number, stop: { now: boolean }): Promise<{ ok: number; failed: string[] }> {
  const r = { ok: 0, failed: [] as string[] };
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (!stop.now) {
        const u = await unary(c, Buffer.from("x"));
        if (u.err === null) r.ok++;
        else r.failed.push(`${u.err.code} ${u.err.details}`);
      }
    }),
  );
  return r;
}

/** dojang with a pid file and an admin listener in front of a fresh Echo backend. */
async function started(o: { extraTop?: string; drainTimeout?: string } = {}) {
  const d = kit.dir();
  const b = await kit.backend("b");
  const [listenPort, adminPort] = [await freePort(), await freePort()];
  const text = configYaml({ listenPort, adminPort, upstream: b.address, drainTimeout: o.drainTimeout ?? "5s", ...(o.extraTop === undefined ? {} : { extraTop: o.extraTop }) });
  const file = d.write("dojang.yaml", text);
  const pidFile = join(d.dir, "dojang.pid");
  const p = spawnDojang(["--config", file, "--pid-file", pidFile]);
  await waitReady(p, `127.0.0.1:${adminPort}`, 30_000);
  await waitFor("the pid file", () => (existsSync(pidFile) ? true : undefined));
  return { d, b, p, file, text, pidFile, listenPort, adminPort, admin: `127.0.0.1:${adminPort}`, address: `127.0.0.1:${listenPort}` };
}

const upgradeCli = (args: readonly string[], ms = 90_000) => runCli(["upgrade", ...args], childEnv(), ms);

describe("dojang upgrade: refused before anything is sent", () => {
  it("usage (2): no pid file, a --build that is not a dojang build, a --config that is not there, a --timeout without a unit", async () => {
    const d = kit.dir();
    const none = await upgradeCli([]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain("no pid file: give --pid-file PATH");
    const pidFile = join(d.dir, "x.pid");
    const build = await upgradeCli(["--pid-file", pidFile, "--build", d.dir]);
    expect({ code: build.code, err: build.stderr.trim() }).toEqual({ code: 2, err: `dojang upgrade: --build: no dojang build in ${d.dir} (no cli.js there); nothing sent` });
    const cfg = await upgradeCli(["--pid-file", pidFile, "--config", join(d.dir, "missing.yaml")]);
    expect({ code: cfg.code, err: cfg.stderr.trim() }).toEqual({ code: 2, err: `dojang upgrade: --config ${join(d.dir, "missing.yaml")}: ENOENT; nothing sent` });
    const t = await upgradeCli(["--pid-file", pidFile, "--timeout", "5"]);
    expect(t.code).toBe(2);
    expect(t.stderr).toContain("--timeout:");
  });

  it("no running dojang (3): the pid file is missing", async () => {
    const d = kit.dir();
    const r = await upgradeCli(["--pid-file", join(d.dir, "gone.pid")]);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain(`no pid file ${join(d.dir, "gone.pid")}`);
  });
});

describe("dojang upgrade: the new process does not become ready (1), the old one serves on", () => {
  it("an invalid config, then a listener on a port in use: each reason is the new process's own; the pid file and the serving process stay; calls go on", { timeout: 180_000 }, async () => {
    const s = await started();
    const c = client(s.address);
    const stop = { now: false };
    const calls = callLoop(c, 10, stop);
    // (a failed expectation ends the loop too, before the kit closes its client)
    try {
      const bad = s.d.write("bad.yaml", "listeners: [\n");
      const r1 = await upgradeCli(["--pid-file", s.pidFile, "--config", bad]);
      expect(r1.code, r1.stdout + r1.stderr).toBe(1);
      expect(r1.stderr).toContain(`dojang upgrade: the new process did not become ready: dojang: invalid config ${bad}:`);
      expect(r1.stderr).toContain(`pid ${s.p.pid} serves on, unchanged`);
      const busy = await occupyPort();
      const clash = s.d.write(
        "clash.yaml",
        s.text.replace("clusters:", ["  - name: extra", `    address: 127.0.0.1:${busy.port}`, "    routes:", '      - match: { prefix: "/" }', "        cluster: backend", "clusters:"].join("\n")),
      );
      const r2 = await upgradeCli(["--pid-file", s.pidFile, "--config", clash]);
      await busy.close();
      expect(r2.code, r2.stdout + r2.stderr).toBe(1);
      expect(r2.stderr).toMatch(new RegExp(`the new process did not become ready: dojang: cannot listen on 127\\.0\\.0\\.1:${busy.port} \\(listener extra\\): .*EADDRINUSE`));
    } finally {
      stop.now = true;
    }
    const done = await calls;
    expect(done.failed).toEqual([]);
    expect(done.ok).toBeGreaterThan(10);
    expect(pidIn(s.pidFile)).toBe(s.p.pid);
    expect((await httpGet(s.admin, "/ready")).status).toBe(200);
    // the refused processes are gone; the serving one logged each refusal
    const refusals = logLines(s.p).filter((l) => l["msg"] === "upgrade: the new process did not become ready; this process keeps serving");
    expect(refusals).toHaveLength(2);
    for (const l of refusals) expect(alive(l["pid"] as number)).toBe(false);
  });

  it("--timeout: a build that never becomes ready is killed when it passes, and the old one serves on", { timeout: 120_000 }, async () => {
    const s = await started();
    const hung = join(s.d.dir, "hung");
    cpSync(join(REPO_ROOT, "dist"), hung, { recursive: true });
    writeFileSync(join(hung, "dojang.mjs"), "setInterval(() => {}, 1000);\n");
    const r = await upgradeCli(["--pid-file", s.pidFile, "--build", hung, "--timeout", "3s"]);
    expect(r.code, r.stdout + r.stderr).toBe(1);
    const m = /the new process did not become ready: the new process \(pid (\d+)\) was not ready within 3000ms; it was killed/.exec(r.stderr);
    expect(m, r.stderr).not.toBeNull();
    await waitFor("the hung process to be gone", () => (alive(Number(m![1])) ? undefined : true));
    expect(pidIn(s.pidFile)).toBe(s.p.pid);
    expect((await unary(client(s.address), Buffer.from("x"))).err).toBeNull();
  });
});

describe("dojang upgrade: the new process serves", () => {
  it("the pid file names it, the old one drains and exits, and calls in flight and new ones all end OK; a bare SIGUSR2 does the same", { timeout: 180_000 }, async () => {
    const s = await started();
    s.b.delayMs = 300;
    const c = client(s.address);
    const stop = { now: false };
    const calls = callLoop(c, 20, stop);
    await sleep(500);
    const r = await upgradeCli(["--pid-file", s.pidFile]);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const m = /^dojang upgrade: upgraded: pid (\d+) serves \(ready in \d+ms\); pid (\d+) stopped accepting and drains its calls \(drainTimeout 5000ms\)$/.exec(r.stdout.trim());
    expect(m, r.stdout).not.toBeNull();
    const first = Number(m![1]);
    expect(Number(m![2])).toBe(s.p.pid);
    expect(pidIn(s.pidFile)).toBe(first);
    await waitFor("the old process to exit", () => (alive(s.p.pid) ? undefined : true), 20_000);
    // SIGUSR2 alone: the same build and config
    process.kill(first, "SIGUSR2");
    const second = await waitFor("the pid file to name the next process", () => (pidIn(s.pidFile) !== first ? pidIn(s.pidFile) : undefined), 60_000, 100);
    await waitFor("the first new process to exit", () => (alive(first) ? undefined : true), 20_000);
    stop.now = true;
    const done = await calls;
    expect(done.failed).toEqual([]);
    expect(done.ok).toBeGreaterThan(20);
    expect((await httpGet(s.admin, "/ready")).status).toBe(200);
    const drained = logLines(s.p).filter((l) => l["msg"] === "upgrade: drained");
    expect(drained.map((l) => [l["pid"], l["code"]])).toEqual([
      [s.p.pid, 0],
      [first, 0],
    ]);
    // a stop still works as before: SIGTERM drains the serving one, which removes the pid file
    process.kill(second, "SIGTERM");
    await waitFor("the last process to exit", () => (alive(second) ? undefined : true), 20_000);
    expect(existsSync(s.pidFile)).toBe(false);
  });
});

describe("dojang upgrade with workers: 2", () => {
  it("a new primary and its workers take the primary's sockets over; the old primary's workers drain and exit; no call fails", { timeout: 180_000 }, async () => {
    const s = await started({ extraTop: "workers: 2" });
    const workersOf = (pid: number): number[] =>
      readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8")
        .trim()
        .split(/\s+/)
        .filter((x) => x !== "")
        .map(Number);
    const oldWorkers = workersOf(s.p.pid);
    expect(oldWorkers).toHaveLength(2);
    s.b.delayMs = 200;
    const clients = Array.from({ length: 4 }, () => client(s.address));
    const stop = { now: false };
    const calls = Promise.all(clients.map((c) => callLoop(c, 10, stop)));
    await sleep(500);
    const r = await upgradeCli(["--pid-file", s.pidFile]);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const next = pidIn(s.pidFile);
    expect(next).not.toBe(s.p.pid);
    await waitFor("the old primary and its workers to exit", () => ([s.p.pid, ...oldWorkers].some(alive) ? undefined : true), 30_000, 100);
    // new connections after the hand-over reach the new primary's workers
    const late = client(s.address);
    expect((await unary(late, Buffer.from("x"))).err).toBeNull();
    stop.now = true;
    const done = await calls;
    expect(done.flatMap((d) => d.failed)).toEqual([]);
    expect(done.reduce((n, d) => n + d.ok, 0)).toBeGreaterThan(40);
    expect(workersOf(next)).toHaveLength(2);
    expect((await httpGet(s.admin, "/ready")).status).toBe(200);
  });
});

// `exec` in the start script and /proc: POSIX shells, Linux
describe.runIf(process.platform === "linux")("dojang upgrade under npm start", () => {
  async function npmStart() {
    const d = kit.dir();
    const b = await kit.backend("npm-b");
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const file = d.write("npm.yaml", configYaml({ listenPort, adminPort, upstream: b.address }));
    const pidFile = join(d.dir, "npm.pid");
    // --ignore-scripts: only the start script runs (reach.test.ts says why)
    const npm = spawnGroup("npm", ["start", "--silent", "--ignore-scripts", "--", "--config", file, "--pid-file", pidFile], { cwd: REPO_ROOT, env: childEnv(), stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    npm.stdout!.setEncoding("utf8").on("data", (c: string) => (out += c));
    npm.stderr!.setEncoding("utf8").on("data", (c: string) => (out += c));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => npm.once("close", (code, signal) => r({ code, signal })));
    const pid = await waitFor(
      "dojang's pid file",
      () => {
        if (npm.exitCode !== null) throw new Error(`npm start exited: ${out}`);
        return existsSync(pidFile) ? pidIn(pidFile) : undefined;
      },
      30_000,
    );
    await waitFor("dojang ready", async () => ((await httpGet(`127.0.0.1:${adminPort}`, "/ready").catch(() => undefined))?.status === 200 ? true : undefined), 30_000);
    return { npm, pid, pidFile, exited, output: () => out, address: `127.0.0.1:${listenPort}` };
  }

  it("npm's child stays (a supervisor): each upgrade's new process is its child, the pid file names it, and SIGTERM to npm drains it and npm exits 0", { timeout: 180_000 }, async () => {
    const s = await npmStart();
    expect(parentOf(s.pid)).toBe(s.npm.pid);
    const r1 = await upgradeCli(["--pid-file", s.pidFile]);
    expect(r1.code, r1.stdout + r1.stderr).toBe(0);
    const g1 = pidIn(s.pidFile);
    // (read while g1 serves: after the next upgrade it drains and may be gone at once)
    const parentOfG1 = parentOf(g1);
    const r2 = await upgradeCli(["--pid-file", s.pidFile]);
    expect(r2.code, r2.stdout + r2.stderr).toBe(0);
    const g2 = pidIn(s.pidFile);
    // the chain is one deep: the second new process is the supervisor's child too, not the first's
    expect([parentOfG1, parentOf(g2)]).toEqual([s.pid, s.pid]);
    expect(alive(s.pid)).toBe(true);
    expect(parentOf(s.pid)).toBe(s.npm.pid);
    await waitFor("the first new process to drain and exit", () => (alive(g1) ? undefined : true), 20_000);
    expect((await unary(client(s.address), Buffer.from("x"))).err).toBeNull();
    s.npm.kill("SIGTERM");
    const e = await Promise.race([s.exited, sleep(30_000).then(() => "npm did not exit")]);
    expect(e, s.output()).toEqual({ code: 0, signal: null });
    expect([alive(s.pid), alive(g2)]).toEqual([false, false]);
    expect(existsSync(s.pidFile)).toBe(false);
    expect(s.output()).toContain("supervisor: the serving process exited");
  });

  it("SIGHUP to npm (which ends npm) after an upgrade: the supervisor's --stop-with-parent stops the serving process; nothing is left", { timeout: 120_000 }, async () => {
    const s = await npmStart();
    const r = await upgradeCli(["--pid-file", s.pidFile]);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const g1 = pidIn(s.pidFile);
    s.npm.kill("SIGHUP");
    await s.exited;
    await waitFor("dojang to exit after npm", () => (alive(s.pid) || alive(g1) ? undefined : true), 30_000, 100);
    expect(existsSync(s.pidFile)).toBe(false);
  });
});
