// Bundles the serving process (dist/main.js and what it imports, dependencies included) into one
// file, dist/dojang.mjs, which the `dojang` command (dist/cli.js) loads.
//
// Why: with ~340 module files (zod alone is 97), node's ESM loader ran hot enough at start-up
// for V8 to optimize its path and URL helpers with TurboFan, which pages TurboFan's part of the
// node executable into memory, and every module keeps its own records. One file, without the
// comments and indentation (V8 keeps the source text): idle RSS 68.5-69 MiB instead of 77.8 on
// Node 24, of which 5.4 MiB are the executable's file pages (README, Benchmarks).
//
// The library entry (dist/index.js) and the tests' in-process imports stay as tsc emits them.
// Run after tsc: `npm run build` does both.
import { build } from "esbuild";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));

// dist/launch.mjs: what the launcher (dist/cli.js) loads to size V8 from the config before it
// re-executes node (src/launch.ts); a second bundle, so the served process never loads it.
//
// dist/cli.js, the launcher itself, is bundled in place (it imports src/version.ts to check the
// Node version first): it stays one file, so dist/cli.js, dist/launch.mjs and dist/dojang.mjs are
// all a copy of dojang needs (the Dockerfile copies those three). It needs no require() and is not
// minified (it is short, and the first file anyone opens).
for (const [entry, outfile] of [
  ["dist/main.js", "dist/dojang.mjs"],
  ["dist/launch.js", "dist/launch.mjs"],
  ["dist/cli.js", "dist/cli.js"],
]) {
  const launcher = outfile === "dist/cli.js";
  await build({
    absWorkingDir: root,
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node22",
    // CommonJS dependencies (pino, prom-client) call require() for node's built-ins; an ES module
    // has no require of its own, so the bundle makes one.
    ...(launcher ? { allowOverwrite: true } : { banner: { js: 'import { createRequire as __dojangRequire } from "node:module"; const require = __dojangRequire(import.meta.url);' } }),
    // Stack traces name the bundle's lines; the map (not loaded unless node runs with
    // --enable-source-maps) leads back to src/.
    sourcemap: "linked",
    // Whitespace only: names stay, so stack traces still name dojang's functions. Renaming
    // identifiers too made idle RSS larger, not smaller (74 MiB; measured).
    minifyWhitespace: !launcher,
    legalComments: "none",
    logLevel: "warning",
  });
}
