// dojang's command line (after src/cli.ts, the launcher): argv and env, --check, and the signals that drain the proxy.
// Exit codes: 0 clean stop, 1 runtime failure (e.g. cannot listen), 2 invalid config or usage.
// src/parent.ts first: for --stop-with-parent its top level notes the parent before anything else runs.
import { startedBy } from "./parent.js";
import { parseArgs } from "node:util";
import type { Config } from "./config/schema.js";
import { takeConfigHandover } from "./config/handover.js";
import { LOG_LEVELS } from "./config/levels.js";
import { loadConfigParsers } from "./config/parsers.js";
import { tlsFileIssues } from "./config/tls-files.js";
import { ConfigError } from "./errors.js";
import { pidFileProblem, removePidFile, writePidFile } from "./pid-file.js";
import { Dojang } from "./proxy/dojang.js";
import { watchConfigFile } from "./config/watch.js";
import { applyMemoryPlan, startHeapTuning } from "./proxy/observe/heap-tuning.js";
import { createAccessLogger, createLogger, type LogLevel } from "./proxy/observe/log.js";
import type { Logger } from "pino";
import { VERSION } from "./version.js";
import { configTextFromPrimary, isWorkerProcess, runPrimary, runWorker } from "./proxy/workers.js";
import {
  DEFAULT_UPGRADE_TIMEOUT_MS,
  UPGRADE_ENV,
  Upgrades,
  buildProblem,
  receiveSockets,
  refuseEarlyRequest,
  reportFailure,
  reportReady,
  runningBuild,
  successorEnv,
  userNodeFlags,
  type Arrival,
  type Served,
  type SpawnSpec,
  type UpgradeRequest,
} from "./upgrade.js";
import { join } from "node:path";

/** The command line's options (src/launch.ts accepts the same ones). */
const CLI_OPTIONS = {
  config: { type: "string", short: "c" },
  check: { type: "boolean", default: false },
  "log-level": { type: "string" },
  "pid-file": { type: "string" },
  "admin-mutations": { type: "boolean", default: false },
  "stop-with-parent": { type: "boolean", default: false },
  "xds-bootstrap": { type: "string" },
  version: { type: "boolean", default: false },
  help: { type: "boolean", short: "h", default: false },
} as const;

const USAGE = `usage: dojang [--config FILE] [--check] [--log-level LEVEL] [--pid-file PATH] [--admin-mutations] [--stop-with-parent]
              [--xds-bootstrap BOOTSTRAP]
       dojang --help | --version
       dojang health [--config FILE] [--timeout DURATION]
       dojang reload [--config FILE] [--pid-file PATH] [--timeout DURATION]
       dojang upgrade [--config FILE] [--pid-file PATH] [--build DIR] [--timeout DURATION]
       dojang stat | top | tap [--admin HOST:PORT | --config FILE | --pid-file PATH] ...   (each: --help)
  --config FILE       YAML or JSON config (default: $DOJANG_CONFIG, else the embedded default = config/dojang.yaml)
  --check             validate the config and the TLS files it names, and exit (0 valid, 2 invalid)
  --log-level L       fatal|error|warn|info|debug|trace|silent (overrides the config)
  --pid-file PATH     write the pid there once listening, remove it on exit (default: $DOJANG_PID_FILE);
                      refuses to start while a running dojang holds it
  --admin-mutations   admin.mutations: true (the fault API, POST /reload, /drain); the token is
                      admin.token, else $DOJANG_ADMIN_TOKEN (required when admin is not on loopback)
  --stop-with-parent  drain and exit when the process that started dojang exits (npm start uses it)
  --xds-bootstrap BOOTSTRAP
                      xds.bootstrap: listeners and clusters also from the xDS control plane that
                      this Envoy-shaped bootstrap file names (docs/guides/xds.md)
  -h, --help          print this and exit 0
  --version           print the version and exit 0
  health              ask the running dojang's admin /ready (0 ready, 1 not, 2 invalid config or no admin)
  reload              SIGHUP the dojang in --pid-file, say whether it applied (0 applied, 1 refused,
                      2 invalid config or usage, 3 no running dojang, 4 not confirmed)
  stat                the running dojang's calls per method, route or endpoint over 10s, 1m or 10m:
                      success rate, calls/s, p50/p95/p99, who decided the failed calls
  top                 the same, live: sorted, refreshing; keys change the sort and the window
  tap                 the calls as they end, one line each (or -o json), filtered by method, code,
                      decided_by, route, client
  upgrade             a new process (a new build, a new config, or both) takes the listening sockets
                      over from the dojang in --pid-file, then the old one drains (0 upgraded, 1 the
                      new one did not start: the old one serves on, 2 usage, 3 no running dojang,
                      4 not confirmed); SIGUSR2 does the same with the running build and config`;
const LEVELS: ReadonlySet<string> = new Set(LOG_LEVELS);

/** Started by `dojang upgrade` (src/upgrade.ts): a failure to start is told to the process that started this one. */
const upgrading = process.env[UPGRADE_ENV] !== undefined && process.send !== undefined && !isWorkerProcess();

function fail(code: number, msg: string): never {
  process.stderr.write(msg.endsWith("\n") ? msg : msg + "\n");
  if (upgrading) reportFailure(code, msg.trim());
  process.exit(code);
}

/** --help and --version: on stdout (what a user pipes to a pager or a script reads), exit 0. */
function print(msg: string): never {
  process.stdout.write(msg + "\n");
  process.exit(0);
}

/**
 * --admin-mutations: a function that turns admin.mutations on in a config, by the config's own
 * rules (an admin off loopback needs a token: admin.token, else $DOJANG_ADMIN_TOKEN); it throws
 * ConfigError naming the key. Applied to the config dojang starts with and to every config file
 * a reload reads, so a reload keeps the switch the command line set.
 */
async function adminMutations(env: NodeJS.ProcessEnv): Promise<(c: Config, source: string) => Config> {
  const { deepFreeze, isLoopbackHost } = await loadConfigParsers();
  const fromEnv = env["DOJANG_ADMIN_TOKEN"];
  return (config, source) => {
    const a = config.admin;
    if (a === null) throw new ConfigError(source, [{ path: "admin", message: "--admin-mutations: the config has no admin listener (admin.address)" }]);
    const token = a.token ?? (fromEnv === undefined || fromEnv === "" ? null : fromEnv);
    if (token !== null && token.length < 16) throw new ConfigError(source, [{ path: "admin.token", message: "must be at least 16 characters (from $DOJANG_ADMIN_TOKEN)" }]);
    if (token === null && !isLoopbackHost(a.address.host)) {
      throw new ConfigError(source, [{ path: "admin.token", message: `--admin-mutations, and admin.address ${a.address.host} is not a loopback address: set admin.token or $DOJANG_ADMIN_TOKEN` }]);
    }
    return deepFreeze({ ...config, admin: { ...a, mutations: true, token } });
  };
}

/** --stop-with-parent: whether the process that started dojang is gone, and what to do then. */
interface ParentWatch {
  readonly parent: number;
  gone: boolean;
  /** set once dojang serves (drain and exit); until then a parent gone is only noted */
  onGone: (() => void) | undefined;
}

/**
 * --stop-with-parent: watches, from the served process's first moments, whether the process that
 * started dojang (src/parent.ts: seen at the launcher's first instruction; 0 = gone already) has
 * exited: its parent pid changes when init or a subreaper adopts it. Checked at once, then once a
 * second (one getppid(2), on an unref'd timer). `npm start` needs it: npm passes SIGINT and
 * SIGTERM to its script, but not SIGHUP, which ends npm and would leave dojang running, orphaned.
 */
function watchParent(parent: number): ParentWatch {
  const w: ParentWatch = { parent, gone: parent === 0 || process.ppid !== parent, onGone: undefined };
  if (w.gone) return w;
  const t = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(t);
    w.gone = true;
    w.onGone?.();
  }, 1000);
  t.unref();
  return w;
}

/** Once dojang serves (or is about to): `stop` now if the parent is gone already, else when it goes. */
function followParent(w: ParentWatch, log: Logger, stop: () => void, what = "draining"): void {
  const go = (): void => {
    log.warn(
      { parent: w.parent },
      `the process that started dojang exited (--stop-with-parent): ${what}. npm passes no SIGHUP on to its script: reload with \`dojang reload --pid-file FILE\` or kill -HUP <dojang's pid>`,
    );
    stop();
  };
  if (w.gone) go();
  else w.onGone = go;
}

async function main(): Promise<void> {
  // `dojang health`: a probe for HEALTHCHECK / exec probes; it reads the config and asks /ready,
  // and never starts the proxy (src/health.ts).
  if (process.argv[2] === "health") {
    const { runHealth } = await import("./health.js");
    const r = await runHealth(process.argv.slice(3));
    (r.code === 0 ? process.stdout : process.stderr).write(`dojang health: ${r.line}\n`);
    process.exit(r.code);
  }
  if (process.argv[2] === "reload") {
    const { runReload } = await import("./reload-command.js");
    const r = await runReload(process.argv.slice(3));
    (r.code === 0 ? process.stdout : process.stderr).write(`dojang reload: ${r.line}\n`);
    process.exit(r.code);
  }
  // `dojang stat`, `top`, `tap`: the operator's views of a running dojang, through its admin
  // listener (src/views/); like health and reload they start nothing
  const verb = process.argv[2];
  if (verb === "stat" || verb === "top" || verb === "tap") {
    const argv = process.argv.slice(3);
    const io = {
      out: process.stdout,
      err: process.stderr,
      input: process.stdin,
      onStop: (stop: () => void) => {
        process.on("SIGINT", stop);
        process.on("SIGTERM", stop);
        // (a reader that went away, `dojang tap | head`: stop quietly)
        process.stdout.on("error", stop);
      },
    };
    const r =
      verb === "stat"
        ? await (await import("./views/stat.js")).runStat(argv)
        : verb === "top"
          ? await (await import("./views/top.js")).runTop(argv, process.env, io)
          : await (await import("./views/tap.js")).runTap(argv, process.env, io);
    if (r.code === 0) {
      if (r.out !== "") process.stdout.write(r.out + "\n");
    } else process.stderr.write(`dojang ${verb}: ${r.out}\n`);
    process.exitCode = r.code;
    return;
  }
  if (process.argv[2] === "upgrade") {
    const { runUpgradeCommand } = await import("./upgrade-command.js");
    const r = await runUpgradeCommand(process.argv.slice(3));
    (r.code === 0 ? process.stdout : process.stderr).write(`dojang upgrade: ${r.line}\n`);
    process.exit(r.code);
  }
  // SIGUSR2 asks for an upgrade (src/upgrade.ts); its default action would end the process, so
  // it is taken from the start: before dojang serves there is nothing to upgrade
  let upgrades: Upgrades | undefined;
  let pidFileForEarly: string | undefined;
  if (!isWorkerProcess()) {
    process.on("SIGUSR2", () => {
      if (upgrades !== undefined) return upgrades.request("SIGUSR2");
      process.stderr.write("dojang: SIGUSR2 (upgrade) before dojang serves: refused\n");
      refuseEarlyRequest(pidFileForEarly, "dojang is still starting (not every listener or worker is ready): ask again once it serves");
    });
  }
  let args;
  try {
    args = parseArgs({ options: CLI_OPTIONS, strict: true }).values;
  } catch (err) {
    fail(2, `dojang: ${(err as Error).message}\n${USAGE}`);
  }
  if (args.help) print(USAGE);
  if (args.version) print(VERSION);
  // from here on: a parent that goes while the config loads or the listeners bind is noted, and
  // dojang stops as soon as it can (a cluster worker follows its primary instead)
  const parentWatch = args["stop-with-parent"] && !args.check && !isWorkerProcess() ? watchParent(startedBy(process.env)) : undefined;
  const level = args["log-level"];
  if (level !== undefined && !LEVELS.has(level)) fail(2, `dojang: --log-level: unknown level "${level}"\n${USAGE}`);
  const pidGiven = args["pid-file"] ?? process.env["DOJANG_PID_FILE"];
  const pidFile = pidGiven === undefined || pidGiven === "" || args.check || isWorkerProcess() ? undefined : pidGiven;
  pidFileForEarly = pidFile;

  // `dojang upgrade`: this process takes over from a running one; its listening sockets first
  let arrival: Arrival | undefined;
  if (upgrading && !args.check) {
    try {
      arrival = await receiveSockets(process.env);
    } catch (err) {
      fail(1, `dojang: upgrade: ${(err as Error).message}`);
    }
  }
  const given = args.config ?? process.env["DOJANG_CONFIG"];
  const file = given === undefined || given === "" ? undefined : given;
  let config: Config;
  // The launcher (src/cli.ts) parsed and checked this very config before it started this process
  // and handed it over (src/config/handover.ts): then the parsers stay unloaded.
  const handed = takeConfigHandover(process.env, file);
  try {
    // A cluster worker runs the config text its primary read, not the file as it is now (a
    // replacement forked after an edit must match the other workers: src/proxy/workers.ts).
    const fromPrimary = configTextFromPrimary();
    if (handed !== undefined && fromPrimary === undefined && !args.check) {
      config = handed;
    } else {
      const { DEFAULT_CONFIG_YAML, configFromText, loadConfigFile } = await loadConfigParsers();
      config =
        fromPrimary !== undefined
          ? configFromText(fromPrimary, file ?? "<embedded default>")
          : file === undefined
            ? configFromText(DEFAULT_CONFIG_YAML, "<embedded default>")
            : loadConfigFile(file);
    }
  } catch (err) {
    if (err instanceof ConfigError) fail(2, `dojang: ${err.message}`);
    throw err;
  }
  const source = file ?? "<embedded default>";
  // --xds-bootstrap: the config's xds block, from the command line (a reload keeps it: xds needs a restart)
  const xdsBootstrap = args["xds-bootstrap"];
  if (xdsBootstrap !== undefined) {
    if (xdsBootstrap === "") fail(2, `dojang: --xds-bootstrap: needs a file\n${USAGE}`);
    config = { ...config, xds: { bootstrap: xdsBootstrap } };
  }
  // the bootstrap is checked as a start reads it (--check too): each bad field by its path
  if (config.xds !== null) {
    const { readBootstrap } = await import("./xds/bootstrap.js");
    const b = readBootstrap(config.xds.bootstrap);
    if (!b.ok) fail(2, `dojang: ${new ConfigError(config.xds.bootstrap, b.issues).message}`);
  }
  // TLS files the config names must be readable and usable: each certificate with its key (--check
  // and start alike: the same loading, the same message)
  const tlsIssues = tlsFileIssues(config);
  if (tlsIssues.length > 0) fail(2, `dojang: ${new ConfigError(source, tlsIssues).message}`);
  let adjustConfig: ((c: Config) => Config) | undefined;
  if (args["admin-mutations"]) {
    const on = await adminMutations(process.env);
    try {
      config = on(config, source);
    } catch (err) {
      if (err instanceof ConfigError) fail(2, `dojang: ${err.message}`);
      throw err;
    }
    // a reloaded file without an admin listener is left as it is: the running admin stays
    // (admin needs a restart), and the reload says so
    adjustConfig = (c) => (c.admin === null ? c : on(c, file ?? source));
  }
  if (xdsBootstrap !== undefined) {
    // a reloaded file keeps the command line's xds block (it needs a restart to change anyway)
    const before = adjustConfig;
    adjustConfig = (c) => ({ ...(before === undefined ? c : before(c)), xds: { bootstrap: xdsBootstrap } });
  }
  if (pidFile !== undefined) {
    // (an upgrade's new process takes the file over from the one it replaces)
    const problem = pidFileProblem(pidFile, process.pid, arrival?.from);
    if (problem !== undefined) fail(problem.code, `dojang: ${problem.message}`);
  }
  if (args.check) {
    process.stdout.write(`dojang: config ${file ?? "<embedded default>"} is valid\n`);
    return;
  }
  const log = createLogger({ level: (level as LogLevel | undefined) ?? config.logLevel });
  // `dojang upgrade`: how this process's successor is started (the request may name another
  // build and another config; the rest of the command line stays), and whether this one stays as
  // its supervisor: when something watches its pid (--stop-with-parent: npm start; pid 1: a container)
  const specFor = (req: UpgradeRequest): SpawnSpec | string => {
    const build = req.build ?? runningBuild(process.argv[1]);
    const problem = buildProblem(build);
    if (problem !== "") return problem;
    const configFile = req.config ?? file;
    const argv = [
      ...(configFile === undefined ? [] : ["--config", configFile]),
      ...(level === undefined ? [] : ["--log-level", level]),
      ...(pidFile === undefined ? [] : ["--pid-file", pidFile]),
      ...(args["admin-mutations"] ? ["--admin-mutations"] : []),
      ...(args["stop-with-parent"] ? ["--stop-with-parent"] : []),
      ...(xdsBootstrap === undefined ? [] : ["--xds-bootstrap", xdsBootstrap]),
    ];
    return {
      execPath: process.execPath,
      args: [...userNodeFlags(process.execArgv, process.env), join(build, "cli.js"), ...argv],
      env: successorEnv(process.env, process.pid),
      cwd: process.cwd(),
      timeoutMs: req.timeoutMs ?? DEFAULT_UPGRADE_TIMEOUT_MS,
    };
  };
  const upgradeOptions = { pidFile, supervise: args["stop-with-parent"] || process.pid === 1, parentSupervises: arrival?.supervised === true };
  // a supervised process whose supervisor is gone stops (as --stop-with-parent would, at once)
  if (arrival?.supervised === true) process.once("disconnect", () => process.kill(process.pid, "SIGTERM"));
  // gone before anything listens: nothing to drain
  if (parentWatch?.gone === true) followParent(parentWatch, log, () => process.exit(0), "exiting before it serves");
  if (config.workers > 1) {
    if (isWorkerProcess()) {
      await runWorker(config, log, level !== undefined).catch((err: unknown) => {
        const e = err as Error & { cause?: Error };
        process.stderr.write(`dojang worker: ${e.message}${e.cause ? ": " + e.cause.message : ""}\n`);
        process.exit(1);
      });
      return;
    }
    if (pidFile !== undefined) process.on("exit", () => removePidFile(pidFile));
    const running: Promise<number> = runPrimary(config, log, file, level !== undefined, {
      ...(adjustConfig === undefined ? {} : { adjustConfig }),
      ...(arrival === undefined ? {} : { inherited: arrival.sockets }),
      onStarted: () => {
        // (an upgrade's new process writes it once every worker serves: onReady)
        if (pidFile !== undefined && arrival === undefined) writePidFile(pidFile);
        // the primary drains its workers on SIGTERM (src/proxy/workers.ts)
        if (parentWatch !== undefined) followParent(parentWatch, log, () => process.kill(process.pid, "SIGTERM"));
      },
      onReady: (h) => {
        if (arrival !== undefined) {
          if (pidFile !== undefined) writePidFile(pidFile);
          reportReady();
        }
        upgrades = new Upgrades({ log, sockets: () => h.sockets(), spec: specFor, drainTimeoutMs: config.drainTimeoutMs, handOver: () => (h.handOver(), running) }, upgradeOptions);
      },
    });
    const code = await running;
    // after a hand-over the upgrade ends this process (or keeps it as the supervisor)
    if (upgrades?.handedOver !== true) process.exit(code);
    return;
  }
  let stopping = false;
  let d: Dojang;
  try {
    d = new Dojang(config, {
      logger: log,
      accessLogger: createAccessLogger({ level: (level as LogLevel | undefined) ?? config.logLevel }),
      reloadLogLevel: level === undefined,
      ...(file === undefined ? {} : { configFile: file }),
      ...(adjustConfig === undefined ? {} : { adjustConfig }),
      onDrainRequest: () => stop("POST /drain"),
      ...(arrival === undefined ? {} : { inherited: arrival.sockets }),
    });
  } catch (err) {
    // a config problem found while building the proxy (a TLS file changed since the check): the
    // same message as any other, no stack
    if (err instanceof ConfigError) fail(2, `dojang: ${err.message}`);
    throw err;
  }
  let watcher: { close(): void } | undefined;
  const stop = (signal: string): void => {
    // a supervisor (after an upgrade) stops by stopping the process it supervises
    if (upgrades?.forward("SIGTERM") === true) return;
    if (stopping) return;
    stopping = true;
    watcher?.close();
    log.info({ signal }, "signal received, draining");
    d.close().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, "error while stopping");
        process.exit(1);
      },
    );
  };
  // (a supervisor's own handlers pass these on: src/upgrade.ts)
  process.on("SIGTERM", () => upgrades?.supervising === true || stop("SIGTERM"));
  process.on("SIGINT", () => upgrades?.supervising === true || stop("SIGINT"));
  // SIGHUP (and POST /reload, and with watchConfig a change of the file) reloads the whole
  // config (Dojang.reload): the log says what applied and what needs a restart; an invalid file
  // changes nothing and says why, with the key paths.
  process.on("SIGHUP", () => {
    if (upgrades?.supervising === true) return;
    if (upgrades?.handedOver === true) return log.warn("SIGHUP: this process has handed over to a new one (dojang upgrade) and drains: not reloaded");
    if (file === undefined) return log.warn("SIGHUP: no config file to reload (embedded default)");
    void d.reloadFile(file, "SIGHUP");
  });
  // the memory budget's plan (src/cli.ts applied its node flags): before start(), so the
  // start-up line shows it
  applyMemoryPlan(d, config);
  try {
    await d.start();
  } catch (err) {
    const e = err as Error & { cause?: Error };
    // exit codes as documented: a config problem 2, anything else (a port in use) 1
    fail(err instanceof ConfigError ? 2 : 1, `dojang: ${e.message}${e.cause ? ": " + e.cause.message : ""}`);
  }
  // The pid file once every listener is bound, so whatever reads it reaches a serving process;
  // removed at exit if it still holds this pid (src/pid-file.ts).
  if (pidFile !== undefined) {
    try {
      writePidFile(pidFile);
    } catch (err) {
      process.stderr.write(`dojang: --pid-file ${pidFile}: cannot write it: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}\n`);
      await d.close(0);
      process.exit(1);
    }
    process.on("exit", () => removePidFile(pidFile));
  }
  if (arrival !== undefined) reportReady();
  upgrades = new Upgrades(
    {
      log,
      sockets: () => d.listeningSockets(),
      spec: specFor,
      drainTimeoutMs: config.drainTimeoutMs,
      handOver: async () => {
        stopping = true;
        watcher?.close();
        await d.handOver();
        return 0;
      },
    } satisfies Served,
    upgradeOptions,
  );
  if (parentWatch !== undefined) followParent(parentWatch, log, () => stop("parent exited"));
  startHeapTuning(d, config, log);
  if (config.watchConfig && file !== undefined && !stopping) {
    watcher = watchConfigFile(
      file,
      (text) => {
        if (text !== d.loadedText) void d.reloadFile(file, "watchConfig");
      },
      log,
    );
    log.info({ file }, "watchConfig: reloading when the config file changes");
  }
}

void main();
