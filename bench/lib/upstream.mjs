// The one fast upstream every peer forwards to: raw node:http2 (no grpc-js), h2c.
//   /bench.Echo/Unary   echoes the framed request body once the request has ended (so a client
//                       that never ends its request holds the call open: the memory shapes)
//   /bench.Echo/Stream  answers with N messages of 64 KiB (N from the `bench-messages` request
//                       header, default 16), then trailers grpc-status 0
//   anything else       Trailers-Only grpc-status 12 (UNIMPLEMENTED)
// Windows are as big as HTTP/2 allows so the upstream is never the flow-control limit.
// A plain HTTP/1.1 control port serves GET /stats (JSON counters) for the harness.
//
// usage: node upstream.mjs --port P --control-port C [--grace-ms MS]   (prints one JSON line {"ready":...})
import http from "node:http";
import http2 from "node:http2";
import { parseArgs } from "node:util";
import { STREAM_COUNT_HEADER, STREAM_MESSAGE_BYTES, STREAM_PATH, UNARY_PATH, frame } from "./grpc.mjs";

const { values: args } = parseArgs({
  options: {
    port: { type: "string", default: "0" },
    "control-port": { type: "string", default: "0" },
    host: { type: "string", default: "127.0.0.1" },
    "grace-ms": { type: "string", default: "200" },
  },
});

const MAX_WINDOW = 2 ** 31 - 1;
const CONNECTION_WINDOW = 2 ** 30;
const MSG64 = frame(STREAM_MESSAGE_BYTES, 0x62);
const DEFAULT_STREAM_MESSAGES = 16;

const stats = {
  /** streams accepted */
  started: 0,
  /** calls answered with grpc-status 0 (counted when the response starts) */
  calls: 0,
  /** streams currently open (the memory shapes wait for this to reach N) */
  active: 0,
  sessions: 0,
  sessionsTotal: 0,
  unimplemented: 0,
  streamMessages: 0,
  bytesIn: 0,
  bytesOut: 0,
  errors: 0,
};

const kBody = Symbol("body");
const kLeft = Symbol("left");

function okHeaders() {
  return { ":status": 200, "content-type": "application/grpc" };
}
function onWantTrailers() {
  this.sendTrailers({ "grpc-status": "0" });
}
function onStreamError() {
  stats.errors++;
}
function onStreamClose() {
  stats.active--;
}

// --- unary echo ---
function onUnaryData(chunk) {
  const b = this[kBody];
  if (b === undefined) this[kBody] = chunk;
  else if (Array.isArray(b)) b.push(chunk);
  else this[kBody] = [b, chunk];
}
function onUnaryEnd() {
  if (this.destroyed || this.closed) return;
  let b = this[kBody];
  if (b === undefined) b = Buffer.alloc(0);
  else if (Array.isArray(b)) b = Buffer.concat(b);
  this[kBody] = undefined;
  stats.calls++;
  stats.bytesIn += b.length;
  stats.bytesOut += b.length;
  this.respond(okHeaders(), { waitForTrailers: true });
  this.end(b);
}

// --- server streaming ---
function onStreamEnd() {
  if (this.destroyed || this.closed) return;
  stats.calls++;
  this.respond(okHeaders(), { waitForTrailers: true });
  pump(this);
}
function pump(s) {
  while (s[kLeft] > 0) {
    if (s.destroyed || s.closed) return;
    s[kLeft]--;
    stats.streamMessages++;
    stats.bytesOut += MSG64.length;
    if (!s.write(MSG64)) {
      s.once("drain", onPumpDrain);
      return;
    }
  }
  s.end();
}
function onPumpDrain() {
  pump(this);
}

const server = http2.createServer({
  settings: {
    initialWindowSize: MAX_WINDOW,
    maxConcurrentStreams: 1_000_000,
    maxHeaderListSize: 1 << 20,
    enablePush: false,
  },
  maxSessionMemory: 4096,
  maxHeaderListPairs: 4000,
  // nginx opens one upstream connection per in-flight call: allow plenty of sessions.
  peerMaxConcurrentStreams: 1_000_000,
});
server.on("session", (s) => {
  stats.sessions++;
  stats.sessionsTotal++;
  s.on("error", () => stats.errors++);
  s.once("close", () => stats.sessions--);
  s.once("localSettings", () => {
    try {
      s.setLocalWindowSize(CONNECTION_WINDOW);
    } catch {
      /* closing */
    }
  });
});
server.on("sessionError", () => stats.errors++);
server.on("stream", (stream, headers) => {
  stats.started++;
  stats.active++;
  stream.on("error", onStreamError);
  stream.once("close", onStreamClose);
  const path = headers[":path"];
  if (path === UNARY_PATH) {
    stream.on("data", onUnaryData);
    stream.once("end", onUnaryEnd);
    stream.once("wantTrailers", onWantTrailers);
  } else if (path === STREAM_PATH) {
    const n = Number(headers[STREAM_COUNT_HEADER] ?? DEFAULT_STREAM_MESSAGES);
    stream[kLeft] = Number.isSafeInteger(n) && n >= 0 && n <= 100_000 ? n : DEFAULT_STREAM_MESSAGES;
    stream.on("data", noop);
    stream.once("end", onStreamEnd);
    stream.once("wantTrailers", onWantTrailers);
  } else {
    stats.unimplemented++;
    stream.resume();
    stream.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": "12", "grpc-message": `unknown method ${path}` }, { endStream: true });
  }
});
function noop() {}

const control = http.createServer((req, res) => {
  if (req.url === "/stats") {
    const body = JSON.stringify({ ...stats, rss: process.memoryUsage.rss() });
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
    res.end(body);
  } else {
    res.writeHead(404).end();
  }
});
control.keepAliveTimeout = 60_000;

// nginx opens one upstream connection per in-flight call (10,000 for held-10k): a deep
// accept queue, or the kernel drops and resets the excess.
server.listen({ port: Number(args.port), host: args.host, backlog: 8192 }, () => {
  control.listen(Number(args["control-port"]), args.host, () => {
    process.stdout.write(JSON.stringify({ ready: true, port: server.address().port, controlPort: control.address().port, pid: process.pid }) + "\n");
  });
});

// SIGTERM is a graceful stop, as a pod's: GOAWAY to every client session (calls in flight
// finish, new ones go elsewhere), the port closes, and the process exits once the sessions are
// gone (at most --grace-ms later).
const sessions = new Set();
server.on("session", (s) => {
  sessions.add(s);
  s.once("close", () => sessions.delete(s));
});
const stop = () => {
  server.close();
  control.close();
  for (const s of sessions) if (!s.closed && !s.destroyed) s.close();
  for (const s of [server, control]) s.unref?.();
  const exitWhenIdle = setInterval(() => sessions.size === 0 && process.exit(0), 10);
  exitWhenIdle.unref();
  setTimeout(() => process.exit(0), Number(args["grace-ms"])).unref();
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
