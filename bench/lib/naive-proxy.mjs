// The straightforward node:http2 gRPC proxy the issue's table measured as "a 60-line node:http2
// proxy (one session, pipe)": one upstream session, every call piped both ways, trailers
// forwarded, nothing else (no status synthesis, no deadline, no limits, no metrics, no logs).
// It is here as the yardstick dojang must beat, and as node:http2's own cost: its RSS and its
// KiB per idle connection are what any node:http2 proxy pays before doing anything.
//
//   node bench/lib/naive-proxy.mjs <listen port> <upstream url> [window bytes]
// With a window (run.mjs --naive-window): both sessions advertise it as their stream window and
// open their connection window to it, so a long stream is held by node:http2's own work, not by
// a window: the floor a node:http2 proxy's MiB costs.
import http2 from "node:http2";

const [port, upstreamUrl, windowArg] = process.argv.slice(2);
const window = windowArg === undefined ? undefined : Number(windowArg);
const settings = window === undefined ? {} : { settings: { initialWindowSize: window } };
const openWindow = (s) => {
  if (window !== undefined && window > 65535) s.setLocalWindowSize(window);
};
if (!port || !upstreamUrl) {
  process.stderr.write("usage: naive-proxy.mjs <listen port> <upstream url>\n");
  process.exit(2);
}

let session;
function upstream() {
  if (session === undefined || session.closed || session.destroyed) {
    session = http2.connect(upstreamUrl, settings);
    session.on("error", () => {});
    session.once("connect", openWindow);
  }
  return session;
}

const HOP = new Set(["connection", "keep-alive", "transfer-encoding", "upgrade", "proxy-connection"]);
function copy(headers, drop) {
  const out = {};
  for (const k of Object.keys(headers)) if (!drop.has(k) && !HOP.has(k)) out[k] = headers[k];
  return out;
}
const REQ_DROP = new Set([":scheme"]);
const RESP_DROP = new Set([]);

const server = http2.createServer(settings);
server.on("session", (s) => s.once("connect", openWindow));
server.on("stream", (down, headers) => {
  const up = upstream().request(copy(headers, REQ_DROP));
  let trailers;
  down.pipe(up);
  up.on("response", (h) => {
    if (!down.closed) down.respond(copy(h, RESP_DROP), { waitForTrailers: true });
  });
  up.on("trailers", (t) => (trailers = copy(t, RESP_DROP)));
  down.on("wantTrailers", () => down.sendTrailers(trailers ?? { "grpc-status": "13", "grpc-message": "no trailers" }));
  up.pipe(down);
  up.on("error", () => {
    if (!down.headersSent && !down.closed) down.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": "14" }, { endStream: true });
    else down.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
  });
  down.on("error", () => up.close(http2.constants.NGHTTP2_CANCEL));
  down.on("close", () => {
    if (!up.closed) up.close(http2.constants.NGHTTP2_CANCEL);
  });
});
server.on("sessionError", () => {});
server.listen(Number(port), "127.0.0.1");
process.on("SIGTERM", () => process.exit(0));
