// Probe: in which order does a node:http2 client stream emit its events, over TLS and over h2c,
// when the response frames of one stream arrive together? What dojang's upstream attempt
// (src/proxy/call/attempt.ts) must not assume; the findings are in docs/concepts/node-http2.md and
// this script's output on Node 24 in docs/concepts/node24-order-probe.txt.
//
// Run: node scripts/node-http2-order-probe.mjs   (loopback only, ephemeral ports, bounded; needs
// the openssl command for a throwaway certificate)
//
// A raw-frame server (TLS with ALPN h2, or plain TCP) answers each pair of requests with two
// writes, one per stream, each carrying a PING and then one stream's whole response in one of
// the shapes below; over TLS each write is one TLS record. A node:http2 client, its listeners on
// from request() as dojang's are, records each stream's events in order. Every shape runs
// ROUNDS times per transport; the output counts each distinct order.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import tls from "node:tls";

const ROUNDS = 20;
const dir = mkdtempSync(join(tmpdir(), "h2-order-probe-"));
execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "k.pem", "-out", "c.pem", "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"], { cwd: dir, stdio: "ignore" });
const key = readFileSync(join(dir, "k.pem"));
const cert = readFileSync(join(dir, "c.pem"));

// --- frames (RFC 9113 §4.1) and HPACK literals without indexing, new name (RFC 7541 §6.2.2) ---
const T = { DATA: 0, HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, PING: 6, WINDOW_UPDATE: 8 };
/** the stream id of the client's uploader (its first request): the server never answers it */
const busyId = 1;
const END_STREAM = 1;
const END_HEADERS = 4;
function frame(type, flags, id, payload = Buffer.alloc(0)) {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(id, 5);
  return Buffer.concat([h, payload]);
}
function block(fields) {
  return Buffer.concat(fields.map(([n, v]) => Buffer.concat([Buffer.from([0, n.length]), Buffer.from(n), Buffer.from([v.length]), Buffer.from(v)])));
}
const head = (id, flags = 0) => frame(T.HEADERS, END_HEADERS | flags, id, block([[":status", "200"], ["content-type", "application/grpc"]]));
const info = (id) => frame(T.HEADERS, END_HEADERS, id, block([[":status", "100"]]));
const message = Buffer.from([0, 0, 0, 0, 3, 1, 2, 3]);
const data = (id, flags = 0) => frame(T.DATA, flags, id, message);
const trailers = (id) => frame(T.HEADERS, END_HEADERS | END_STREAM, id, block([["grpc-status", "0"]]));
const trailersOnly = (id) => frame(T.HEADERS, END_HEADERS | END_STREAM, id, block([[":status", "200"], ["content-type", "application/grpc"], ["grpc-status", "5"]]));
const rst = (id, code) => {
  const p = Buffer.alloc(4);
  p.writeUInt32BE(code);
  return frame(T.RST_STREAM, 0, id, p);
};

/** The response shapes: the frames one stream gets, in one write. */
const SHAPES = {
  "HEADERS, DATA, trailers": (id) => [head(id), data(id), trailers(id)],
  "HEADERS, DATA(END_STREAM), no trailers": (id) => [head(id), data(id, END_STREAM)],
  "Trailers-Only HEADERS(END_STREAM)": (id) => [trailersOnly(id)],
  "HEADERS 100, HEADERS 200, DATA, trailers": (id) => [info(id), head(id), data(id), trailers(id)],
  "HEADERS, DATA, RST_STREAM(CANCEL)": (id) => [head(id), data(id), rst(id, 8)],
  "HEADERS, DATA, RST_STREAM(NO_ERROR)": (id) => [head(id), data(id), rst(id, 0)],
  "HEADERS, RST_STREAM(INTERNAL_ERROR)": (id) => [head(id), rst(id, 2)],
};

/** A raw-frame server: SETTINGS, then for every two request HEADERS two writes (PING + one stream's shape). */
function rawServer(useTls, shape) {
  const onConn = (sock) => {
    sock.on("error", () => {});
    let buf = Buffer.alloc(0);
    let preface = true;
    let pending = [];
    sock.write(frame(T.SETTINGS, 0, 0));
    sock.on("data", (d) => {
      buf = Buffer.concat([buf, d]);
      if (preface) {
        if (buf.length < 24) return;
        buf = buf.subarray(24);
        preface = false;
      }
      while (buf.length >= 9) {
        const len = buf.readUIntBE(0, 3);
        if (buf.length < 9 + len) break;
        const type = buf[3];
        const flags = buf[4];
        const id = buf.readUInt32BE(5) & 0x7fffffff;
        buf = buf.subarray(9 + len);
        if (type === T.SETTINGS && (flags & 1) === 0) sock.write(frame(T.SETTINGS, 1, 0));
        if (type === T.HEADERS && id !== busyId) pending.push(id);
        if (type === T.DATA && len > 0) {
          // the uploader's window back at once (connection and stream)
          const inc = Buffer.alloc(4);
          inc.writeUInt32BE(len);
          sock.write(Buffer.concat([frame(T.WINDOW_UPDATE, 0, 0, inc), frame(T.WINDOW_UPDATE, 0, id, inc)]));
        }
      }
      if (pending.length >= 2) {
        let ping = 0;
        for (const id of pending) sock.write(Buffer.concat([frame(T.PING, 0, 0, Buffer.alloc(8, ++ping)), ...shape(id)]));
        pending = [];
      }
    });
  };
  return useTls ? tls.createServer({ key, cert, ALPNProtocols: ["h2"] }, onConn) : net.createServer(onConn);
}

/** One stream's events, in the order node emitted them (repeated 'data' folded into one). */
function watch(req) {
  const ev = [];
  const add = (e) => {
    if (ev.at(-1) !== e) ev.push(e);
  };
  req.on("headers", () => add("headers(1xx)"));
  req.on("response", () => add("response"));
  req.on("data", () => add("data"));
  req.on("trailers", () => add("trailers"));
  // (whether node had closed the stream by its 'end': dojang reads that to tell END_STREAM
  // without trailers from RST_STREAM(NO_ERROR), spec §10.2 P4)
  req.on("end", () => add(req.closed ? "end(closed)" : "end"));
  req.on("aborted", () => add("aborted"));
  req.on("error", (e) => add(`error(${e.code})`));
  return new Promise((resolve) => {
    // (bounded: a stream still open after 2 s is recorded as such and destroyed)
    const t = setTimeout(() => {
      add("no close within 2 s");
      req.destroy();
    }, 2000);
    req.on("close", () => {
      clearTimeout(t);
      resolve([...ev, `close(rst ${req.rstCode})`].join(" → "));
    });
  });
}

async function run(useTls, name) {
  const server = rawServer(useTls, SHAPES[name]);
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address();
  const client = http2.connect(`${useTls ? "https" : "http"}://localhost:${port}`, { ca: cert });
  client.on("error", () => {});
  const counts = new Map();
  // The uploader: one request that keeps writing while the rounds run, as a proxy's other calls do.
  const up = client.request({ ":method": "POST", ":path": "/p.S/Upload", "content-type": "application/grpc", te: "trailers" });
  up.on("error", () => {});
  const chunk = Buffer.alloc(16 * 1024);
  let uploading = true;
  const pump = () => {
    while (uploading && up.write(chunk));
    if (uploading) up.once("drain", pump);
  };
  pump();
  for (let i = 0; i < ROUNDS; i++) {
    const orders = await Promise.all(
      [0, 1].map(() => {
        const req = client.request({ ":method": "POST", ":path": "/p.S/M", "content-type": "application/grpc", te: "trailers" });
        const w = watch(req);
        req.end(message);
        return w;
      }),
    );
    for (const o of orders) counts.set(o, (counts.get(o) ?? 0) + 1);
  }
  uploading = false;
  client.destroy();
  await new Promise((r) => server.close(r));
  console.log(`\n### ${useTls ? "TLS" : "h2c"}: ${name}`);
  for (const [o, n] of [...counts].sort((a, b) => b[1] - a[1])) console.log(`  ${String(n).padStart(3)} × ${o}`);
}

console.log(`# node ${process.version}, nghttp2 ${process.versions.nghttp2}, OpenSSL ${process.versions.openssl}; ${ROUNDS} rounds of 2 streams per shape and transport`);
try {
  for (const name of Object.keys(SHAPES)) for (const useTls of [false, true]) await run(useTls, name);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
