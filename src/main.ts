// dojang's command line (after src/cli.ts, the launcher): argv and env, --check, and the signals that drain the proxy.
// Exit codes: 0 clean stop, 1 runtime failure (e.g. cannot listen), 2 invalid config or usage.
import { parseArgs } from "node:util";
import type { Config } from "./config/schema.js";
import { takeConfigHandover } from "./config/handover.js";
import { LOG_LEVELS } from "./config/levels.js";
import { loadConfigParsers } from "./config/parsers.js";
import { tlsFileIssues } from "./config/tls-files.js";
import { ConfigError } from "./errors.js";
import { Dojang, applyMemoryPlan, startHeapTuning, watchConfigFile } from "./proxy/dojang.js";
import { createAccessLogger, createLogger, type LogLevel } from "./proxy/observe/log.js";
import { VERSION } from "./version.js";
import { configTextFromPrimary, isWorkerProcess, runPrimary, runWorker } from "./proxy/workers.js";

const USAGE = `usage: dojang [--config FILE] [--check] [--log-level LEVEL]
  --config FILE     YAML or JSON config (default: $DOJANG_CONFIG, else the embedded default)
  --check           validate the config and exit (0 valid, 2 invalid)
  --log-level L     fatal|error|warn|info|debug|trace|silent (overrides the config)
  --version
       dojang health [--config FILE] [--timeout DURATION]
                    ask the running dojang's admin /ready (0 ready, 1 not, 2 config/no admin)`;
const LEVELS: ReadonlySet<string> = new Set(LOG_LEVELS);

function fail(code: number, msg: string): never {
  process.stderr.write(msg.endsWith("\n") ? msg : msg + "\n");
  process.exit(code);
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
  let args;
  try {
    args = parseArgs({
      options: {
        config: { type: "string", short: "c" },
        check: { type: "boolean", default: false },
        "log-level": { type: "string" },
        version: { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
    }).values;
  } catch (err) {
    fail(2, `dojang: ${(err as Error).message}\n${USAGE}`);
  }
  if (args.help) fail(0, USAGE);
  if (args.version) fail(0, VERSION);
  const level = args["log-level"];
  if (level !== undefined && !LEVELS.has(level)) fail(2, `dojang: --log-level: unknown level "${level}"\n${USAGE}`);

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
  // TLS certificate files the config names must be readable (--check and start alike)
  const unreadable = tlsFileIssues(config);
  if (unreadable.length > 0) fail(2, `dojang: ${new ConfigError(file ?? "<embedded default>", unreadable).message}`);
  if (args.check) {
    process.stdout.write(`dojang: config ${file ?? "<embedded default>"} is valid\n`);
    return;
  }
  const log = createLogger({ level: (level as LogLevel | undefined) ?? config.logLevel });
  if (config.workers > 1) {
    if (isWorkerProcess()) {
      await runWorker(config, log, level !== undefined).catch((err: unknown) => {
        const e = err as Error & { cause?: Error };
        process.stderr.write(`dojang worker: ${e.message}${e.cause ? ": " + e.cause.message : ""}\n`);
        process.exit(1);
      });
      return;
    }
    process.exit(await runPrimary(config, log, file, level !== undefined));
  }
  let stopping = false;
  const d = new Dojang(config, {
    logger: log,
    accessLogger: createAccessLogger({ level: (level as LogLevel | undefined) ?? config.logLevel }),
    reloadLogLevel: level === undefined,
    ...(file === undefined ? {} : { configFile: file }),
    onDrainRequest: () => stop("POST /drain"),
  });
  let watcher: { close(): void } | undefined;
  const stop = (signal: string): void => {
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
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  // SIGHUP (and POST /reload, and with watchConfig a change of the file) reloads the whole
  // config (Dojang.reload): the log says what applied and what needs a restart; an invalid file
  // changes nothing and says why, with the key paths.
  process.on("SIGHUP", () => {
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
    process.stderr.write(`dojang: ${e.message}${e.cause ? ": " + e.cause.message : ""}\n`);
    process.exit(1);
  }
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
