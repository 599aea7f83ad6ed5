// The "server under test" for connectconformance --mode server: dojang in front of the suite's
// own reference server. connectconformance starts this once per server config it needs, writes a
// size-delimited ServerCompatRequest on stdin, and reads a size-delimited ServerCompatResponse
// {host, port} from stdout (connectrpc/conformance docs/testing_servers.md). This script hands the
// same request to the reference server (a child process), reads where it listens, starts dojang
// (the built library, dist/index.js) with one listener taking gRPC, gRPC-Web and Connect and one
// cluster pointing at the reference server, and answers with dojang's address. The suite's client
// then talks only to dojang; dojang talks gRPC to the reference server.
//
// Usage: node dojang-in-front.mjs [--prefix-route] <referenceserver binary> [referenceserver args...]
// --prefix-route: one `prefix: "/"` route instead of the service route (every path goes upstream,
// and a path the reference server does not serve gets its own answer).
// Nothing but the response goes to stdout; the reference server's stderr is passed on.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const argv = process.argv.slice(2);
const prefixRoute = argv[0] === "--prefix-route";
const [refBin, ...refArgs] = prefixRoute ? argv.slice(1) : argv;
if (!refBin) {
  process.stderr.write("usage: dojang-in-front.mjs [--prefix-route] <referenceserver> [args...]\n");
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

/** A message's fields: number → varint (number) or bytes (Buffer), the last of each number. */
function fields(msg) {
  const out = new Map();
  const varint = (r) => {
    let v = 0;
    let mul = 1;
    for (;;) {
      const b = msg[r.i++];
      v += (b & 0x7f) * mul;
      mul *= 128;
      if ((b & 0x80) === 0) return v;
    }
  };
  for (const r = { i: 0 }; r.i < msg.length; ) {
    const tag = varint(r);
    if ((tag & 7) === 0) out.set(Math.floor(tag / 8), varint(r));
    else if ((tag & 7) === 2) {
      const n = varint(r);
      out.set(Math.floor(tag / 8), msg.subarray(r.i, r.i + n));
      r.i += n;
    } else throw new Error(`unexpected wire type in field tag ${tag}`);
  }
  return out;
}

function putVarint(out, v) {
  while (v >= 0x80) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
}

/** Encodes varint (number) and bytes (Buffer) fields, size-delimited. */
function encodeDelimited(entries) {
  const out = [];
  for (const [n, v] of entries) {
    if (typeof v === "number") {
      putVarint(out, n * 8);
      putVarint(out, v);
    } else {
      putVarint(out, n * 8 + 2);
      putVarint(out, v.length);
      out.push(...v);
    }
  }
  const len = Buffer.alloc(4);
  len.writeUInt32BE(out.length);
  return Buffer.concat([len, Buffer.from(out)]);
}

function encodeResponse(host, port, pemCert) {
  return encodeDelimited([[1, Buffer.from(host)], [2, port], ...(pemCert ? [[3, pemCert]] : [])]);
}

// The runner gives a server 10 s to answer: dojang's modules load while the reference server starts.
const dojang = import(pathToFileURL(join(import.meta.dirname, "..", "..", "dist", "index.js")).href);
const request = await readDelimited(process.stdin);
// ServerCompatRequest: protocol 1, http_version 2, use_tls 4, message_receive_limit 6, server_creds 7 {cert 1, key 2}.
// With TLS, dojang's listener is TLS (ALPN h2 and http/1.1, the runner's certificate) and the
// reference server behind it is asked for plain HTTP/2 (h2c): dojang's upstream is gRPC over h2c.
const req = fields(request.subarray(4));
const tls = req.get(4) === 1;
const creds = tls ? fields(req.get(7)) : null;
const refRequest = tls ? encodeDelimited([[1, req.get(1) ?? 0], [2, 2], ...(req.has(6) ? [[6, req.get(6)]] : [])]) : request;
const ref = spawn(refBin, refArgs, { stdio: ["pipe", "pipe", "inherit"] });
let closing = false;
let px;
let certDir = null;
const parent = process.ppid;
setInterval(() => process.ppid !== parent && stop(), 500).unref();
process.on("SIGTERM", () => stop());
process.on("SIGINT", () => stop());
process.on("exit", () => ref.kill("SIGKILL"));
ref.on("exit", (code, signal) => {
  if (!closing) {
    process.stderr.write(`dojang-in-front: the reference server exited (${code ?? signal})\n`);
    process.exit(1);
  }
});
ref.stdin.write(refRequest);
const up = decodeResponse((await readDelimited(ref.stdout)).subarray(4));
ref.stdout.resume(); // whatever else it prints is not ours to read

const { startDojang } = await dojang;
let listenerTls = null;
if (tls) {
  certDir = mkdtempSync(join(tmpdir(), "dojang-conformance-"));
  writeFileSync(join(certDir, "cert.pem"), creds.get(1));
  writeFileSync(join(certDir, "key.pem"), creds.get(2));
  listenerTls = { certFile: join(certDir, "cert.pem"), keyFile: join(certDir, "key.pem") };
}
const MiB = 1024 * 1024;
px = await startDojang({
  logLevel: process.env.DOJANG_LOG_LEVEL ?? "silent",
  config: {
    listeners: [
      {
        name: "conformance",
        address: "127.0.0.1:0",
        grpcWeb: true,
        connect: true,
        // TLS: HTTP/1.1 and HTTP/2 on this one port (ALPN), as the runner gives one address
        ...(listenerTls ? { tls: listenerTls } : {}),
        // One route, for the service the reference server implements, as a gateway routes the
        // services it knows: a path outside it is dojang's no_route (Connect: HTTP 404, as the
        // suite's unexpected-uri case wants). Or (--prefix-route) one route for every path, as a
        // sidecar routes: such a path reaches the reference server, which answers HTTP 404, and
        // Connect's answer must still be 404. The suite's large-message cases go up to a few
        // MiB: dojang's limits stay out of the way.
        routes: [{ match: prefixRoute ? { prefix: "/" } : { service: "connectrpc.conformance.v1.ConformanceService" }, cluster: "reference", maxRequestMessageBytes: 64 * MiB, maxResponseMessageBytes: 64 * MiB }],
      },
    ],
    clusters: [{ name: "reference", endpoints: [`${up.host || "127.0.0.1"}:${up.port}`] }],
    // DOJANG_JOURNAL=1: the calls' access records go to stderr when the runner stops this server
    journal: process.env.DOJANG_JOURNAL === "1" ? 10_000 : 0,
  },
});
const [host, port] = [px.address.slice(0, px.address.lastIndexOf(":")), Number(px.address.slice(px.address.lastIndexOf(":") + 1))];
process.stdout.write(encodeResponse(host, port, tls ? creds.get(1) : null));

// The runner stops a server with SIGTERM: the reference server goes with it, whatever happens.
// If the runner itself goes (killed, timed out) this process is reparented: it stops too.
function stop() {
  if (closing) return;
  closing = true;
  if (process.env.DOJANG_JOURNAL === "1" && px) for (const c of px.calls) process.stderr.write(`${JSON.stringify(c)}\n`);
  ref.kill("SIGTERM");
  if (certDir) rmSync(certDir, { recursive: true, force: true });
  setTimeout(() => process.exit(0), 1000).unref();
  if (px) px.close(0).then(() => process.exit(0), () => process.exit(0));
  else process.exit(0);
}
