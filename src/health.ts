// `dojang health`: asks a running dojang whether it is ready, for container HEALTHCHECKs and exec
// probes. It reads the config the server reads (--config, else $DOJANG_CONFIG, else the embedded
// default, with the same ${VAR} expansion), finds the admin listener in it and GETs /ready there.
// It starts nothing: no proxy, no logger, one HTTP request on loopback.
//
// Exit codes: 0 ready (200), 1 not ready (503 while draining, refused, timed out: one line on
// stderr says which), 2 the config is invalid or has no admin address to ask.
import { http } from "./proxy/downstream/node-http.js";
import { parseArgs } from "node:util";
import { DEFAULT_CONFIG_YAML, configFromText, formatHostPort, loadConfigFile, parseDuration, type Config, type HostPort } from "./config/index.js";
import { ConfigError } from "./errors.js";

export const HEALTH_USAGE = `usage: dojang health [--config FILE] [--timeout DURATION]
  --config FILE         the server's config (default: $DOJANG_CONFIG, else the embedded default)
  --timeout DURATION    how long to wait for /ready (default 1500ms)
  exit 0 ready, 1 not ready (draining, not running, no answer), 2 config error or no admin address`;

/** Below Docker's HEALTHCHECK --timeout (2s in the Dockerfile), so dojang's reason reaches the log first. */
export const DEFAULT_HEALTH_TIMEOUT_MS = 1500;

export interface HealthResult {
  readonly code: 0 | 1 | 2;
  /** one line, no newline */
  readonly line: string;
}

/**
 * Where to ask: the admin address, with a wildcard bind replaced by the loopback address of its
 * family (0.0.0.0 → 127.0.0.1, :: → ::1), since a wildcard is a bind address, not a destination.
 */
export function healthTarget(config: Config): HostPort | string {
  const admin = config.admin;
  if (admin === null) return "the config has no admin listener (admin.address): nothing to ask /ready";
  const { host, port } = admin.address;
  if (port === 0) return `admin.address ${formatHostPort(admin.address)} has port 0 (ephemeral): give it a fixed port to check it`;
  if (host === "0.0.0.0") return { host: "127.0.0.1", port };
  if (host === "::") return { host: "::1", port };
  return { host, port };
}

/** A subcommand's `--timeout DURATION` in ms (`dflt` when absent), or the usage error's line. */
export function timeoutOption(value: string | undefined, dflt: number): number | string {
  if (value === undefined) return dflt;
  const t = parseDuration(value);
  return t.ok && t.ms >= 1 ? t.ms : `--timeout: ${t.ok ? "must be at least 1ms" : t.error}`;
}

/** GET http://target/ready within timeoutMs: 0 on 200, 1 otherwise. Never throws. */
export function checkReady(target: HostPort, timeoutMs: number): Promise<HealthResult> {
  const url = `http://${formatHostPort(target)}/ready`;
  return new Promise((resolve) => {
    let done = false;
    const finish = (r: HealthResult): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      req.destroy();
      resolve(r);
    };
    const req = http.get({ host: target.host, port: target.port, path: "/ready", agent: false, headers: { connection: "close" } }, (res) => {
      const status = res.statusCode ?? 0;
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => {
        if (body.length < 200) body += c;
      });
      res.on("end", () => {
        const said = body.trim().split("\n")[0] ?? "";
        finish(status === 200 ? { code: 0, line: `ready (${url} 200)` } : { code: 1, line: `not ready: ${url} answered ${status}${said === "" ? "" : ` "${said}"`}` });
      });
      res.on("error", (err) => finish({ code: 1, line: `not ready: ${url}: ${err.message}` }));
    });
    req.on("error", (err: NodeJS.ErrnoException) => {
      const why = err.code === "ECONNREFUSED" ? "connection refused (is dojang running?)" : err.message;
      finish({ code: 1, line: `not ready: ${url}: ${why}` });
    });
    const timer = setTimeout(() => finish({ code: 1, line: `not ready: ${url} did not answer within ${timeoutMs}ms` }), timeoutMs);
  });
}

/** The whole subcommand, from its arguments (after "health") and the environment. */
export async function runHealth(argv: readonly string[], env: Readonly<Record<string, string | undefined>> = process.env): Promise<HealthResult> {
  let args;
  try {
    args = parseArgs({
      args: [...argv],
      options: { config: { type: "string", short: "c" }, timeout: { type: "string" }, help: { type: "boolean", short: "h", default: false } },
      strict: true,
    }).values;
  } catch (err) {
    return { code: 2, line: `${(err as Error).message}\n${HEALTH_USAGE}` };
  }
  if (args.help) return { code: 0, line: HEALTH_USAGE };
  const timeoutMs = timeoutOption(args.timeout, DEFAULT_HEALTH_TIMEOUT_MS);
  if (typeof timeoutMs === "string") return { code: 2, line: timeoutMs };
  const given = args.config ?? env["DOJANG_CONFIG"];
  const file = given === undefined || given === "" ? undefined : given;
  let config: Config;
  try {
    config = file === undefined ? configFromText(DEFAULT_CONFIG_YAML, "<embedded default>", env) : loadConfigFile(file, env);
  } catch (err) {
    if (err instanceof ConfigError) return { code: 2, line: err.message.replaceAll("\n", "; ") };
    return { code: 2, line: `cannot read the config: ${(err as Error).message}` };
  }
  const target = healthTarget(config);
  if (typeof target === "string") return { code: 2, line: target };
  return checkReady(target, timeoutMs);
}
