// A new connection while others attack (issue 32 item 4), dojang against nginx and HAProxy in one
// run: for each peer (the harness's own configs, bench/lib/peers.mjs) and each round, ten raw
// connections each write 1,000 HEADERS + RST_STREAM(CANCEL) at once (rapid reset), while a
// separate probe process (lib/settings-probe.mjs) opens a new connection every 50 ms and times
// each to the peer's first SETTINGS. Prints, per peer, the probes answered, median and max, and
// how the attackers' connections ended. The same shape as test/process/attack-new-connections.test.ts.
//
// usage: node bench/new-conn-under-attack.mjs [--peers dojang,nginx,haproxy] [--rounds 3]
//        [--probes 20] [--bound-ms 2000] [--dojang-dist DIR (another build's dist, to compare)]
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { UNARY_PATH } from "./lib/grpc.mjs";
import { makePeer } from "./lib/peers.mjs";
import { startProcess, stopProcess, tail } from "./lib/proc.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(HERE, "..");
const { values: args } = parseArgs({
  options: {
    peers: { type: "string", default: "dojang,nginx,haproxy" },
    rounds: { type: "string", default: "3" },
    probes: { type: "string", default: "20" },
    "bound-ms": { type: "string", default: "2000" },
    "dojang-dist": { type: "string" },
  },
});
const ATTACKERS = 10;
const RESETS = 1000;
const PROBES = Number(args.probes);
const ROUNDS = Number(args.rounds);
const BOUND = Number(args["bound-ms"]);

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
const frame = (type, flags, id, payload = Buffer.alloc(0)) => {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(id, 5);
  return Buffer.concat([h, payload]);
};
/** HPACK literal header fields without indexing, new names, no Huffman (every length < 127) */
const block = (fields) => Buffer.concat(fields.flatMap(([n, v]) => [Buffer.from([0, n.length]), Buffer.from(n), Buffer.from([v.length]), Buffer.from(v)]));
const REQUEST = block([
  [":method", "POST"],
  [":scheme", "http"],
  [":path", UNARY_PATH],
  [":authority", "bench"],
  ["content-type", "application/grpc"],
  ["te", "trailers"],
]);
const CANCEL = Buffer.from([0, 0, 0, 8]);
function floodBytes() {
  const parts = [PREFACE, frame(4, 0, 0)];
  for (let i = 0; i < RESETS; i++) parts.push(frame(1, 0x4, 1 + 2 * i, REQUEST), frame(3, 0, 1 + 2 * i, CANCEL));
  return Buffer.concat(parts);
}

/** One attacker: resolves once connected; `ended()` says how its connection ended (GOAWAY code, or how it closed). */
function attacker(port) {
  return new Promise((res, rej) => {
    const sock = net.connect(port, "127.0.0.1");
    let buf = Buffer.alloc(0);
    let goaway;
    let closed = false;
    sock.on("data", (d) => {
      buf = Buffer.concat([buf, d]);
      while (buf.length >= 9) {
        const len = buf.readUIntBE(0, 3);
        if (buf.length < 9 + len) break;
        if (buf[3] === 7 && goaway === undefined) goaway = buf.readUInt32BE(9 + 4);
        if (buf[3] === 4 && (buf[4] & 1) === 0) sock.write(frame(4, 1, 0)); // SETTINGS ACK
        buf = buf.subarray(9 + len);
      }
    });
    sock.on("error", () => {});
    sock.on("close", () => (closed = true));
    sock.once("connect", () =>
      res({
        flood: () => sock.write(floodBytes()),
        ended: () => (goaway !== undefined ? `GOAWAY ${goaway}` : closed ? "closed" : "open"),
        close: () => sock.destroy(),
      }),
    );
    sock.once("error", rej);
  });
}

async function startProbes(port) {
  const child = spawn(process.execPath, [join(HERE, "lib", "settings-probe.mjs"), `127.0.0.1:${port}`, "--count", String(PROBES), "--interval-ms", "50", "--timeout-ms", "10000"], { stdio: ["pipe", "pipe", "inherit"] });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  await lines.next();
  return async () => {
    child.stdin.write("go\n");
    return JSON.parse(String((await lines.next()).value));
  };
}

async function round(port) {
  const go = await startProbes(port);
  const atks = await Promise.all(Array.from({ length: ATTACKERS }, () => attacker(port)));
  const probes = go();
  for (const a of atks) a.flood();
  const r = await probes;
  await new Promise((res) => setTimeout(res, 2000));
  const ended = atks.map((a) => a.ended());
  for (const a of atks) a.close();
  return { ms: r.settingsMs, wrong: r.wrong, ended };
}

const tmp = mkdtempSync(join(os.tmpdir(), "dojang-newconn-"));
const env = { tmp, repo: REPO, nodeBin: process.execPath, upstreamPort: undefined, altDist: args["dojang-dist"] ? resolve(args["dojang-dist"]) : undefined, altDistLabel: args["dojang-dist"], altNodeArgs: [] };
const upstream = startProcess("upstream", process.execPath, [join(HERE, "lib", "upstream.mjs")], { logDir: tmp, cwd: REPO, pipeStdout: true });
try {
  const ready = await new Promise((res, rej) => {
    const t = setTimeout(() => rej(new Error(`upstream not ready: ${tail(upstream.stderrFile)}`)), 10_000);
    createInterface({ input: upstream.child.stdout }).once("line", (l) => {
      clearTimeout(t);
      res(JSON.parse(l));
    });
  });
  env.upstreamPort = ready.port;
  const loadavg = os.loadavg().map((v) => v.toFixed(1)).join(" ");
  console.log(`new connections under rapid reset: ${ATTACKERS} connections x ${RESETS} streams written at once; ${PROBES} probes, one every 50 ms; ${ROUNDS} round(s); ${os.cpus().length} CPUs, load average ${loadavg}; node ${process.version}`);
  console.log(`peer      round  probes<=${BOUND}ms  timed out  median ms  max ms  attackers' connections`);
  const peers = args.peers.split(",").map((n) => (n === "dojang" && env.altDist !== undefined ? "dojang-alt" : n));
  for (let r = 1; r <= ROUNDS; r++) {
    for (const name of peers) {
      const peer = makePeer(name, env);
      const skip = await peer.prepare();
      if (skip !== undefined) {
        console.log(`${name}: skipped (${skip})`);
        continue;
      }
      await peer.start();
      try {
        const res = await round(peer.port);
        const got = res.ms.filter((v) => v !== null).sort((a, b) => a - b);
        const within = res.ms.filter((v) => v !== null && v <= BOUND).length;
        const median = got.length > 0 ? got[got.length >> 1] : NaN;
        const max = got.length === res.ms.length ? got[got.length - 1] : Infinity;
        const ends = Object.entries(res.ended.reduce((m, e) => ((m[e] = (m[e] ?? 0) + 1), m), {})).map(([k, v]) => `${v}x ${k}`).join(", ");
        console.log(`${name.padEnd(9)} ${String(r).padStart(5)}  ${`${within}/${res.ms.length}`.padStart(13)}  ${String(res.ms.length - got.length).padStart(9)}  ${median.toFixed(0).padStart(9)}  ${max.toFixed(0).padStart(6)}  ${ends}${res.wrong.length ? `; first frame not SETTINGS: ${res.wrong.join(", ")}` : ""}`);
      } finally {
        await peer.stop();
      }
    }
  }
} finally {
  await stopProcess(upstream, 3000);
  rmSync(tmp, { recursive: true, force: true });
}
