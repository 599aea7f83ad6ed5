// Which process made a TCP connection, read from the kernel's tables in /proc (Linux): a test's
// proof that a given process (one `workers: N` worker) opened the connection an upstream saw,
// judged by the kernel rather than by anything dojang reports about itself.
import { readFileSync, readdirSync, readlinkSync } from "node:fs";

/** The socket inodes process `pid` holds open. */
function socketInodes(pid: number): Set<string> {
  const out = new Set<string>();
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return out;
  }
  for (const fd of fds) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m !== null) out.add(m[1]!);
    } catch {
      /* closed meanwhile */
    }
  }
  return out;
}

/** The local ports of the TCP sockets (IPv4 and IPv6) process `pid` holds open. */
export function tcpPortsOf(pid: number): Set<number> {
  const inodes = socketInodes(pid);
  const ports = new Set<number>();
  for (const table of [`/proc/${pid}/net/tcp`, `/proc/${pid}/net/tcp6`]) {
    let text: string;
    try {
      text = readFileSync(table, "utf8");
    } catch {
      continue;
    }
    // "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode"
    for (const line of text.split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10) continue;
      if (!inodes.has(f[9]!)) continue;
      ports.add(parseInt(f[1]!.slice(f[1]!.lastIndexOf(":") + 1), 16));
    }
  }
  return ports;
}

/**
 * The pids of `pid`'s children (a `workers: N` primary's workers): every process whose parent it
 * is, from /proc/<p>/stat (/proc/<pid>/task/<pid>/children lists only the children its main
 * thread forked, and was seen empty here while the workers ran).
 */
export function childPids(pid: number): number[] {
  const out: number[] = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${d}/stat`, "utf8");
    } catch {
      continue; // ended meanwhile
    }
    // "pid (comm) state ppid …": comm may hold spaces and parentheses, so read after its last ")"
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    if (ppid === pid) out.push(Number(d));
  }
  return out.sort((a, b) => a - b);
}

/** For each peer ("127.0.0.1:54321", as grpc-js getPeer() gives it), the pid among `pids` whose socket it is; undefined when none. */
export function ownersOf(peers: Iterable<string>, pids: readonly number[]): Map<string, number | undefined> {
  const byPid = pids.map((p) => [p, tcpPortsOf(p)] as const);
  const out = new Map<string, number | undefined>();
  for (const peer of peers) {
    const port = Number(peer.slice(peer.lastIndexOf(":") + 1));
    out.set(peer, byPid.find(([, ports]) => ports.has(port))?.[0]);
  }
  return out;
}
