// Services that misbehave on purpose, for dojang's side calls (the rate-limit service, the
// authorization service, a JWKS server): each listens on its own loopback port and does one wrong
// thing to every request, written with raw node:http2, node:https and node:net so that
// no client library's idea of a well-behaved peer gets in the way. Each counts what reached it.
import http2 from "node:http2";
import type { IncomingMessage, ServerResponse } from "node:http";
import https from "node:https";
import net, { type AddressInfo } from "node:net";
import { randomBytes } from "node:crypto";
import type { CertFiles } from "./certs.js";

export interface Misbehaving {
  readonly name: string;
  /** "127.0.0.1:port" */
  readonly address: string;
  /** requests (or, for the connection-level ones, connections) that reached it */
  readonly hits: () => number;
  close(): Promise<void>;
}

/** RST_STREAM codes 0..13 by name (RFC 9113 §7). */
export const RST_CODES: readonly (readonly [string, number])[] = [
  ["NO_ERROR", 0], ["PROTOCOL_ERROR", 1], ["INTERNAL_ERROR", 2], ["FLOW_CONTROL_ERROR", 3], ["SETTINGS_TIMEOUT", 4],
  ["STREAM_CLOSED", 5], ["FRAME_SIZE_ERROR", 6], ["REFUSED_STREAM", 7], ["CANCEL", 8], ["COMPRESSION_ERROR", 9],
  ["CONNECT_ERROR", 10], ["ENHANCE_YOUR_CALM", 11], ["INADEQUATE_SECURITY", 12], ["HTTP_1_1_REQUIRED", 13],
];

function listen(server: net.Server): Promise<string> {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(`127.0.0.1:${(server.address() as AddressInfo).port}`)));
}

/** Closes `server` and destroys what it still holds (a hanging peer keeps its sockets open). */
function closer(server: net.Server, sockets: Set<net.Socket>): () => Promise<void> {
  return () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    });
}

function track(server: net.Server, sockets: Set<net.Socket>): void {
  server.on("connection", (s: net.Socket) => {
    sockets.add(s);
    s.on("error", () => {});
    s.on("close", () => sockets.delete(s));
  });
}

/** A gRPC message frame (5-byte prefix) claiming `claimed` bytes and carrying `payload`. */
function grpcFrame(payload: Buffer, claimed = payload.length): Buffer {
  const b = Buffer.alloc(5);
  b.writeUInt32BE(claimed, 1);
  return Buffer.concat([b, payload]);
}

type StreamBehaviour = (stream: http2.ServerHttp2Stream, session: http2.Http2Session) => void;

/** The gRPC services' misbehaviours at the HTTP/2 stream level (node:http2 server, h2c). */
export const H2_BEHAVIOURS: Readonly<Record<string, StreamBehaviour>> = {
  ...Object.fromEntries(RST_CODES.map(([name, code]) => [`reset ${name}`, (s: http2.ServerHttp2Stream) => s.close(code)])),
  "hangs (no answer)": () => {},
  "answers headers, then hangs": (s) => s.respond({ ":status": 200, "content-type": "application/grpc" }),
  "half-closes (headers with END_STREAM, no status)": (s) => s.respond({ ":status": 200, "content-type": "application/grpc" }, { endStream: true }),
  "answers an undecodable message": (s) => {
    s.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
    s.once("wantTrailers", () => s.sendTrailers({ "grpc-status": "0" }));
    s.end(grpcFrame(Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f])));
  },
  "answers the wrong content-type": (s) => {
    s.respond({ ":status": 200, "content-type": "text/html" });
    s.end("<html>not gRPC</html>");
  },
  "answers HTTP 503": (s) => s.respond({ ":status": 503 }, { endStream: true }),
  "cuts a message short (prefix says 100 bytes, 10 sent, then END_STREAM)": (s) => {
    s.respond({ ":status": 200, "content-type": "application/grpc" });
    s.end(grpcFrame(Buffer.alloc(10), 100));
  },
  "closes the connection mid-call": (_s, session) => session.socket.destroy(),
  "sends GOAWAY PROTOCOL_ERROR after the stream, then hangs": (s, session) => session.goaway(1, s.id ?? 1),
};

/**
 * A well-begun HTTP/2 connection (the client's preface read, SETTINGS both ways), written frame by
 * frame: `onHeaders` runs for each HEADERS frame the client sends.
 */
function rawH2(s: net.Socket, onHeaders: () => void): void {
  let buf = Buffer.alloc(0);
  let preface = 24;
  let spoke = false;
  s.on("data", (d: Buffer) => {
    buf = Buffer.concat([buf, d]);
    if (preface > 0) {
      const n = Math.min(preface, buf.length);
      buf = buf.subarray(n);
      preface -= n;
      if (preface > 0) return;
    }
    if (!spoke) {
      spoke = true;
      s.write(Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0])); // SETTINGS (empty)
    }
    while (buf.length >= 9) {
      const len = buf.readUIntBE(0, 3);
      if (buf.length < 9 + len) return;
      const type = buf[3]!;
      const flags = buf[4]!;
      if (type === 4 && (flags & 1) === 0) s.write(Buffer.from([0, 0, 0, 4, 1, 0, 0, 0, 0])); // ACK their SETTINGS
      if (type === 1) onHeaders();
      buf = buf.subarray(9 + len);
    }
  });
}

/** Misbehaviours at the connection level (node:net): below HTTP/2. */
export const NET_BEHAVIOURS: Readonly<Record<string, (s: net.Socket) => void>> = {
  "answers garbage bytes instead of HTTP/2": (s) => s.write(randomBytes(1024)),
  "half-closes the TCP connection (FIN) after the request": (s) => s.once("data", () => s.end()),
  "resets the TCP connection": (s) => s.resetAndDestroy(),
  "accepts and never speaks": () => {},
  // a well-begun HTTP/2 connection (SETTINGS both ways) that turns to garbage when the call comes
  "writes garbage bytes into the connection mid-call": (s) => rawH2(s, () => s.write(randomBytes(256))),
  // GOAWAY(NO_ERROR, last-stream-id 0) for the call's HEADERS: the call was not processed (a
  // frame of its own: node's session.goaway(0, 0) sends the last stream it processed instead of 0)
  "sends GOAWAY (last stream 0) and keeps the connection": (s) => rawH2(s, () => s.write(Buffer.from([0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]))),
  // SETTINGS, then a HEADERS frame whose header says 100 bytes and only 5 come
  "sends an HTTP/2 frame cut short": (s) =>
    s.once("data", () => s.write(Buffer.concat([Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]), Buffer.from([0, 0, 100, 1, 4, 0, 0, 0, 1]), Buffer.alloc(5)]))),
};

/** A gRPC "service" on h2c that does `name` (from H2_BEHAVIOURS or NET_BEHAVIOURS) to each request. */
export async function startMisbehavingGrpc(name: string): Promise<Misbehaving> {
  let hits = 0;
  const sockets = new Set<net.Socket>();
  const h2 = H2_BEHAVIOURS[name];
  if (h2 !== undefined) {
    const server = http2.createServer();
    track(server, sockets);
    server.on("sessionError", () => {});
    server.on("stream", (stream, _headers) => {
      hits++;
      stream.on("error", () => {});
      stream.resume();
      h2(stream, stream.session!);
    });
    const address = await listen(server);
    return { name, address, hits: () => hits, close: closer(server, sockets) };
  }
  const raw = NET_BEHAVIOURS[name];
  if (raw === undefined) throw new Error(`no behaviour ${name}`);
  const server = net.createServer((s) => {
    hits++;
    raw(s);
  });
  track(server, sockets);
  const address = await listen(server);
  return { name, address, hits: () => hits, close: closer(server, sockets) };
}

type HttpsBehaviour = (req: IncomingMessage, res: ServerResponse) => void;

/** A JWKS server's misbehaviours over HTTPS (HTTP/1.1: GOAWAY has no counterpart). */
export const HTTPS_BEHAVIOURS: Readonly<Record<string, HttpsBehaviour>> = {
  "hangs (no answer)": () => {},
  "answers headers, then hangs": (_q, r) => r.writeHead(200, { "content-type": "application/json" }).flushHeaders(),
  "trickles one byte every 50 ms (never idle for the timeout)": (_q, r) => {
    r.writeHead(200, { "content-type": "application/json" });
    const t = setInterval(() => (r.destroyed ? clearInterval(t) : r.write(" ")), 50);
    r.on("close", () => clearInterval(t));
  },
  "half-closes (FIN) after the request": (q) => q.socket.end(),
  "answers the wrong content-type (an HTML page)": (_q, r) => r.writeHead(200, { "content-type": "text/html" }).end("<html>login</html>"),
  "answers JSON that is not a JWKS": (_q, r) => r.writeHead(200, { "content-type": "application/json" }).end('{"hello":"world"}'),
  "answers HTTP 503": (_q, r) => r.writeHead(503).end(),
  "cuts the body short (content-length 1000, 10 sent, connection closed)": (q, r) => {
    r.writeHead(200, { "content-type": "application/json", "content-length": "1000" });
    r.write('{"keys":[ ');
    setTimeout(() => q.socket.destroy(), 20);
  },
  "cuts the body short (content-length 1000, 10 sent, then hangs)": (_q, r) => {
    r.writeHead(200, { "content-type": "application/json", "content-length": "1000" });
    r.write('{"keys":[ ');
  },
  "closes the connection mid-response (chunked body, no last chunk)": (q, r) => {
    r.writeHead(200, { "content-type": "application/json" });
    r.write('{"keys":[');
    setTimeout(() => q.socket.destroy(), 20);
  },
  "answers more than 1 MiB": (_q, r) => {
    r.writeHead(200, { "content-type": "application/json" });
    r.end(`{"keys":[],"pad":"${"x".repeat(1_100_000)}"}`);
  },
};

/** Below HTTPS: the TLS handshake itself goes wrong. */
export const TLS_NET_BEHAVIOURS: Readonly<Record<string, (s: net.Socket) => void>> = {
  "answers garbage bytes instead of TLS": (s) => s.write(randomBytes(1024)),
  "resets the TCP connection": (s) => s.resetAndDestroy(),
  "accepts and never speaks (TLS handshake hangs)": () => {},
};

/** A JWKS "server" at https://127.0.0.1:<port>/jwks.json that does `name` to each request. */
export async function startMisbehavingJwks(name: string, cert: CertFiles): Promise<Misbehaving & { readonly url: string }> {
  let hits = 0;
  const sockets = new Set<net.Socket>();
  const b = HTTPS_BEHAVIOURS[name];
  let server: net.Server;
  if (b !== undefined) {
    const s = https.createServer({ cert: cert.cert, key: cert.key }, (req, res) => {
      hits++;
      res.on("error", () => {});
      b(req, res);
    });
    s.on("tlsClientError", () => {});
    s.keepAliveTimeout = 0;
    server = s;
  } else {
    const raw = TLS_NET_BEHAVIOURS[name];
    if (raw === undefined) throw new Error(`no behaviour ${name}`);
    server = net.createServer((sock) => {
      hits++;
      raw(sock);
    });
  }
  track(server, sockets);
  const address = await listen(server);
  return { name, address, url: `https://${address}/jwks.json`, hits: () => hits, close: closer(server, sockets) };
}
