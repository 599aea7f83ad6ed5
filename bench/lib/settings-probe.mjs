// New connections, timed to the server's first SETTINGS: what a client's "connection attempt
// timed out before receiving SETTINGS frame" measures. Runs as its own process so that the
// attack it is run beside (in the test or the harness) does not delay its own clock: each probe
// opens a TCP connection, sends the HTTP/2 preface and an empty SETTINGS, and records the
// milliseconds from its connect() call (the listen queue and the accept count) to the first
// server frame, which RFC 9113 §3.4 says must be SETTINGS without ACK. Probes stay open until
// the last has its answer or timed out, then all close.
//
// usage: node settings-probe.mjs HOST:PORT [--count N] [--interval-ms MS] [--timeout-ms MS]
//   prints {"ready":true} once loaded, waits for a line on stdin (go), then probes and prints
//   one JSON line: {"settingsMs":[...] (null = timed out), "wrong":[...] (first frame not SETTINGS)}
import net from "node:net";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";

const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    count: { type: "string", default: "20" },
    "interval-ms": { type: "string", default: "50" },
    "timeout-ms": { type: "string", default: "10000" },
  },
});
const [host, port] = positionals[0].split(":");
const count = Number(args.count);
const interval = Number(args["interval-ms"]);
const timeoutMs = Number(args["timeout-ms"]);

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
/** an empty SETTINGS frame: length 0, type 4, flags 0, stream 0 */
const SETTINGS = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]);

/** One probe: ms to the server's first frame header, null if none within timeoutMs. */
function probe(sockets, wrong) {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const sock = net.connect(Number(port), host);
    sockets.push(sock);
    let got = Buffer.alloc(0);
    let done = false;
    const finish = (v) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(v);
    };
    const timer = setTimeout(() => finish(null), timeoutMs);
    sock.setNoDelay(true);
    sock.on("connect", () => sock.write(Buffer.concat([PREFACE, SETTINGS])));
    sock.on("data", (d) => {
      if (done) return;
      got = Buffer.concat([got, d]);
      if (got.length < 9) return;
      const ms = performance.now() - t0;
      // type 4 (SETTINGS), ACK flag clear
      if (got[3] !== 4 || (got[4] & 1) !== 0) wrong.push(`type ${got[3]} flags ${got[4]}`);
      finish(ms);
    });
    sock.on("error", () => finish(null));
    sock.on("close", () => finish(null));
  });
}

process.stdout.write(JSON.stringify({ ready: true }) + "\n");
createInterface({ input: process.stdin }).once("line", async () => {
  const sockets = [];
  const wrong = [];
  const pending = [];
  for (let i = 0; i < count; i++) {
    pending.push(probe(sockets, wrong));
    await new Promise((r) => setTimeout(r, interval));
  }
  const settingsMs = await Promise.all(pending);
  for (const s of sockets) s.destroy();
  process.stdout.write(JSON.stringify({ settingsMs: settingsMs.map((v) => (v === null ? null : Math.round(v * 10) / 10)), wrong }) + "\n");
  process.exit(0);
});
