// `dojang reload`: sends SIGHUP to the dojang whose pid file (src/pid-file.ts) it is given, and
// tells whether the reload applied: it reads dojang_config_reloads_total{result} on the admin
// listener's /metrics before the signal and waits for the ok or the error count to move. Like
// `dojang health` (src/health.ts) it starts nothing.
//
// Exit codes: 0 applied, 1 refused (dojang kept its config; its log says why), 2 usage or an
// invalid config (nothing sent), 3 no running dojang (no pid file, or its process is gone or is
// not dojang; nothing sent), 4 sent but not confirmed (no admin listener to ask, or no answer
// within --timeout).
import { parseArgs } from "node:util";
import { formatHostPort, loadConfigFile, type Config, type HostPort } from "./config/index.js";
import { ConfigError } from "./errors.js";
import { healthTarget, timeoutOption } from "./health.js";
import { readPidFile } from "./pid-file.js";
import { http } from "./proxy/downstream/node-http.js";

export const RELOAD_USAGE = `usage: dojang reload [--config FILE] [--pid-file PATH] [--timeout DURATION]
  --config FILE         the config file dojang runs (default: $DOJANG_CONFIG): checked before the
                        signal, and its admin address is where the result is read
  --pid-file PATH       the file dojang --pid-file wrote (default: $DOJANG_PID_FILE)
  --timeout DURATION    how long to wait for the result (default 5s)
  exit 0 applied, 1 refused (dojang kept its config), 2 usage or invalid config (nothing sent),
  3 no running dojang (nothing sent), 4 sent but not confirmed (no admin listener, no answer)`;

export const DEFAULT_RELOAD_TIMEOUT_MS = 5000;

export interface ReloadResult {
  readonly code: 0 | 1 | 2 | 3 | 4;
  /** one line (or the usage), no trailing newline */
  readonly line: string;
}

type Counts = { readonly ok: number; readonly error: number };

/** dojang_config_reloads_total{result="ok"|"error"} from the admin's /metrics, or undefined. */
function reloadCounts(target: HostPort, timeoutMs: number): Promise<Counts | undefined> {
  return new Promise((resolve) => {
    const req = http.get({ host: target.host, port: target.port, path: "/metrics", agent: false, headers: { connection: "close" }, timeout: timeoutMs }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => {
        // a result not counted yet has no sample line, only the metric's HELP and TYPE
        const known = body.includes("# TYPE dojang_config_reloads_total counter");
        const count = (result: string): number => {
          const m = new RegExp(`^dojang_config_reloads_total\\{result="${result}"\\} (\\d+)`, "m").exec(body);
          return m !== null ? Number(m[1]) : known ? 0 : NaN;
        };
        const c = { ok: count("ok"), error: count("error") };
        resolve(res.statusCode === 200 && !Number.isNaN(c.ok) && !Number.isNaN(c.error) ? c : undefined);
      });
      res.on("error", () => resolve(undefined));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(undefined));
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** `dojang reload`, from its arguments (after "reload") and the environment. */
export async function runReload(argv: readonly string[], env: Readonly<Record<string, string | undefined>> = process.env): Promise<ReloadResult> {
  let args;
  try {
    args = parseArgs({
      args: [...argv],
      options: {
        config: { type: "string", short: "c" },
        "pid-file": { type: "string" },
        timeout: { type: "string" },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
    }).values;
  } catch (err) {
    return { code: 2, line: `${(err as Error).message}\n${RELOAD_USAGE}` };
  }
  if (args.help) return { code: 0, line: RELOAD_USAGE };
  const timeoutMs = timeoutOption(args.timeout, DEFAULT_RELOAD_TIMEOUT_MS);
  if (typeof timeoutMs === "string") return { code: 2, line: timeoutMs };
  const pidFile = nonEmpty(args["pid-file"] ?? env["DOJANG_PID_FILE"]);
  if (pidFile === undefined) return { code: 2, line: `no pid file: give --pid-file PATH (the one dojang was started with) or set $DOJANG_PID_FILE\n${RELOAD_USAGE}` };
  const file = nonEmpty(args.config ?? env["DOJANG_CONFIG"]);
  // The file dojang will read is checked first: an invalid one would be refused anyway, and
  // nothing is sent (no error in dojang's log, no refused reload counted).
  let config: Config | undefined;
  if (file !== undefined) {
    try {
      config = loadConfigFile(file, env);
    } catch (err) {
      if (err instanceof ConfigError) return { code: 2, line: `${err.message}\n  (nothing sent: dojang would refuse it)` };
      return { code: 2, line: `cannot read the config: ${(err as Error).message}; nothing sent` };
    }
  }
  const s = readPidFile(pidFile);
  if (s.state !== "running") return { code: 3, line: `${s.why}: is dojang running with --pid-file ${pidFile}? Nothing sent` };
  const target = config === undefined ? "no --config (nor $DOJANG_CONFIG) to find the admin listener in" : healthTarget(config);
  const before = typeof target === "string" ? undefined : await reloadCounts(target, Math.min(timeoutMs, 2000));
  try {
    process.kill(s.pid, "SIGHUP");
  } catch (err) {
    return { code: 3, line: `cannot signal pid ${s.pid}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` };
  }
  if (typeof target === "string") return { code: 4, line: `sent SIGHUP to dojang (pid ${s.pid}); not confirmed: ${target}; its log says whether it applied` };
  const where = `http://${formatHostPort(target)}/metrics`;
  if (before === undefined) return { code: 4, line: `sent SIGHUP to dojang (pid ${s.pid}); not confirmed: ${where} did not answer with dojang_config_reloads_total` };
  const until = Date.now() + timeoutMs;
  for (;;) {
    await sleep(50);
    const now = await reloadCounts(target, Math.max(1, Math.min(1000, until - Date.now())));
    if (now !== undefined && now.ok > before.ok) return { code: 0, line: `applied (pid ${s.pid}): config reloaded; what changed, and what needs a restart, is in dojang's log` };
    if (now !== undefined && now.error > before.error) return { code: 1, line: `refused (pid ${s.pid}): dojang kept its config; its log says why ("reload failed; nothing changed")` };
    if (Date.now() >= until) return { code: 4, line: `sent SIGHUP to dojang (pid ${s.pid}); not confirmed: no reload counted on ${where} within ${timeoutMs}ms` };
  }
}

function nonEmpty(v: string | undefined): string | undefined {
  return v === undefined || v === "" ? undefined : v;
}
