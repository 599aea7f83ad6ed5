// Reaching a running dojang from outside (issue 18, item 4): the pid in the start-up line,
// --pid-file, `dojang reload` and its exit codes, --admin-mutations (the fault API from the
// command line), and `npm start`, which must pass signals on and never leave dojang orphaned.
// Real processes: `node dist/cli.js`, and `npm start` in the repository.
import { spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  REPO_ROOT,
  assertDistBuilt,
  childEnv,
  configYaml,
  freePort,
  httpGet,
  killSpawned,
  logLine,
  logLines,
  occupyPort,
  runCli,
  spawnDojang,
  spawnGroup,
  tempDir,
  waitFor,
  waitReady,
  type DojangProcess,
} from "../helpers/process.js";

const dirs: ReturnType<typeof tempDir>[] = [];
beforeAll(() => assertDistBuilt());
afterEach(async () => {
  // npm start runs in a process group of its own (spawnGroup): killSpawned ends it, dojang included
  await killSpawned();
  for (const d of dirs.splice(0)) d.remove();
});

function dir(): ReturnType<typeof tempDir> {
  const d = tempDir();
  dirs.push(d);
  return d;
}

/** Whether a process with this pid exists and has not exited (a zombie nobody reaped yet has). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0] !== "Z";
  } catch {
    return process.platform !== "linux";
  }
}

/** A started dojang with a pid file, and its ports. */
async function startWithPidFile(extraArgs: readonly string[] = [], opts: { admin?: boolean; env?: NodeJS.ProcessEnv } = {}) {
  const d = dir();
  const [listenPort, adminPort] = [await freePort(), await freePort()];
  const file = d.write("dojang.yaml", configYaml({ listenPort, ...(opts.admin === false ? {} : { adminPort }) }));
  const pidFile = join(d.dir, "dojang.pid");
  const p = spawnDojang(["--config", file, "--pid-file", pidFile, ...extraArgs], opts.env ?? childEnv());
  if (opts.admin === false) await waitFor("the pid file", () => (existsSync(pidFile) ? true : undefined));
  else await waitReady(p, `127.0.0.1:${adminPort}`);
  return { d, p, file, pidFile, listenPort, adminPort, admin: `127.0.0.1:${adminPort}` };
}

async function stopClean(p: DojangProcess): Promise<void> {
  p.child.kill("SIGTERM");
  expect(await p.exited(15_000)).toEqual({ code: 0, signal: null });
}

describe("the pid", () => {
  it("is in the start-up line; --pid-file holds it once dojang listens, and is removed after a clean stop", async () => {
    const s = await startWithPidFile();
    expect(readFileSync(s.pidFile, "utf8")).toBe(`${s.p.pid}\n`);
    const started = logLines(s.p).find((l) => l["msg"] === "dojang started");
    expect(started?.["pid"]).toBe(s.p.pid);
    await stopClean(s.p);
    expect(existsSync(s.pidFile)).toBe(false);
  });

  it("a second dojang with the same pid file refuses to start (exit 1, naming the running pid), and the first keeps its file", async () => {
    const s = await startWithPidFile();
    const [listenPort] = [await freePort()];
    const second = await runCli(["--config", s.d.write("second.yaml", configYaml({ listenPort })), "--pid-file", s.pidFile]);
    expect(second.code).toBe(1);
    expect(second.stderr).toContain(`--pid-file ${s.pidFile}: dojang is already running as pid ${s.p.pid}`);
    expect(readFileSync(s.pidFile, "utf8")).toBe(`${s.p.pid}\n`);
    await stopClean(s.p);
  });

  it("a pid file left by a process that is gone is taken over; $DOJANG_PID_FILE is the default", async () => {
    const d = dir();
    const gone = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
    await new Promise((r) => gone.once("close", r));
    const pidFile = join(d.dir, "left.pid");
    writeFileSync(pidFile, `${gone.pid}\n`);
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const p = spawnDojang(["--config", d.write("c.yaml", configYaml({ listenPort, adminPort }))], childEnv({ DOJANG_PID_FILE: pidFile }));
    await waitReady(p, `127.0.0.1:${adminPort}`);
    expect(readFileSync(pidFile, "utf8")).toBe(`${p.pid}\n`);
    await stopClean(p);
    expect(existsSync(pidFile)).toBe(false);
  });
});

describe("dojang reload", () => {
  /** The /config the running dojang serves: its cluster's endpoints. */
  const endpoints = async (admin: string): Promise<unknown> => (JSON.parse((await httpGet(admin, "/config")).body) as { clusters: { endpoints: unknown }[] }).clusters[0]?.endpoints;

  it("applied: exit 0, and the running dojang serves the new file", async () => {
    const s = await startWithPidFile();
    writeFileSync(s.file, configYaml({ listenPort: s.listenPort, adminPort: s.adminPort, upstream: "127.0.0.1:2" }));
    const r = await runCli(["reload", "--config", s.file, "--pid-file", s.pidFile]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`dojang reload: applied (pid ${s.p.pid})`);
    expect(JSON.stringify(await endpoints(s.admin))).toContain('"port":2');
    await stopClean(s.p);
  });

  it("refused by dojang (a new listener on a port in use): exit 1, and the old config keeps serving", async () => {
    const s = await startWithPidFile();
    const held = await occupyPort();
    try {
      const before = await endpoints(s.admin);
      const second = `  - name: extra\n    address: 127.0.0.1:${held.port}\n    routes:\n      - match: { prefix: "/" }\n        cluster: backend\n`;
      writeFileSync(s.file, configYaml({ listenPort: s.listenPort, adminPort: s.adminPort, upstream: "127.0.0.1:2" }).replace("clusters:\n", second + "clusters:\n"));
      const r = await runCli(["reload", "--config", s.file, "--pid-file", s.pidFile]);
      expect(r.code, r.stdout + r.stderr).toBe(1);
      expect(r.stderr).toContain(`dojang reload: refused (pid ${s.p.pid})`);
      expect(await endpoints(s.admin)).toEqual(before);
    } finally {
      await held.close();
    }
    await stopClean(s.p);
  });

  it("an invalid file: exit 2 with the key path, and nothing is sent (dojang logs no reload)", async () => {
    const s = await startWithPidFile();
    writeFileSync(s.file, configYaml({ listenPort: s.listenPort, adminPort: s.adminPort, routeCluster: "bakend" }));
    const r = await runCli(["reload", "--config", s.file, "--pid-file", s.pidFile]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('listeners[0].routes[0].cluster: unknown cluster "bakend"');
    expect(r.stderr).toContain("nothing sent");
    const metrics = (await httpGet(s.admin, "/metrics")).body;
    expect(metrics).not.toMatch(/^dojang_config_reloads_total\{result="error"\} [1-9]/m);
    await stopClean(s.p);
    expect(logLines(s.p).some((l) => String(l["msg"]).startsWith("reload failed"))).toBe(false);
  });

  it("no running dojang: exit 3 for a missing pid file and for one whose process is gone; no pid file given is a usage error (2)", async () => {
    const d = dir();
    const file = d.write("c.yaml", configYaml({ listenPort: 0 }));
    const missing = await runCli(["reload", "--config", file, "--pid-file", join(d.dir, "none.pid")]);
    expect(missing.code).toBe(3);
    expect(missing.stderr).toContain(`no pid file ${join(d.dir, "none.pid")}`);
    const gone = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
    await new Promise((r) => gone.once("close", r));
    const stale = d.write("stale.pid", `${gone.pid}\n`);
    const r = await runCli(["reload", "--config", file, "--pid-file", stale]);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain(`names pid ${gone.pid}, which is not a running dojang`);
    const usage = await runCli(["reload", "--config", file], childEnv({ DOJANG_PID_FILE: undefined }));
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain("usage: dojang reload");
  });

  it("with workers: the primary's pid (in its start-up line and the pid file) reloads every worker: exit 0", async () => {
    const d = dir();
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const file = d.write("w.yaml", configYaml({ listenPort, adminPort, extraTop: "workers: 2" }));
    const pidFile = join(d.dir, "w.pid");
    const p = spawnDojang(["--config", file, "--pid-file", pidFile]);
    const admin = `127.0.0.1:${adminPort}`;
    await waitReady(p, admin);
    await waitFor("the pid file", () => (existsSync(pidFile) ? true : undefined));
    expect(readFileSync(pidFile, "utf8")).toBe(`${p.pid}\n`);
    expect((await logLine(p, (l) => l["msg"] === "dojang primary started", "dojang primary started"))["pid"]).toBe(p.pid);
    writeFileSync(file, configYaml({ listenPort, adminPort, upstream: "127.0.0.1:2", extraTop: "workers: 2" }));
    const r = await runCli(["reload", "--config", file, "--pid-file", pidFile], childEnv(), 20_000);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(JSON.stringify(await endpoints(admin))).toContain('"port":2');
    await stopClean(p);
    expect(existsSync(pidFile)).toBe(false);
  });

  it("without an admin listener it still reloads, and says it cannot confirm (exit 4)", async () => {
    const s = await startWithPidFile([], { admin: false });
    writeFileSync(s.file, configYaml({ listenPort: s.listenPort, upstream: "127.0.0.1:2" }));
    const r = await runCli(["reload", "--config", s.file, "--pid-file", s.pidFile]);
    expect(r.code).toBe(4);
    expect(r.stderr).toContain(`sent SIGHUP to dojang (pid ${s.p.pid}); not confirmed`);
    await waitFor("the reload log line", () => (logLines(s.p).some((l) => l["msg"] === "config reloaded") ? true : undefined));
    await stopClean(s.p);
  });
});

describe("--admin-mutations", () => {
  const postFault = (admin: string, headers: Record<string, string> = {}) =>
    fetch(`http://${admin}/faults`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify({ id: "cli", action: { kind: "abort", code: "UNAVAILABLE" } }),
      signal: AbortSignal.timeout(5000),
    });

  it("turns the fault API on from the command line (201), where the same config alone refuses it (403); a reload keeps it", async () => {
    const off = await startWithPidFile();
    expect((await postFault(off.admin)).status).toBe(403);
    await stopClean(off.p);

    const on = await startWithPidFile(["--admin-mutations"]);
    expect((await postFault(on.admin)).status).toBe(201);
    // the file says nothing of mutations: a reload neither turns them off nor calls them a change
    writeFileSync(on.file, configYaml({ listenPort: on.listenPort, adminPort: on.adminPort, upstream: "127.0.0.1:2" }));
    on.p.child.kill("SIGHUP");
    const line = await waitFor("the reload log line", () => logLines(on.p).find((l) => String(l["msg"]).startsWith("config reloaded")));
    expect(line["notApplied"]).toEqual([]);
    expect((await fetch(`http://${on.admin}/faults/cli`, { method: "DELETE", signal: AbortSignal.timeout(5000) })).status).toBe(204);
    await stopClean(on.p);
  });

  it("follows the token rule: an admin off loopback needs admin.token or $DOJANG_ADMIN_TOKEN (--check: exit 2 naming admin.token, then 0)", async () => {
    const d = dir();
    const file = d.write("wide.yaml", configYaml({ listenPort: 0 }).replace("listeners:", "admin:\n  address: 0.0.0.0:9901\nlisteners:"));
    const r = await runCli(["--check", "--admin-mutations", "--config", file], childEnv({ DOJANG_ADMIN_TOKEN: undefined }));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("admin.token: --admin-mutations, and admin.address 0.0.0.0 is not a loopback address");
    const short = await runCli(["--check", "--admin-mutations", "--config", file], childEnv({ DOJANG_ADMIN_TOKEN: "short" }));
    expect(short.code).toBe(2);
    expect(short.stderr).toContain("admin.token: must be at least 16 characters");
    const ok = await runCli(["--check", "--admin-mutations", "--config", file], childEnv({ DOJANG_ADMIN_TOKEN: "a-token-of-24-characters" }));
    expect(ok.stderr).toBe("");
    expect(ok.code).toBe(0);
    const none = await runCli(["--check", "--admin-mutations", "--config", d.write("no-admin.yaml", configYaml({ listenPort: 0 }))]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain("admin: --admin-mutations: the config has no admin listener");
  });

  it("with $DOJANG_ADMIN_TOKEN, a mutation needs the token (401 without it)", async () => {
    const token = "a-token-of-24-characters";
    const s = await startWithPidFile(["--admin-mutations"], { env: childEnv({ DOJANG_ADMIN_TOKEN: token }) });
    expect((await postFault(s.admin)).status).toBe(401);
    expect((await postFault(s.admin, { authorization: `Bearer ${token}` })).status).toBe(201);
    await stopClean(s.p);
  });
});

// `exec` in the start script and /proc: POSIX shells, Linux
describe.runIf(process.platform === "linux")("npm start", () => {
  /** `npm start` with a config on free ports and a pid file in a temp dir (later flags win), in a process group of its own. */
  async function npmStart() {
    const d = dir();
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const file = d.write("npm.yaml", configYaml({ listenPort, adminPort }));
    const pidFile = join(d.dir, "npm.pid");
    // --ignore-scripts skips prestart (a build in the repository while other tests use dist/;
    // test/process/fresh-start.test.ts covers it in a clone): only the start script runs
    const npm = spawnGroup("npm", ["start", "--silent", "--ignore-scripts", "--", "--config", file, "--pid-file", pidFile], { cwd: REPO_ROOT, env: childEnv(), stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    npm.stdout!.setEncoding("utf8").on("data", (c: string) => (out += c));
    npm.stderr!.setEncoding("utf8").on("data", (c: string) => (out += c));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => npm.once("close", (code, signal) => r({ code, signal })));
    const pid = await waitFor(
      "dojang's pid file",
      () => {
        if (npm.exitCode !== null) throw new Error(`npm start exited: ${out}`);
        return existsSync(pidFile) ? Number(readFileSync(pidFile, "utf8")) : undefined;
      },
      30_000,
    );
    await waitFor("dojang ready", async () => ((await httpGet(`127.0.0.1:${adminPort}`, "/ready").catch(() => undefined))?.status === 200 ? true : undefined));
    return { npm, pid, pidFile, exited, output: () => out };
  }

  it("runs dojang as npm's own child, so SIGTERM to npm drains dojang and npm exits with dojang's 0", { timeout: 60_000 }, async () => {
    const s = await npmStart();
    expect(readFileSync(`/proc/${s.pid}/stat`, "utf8").split(") ")[1]?.split(" ")[1]).toBe(String(s.npm.pid));
    s.npm.kill("SIGTERM");
    const e = await Promise.race([s.exited, new Promise((_, j) => setTimeout(() => j(new Error(`npm did not exit: ${s.output()}`)), 20_000))]);
    expect(e).toEqual({ code: 0, signal: null });
    expect(s.output()).toContain('"signal":"SIGTERM"');
    expect(alive(s.pid)).toBe(false);
    expect(existsSync(s.pidFile)).toBe(false);
  });

  it("SIGHUP to npm (which npm does not pass on, and which ends npm) does not leave dojang orphaned: it drains and exits", { timeout: 60_000 }, async () => {
    const s = await npmStart();
    s.npm.kill("SIGHUP");
    await s.exited;
    await waitFor("dojang to exit after npm", () => (alive(s.pid) ? undefined : true), 20_000);
    expect(s.output()).toContain("the process that started dojang exited (--stop-with-parent)");
    expect(existsSync(s.pidFile)).toBe(false);
  });
});
