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
// The same re-exec sets V8's heap sizes from the memory budget (`memory.limit`, else the
// container's cgroup limit; src/config/memory.ts): the launcher reads the config the command
// line names with the same loader (dist/launch.mjs, loaded only here, gone with this process
// image after execve), passes the derived node flags first (node flags given on the command line
// come after them and win) and hands the plan to the served process in DOJANG_MEMORY_PLAN (JSON,
// nothing secret), which shows it in /config and its start-up line. An invalid config gives no
// plan: node starts without sizing flags and src/main.ts reports the error as it always did.
//
// The launcher also hands the config it parsed to the served process (DOJANG_CONFIG_HANDOVER,
// src/config/handover.ts): the served process then loads the config parsers (zod, YAML) only
// when something needs them (src/config/parsers.ts): idle RSS 76 -> 69 MiB, measured.
//
// DOJANG_MEMORY_REDUCER=on keeps V8's reducer (idle memory given back, at that CPU price); where
// process.execve does not exist (Windows) dojang runs without the flags.
//
// First of all, who started dojang (src/parent.ts: its top level reads the parent pid before
// anything else runs), for --stop-with-parent: a parent that exits while dojang starts must still
// end it. Then the Node version (src/version.ts): on a node older than NODE_RANGE the proxy would
// start and fail every call, so it refuses here, in one line, exit 2. The imports are bundled into
// dist/cli.js (scripts/bundle.mjs), which stays one file.
import { STARTED_BY_ENV, handParentOn } from "./parent.js";
import { nodeVersionProblem } from "./version.js";

// the served process reads it (process.execve keeps the pid, and so the parent); one left in the
// environment by whatever started dojang is never taken
if (process.argv.includes("--stop-with-parent")) handParentOn(process.env);
else delete process.env[STARTED_BY_ENV];

const tooOld = nodeVersionProblem();
if (tooOld !== undefined) {
  process.stderr.write(tooOld + "\n");
  process.exit(2);
}

const FLAG = "--no-memory-reducer";
// V8 counts the external memory allocated since the last mark-compact (ArrayBuffer backing
// stores: node:http2's socket reads, 64 KiB each) against the old generation's limit. A stream
// that passes 64 MiB through a ~10 MiB heap then starts a mark-compact every few MiB, and each
// one promotes the reads in flight, which only the next mark-compact frees: a storm in which few
// scavenges free young reads (55 mark-compacts per 24 calls of 64 MiB, a fresh process). With
// this flag the external bytes count in V8's global limit, which is paced by heap and external
// memory together: 0 mark-compacts, 1.5-1.7x the MB/s at the same RSS (docs/contributing/performance.md, "The
// mark-compact storm"). Its price, dead reads of cut calls waiting longer, the overload guard
// pays back (observe/overload.ts). A node flag given on the command line comes after it and wins.
const EXTERNAL_MEMORY_FLAG = "--external-memory-accounted-in-global-limit";
// That global limit grows by V8's global controller's factor, which it keeps at its minimum, 1.1
// (`--trace-gc-verbose`: "[GlobalMemoryController] factor 1.1 ... mutator=0": it sees no
// allocation rate for external memory). A long stream has 20-25 MB of socket reads alive at any
// moment, so once a mark-compact has set that limit, the next one comes after ~25 MB more: one
// per ~40 ms at 1 GB/s, each promoting the reads in flight, which only the next one frees. Not
// dojang's code: the plain node:http2 pipe does the same once its heap holds a few MB of live
// objects (`bench/long-stream-gc.mjs --proxy naive --ballast N`; docs/contributing/performance.md,
// "The storm's second cause"). A fixed factor of 3 (V8's own ranges over 1.1-4) spaces them
// ~100 MB apart: a long stream at 0.64x the CPU per MiB and 1.51x the MB/s, at 1.05x the RSS,
// unary calls within their spread (bench/results/heap-growing-ab). A node flag given on the
// command line comes after it and wins.
const HEAP_GROWING_FLAG = "--heap-growing-percent=200";
const PLAN_ENV = "DOJANG_MEMORY_PLAN";
// src/config/handover.ts (a literal here: the launcher imports nothing before it has to)
const HANDOVER_ENV = "DOJANG_CONFIG_HANDOVER";
// src/upgrade.ts UPGRADE_ENV (a literal, as above)
const UPGRADE_ENV = "DOJANG_UPGRADE";

// set in the re-executed process (and inherited by cluster workers): never exec twice
if (process.env[PLAN_ENV] === undefined && typeof process.execve === "function" && process.platform !== "win32") {
  const launchFile = "./launch.mjs";
  type Launch = (argv: readonly string[], env: NodeJS.ProcessEnv) => Promise<{ plan: { nodeFlags: readonly string[] }; handover: string | undefined } | undefined>;
  // a copy of dist without launch.mjs (an image that copies only cli.js and dojang.mjs) runs
  // without sizing flags; the served process then says flags_applied: false
  const launch = await import(launchFile).then(
    (m: { launch: Launch }) => m.launch,
    () => undefined,
  );
  // only this launcher's own handover is ever taken (one left in the environment by whatever
  // started dojang is not)
  delete process.env[HANDOVER_ENV];
  const found = await launch?.(process.argv.slice(2), process.env);
  const flags = [...(process.env["DOJANG_MEMORY_REDUCER"] === "on" ? [] : [FLAG]), EXTERNAL_MEMORY_FLAG, HEAP_GROWING_FLAG, ...(found?.plan.nodeFlags ?? [])].filter((f) => !process.execArgv.includes(f));
  if (flags.length > 0 || found?.handover !== undefined) {
    // "" when there is no plan: the served process derives one itself and says it is not applied
    const env: NodeJS.ProcessEnv = { ...process.env, [PLAN_ENV]: found === undefined ? "" : JSON.stringify(found.plan) };
    if (found?.handover !== undefined) env[HANDOVER_ENV] = found.handover;
    // `dojang upgrade` starts the new process with an IPC channel on fd 0 (src/upgrade.ts): node
    // takes NODE_CHANNEL_FD out of the environment as it starts, and only fds 0-2 outlive execve
    // (node marks inherited descriptors close-on-exec), so the channel is named again here
    const channelFd = (process.channel as { fd?: unknown } | undefined)?.fd;
    if (process.env[UPGRADE_ENV] !== undefined && typeof channelFd === "number" && channelFd <= 2) env["NODE_CHANNEL_FD"] = String(channelFd);
    process.execve(process.execPath, [process.execPath, ...flags, ...process.execArgv, ...process.argv.slice(1)], env);
  }
}
// a variable, so that tsc does not look for the bundle, which esbuild writes after it
const entry = "./dojang.mjs";
await import(entry);
