#!/usr/bin/env node
// The `dojang` command's entry. It makes sure V8's memory reducer is off before anything else is
// loaded: after the proxy sits idle for a while, that reducer runs memory-reducing GCs, and the
// heap limits V8 derives from the shrunken heap keep the next load collecting far more (measured
// on one pinned CPU: 1.15x the CPU per call on unary 10x10 and half the streaming MB/s until it
// is off; README, Benchmarks). The flag only takes effect when node starts (v8.setFlagsFromString
// is too late, and NODE_OPTIONS refuses it), so the launcher replaces its own process image
// with node started again with the flag (process.execve: same pid, same stdio, signals and exit
// code untouched), then loads the real command line: src/main.ts, bundled with everything it
// imports into dist/dojang.mjs (scripts/bundle.mjs; one file instead of ~340 modules saves 9 MiB
// of idle RSS).
//
// DOJANG_MEMORY_REDUCER=on keeps V8's reducer (idle memory given back, at that CPU price); where
// process.execve does not exist (Node < 22.15, Windows) dojang runs without the flag.
const FLAG = "--no-memory-reducer";

if (process.env["DOJANG_MEMORY_REDUCER"] !== "on" && !process.execArgv.includes(FLAG) && typeof process.execve === "function" && process.platform !== "win32") {
  process.execve(process.execPath, [process.execPath, FLAG, ...process.execArgv, ...process.argv.slice(1)], process.env);
}
// a variable, so that tsc does not look for the bundle, which esbuild writes after it
const entry = "./dojang.mjs";
await import(entry);
