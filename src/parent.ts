// --stop-with-parent's memory of who started dojang, taken at the first instruction of each
// process in the chain (src/cli.ts, the launcher, and src/main.ts, the served process: both import
// this module before anything else, so its top level runs first). Reading the parent only once
// dojang listened (as before) missed a parent that exited during start-up: dojang had already been
// adopted by init, and watched init. The launcher hands what it saw to the served process in
// DOJANG_STARTED_BY, since it may spend a while reading the config before node starts again
// (process.execve keeps the pid, so the parent is the same process).

import { readFileSync } from "node:fs";

/** The parent pid as this process first saw it: the very first thing this bundle does. */
const FIRST_PPID = process.ppid;

/** The launcher's record for the served process: a pid, or "0" when the parent was gone already. */
export const STARTED_BY_ENV = "DOJANG_STARTED_BY";

/**
 * The pid of the process that started dojang, or 0 when it had exited before this process could
 * look (node can take a few hundred ms to reach the first line on a loaded machine). That case is
 * told from init starting dojang by the process group: a process init adopted keeps the group its
 * parent gave it, while init (systemd, tini, a container's first process) starts a program in its
 * own group or in init's. So: parent pid 1, and a group that is neither ours nor init's, means
 * orphaned. (Under a subreaper the orphan's new parent is not pid 1, and a parent gone that early
 * cannot be told apart from it; one that goes later always can.) `pgrp` is read only when needed.
 */
export function parentAtStart(ppid: number, pid: number, pgrp: () => number | undefined): number {
  if (ppid !== 1 || pid === 1) return ppid;
  const g = pgrp();
  return g !== undefined && g !== 1 && g !== pid ? 0 : ppid;
}

const firstParent = (): number => parentAtStart(FIRST_PPID, process.pid, processGroup);

/** This process's group id, from /proc (Linux); undefined elsewhere. */
function processGroup(): number | undefined {
  try {
    // "pid (comm) state ppid pgrp ..."; comm may hold spaces and parentheses, so split after the last ")"
    const stat = readFileSync("/proc/self/stat", "utf8");
    const n = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]);
    return Number.isSafeInteger(n) ? n : undefined;
  } catch {
    return undefined;
  }
}

/** The launcher: puts what it saw at its first instruction where the served process will read it. */
export function handParentOn(env: NodeJS.ProcessEnv): void {
  env[STARTED_BY_ENV] = String(firstParent());
}

/** The served process: who started dojang (0: gone before dojang could look), from the launcher or its own first look. */
export function startedBy(env: NodeJS.ProcessEnv): number {
  const handed = env[STARTED_BY_ENV];
  return handed !== undefined && /^\d+$/.test(handed) ? Number(handed) : firstParent();
}
