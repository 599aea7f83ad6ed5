// Pieces of the standalone benches (grpc-web.mjs, tls.mjs) that start their own processes: the
// fast upstream (bench/lib/upstream.mjs), a dojang child on a config file, and waiting for a port.
import { spawn } from "node:child_process";
import net from "node:net";
import { fileURLToPath } from "node:url";
import { freePort } from "./peers.mjs";

/**
 * The node flags dojang's launcher (src/cli.ts, src/config/memory.ts) starts the served process
 * with when no memory limit applies. A bench that runs dist/cli.js as one process image (with
 * DOJANG_MEMORY_PLAN set to "" the launcher does not re-execute; under callgrind it must not)
 * gives them itself, so that it measures the process dojang runs.
 */
export const LAUNCHER_NODE_FLAGS = Object.freeze(["--no-memory-reducer", "--external-memory-accounted-in-global-limit", "--heap-growing-percent=200", "--max-semi-space-size=2"]);

/** Starts a node child that prints one JSON line when ready; resolves with it and the process. */
export function startNode(name, file, argv) {
  const p = spawn(process.execPath, [file, ...argv], { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    let buf = "";
    const t = setTimeout(() => reject(new Error(`${name} did not start`)), 15_000);
    p.stdout.on("data", (d) => {
      buf += d;
      const nl = buf.indexOf("\n");
      if (nl >= 0 && buf.trimStart().startsWith("{")) {
        clearTimeout(t);
        p.stdout.removeAllListeners("data");
        p.stdout.resume();
        resolve({ p, ready: JSON.parse(buf.slice(0, nl)) });
      }
    });
    p.on("exit", (code) => reject(new Error(`${name} exited (${code})`)));
  });
}

/** Resolves once 127.0.0.1:port accepts a connection (every 50 ms, at most 200 tries). */
export async function waitPort(port) {
  for (let i = 0; i < 200; i++) {
    const ok = await new Promise((r) => {
      const s = net.connect(port, "127.0.0.1", () => (s.destroy(), r(true)));
      s.on("error", () => r(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`port ${port} never opened`);
}

/**
 * waitPort for a process that starts slowly (valgrind): up to `rounds` of waitPort's 10 s, given up
 * at once if `p` exits meanwhile.
 */
export async function waitPortOf(p, port, rounds) {
  for (let i = 0; ; i++) {
    try {
      await waitPort(port);
      return;
    } catch (err) {
      if (i === rounds - 1 || p.exitCode !== null) throw err;
    }
  }
}

/** The fast upstream on free ports: { p, port }. */
export async function startFastUpstream() {
  const port = await freePort();
  const { p } = await startNode("upstream", fileURLToPath(new URL("./upstream.mjs", import.meta.url)), ["--port", String(port), "--control-port", String(await freePort())]);
  return { p, port };
}

/** `node <cli> --config <cfgFile>` with stdout ignored and stderr inherited; resolves once every port in `ports` accepts. */
export async function startDojangChild(cli, cfgFile, ports) {
  const p = spawn(process.execPath, [cli, "--config", cfgFile], { stdio: ["ignore", "ignore", "inherit"] });
  for (const port of ports) await waitPort(port);
  return p;
}
