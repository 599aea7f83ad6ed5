// The pid file (`dojang --pid-file PATH`): how scripts and `dojang reload` reach a running dojang.
//
// It holds the serving process's pid and a newline (the usual daemon format: what
// start-stop-daemon, systemd's PIDFile= and `kill -HUP $(cat FILE)` read). The CLI writes it once
// every listener is bound (so whatever reads it reaches a process that serves), atomically (a
// temporary file renamed over it), and removes it when it exits, if it still holds its own pid.
// A start refuses a pid file held by a dojang that is still running (two proxies writing one
// file would leave reload and stop scripts signalling the wrong one); a file left behind by a
// process that is gone (a crash, SIGKILL) is taken over. Only node:fs: the served process loads it.
import { accessSync, constants, readFileSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";

export type PidFileState =
  | { readonly state: "running"; readonly pid: number }
  | { readonly state: "stale" | "missing" | "unreadable"; readonly why: string };

/**
 * Whether `pid` is a running dojang. Alive: signal 0 succeeds (or EPERM: it exists, owned by
 * another user). On Linux the process's command line must also name dojang (an argument ending in
 * cli.js, or containing "dojang"): a pid file left by a crash may hold a pid the system has since
 * given to another process, and SIGHUP would end that one.
 */
export function isRunningDojang(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  let cmdline: string;
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return true; // no /proc (not Linux): alive is all that can be told
  }
  return cmdline.split("\0").some((a) => a.endsWith("cli.js") || a.includes("dojang"));
}

/** What the pid file at `path` says. */
export function readPidFile(path: string): PidFileState {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    return code === "ENOENT" ? { state: "missing", why: `no pid file ${path}` } : { state: "unreadable", why: `cannot read the pid file ${path}: ${code}` };
  }
  const line = text.split("\n")[0]?.trim() ?? "";
  const pid = /^[1-9]\d{0,9}$/.test(line) ? Number(line) : NaN;
  if (!Number.isSafeInteger(pid)) return { state: "unreadable", why: `the pid file ${path} holds no pid (${JSON.stringify(line.slice(0, 40))})` };
  if (!isRunningDojang(pid)) return { state: "stale", why: `the pid file ${path} names pid ${pid}, which is not a running dojang` };
  return { state: "running", pid };
}

/**
 * Before listening: why dojang must not start with this pid file (another dojang holds it, or its
 * directory cannot be written), or undefined. The message is one line, without "dojang: ".
 * `takesOver`: the pid of the dojang this one replaces (`dojang upgrade`), which may hold it.
 */
export function pidFileProblem(path: string, self: number = process.pid, takesOver?: number): { code: 1 | 2; message: string } | undefined {
  const s = readPidFile(path);
  if (s.state === "running" && s.pid !== self && s.pid !== takesOver) return { code: 1, message: `--pid-file ${path}: dojang is already running as pid ${s.pid} (stop it, or give another --pid-file)` };
  try {
    accessSync(dirname(path), constants.W_OK);
  } catch (err) {
    return { code: 2, message: `--pid-file ${path}: cannot write in ${dirname(path)}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` };
  }
  return undefined;
}

/** Writes `pid` to `path` atomically (a temporary file in the same directory renamed over it). */
export function writePidFile(path: string, pid: number = process.pid): void {
  const tmp = `${path}.${pid}.tmp`;
  writeFileSync(tmp, `${pid}\n`, { mode: 0o644 });
  try {
    renameSync(tmp, path);
  } catch (err) {
    try {
      unlinkSync(tmp);
    } catch {
      /* gone already */
    }
    throw err;
  }
}

/** Removes the pid file if it still holds `pid` (a newer dojang may have taken it over). Never throws. */
export function removePidFile(path: string, pid: number = process.pid): void {
  try {
    if (readFileSync(path, "utf8").trim() === String(pid)) unlinkSync(path);
  } catch {
    /* gone already, or not ours to remove */
  }
}
