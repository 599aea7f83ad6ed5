// Processes the harness starts (always pinned with taskset, logs to files, stopped by pid) and
// what it reads about them from /proc (CPU ticks, RSS, descendants).
import { spawn, execFileSync } from "node:child_process";
import { openSync, closeSync, readFileSync, readdirSync, existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";

let clkTck = 100;
try {
  clkTck = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
} catch {
  /* 100 is Linux's USER_HZ everywhere we care about */
}
export const CLK_TCK = clkTck;

/**
 * CPU time of every thread of `pid`, ns: the sum of /proc/<pid>/task/<tid>/schedstat's first
 * field (time on a CPU, kept by the scheduler in ns, where /proc/<pid>/stat counts CLK_TCK ticks:
 * 10 ms, 3.3 µs a call over 3,000 calls). A thread that ended meanwhile is left out.
 */
export function cpuNs(pid) {
  let sum = 0;
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    try {
      sum += Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, "utf8").split(" ")[0]);
    } catch {
      /* the thread ended */
    }
  }
  return sum;
}

/**
 * cpuNs by thread: the main thread's (tid = pid) under "main", every other thread's under its name
 * (/proc/<pid>/task/<tid>/comm: V8's platform workers, which compile and mark concurrently, are
 * "V8 DefaultWorke"; libuv's pool "libuv-worker"), in ns.
 */
export function cpuNsByThread(pid) {
  const out = {};
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    try {
      const ns = Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, "utf8").split(" ")[0]);
      const name = t === String(pid) ? "main" : readFileSync(`/proc/${pid}/task/${t}/comm`, "utf8").trim();
      out[name] = (out[name] ?? 0) + ns;
    } catch {
      /* the thread ended */
    }
  }
  return out;
}

/** Every process this harness started and has not seen exit: killed on harness exit. */
const live = new Map();

process.on("exit", () => {
  for (const p of live.values()) {
    try {
      process.kill(p.pid, "SIGKILL");
    } catch {
      /* already gone */
    }
  }
});

export function which(bin) {
  for (const dir of (process.env.PATH ?? "").split(":")) {
    const f = join(dir || ".", bin);
    if (existsSync(f)) return f;
  }
  for (const dir of ["/usr/sbin", "/sbin", "/usr/local/sbin"]) {
    const f = join(dir, bin);
    if (existsSync(f)) return f;
  }
  return undefined;
}

/**
 * Starts `cmd args` as `taskset -c cpus cmd args` (taskset execs, so the pid is the command's
 * own), stdout/stderr to `<logDir>/<name>.stdout.log|.stderr.log` unless `pipeStdout`, its pid
 * in `<logDir>/<name>.pid`.
 * Returns { name, pid, child, exited (promise of {code, signal}), stdoutFile, stderrFile }.
 */
export function startProcess(name, cmd, args, { cpus, logDir, cwd, env, pipeStdout = false, pipeStdin = false }) {
  const stdoutFile = join(logDir, `${name}.stdout.log`);
  const stderrFile = join(logDir, `${name}.stderr.log`);
  const out = pipeStdout ? "pipe" : openSync(stdoutFile, "a");
  const err = openSync(stderrFile, "a");
  const argv = cpus === undefined ? [cmd, ...args] : ["taskset", "-c", String(cpus), cmd, ...args];
  const child = spawn(argv[0], argv.slice(1), {
    cwd,
    env: env ?? process.env,
    stdio: [pipeStdin ? "pipe" : "ignore", out, err],
    detached: false,
  });
  if (typeof out === "number") closeSync(out);
  closeSync(err);
  const p = { name, pid: child.pid, child, stdoutFile, stderrFile, exitInfo: undefined };
  if (child.pid !== undefined) writeFileSync(join(logDir, `${name}.pid`), `${child.pid}\n`);
  live.set(p.pid, p);
  p.exited = new Promise((resolve) => {
    child.once("exit", (code, signal) => {
      live.delete(p.pid);
      p.exitInfo = { code, signal };
      resolve(p.exitInfo);
    });
    child.once("error", (e) => {
      live.delete(p.pid);
      p.exitInfo = { code: -1, signal: null, error: e.message };
      resolve(p.exitInfo);
    });
  });
  return p;
}

export function isAlive(p) {
  return p !== undefined && p.exitInfo === undefined;
}

/** SIGTERM by pid, then SIGKILL after `graceMs`. Only ever a process we started. */
export async function stopProcess(p, graceMs = 5000) {
  if (!isAlive(p)) return p?.exitInfo;
  try {
    process.kill(p.pid, "SIGTERM");
  } catch {
    /* gone */
  }
  const t = setTimeout(() => {
    try {
      process.kill(p.pid, "SIGKILL");
    } catch {
      /* gone */
    }
  }, graceMs);
  const r = await p.exited;
  clearTimeout(t);
  return r;
}

export function tail(file, lines = 20) {
  try {
    const t = readFileSync(file, "utf8").trimEnd().split("\n");
    return t.slice(-lines).join("\n");
  } catch {
    return "";
  }
}

// === /proc ===

/** utime+stime of one process in ticks, or undefined when it is gone. */
export function cpuTicks(pid) {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8");
    const rest = s.slice(s.lastIndexOf(")") + 2).split(" ");
    // rest[0] is field 3 (state); utime is field 14, stime field 15
    return Number(rest[11]) + Number(rest[12]);
  } catch {
    return undefined;
  }
}

/** VmRSS in KiB (or another /proc/<pid>/status field: RssAnon, RssFile), or undefined. */
export function rssKiB(pid, field = "VmRSS") {
  try {
    const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** pid and all its live descendants (dojang's cluster workers, for example). */
export function processTree(pid) {
  const out = [];
  const stack = [pid];
  while (stack.length > 0) {
    const p = stack.pop();
    if (!existsSync(`/proc/${p}`)) continue;
    out.push(p);
    let tasks = [];
    try {
      tasks = readdirSync(`/proc/${p}/task`);
    } catch {
      continue;
    }
    for (const t of tasks) {
      try {
        const c = readFileSync(`/proc/${p}/task/${t}/children`, "utf8").trim();
        if (c !== "") for (const x of c.split(/\s+/)) stack.push(Number(x));
      } catch {
        /* task gone */
      }
    }
  }
  return out;
}

/** CPU microseconds of a process tree (sum). */
export function treeCpuUs(pid) {
  let ticks = 0;
  for (const p of processTree(pid)) ticks += cpuTicks(p) ?? 0;
  return (ticks * 1e6) / CLK_TCK;
}

/** RSS of a process tree (sum of VmRSS; shared pages of forked workers count more than once).
 * `field: "RssAnon"` sums only the anonymous pages (heap, stacks, malloc): what the process itself
 * allocated, without the executable's and libraries' file pages that every process of the same
 * binary shares. */
export function treeRssKiB(pid, field = "VmRSS") {
  let kib = 0;
  for (const p of processTree(pid)) kib += rssKiB(p, field) ?? 0;
  return kib;
}

export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

/** Per-CPU jiffies from /proc/stat: { [cpu]: { busy, steal, total } }. */
export function cpuStat() {
  const out = {};
  try {
    for (const line of readFileSync("/proc/stat", "utf8").split("\n")) {
      const m = /^cpu(\d+)\s+(.*)$/.exec(line);
      if (!m) continue;
      const v = m[2].trim().split(/\s+/).map(Number);
      // user nice system idle iowait irq softirq steal guest guest_nice. busy = user+nice+system,
      // what processes' utime+stime add up to (irq/softirq time, loopback's own packet work
      // included, belongs to no process).
      const steal = v[7] ?? 0;
      const total = v.slice(0, 8).reduce((a, b) => a + b, 0);
      out[m[1]] = { busy: v[0] + v[1] + v[2], steal, total };
    }
  } catch {
    /* not Linux */
  }
  return out;
}

/** "0", "0-1", "0,2-3" → [0], [0, 1], [0, 2, 3]. */
export function parseCpuList(s) {
  const out = [];
  for (const part of String(s).split(",")) {
    const [a, b] = part.split("-").map(Number);
    for (let i = a; i <= (b ?? a); i++) out.push(i);
  }
  return out;
}

/** Busy and steal percent of `cpus` (summed, 100 = one CPU) between two cpuStat() samples. */
export function cpuBusy(s0, s1, cpus) {
  let busy = 0;
  let steal = 0;
  let total = 0;
  for (const c of cpus) {
    const a = s0[c];
    const b = s1[c];
    if (!a || !b) continue;
    busy += b.busy - a.busy;
    steal += b.steal - a.steal;
    total += b.total - a.total;
  }
  if (total === 0) return undefined;
  const n = cpus.length;
  return { busyPercent: (busy / total) * 100 * n, stealPercent: (steal / total) * 100 * n };
}
