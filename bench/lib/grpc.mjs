// gRPC-over-HTTP/2 helpers shared by the bench upstream, the bench clients and the harness's
// pre-flight checks. Raw node:http2 only (no grpc-js): the point is to measure the proxy, not a
// client library.
import http2 from "node:http2";

export const UNARY_PATH = "/bench.Echo/Unary";
export const STREAM_PATH = "/bench.Echo/Stream";
/** Request header telling the upstream how many 64 KiB messages a Stream call answers with. */
export const STREAM_COUNT_HEADER = "bench-messages";
export const STREAM_MESSAGE_BYTES = 64 * 1024;

/** One length-prefixed gRPC message (flag 0 = uncompressed) with `size` payload bytes. */
export function frame(size, fill = 0x61) {
  const b = Buffer.alloc(5 + size, fill);
  b[0] = 0;
  b.writeUInt32BE(size, 1);
  return b;
}

export function grpcRequestHeaders(path, authority, extra = {}) {
  return {
    ":method": "POST",
    ":scheme": "http",
    ":path": path,
    ":authority": authority,
    "content-type": "application/grpc",
    te: "trailers",
    ...extra,
  };
}

/** Big windows so a bench client is never the flow-control limit. */
export const CLIENT_SETTINGS = { initialWindowSize: 2 ** 31 - 1, enablePush: false };
export const BIG_CONNECTION_WINDOW = 2 ** 30;

export function connect(url, opts = {}) {
  const s = http2.connect(url, { settings: CLIENT_SETTINGS, maxSessionMemory: 1024, ...opts });
  s.once("connect", () => {
    try {
      s.setLocalWindowSize(BIG_CONNECTION_WINDOW);
    } catch {
      /* closing */
    }
  });
  return s;
}

export function waitConnect(session, timeoutMs = 5000) {
  return new Promise((resolve, reject) => {
    if (session.connecting === false && !session.destroyed) return resolve(session);
    const t = setTimeout(() => reject(new Error(`connect timeout after ${timeoutMs}ms`)), timeoutMs);
    session.once("connect", () => {
      clearTimeout(t);
      resolve(session);
    });
    session.once("error", (err) => {
      clearTimeout(t);
      reject(err);
    });
  });
}

/**
 * One gRPC call on `session`: sends `body` (already framed), resolves with
 * { status (HTTP), grpcStatus, grpcMessage, body (Buffer of the framed response), messages }.
 */
export function call(session, path, body, { authority = "bench", headers = {}, timeoutMs = 10_000 } = {}) {
  return new Promise((resolve, reject) => {
    const req = session.request(grpcRequestHeaders(path, authority, headers), { endStream: false });
    const chunks = [];
    let status;
    let grpcStatus;
    let grpcMessage;
    const t = setTimeout(() => {
      req.close(http2.constants.NGHTTP2_CANCEL);
      reject(new Error(`call ${path} timed out after ${timeoutMs}ms`));
    }, timeoutMs);
    let attempts;
    req.on("response", (h) => {
      status = h[":status"];
      // dojang's optional x-dojang-attempts response header (the chaos run's histogram)
      if (h["x-dojang-attempts"] !== undefined) attempts = Number(h["x-dojang-attempts"]);
      if (h["grpc-status"] !== undefined) {
        grpcStatus = h["grpc-status"];
        grpcMessage = h["grpc-message"];
      }
    });
    req.on("trailers", (h) => {
      grpcStatus = h["grpc-status"];
      grpcMessage = h["grpc-message"];
    });
    req.on("data", (c) => chunks.push(c));
    req.on("error", (err) => {
      clearTimeout(t);
      reject(err);
    });
    req.on("close", () => {
      clearTimeout(t);
      const b = Buffer.concat(chunks);
      resolve({ status, grpcStatus, grpcMessage, body: b, messages: countMessages(b), rstCode: req.rstCode, attempts });
    });
    req.end(body);
  });
}

/** Number of complete length-prefixed messages in a buffer (-1 if it does not parse). */
export function countMessages(b) {
  let n = 0;
  let i = 0;
  while (i + 5 <= b.length) {
    const len = b.readUInt32BE(i + 1);
    i += 5 + len;
    if (i > b.length) return -1;
    n++;
  }
  return i === b.length ? n : -1;
}
