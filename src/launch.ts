// What the launcher (src/cli.ts) needs before it starts node again: the memory plan of the config
// the command line names (src/config/memory.ts). Bundled on its own (dist/launch.mjs) and loaded
// only by the launcher, whose process image execve replaces, so none of it stays in the served
// process. The config is read with the same loader src/main.ts uses; anything wrong with it (or
// with the command line) gives no plan here, and src/main.ts reports it as it always did: one
// place for error messages and exit codes.
import { parseArgs } from "node:util";
import { DEFAULT_CONFIG_YAML, configFromText, loadConfigFile, type Config, type MemoryPlan } from "./config/index.js";
import { planForConfig } from "./proxy/observe/heap.js";

/** The plan for the command line `argv` (process.argv.slice(2)), or undefined (no config to size for: health, --help, --version, an invalid config or command line). */
export function launchPlan(argv: readonly string[], env: NodeJS.ProcessEnv): MemoryPlan | undefined {
  if (argv[0] === "health") return undefined;
  let config: Config;
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
    const given = values.config ?? env["DOJANG_CONFIG"];
    config = given === undefined || given === "" ? configFromText(DEFAULT_CONFIG_YAML, "<embedded default>") : loadConfigFile(given, env);
  } catch {
    return undefined;
  }
  return planForConfig(config.memory.limitBytes, config.workers);
}
