// `dojang upgrade`: asks the dojang whose pid file it is given to hand its listening sockets to a
// new process (a new build, a new config, or both) and tells how it went (src/upgrade.ts does the
// work inside the processes). Like `dojang reload` it starts nothing itself: it leaves the request
// in a file beside the pid file, sends SIGUSR2 (what a bare `kill -USR2` does too, with the
// running build and config), and waits for the result file the serving process writes once the
// new process is ready and the old one has stopped accepting, or once the new one has failed.
//
// Exit codes: 0 upgraded, 1 the new process did not become ready (the old one serves on,
// untouched; the reason follows: its config error, its exit code, the timeout), 2 usage or a
// --build that is not a dojang build (nothing sent), 3 no running dojang (nothing sent), 4 sent
// but not confirmed (no result in time).
import { randomUUID } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { timeoutOption } from "./health.js";
import { readPidFile } from "./pid-file.js";
import { DEFAULT_UPGRADE_TIMEOUT_MS, buildProblem, requestFile, resultFile, writeAtomically, type UpgradeResult } from "./upgrade.js";

export const UPGRADE_USAGE = `usage: dojang upgrade [--config FILE] [--pid-file PATH] [--build DIR] [--timeout DURATION]
  --config FILE         the config the new process runs (default: the running dojang's); the new
                        process checks it as a start does, and a refusal is the upgrade's failure
  --pid-file PATH       the file dojang --pid-file wrote (default: $DOJANG_PID_FILE)
  --build DIR           the dist/ directory of the dojang build to run (default: the running one's)
  --timeout DURATION    how long the new process has to become ready (default 60s); past it, it
                        is killed and the old one serves on
  exit 0 upgraded (the new process serves; the old one stopped accepting and drains), 1 the new
  process did not become ready (the old one serves on, untouched; the reason follows), 2 usage
  (nothing sent), 3 no running dojang (nothing sent), 4 sent but not confirmed`;

/** How much longer than --timeout the command waits for the result (the new process is killed at --timeout). */
const RESULT_GRACE_MS = 15_000;

export interface UpgradeCommandResult {
  readonly code: 0 | 1 | 2 | 3 | 4;
  /** one line (or the usage), no trailing newline */
  readonly line: string;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The result for request `id`, once the serving process has written it. */
function readResult(pidFile: string, id: string): UpgradeResult | undefined {
  try {
    const r = JSON.parse(readFileSync(resultFile(pidFile), "utf8")) as UpgradeResult;
    return r.id === id ? r : undefined;
  } catch {
    return undefined;
  }
}

/** `dojang upgrade`, from its arguments (after "upgrade") and the environment. */
export async function runUpgradeCommand(argv: readonly string[], env: Readonly<Record<string, string | undefined>> = process.env): Promise<UpgradeCommandResult> {
  let args;
  try {
    args = parseArgs({
      args: [...argv],
      options: {
        config: { type: "string", short: "c" },
        "pid-file": { type: "string" },
        build: { type: "string" },
        timeout: { type: "string" },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
    }).values;
  } catch (err) {
    return { code: 2, line: `${(err as Error).message}\n${UPGRADE_USAGE}` };
  }
  if (args.help) return { code: 0, line: UPGRADE_USAGE };
  const timeoutMs = timeoutOption(args.timeout, DEFAULT_UPGRADE_TIMEOUT_MS);
  if (typeof timeoutMs === "string") return { code: 2, line: timeoutMs };
  const pidFile = nonEmpty(args["pid-file"] ?? env["DOJANG_PID_FILE"]);
  if (pidFile === undefined) return { code: 2, line: `no pid file: give --pid-file PATH (the one dojang was started with) or set $DOJANG_PID_FILE\n${UPGRADE_USAGE}` };
  // paths as this command's working directory sees them (the serving process may run elsewhere)
  const config = args.config === undefined ? undefined : resolve(args.config);
  if (config !== undefined) {
    try {
      if (!statSync(config).isFile()) return { code: 2, line: `--config ${config}: not a file; nothing sent` };
    } catch (err) {
      return { code: 2, line: `--config ${config}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}; nothing sent` };
    }
  }
  const build = args.build === undefined ? undefined : resolve(args.build);
  if (build !== undefined) {
    const problem = buildProblem(build);
    if (problem !== "") return { code: 2, line: `--build: ${problem}; nothing sent` };
  }
  const s = readPidFile(pidFile);
  if (s.state !== "running") return { code: 3, line: `${s.why}: is dojang running with --pid-file ${pidFile}? Nothing sent` };
  const id = randomUUID();
  try {
    writeAtomically(requestFile(pidFile), JSON.stringify({ id, at: Date.now(), timeoutMs, ...(config === undefined ? {} : { config }), ...(build === undefined ? {} : { build }) }) + "\n");
  } catch (err) {
    return { code: 2, line: `cannot write the request beside the pid file (${requestFile(pidFile)}): ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}; nothing sent` };
  }
  try {
    process.kill(s.pid, "SIGUSR2");
  } catch (err) {
    return { code: 3, line: `cannot signal pid ${s.pid}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` };
  }
  const until = Date.now() + timeoutMs + RESULT_GRACE_MS;
  for (;;) {
    const r = readResult(pidFile, id);
    if (r !== undefined) {
      if (r.ok) {
        const drain = r.drainTimeoutMs === undefined ? "" : ` (drainTimeout ${r.drainTimeoutMs}ms)`;
        return { code: 0, line: `upgraded: pid ${r.pid} serves (ready in ${r.readyMs}ms); pid ${r.oldPid} stopped accepting and drains its calls${drain}` };
      }
      return { code: 1, line: `the new process did not become ready: ${r.reason ?? "no reason given"}; pid ${r.oldPid} serves on, unchanged` };
    }
    if (Date.now() >= until) return { code: 4, line: `sent SIGUSR2 to dojang (pid ${s.pid}); not confirmed: no result in ${resultFile(pidFile)} within ${timeoutMs + RESULT_GRACE_MS}ms; its log says what happened` };
    await sleep(100);
  }
}

function nonEmpty(v: string | undefined): string | undefined {
  return v === undefined || v === "" ? undefined : v;
}
