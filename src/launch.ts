// What the launcher (src/cli.ts) needs before it starts node again: the memory plan of the config
// the command line names (src/config/memory.ts). Bundled on its own (dist/launch.mjs) and loaded
// only by the launcher, whose process image execve replaces, so none of it stays in the served
// process. The config is read with the same loader src/main.ts uses, but only when it can matter:
// with no cgroup limit and no `memory` key in the file the plan is the no-limit one, and loading
// the config schema (~0.3 s of start-up on a busy 2-CPU machine) is skipped. Anything wrong with
// the config (or with the command line) gives no plan here, and src/main.ts reports it as it
// always did: one place for error messages and exit codes.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { memoryPlan, type MemoryPlan } from "./config/memory.js";
import { planForConfig, readCgroupMemoryLimit } from "./proxy/observe/heap.js";

/** A `memory` key in YAML or JSON text (a comment that says "memory:" only costs the full read). */
const MEMORY_KEY = /(^|[\s{,"'])memory["']?\s*:/m;

/** The plan for the command line `argv` (process.argv.slice(2)), or undefined (no config to size for: health, --help, --version, an invalid config or command line). */
export async function launchPlan(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<MemoryPlan | undefined> {
  if (argv[0] === "health") return undefined;
  let given: string | undefined;
  try {
    const { values } = parseArgs({
      args: [...argv],
      options: {
        config: { type: "string", short: "c" },
        check: { type: "boolean" },
        "log-level": { type: "string" },
        version: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
    });
    if (values.help === true || values.version === true) return undefined;
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
  // the embedded default has no memory key
  if (readCgroupMemoryLimit() === undefined && (text === undefined || !MEMORY_KEY.test(text))) return memoryPlan(null, "none", 1);
  try {
    const { DEFAULT_CONFIG_YAML, configFromText } = await import("./config/index.js");
    const config = configFromText(text ?? DEFAULT_CONFIG_YAML, given ?? "<embedded default>", env);
    return planForConfig(config.memory.limitBytes, config.workers);
  } catch {
    return undefined;
  }
}
