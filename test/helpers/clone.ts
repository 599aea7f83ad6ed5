// A fresh clone, for tests of what a new user's first commands do: the files git tracks (and
// new files not yet committed, minus ignored ones: what the next commit would hold) copied into a
// temporary directory, without dist/, with node_modules symlinked to this repo's (so no install).
// Also `npm` run there, bounded in time, in a process group of its own (process.ts runGroup).
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { REPO_ROOT, childEnv, runGroup } from "./process.js";

export interface Clone {
  readonly dir: string;
  remove(): void;
}

export function freshClone(prefix = "dojang-clone-"): Clone {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const files = execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard", "-z"], { cwd: REPO_ROOT, encoding: "utf8" })
    .split("\0")
    .filter((f) => f !== "" && !f.startsWith("dist/") && existsSync(join(REPO_ROOT, f)));
  for (const f of files) {
    mkdirSync(join(dir, dirname(f)), { recursive: true });
    cpSync(join(REPO_ROOT, f), join(dir, f));
  }
  symlinkSync(join(REPO_ROOT, "node_modules"), join(dir, "node_modules"), "dir");
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface NpmRun {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/**
 * `npm ...args` in `cwd`, in a process group of its own (npm, node and whatever they start); rejects
 * after `ms`, having killed that group. The group is also killed when the test ends (process.ts).
 */
export async function npm(args: readonly string[], cwd: string, ms: number, env: NodeJS.ProcessEnv = childEnv()): Promise<NpmRun> {
  const r = await runGroup("npm", args, { cwd, env }, ms);
  return { code: r.code, stdout: r.stdout, stderr: r.stderr, ms: r.ms };
}
