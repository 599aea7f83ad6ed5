// The CLI as a real process: exit codes (0 clean, 1 runtime failure, 2 invalid config or usage),
// key-path messages on stderr, --check, DOJANG_CONFIG and ${VAR:-default} expansion.
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_CONFIG_YAML } from "../../src/config/index.js";
import { echoClient, startGrpcServer, unary, type GrpcServer } from "../helpers/peers.js";
import {
  REPO_ROOT,
  assertDistBuilt,
  canConnect,
  childEnv,
  configYaml,
  freePort,
  httpGet,
  killSpawned,
  occupyPort,
  runCli,
  spawnDojang,
  tempDir,
  waitReady,
} from "../helpers/process.js";

const tmp = tempDir();
let up: GrpcServer | undefined;

beforeAll(() => assertDistBuilt());
afterEach(async () => {
  await killSpawned();
});
afterAll(async () => {
  await up?.close();
  tmp.remove();
});

async function upstream(): Promise<GrpcServer> {
  up ??= await startGrpcServer({
    Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.concat([Buffer.from("echo:"), call.request])),
  });
  return up;
}

/** One unary call through the proxy listening on `listenPort`: the upstream's echo comes back. */
async function expectEcho(listenPort: number, text: string): Promise<void> {
  const c = echoClient(`127.0.0.1:${listenPort}`);
  try {
    const r = await unary(c, Buffer.from(text), new grpc.Metadata(), { deadline: Date.now() + 5000 });
    expect(r.err).toBeNull();
    expect(r.res?.toString()).toBe(`echo:${text}`);
  } finally {
    c.close();
  }
}

/** Stops a started child with SIGTERM and expects a clean exit. */
async function stopClean(p: ReturnType<typeof spawnDojang>): Promise<void> {
  p.child.kill("SIGTERM");
  expect(await p.exited(10_000)).toEqual({ code: 0, signal: null });
}

describe("invalid configs exit 2 and name the key on stderr", () => {
  it("reports a route naming an unknown cluster at listeners[0].routes[0].cluster, with a suggestion", async () => {
    const file = tmp.write("bakend.yaml", configYaml({ listenPort: 0, routeCluster: "bakend" }));
    const r = await runCli(["--config", file]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`invalid config ${file}:`);
    expect(r.stderr).toContain('listeners[0].routes[0].cluster: unknown cluster "bakend" (did you mean "backend"?)');
    expect(r.stdout).toBe("");
  });

  it("reports a YAML syntax error with the line and column it is on", async () => {
    const text = ["listeners:", "  - name: main", "\taddress: 127.0.0.1:0", "clusters: []", ""].join("\n");
    const r = await runCli(["--config", tmp.write("syntax.yaml", text)]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/line 3, column \d+: /);
  });

  it("reports an unknown key with its path and a did-you-mean", async () => {
    const file = tmp.write("unknown-key.yaml", configYaml({ listenPort: 0, extraRoute: "timout: 1s" }));
    const r = await runCli(["--config", file]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('listeners[0].routes[0].timout: unknown key "timout" (did you mean "timeout"?)');
  });

  it("reports a bad duration with its path and the value", async () => {
    const file = tmp.write("bad-duration.yaml", configYaml({ listenPort: 0, drainTimeout: "5 seconds" }));
    const r = await runCli(["--config", file]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('drainTimeout: invalid duration "5 seconds"');
  });

  it("reports every issue of a file, not just the first", async () => {
    const file = tmp.write("two-issues.yaml", configYaml({ listenPort: 0, routeCluster: "bakend", drainTimeout: "soon" }));
    const r = await runCli(["--config", file]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('drainTimeout: invalid duration "soon"');
    expect(r.stderr).toContain('listeners[0].routes[0].cluster: unknown cluster "bakend"');
  });

  it("exits 2 with the errno and the path when the config file does not exist", async () => {
    const missing = join(tmp.dir, "no-such-file.yaml");
    const r = await runCli(["--config", missing]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("ENOENT");
    expect(r.stderr).toContain(missing);
    expect(r.stderr).toContain("cannot read the config file");
  });

  it("reports an unset ${VAR} without a default at the key that uses it", async () => {
    const file = tmp.write("unset-var.yaml", configYaml({ listenPort: "${DOJANG_TEST_UNSET_PORT}" }));
    const r = await runCli(["--config", file], childEnv({ DOJANG_TEST_UNSET_PORT: undefined }));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('listeners[0].address: environment variable "DOJANG_TEST_UNSET_PORT" is not set');
  });
});

describe("--check", () => {
  it("exits 0 on a valid file, says it is valid, and never binds the listener or admin port", async () => {
    // Both ports are held by the test: a proxy that tried to listen would exit 1.
    const listen = await occupyPort();
    const admin = await occupyPort();
    try {
      const file = tmp.write("valid.yaml", configYaml({ listenPort: listen.port, adminPort: admin.port }));
      const r = await runCli(["--check", "--config", file]);
      expect(r).toMatchObject({ code: 0, signal: null, stderr: "" });
      expect(r.stdout).toBe(`dojang: config ${file} is valid\n`);
    } finally {
      await listen.close();
      await admin.close();
    }
  });

  it("exits 2 on an invalid file with the same key-path message as a real start", async () => {
    const file = tmp.write("check-bakend.yaml", configYaml({ listenPort: 0, routeCluster: "bakend" }));
    const r = await runCli(["--check", "--config", file]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('listeners[0].routes[0].cluster: unknown cluster "bakend"');
    expect(r.stdout).not.toContain("is valid");
  });
});

describe("DOJANG_CONFIG", () => {
  it("is the config file when --config is absent (an invalid one is reported as that file)", async () => {
    const file = tmp.write("env-invalid.yaml", configYaml({ listenPort: 0, routeCluster: "bakend" }));
    const r = await runCli(["--check"], childEnv({ DOJANG_CONFIG: file }));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`invalid config ${file}:`);
    expect(r.stderr).toContain('listeners[0].routes[0].cluster: unknown cluster "bakend"');
  });

  it("is checked by --check and named in the message", async () => {
    const file = tmp.write("env-valid.yaml", configYaml({ listenPort: 0 }));
    const r = await runCli(["--check"], childEnv({ DOJANG_CONFIG: file }));
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`dojang: config ${file} is valid\n`);
  });

  it("starts a real proxy from the file it names", async () => {
    const u = await upstream();
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const file = tmp.write("env-start.yaml", configYaml({ listenPort, adminPort, upstream: u.address, logLevel: "warn" }));
    const p = spawnDojang([], childEnv({ DOJANG_CONFIG: file }));
    await waitReady(p, `127.0.0.1:${adminPort}`);
    await expectEcho(listenPort, "via-env");
    await stopClean(p);
  });

  it("runs from dist/cli.js and the dist/dojang.mjs bundle alone, copied where no node_modules can be found", async () => {
    // The serving process is one bundled file (scripts/bundle.mjs): nothing it runs is resolved
    // from node_modules at run time.
    const u = await upstream();
    const alone = join(tmp.dir, "alone");
    mkdirSync(alone);
    for (const f of ["cli.js", "dojang.mjs", "launch.mjs"]) copyFileSync(join(REPO_ROOT, "dist", f), join(alone, f));
    writeFileSync(join(alone, "package.json"), '{"type":"module"}');
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const file = tmp.write("alone.yaml", configYaml({ listenPort, adminPort, upstream: u.address, logLevel: "warn" }));
    const p = spawnDojang(["--config", file], childEnv(), join(alone, "cli.js"));
    await waitReady(p, `127.0.0.1:${adminPort}`);
    await expectEcho(listenPort, "bundled");
    const metrics = await httpGet(`127.0.0.1:${adminPort}`, "/metrics");
    expect(metrics.body).toContain("dojang_calls_total{");
    await stopClean(p);
  });

  it("loses to an explicit --config", async () => {
    const bad = tmp.write("env-loses.yaml", configYaml({ listenPort: 0, routeCluster: "bakend" }));
    const good = tmp.write("flag-wins.yaml", configYaml({ listenPort: 0 }));
    const r = await runCli(["--check", "--config", good], childEnv({ DOJANG_CONFIG: bad }));
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`dojang: config ${good} is valid\n`);
  });
});

describe("${VAR:-default} expansion in a real process", () => {
  it("takes the listener and admin ports from the environment", async () => {
    const u = await upstream();
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    // The defaults (port 1 and 2) could never be bound by a test user: only the env values work.
    const file = tmp.write("env-ports.yaml", configYaml({
      listenPort: "${DOJANG_TEST_LISTEN_PORT:-1}",
      adminPort: "${DOJANG_TEST_ADMIN_PORT:-2}",
      upstream: u.address,
      logLevel: "warn",
    }));
    const p = spawnDojang(["--config", file], childEnv({ DOJANG_TEST_LISTEN_PORT: String(listenPort), DOJANG_TEST_ADMIN_PORT: String(adminPort) }));
    await waitReady(p, `127.0.0.1:${adminPort}`);
    const cfg = JSON.parse((await httpGet(`127.0.0.1:${adminPort}`, "/config")).body) as { listeners: { address: unknown }[] };
    expect(cfg.listeners[0]?.address).toEqual({ host: "127.0.0.1", port: listenPort });
    await expectEcho(listenPort, "port-from-env");
    await stopClean(p);
  });

  it("uses the default when the variable is unset or empty", async () => {
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const file = tmp.write("env-defaults.yaml", configYaml({
      listenPort: `\${DOJANG_TEST_LISTEN_PORT:-${listenPort}}`,
      adminPort: `\${DOJANG_TEST_ADMIN_PORT:-${adminPort}}`,
      logLevel: "warn",
    }));
    const p = spawnDojang(["--config", file], childEnv({ DOJANG_TEST_LISTEN_PORT: undefined, DOJANG_TEST_ADMIN_PORT: "" }));
    await waitReady(p, `127.0.0.1:${adminPort}`);
    expect(await canConnect(listenPort)).toBe(true);
    await stopClean(p);
  });
});

describe("usage errors exit 2", () => {
  it("rejects an unknown flag with the usage text", async () => {
    const r = await runCli(["--config", "x.yaml", "--frobnicate"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--frobnicate");
    expect(r.stderr).toContain("usage: dojang [--config FILE] [--check] [--log-level LEVEL]");
  });

  it("rejects --log-level nope with the usage text", async () => {
    const file = tmp.write("loglevel.yaml", configYaml({ listenPort: 0 }));
    const r = await runCli(["--log-level", "nope", "--config", file]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--log-level: unknown level "nope"');
    expect(r.stderr).toContain("usage: dojang");
  });

  it("rejects --config without a value", async () => {
    const r = await runCli(["--config"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("usage: dojang");
  });

  it("prints the version on stdout and exits 0 for --version", async () => {
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { version: string };
    const r = await runCli(["--version"]);
    expect(r).toMatchObject({ code: 0, stdout: `${pkg.version}\n`, stderr: "" });
  });

  it("prints the usage on stdout and exits 0 for --help (and -h)", async () => {
    for (const flag of ["--help", "-h"]) {
      const r = await runCli([flag]);
      expect(r.code).toBe(0);
      expect(r.stderr).toBe("");
      expect(r.stdout).toMatch(/^usage: dojang /);
    }
  });

  it("prints exactly the command line reference's block for --help", async () => {
    const readme = readFileSync(join(REPO_ROOT, "docs", "reference", "cli.md"), "utf8");
    const at = readme.indexOf("```\n", readme.indexOf("<!-- output-of: dojang --help -->")) + 4;
    const block = readme.slice(at, readme.indexOf("```", at));
    const r = await runCli(["--help"]);
    expect(r.stdout).toBe(block);
  });

  it("prints each subcommand's usage on stdout for --help, exit 0", async () => {
    for (const sub of ["health", "reload"]) {
      const r = await runCli([sub, "--help"]);
      expect(r.code, sub).toBe(0);
      expect(r.stderr, sub).toBe("");
      expect(r.stdout, sub).toContain(`usage: dojang ${sub} `);
    }
  });
});

describe("--log-level", () => {
  it("overrides the config's logLevel in a real process (silent: no log lines at all)", async () => {
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const file = tmp.write("level-override.yaml", configYaml({ listenPort, adminPort, logLevel: "info" }));
    const p = spawnDojang(["--config", file, "--log-level", "silent"]);
    await waitReady(p, `127.0.0.1:${adminPort}`);
    await stopClean(p);
    expect(p.stdout()).toBe("");
    expect(p.stderr()).toBe("");
  });

  it("leaves the config's logLevel in force when absent (info: started and stopped lines)", async () => {
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const file = tmp.write("level-config.yaml", configYaml({ listenPort, adminPort, logLevel: "info" }));
    const p = spawnDojang(["--config", file]);
    await waitReady(p, `127.0.0.1:${adminPort}`);
    await stopClean(p);
    const msgs = p.stdout().trim().split("\n").map((l) => (JSON.parse(l) as { msg: string }).msg);
    expect(msgs[0]).toBe("dojang started");
    expect(msgs[msgs.length - 1]).toBe("stopped");
  });
});

describe("runtime failures exit 1", () => {
  it("exits 1 naming the address and EADDRINUSE when the listener port is taken", async () => {
    const held = await occupyPort();
    try {
      const adminPort = await freePort();
      const file = tmp.write("inuse.yaml", configYaml({ listenPort: held.port, adminPort, logLevel: "warn" }));
      const p = spawnDojang(["--config", file]);
      const e = await p.exited(10_000);
      expect(e).toEqual({ code: 1, signal: null });
      expect(p.stderr()).toContain(`cannot listen on 127.0.0.1:${held.port} (listener main)`);
      expect(p.stderr()).toContain("EADDRINUSE");
      // It did not leave the admin port bound behind it.
      expect(await canConnect(adminPort)).toBe(false);
    } finally {
      await held.close();
    }
  });

  it("exits 1 naming the admin address when the admin port is taken", async () => {
    const held = await occupyPort();
    try {
      const listenPort = await freePort();
      const file = tmp.write("admin-inuse.yaml", configYaml({ listenPort, adminPort: held.port, logLevel: "warn" }));
      const p = spawnDojang(["--config", file]);
      expect(await p.exited(10_000)).toEqual({ code: 1, signal: null });
      expect(p.stderr()).toContain(`cannot listen on 127.0.0.1:${held.port} (admin)`);
      expect(p.stderr()).toContain("EADDRINUSE");
      expect(await canConnect(listenPort)).toBe(false);
    } finally {
      await held.close();
    }
  });
});

describe("the default config", () => {
  const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> };

  it("is what npm start runs: config/dojang.yaml, which --check accepts", async () => {
    // exec: npm's child is dojang itself (npm passes SIGINT and SIGTERM to it); see test/process/reach.test.ts
    expect(pkg.scripts["start"]).toBe("exec node dist/cli.js --config config/dojang.yaml --pid-file dojang.pid --stop-with-parent");
    expect(pkg.scripts["reload"]).toBe("node dist/cli.js reload --config config/dojang.yaml --pid-file dojang.pid");
    const r = await runCli(["--check", "--config", "config/dojang.yaml"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("dojang: config config/dojang.yaml is valid\n");
  });

  it("is embedded byte for byte, and --check with no config and no DOJANG_CONFIG validates the embedded one", async () => {
    expect(readFileSync(join(REPO_ROOT, "config", "dojang.yaml"), "utf8")).toBe(DEFAULT_CONFIG_YAML);
    const r = await runCli(["--check"], childEnv({ DOJANG_CONFIG: undefined }));
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("dojang: config <embedded default> is valid\n");
  });

  it("treats an empty DOJANG_CONFIG as unset and validates the embedded default", async () => {
    const r = await runCli(["--check"], childEnv({ DOJANG_CONFIG: "" }));
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("dojang: config <embedded default> is valid\n");
  });
});

describe("the launcher (src/cli.ts)", () => {
  /** The serving process's node flags, read from /proc (Linux). */
  function nodeArgs(pid: number): string[] {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter((a) => a.startsWith("--"));
  }

  it.runIf(process.platform === "linux")("serves from the same pid with V8's memory reducer off, and still stops cleanly on SIGTERM", async () => {
    const u = await upstream();
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const file = tmp.write("launcher.yaml", configYaml({ listenPort, adminPort, upstream: u.address }));
    const p = spawnDojang(["--config", file]);
    await waitReady(p, `127.0.0.1:${adminPort}`);
    // the launcher's flags, in order, before the command line's: the reducer off; external memory
    // (node:http2's socket reads) paced in V8's global limit, not the old generation's (without it
    // a long stream runs a mark-compact storm; src/cli.ts); that global limit grown by a factor
    // of 3, not V8's 1.1 (the storm's second cause); the memory plan's semi-space
    const launched = ["--no-memory-reducer", "--external-memory-accounted-in-global-limit", "--heap-growing-percent=200", "--max-semi-space-size=2"];
    const argv = readFileSync(`/proc/${p.pid}/cmdline`, "utf8").split("\0");
    expect(argv.slice(1, argv.findIndex((a) => a.endsWith("cli.js")))).toEqual(launched);
    // the benches that run dist/cli.js as one process image (callgrind) give the same flags
    const bench = (await import(join(REPO_ROOT, "bench", "lib", "standalone.mjs"))) as { LAUNCHER_NODE_FLAGS: readonly string[] };
    expect(bench.LAUNCHER_NODE_FLAGS).toEqual(launched);
    const r = await unary(echoClient(`127.0.0.1:${listenPort}`), Buffer.from("x"));
    expect(r.err).toBeNull();
    await stopClean(p);
  });

  it.runIf(process.platform === "linux")("keeps V8's memory reducer with DOJANG_MEMORY_REDUCER=on", async () => {
    const u = await upstream();
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const file = tmp.write("launcher-on.yaml", configYaml({ listenPort, adminPort, upstream: u.address }));
    const p = spawnDojang(["--config", file], childEnv({ DOJANG_MEMORY_REDUCER: "on" }));
    await waitReady(p, `127.0.0.1:${adminPort}`);
    expect(nodeArgs(p.pid)).not.toContain("--no-memory-reducer");
    await stopClean(p);
  });
});
