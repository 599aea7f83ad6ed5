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
// No registry: each loader hands its module to whoever awaits it, and the code that parses fault
// rules at run time (the /faults API, FaultSet.update, header faults) takes the FaultParsers as an
// argument. So a path that never loaded them does not type-check, whatever else was imported
// first (src/proxy/filters/fault/control.ts holds them: given by the library entry, or loaded by start(), a
// reload or the API's first use).
import type { formatFaultRule, parseFaultAction, parseFaultRule, parsePercentage } from "./faults/parse.js";

/** The fault rule parsers (src/config/faults/parse.ts; its module namespace is one). */
export interface FaultParsers {
  readonly parseFaultRule: typeof parseFaultRule;
  readonly formatFaultRule: typeof formatFaultRule;
  readonly parseFaultAction: typeof parseFaultAction;
  readonly parsePercentage: typeof parsePercentage;
}

let faults: Promise<FaultParsers> | undefined;

/** The fault rule parsers (zod); loads them on the first call. */
export function loadFaultParsers(): Promise<FaultParsers> {
  // literal specifiers keep the modules in dist/dojang.mjs, where esbuild evaluates them only when this runs
  return (faults ??= import("./faults/parse.js"));
}

type ConfigModule = typeof import("./index.js");
let loading: Promise<ConfigModule> | undefined;

/** The whole config module (configFromText, loadConfigFile, ...); loads it on the first call. */
export function loadConfigParsers(): Promise<ConfigModule> {
  return (loading ??= import("./index.js"));
}
