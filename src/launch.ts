// What the launcher (src/cli.ts) needs before it starts node again: the memory plan of the config
// the command line names (src/config/memory.ts), and that config itself, parsed and checked, to
// hand to the served process (src/config/handover.ts) so that it never loads the parsers unless
// something needs them at run time (src/config/parsers.ts). Bundled on its own (dist/launch.mjs)
// and loaded only by the launcher, whose process image execve replaces, so none of it stays in
// the served process. The config is read with the same loader src/main.ts uses. Anything wrong
// with the config (or with the command line, or a TLS file it names) gives no plan and no
// handover here, and src/main.ts parses the file itself and reports it as it always did: one
// place for error messages and exit codes. So do `--check`, `--help`, `--version`, `health`, `reload`, `upgrade`, `stat`, `top` and `tap`.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import type { MemoryPlan } from "./config/memory.js";
import { encodeConfigHandover } from "./config/handover.js";
import { planForConfig } from "./proxy/observe/heap.js";

/** What launch() found: the memory plan and, when the config is valid, its handover text. */
export interface Launch {
  readonly plan: MemoryPlan;
  /** CONFIG_HANDOVER_ENV's value; undefined when the config is not handed over (workers, too large) */
  readonly handover: string | undefined;
}

/**
 * The plan and the config handover for the command line `argv` (process.argv.slice(2)), or
 * undefined (no config to size for: health, --help, --version, --check, an invalid config or
 * command line).
 */
export async function launch(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<Launch | undefined> {
  if (argv[0] === "health" || argv[0] === "reload" || argv[0] === "upgrade" || argv[0] === "stat" || argv[0] === "top" || argv[0] === "tap") return undefined;
  let given: string | undefined;
  try {
    const { values } = parseArgs({
      args: [...argv],
      options: {
        config: { type: "string", short: "c" },
        check: { type: "boolean" },
        "log-level": { type: "string" },
        // src/main.ts's other options (CLI_OPTIONS): accepted, nothing to size for
        "pid-file": { type: "string" },
        "admin-mutations": { type: "boolean" },
        "stop-with-parent": { type: "boolean" },
        "xds-bootstrap": { type: "string" },
        version: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
    });
    if (values.help === true || values.version === true || values.check === true) return undefined;
    const g = values.config ?? env["DOJANG_CONFIG"];
    given = g === undefined || g === "" ? undefined : g;
  } catch {
    return undefined;
  }
  let text: string | undefined;
  if (given !== undefined) {
    try {
      text = readFileSync(given, "utf8");
    } catch {
      return undefined;
    }
  }
  try {
    const { DEFAULT_CONFIG_YAML, configFromText, tlsFileIssues } = await import("./config/index.js");
    const config = configFromText(text ?? DEFAULT_CONFIG_YAML, given ?? "<embedded default>", env);
    if (tlsFileIssues(config).length > 0) return undefined;
    const plan = planForConfig(config.memory.limitBytes, config.workers);
    // cluster workers take the config text from their primary (src/proxy/workers.ts), which
    // parses it anyway
    return { plan, handover: config.workers > 1 ? undefined : encodeConfigHandover(config, given) };
  } catch {
    return undefined;
  }
}
