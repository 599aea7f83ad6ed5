// The "server under test" for connectconformance --mode server: dojang in front of the suite's
// own reference server. connectconformance starts this once per server config it needs, writes a
// size-delimited ServerCompatRequest on stdin, and reads a size-delimited ServerCompatResponse
// {host, port} from stdout (connectrpc/conformance docs/testing_servers.md). This script hands the
// same request to the reference server (a child process), reads where it listens, starts dojang
// (the built library, dist/index.js) with one listener taking gRPC, gRPC-Web and Connect and one
// cluster pointing at the reference server, and answers with dojang's address. The suite's client
// then talks only to dojang; dojang talks gRPC to the reference server.
//
// Usage: node dojang-in-front.mjs <referenceserver binary> [referenceserver args...]
// Nothing but the response goes to stdout; the reference server's stderr is passed on.
import { spawn } from "node:child_process";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [refBin, ...refArgs] = process.argv.slice(2);
if (!refBin) {
  process.stderr.write("usage: dojang-in-front.mjs <referenceserver> [args...]\n");
  process.exit(2);
}

/** Reads one size-delimited message (4-byte big-endian length, then the bytes) from a stream. */
function readDelimited(stream) {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const onData = (c) => {
      buf = Buffer.concat([buf, c]);
      if (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
        stream.off("data", onData);
        stream.pause();
        resolve(buf.subarray(0, 4 + buf.readUInt32BE(0)));
      }
    };
    stream.on("data", onData);
    stream.once("end", () => reject(new Error("stream ended before a whole message")));
  });
}

/** ServerCompatResponse: host (1, string), port (2, varint). */
function decodeResponse(msg) {
  let host = "";
  let port = 0;
  for (let i = 0; i < msg.length; ) {
    const tag = msg[i++];
    if (tag === 0x0a || tag === 0x1a) {
      const len = msg[i++];
      if (tag === 0x0a) host = msg.subarray(i, i + len).toString();
      i += len;
    } else if (tag === 0x10) {
      let v = 0;
      let mul = 1;
      for (;;) {
        const b = msg[i++];
        v += (b & 0x7f) * mul;
        mul *= 128;
        if ((b & 0x80) === 0) break;
      }
      port = v;
    } else throw new Error(`unexpected field tag ${tag} in the reference server's response`);
  }
  return { host, port };
}

function encodeResponse(host, port) {
  const h = Buffer.from(host);
  const p = [];
  for (let v = port; ; ) {
    if (v < 0x80) {
      p.push(v);
      break;
    }
    p.push((v & 0x7f) | 0x80);
    v >>>= 7;
  }
  const body = Buffer.concat([Buffer.from([0x0a, h.length]), h, Buffer.from([0x10, ...p])]);
  const len = Buffer.alloc(4);
  len.writeUInt32BE(body.length);
  return Buffer.concat([len, body]);
}

// The runner gives a server 10 s to answer: dojang's modules load while the reference server starts.
const dojang = import(pathToFileURL(join(import.meta.dirname, "..", "..", "dist", "index.js")).href);
const request = await readDelimited(process.stdin);
const ref = spawn(refBin, refArgs, { stdio: ["pipe", "pipe", "inherit"] });
let closing = false;
ref.on("exit", (code, signal) => {
  if (!closing) {
    process.stderr.write(`dojang-in-front: the reference server exited (${code ?? signal})\n`);
    process.exit(1);
  }
});
ref.stdin.write(request);
const up = decodeResponse((await readDelimited(ref.stdout)).subarray(4));
ref.stdout.resume(); // whatever else it prints is not ours to read

const { startDojang } = await dojang;
const MiB = 1024 * 1024;
const px = await startDojang({
  logLevel: process.env.DOJANG_LOG_LEVEL ?? "silent",
  config: {
    listeners: [
      {
        name: "conformance",
        address: "127.0.0.1:0",
        grpcWeb: true,
        connect: true,
        // One route, for the service the reference server implements, as a gateway routes the
        // services it knows: a path outside it is dojang's no_route (Connect: HTTP 404, as the
        // suite's unexpected-uri case wants). The suite's large-message cases go up to a few MiB:
        // dojang's limits stay out of the way.
        routes: [{ match: { service: "connectrpc.conformance.v1.ConformanceService" }, cluster: "reference", maxRequestMessageBytes: 64 * MiB, maxResponseMessageBytes: 64 * MiB }],
      },
    ],
    clusters: [{ name: "reference", endpoints: [`${up.host || "127.0.0.1"}:${up.port}`] }],
    // DOJANG_JOURNAL=1: the calls' access records go to stderr when the runner stops this server
    journal: process.env.DOJANG_JOURNAL === "1" ? 10_000 : 0,
  },
});
const [host, port] = [px.address.slice(0, px.address.lastIndexOf(":")), Number(px.address.slice(px.address.lastIndexOf(":") + 1))];
process.stdout.write(encodeResponse(host, port));

// The runner stops a server with SIGTERM: the reference server goes with it, whatever happens.
function stop() {
  if (closing) return;
  closing = true;
  if (process.env.DOJANG_JOURNAL === "1") for (const c of px.calls) process.stderr.write(`${JSON.stringify(c)}\n`);
  ref.kill("SIGTERM");
  setTimeout(() => process.exit(0), 1000).unref();
  px.close(0).then(() => process.exit(0), () => process.exit(0));
}
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
process.on("exit", () => ref.kill("SIGKILL"));
