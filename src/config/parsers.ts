// The config's parsers, loaded when needed instead of with the served process.
//
// The zod schemas and the YAML reader (src/config/parse.ts, schema.ts, load.ts, faults/parse.ts
// and the two libraries) are the largest single part of an idle dojang: ~16 MiB of anonymous
// memory and ~20 MiB of RSS in a process that imports and uses them, against ~76 MiB for the
// whole idle proxy (measured with bench/run.mjs's idle shape and /proc/<pid>/smaps_rollup). The
// launcher already parses the config before it re-executes node (src/cli.ts, src/launch.ts), so
// the served process takes that result (src/config/handover.ts) and loads the parsers only for
// what needs them at run time: a reload, the fault API, header faults, config fault rules.
//
// Two ways in, so that nothing that has them already pays twice:
// - src/config/faults/parse.ts registers its functions here when it is evaluated, so any code
//   that imports the config module statically (the library entry, the tests) has them at once;
// - loadConfigParsers() imports the whole config module; the served process awaits it before
//   the first use (src/proxy/dojang.ts start() and reloadFile()).
// faultParsers() is the synchronous accessor the fault filter uses on its paths; it throws (a bug,
// never a client's doing) if nothing loaded them.
import type { formatFaultRule, parseFaultAction, parseFaultRule, parsePercentage } from "./faults/parse.js";

export interface FaultParsers {
  readonly parseFaultRule: typeof parseFaultRule;
  readonly formatFaultRule: typeof formatFaultRule;
  readonly parseFaultAction: typeof parseFaultAction;
  readonly parsePercentage: typeof parsePercentage;
}

let faults: FaultParsers | undefined;

/** Called by src/config/faults/parse.ts when it is evaluated. */
export function registerFaultParsers(p: FaultParsers): void {
  faults = p;
}

/** The fault rule parsers; throws when the config module was never loaded (see loadConfigParsers). */
export function faultParsers(): FaultParsers {
  if (faults === undefined) throw new Error("dojang: the config parsers are not loaded (loadConfigParsers() must run before fault rules are parsed)");
  return faults;
}

/** Whether the fault parsers are loaded (tests, and the start-up line). */
export function configParsersLoaded(): boolean {
  return faults !== undefined;
}

type ConfigModule = typeof import("./index.js");
let loading: Promise<ConfigModule> | undefined;

/** The whole config module (configFromText, loadConfigFile, ...); loads it on the first call. */
export function loadConfigParsers(): Promise<ConfigModule> {
  // a variable specifier would keep esbuild from bundling it; a literal keeps it in dist/dojang.mjs,
  // where esbuild evaluates it only when this runs
  return (loading ??= import("./index.js"));
}
