// The launcher's config, handed to the process it starts.
//
// The launcher (src/cli.ts) parses and validates the config before it re-executes node with the
// memory flags (src/launch.ts). Instead of parsing the same file again, the served process takes
// that result: the Config, serialized with V8's structured clone (node:v8 serialize, which keeps
// undefined, Infinity, Sets and Maps as they are) and base64-encoded into one environment
// variable. Taking it costs a decode; the zod schemas and the YAML reader then stay unloaded until
// something needs them (src/config/parsers.ts), which took an idle dojang from 76 to 69 MiB of RSS.
//
// The variable is removed from process.env when it is taken, so neither children (cluster
// workers, which are not handed a config: see src/launch.ts) nor a diagnostic report carry it;
// the config can hold the admin token. It is ignored unless it names the same config source the
// served process was given, and it is only ever written by the launcher for its own execve.
// A config too large for one variable (Linux caps a single one at 128 KiB) is not handed over:
// the served process parses it itself, as without a launcher.
import { deserialize, serialize } from "node:v8";
import { deepFreeze } from "./freeze.js";
import type { Config } from "./schema.js";

export const CONFIG_HANDOVER_ENV = "DOJANG_CONFIG_HANDOVER";
/** Under Linux's MAX_ARG_STRLEN (32 pages, 128 KiB) with room for the name. */
export const HANDOVER_MAX_CHARS = 120 * 1024;

interface Envelope {
  /** the config file's path as given, or "" for the embedded default */
  readonly source: string;
  readonly config: Config;
}

/** The variable's value for `config` read from `source` (undefined: embedded default); undefined when too large. */
export function encodeConfigHandover(config: Config, source: string | undefined): string | undefined {
  const text = serialize({ source: source ?? "", config } satisfies Envelope).toString("base64");
  return text.length > HANDOVER_MAX_CHARS ? undefined : text;
}

/**
 * Takes the handed-over config from `env` (and deletes the variable): the deep-frozen Config when
 * it is there and was read from the same `source`, else undefined (the caller parses the file).
 */
export function takeConfigHandover(env: NodeJS.ProcessEnv, source: string | undefined): Config | undefined {
  const text = env[CONFIG_HANDOVER_ENV];
  if (text === undefined) return undefined;
  delete env[CONFIG_HANDOVER_ENV];
  let e: Partial<Envelope>;
  try {
    e = deserialize(Buffer.from(text, "base64")) as Partial<Envelope>;
  } catch {
    return undefined;
  }
  if (typeof e !== "object" || e === null || e.source !== (source ?? "") || typeof e.config !== "object" || e.config === null) return undefined;
  return deepFreeze(e.config);
}
