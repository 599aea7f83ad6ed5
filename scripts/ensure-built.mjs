// `npm start`'s prestart: builds dist/ when it is missing or older than what it is built from, and
// does nothing else, so a fresh clone starts (`npm ci && npm start`) and a start with dist/
// current costs one directory walk (a few milliseconds), not a 10-second build.
//
// Stale means: an output is missing, or some input was modified after the oldest output. Inputs
// are src/ (every file), tsconfig.json, scripts/ (the build steps) and package-lock.json (the
// bundle carries the dependencies). Outputs are the files `npm start` and the library load.
import { spawnSync } from "node:child_process";
import { readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const OUTPUTS = ["dist/cli.js", "dist/dojang.mjs", "dist/index.js", "dist/index.d.ts"];
const INPUTS = ["src", "tsconfig.json", "scripts", "package-lock.json"];

function mtime(path) {
  try {
    return statSync(join(root, path)).mtimeMs;
  } catch {
    return undefined;
  }
}

/** The newest input file: [relative path, mtime]. */
function newestInput() {
  let best = ["", 0];
  const visit = (abs) => {
    let st;
    try {
      st = statSync(abs);
    } catch {
      return;
    }
    if (st.isDirectory()) {
      for (const name of readdirSync(abs)) visit(join(abs, name));
    } else if (st.mtimeMs > best[1]) {
      best = [relative(root, abs), st.mtimeMs];
    }
  };
  for (const p of INPUTS) visit(join(root, p));
  return best;
}

/** Why dist/ needs a build, or undefined when it is current. */
export function staleReason() {
  let oldest = Infinity;
  for (const out of OUTPUTS) {
    const t = mtime(out);
    if (t === undefined) return `${out} is missing`;
    if (t < oldest) oldest = t;
  }
  const [file, t] = newestInput();
  return t > oldest ? `${file} is newer than dist/` : undefined;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const why = staleReason();
  if (why === undefined) {
    process.stderr.write("dojang: dist/ is up to date\n");
  } else {
    process.stderr.write(`dojang: building dist/ (${why}): npm run build\n`);
    const r = spawnSync("npm", ["run", "build", "--silent"], { cwd: root, stdio: "inherit", shell: process.platform === "win32" });
    if (r.status !== 0) {
      process.stderr.write(`dojang: the build failed (${r.error?.message ?? `exit ${r.status}`}); fix it, then npm start again\n`);
      process.exit(r.status || 1);
    }
  }
}
