// The second kind of client side: a gRPC-Web request (application/grpc-web, +proto, -text;
// HTTP/1.1 through the listener's http1Address server, or HTTP/2 on its h2c port) drives the same
// Call as a native gRPC stream. The Call writes to its client side through the Downstream
// contract (src/proxy/call/downstream.ts), which a native ServerHttp2Stream meets as it is;
// WebDownstream implements it and translates, so deadline, routing, retries, filters, limits
// and the access log are the native path's own, and the native path is untouched.
//
// Translation (grpc/grpc doc/PROTOCOL-WEB.md; pure parts in src/translate/grpc-web.ts):
// - request: the content type becomes application/grpc(+subtype) upstream; -text bodies are
//   base64-decoded incrementally (4-character groups carried across chunks); HTTP/1.1-only
//   fields (host, connection, keep-alive, transfer-encoding...) never go upstream.
// - response: always HTTP 200 (a browser cannot read anything else through CORS: envoy#10128);
//   the head keeps the upstream's metadata with the gRPC-Web content type; the trailers become the
//   trailer frame (flag 0x80) at the end of the body. A Trailers-Only reply, from the upstream or
//   decided by dojang (no route, deadline, limits, retries exhausted, HTTP-status and reset
//   translation), goes out as headers that carry grpc-status/grpc-message AND a body holding the
//   same status as a trailer frame, so every gRPC-Web client reads it (grpc-web#962, #957).
// - -text responses are base64 with the encoder's carry, padded only at the end.
//
// Hot path: the request's 'data'/'end' listeners are module-level and find the adapter in a
// symbol slot; a binary body passes through unchanged (no copy).
import { EventEmitter } from "node:events";
import http2, { type IncomingHttpHeaders, type ServerHttp2Session, type ServerHttp2Stream } from "node:http2";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Readable } from "node:stream";
import type { TLSSocket } from "node:tls";
import { xfccOf } from "./tls.js";
import { kClientCert, kPeer, type ClientPeer } from "../call/headers.js";
import { clientPeer } from "./peer.js";
import { Code, encodeGrpcMessage, outcome } from "../../translate/index.js";
import {
  decodeBase64Chunk,
  encodeBase64Chunk,
  encodeTrailerFrame,
  finishBase64,
  newBase64Decoder,
  newBase64Encoder,
  upstreamContentType,
  webResponseContentType,
  type Base64Decoder,
  type Base64Encoder,
  type WebContentType,
} from "../../translate/grpc-web.js";
import { Call } from "../call/call.js";
import type { CallContext } from "../call/context.js";
import type { Downstream, RespondOptions } from "../call/downstream.js";
import { headerObject, type OutgoingHeaders } from "../call/headers.js";

/**
 * The fields of a Trailers-Only status that are repeated as its trailer frame: the status, and a
 * rate-limit refusal's hint (src/proxy/filters/rate-limit), which gRPC reads from trailers.
 */
const STATUS_FIELDS = new Set([
  "grpc-status", "grpc-message", "grpc-status-details-bin",
  "grpc-retry-pushback-ms", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset",
]);
/** HTTP/1.1 connection-level fields and the gRPC-Web request markers: never forwarded upstream. */
const NOT_UPSTREAM = new Set(["host", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "content-length", "content-type", "x-grpc-web", "te"]);
/** Response fields HTTP/1.1 must not carry from an HTTP/2 head (and our own content type). */
const NOT_DOWNSTREAM = new Set(["content-type", "content-length", "transfer-encoding", "connection", "keep-alive"]);

const kWeb = Symbol("dojang.grpcWeb");

/**
 * What a Call reads of its client connection (`down.session`) when that connection is HTTP/1.1:
 * the socket (a rate limit keyed by client address, a fault that drops the connection) and the
 * verified client certificate (x-forwarded-client-cert). One per socket, made at its first
 * gRPC-Web request. Over HTTP/2 the request stream's own session serves.
 */
export interface Http1Session {
  readonly socket: Socket;
  destroy(): void;
  [kClientCert]?: string;
  /** who the client is (the access record's client_address, tls_*), read once per socket */
  [kPeer]?: ClientPeer;
}
const kHttp1Session = Symbol("dojang.http1Session");
type SessionCarrier = Socket & { [kHttp1Session]?: Http1Session };

export function http1Session(socket: Socket): Http1Session {
  const c = socket as SessionCarrier;
  let s = c[kHttp1Session];
  if (s === undefined) {
    s = { socket, destroy: () => socket.destroy(), [kPeer]: clientPeer(socket) };
    // a TLS socket (ALPN http/1.1 on a TLS listener) with a client certificate the CA verified
    if ((socket as TLSSocket).encrypted === true) {
      const xfcc = xfccOf(socket as TLSSocket);
      if (xfcc !== undefined) s[kClientCert] = xfcc;
    }
    c[kHttp1Session] = s;
  }
  return s;
}
type Carrier = Readable & { [kWeb]?: WebDownstream };

/** The CORS answer for one request (computed by the listener from its `cors` config): headers to add, or none. */
export type CorsHeaders = Readonly<Record<string, string>> | null;

/**
 * The client side of one gRPC-Web call, a Downstream (respond, write, end, sendTrailers, close,
 * pause/resume, the state flags, and the 'data', 'end', 'drain', 'wantTrailers', 'close', 'error'
 * events). Over HTTP/1.1 it wraps node:http's request and response; over HTTP/2 the gRPC-Web
 * request's own ServerHttp2Stream.
 */
export class WebDownstream extends EventEmitter implements Downstream {
  /** what the access log says about the client side: "grpc-web" or "grpc-web-text" */
  readonly protocol: string;
  readonly id: number | undefined = undefined;
  /** the client connection: the HTTP/2 session, or the HTTP/1.1 socket's stand-in */
  readonly session: ServerHttp2Session | Http1Session | undefined;
  closed = false;
  destroyed = false;
  aborted = false;
  headersSent = false;
  writableEnded = false;
  readableEnded = false;
  rstCode: number | undefined = undefined;
  call: Call | undefined = undefined;
  private readonly dec: Base64Decoder | null;
  private readonly enc: Base64Encoder | null;
  private trailersWanted = false;
  private hooked = false;

  constructor(
    readonly web: WebContentType,
    private readonly req: Readable,
    private readonly h1: ServerResponse | undefined,
    private readonly h2: ServerHttp2Stream | undefined,
    private readonly cors: CorsHeaders,
  ) {
    super();
    this.protocol = web.text ? "grpc-web-text" : "grpc-web";
    this.dec = web.text ? newBase64Decoder() : null;
    this.enc = web.text ? newBase64Encoder() : null;
    this.session = h2 !== undefined ? h2.session : h1 !== undefined ? http1Session(h1.socket ?? (req as IncomingMessage).socket) : undefined;
    (req as Carrier)[kWeb] = this;
    // The request body flows only once the Call listens for it (after its attempt is open).
    this.on("newListener", onNewListener);
    const sink: EventEmitter = h1 ?? h2!;
    (sink as Carrier)[kWeb] = this;
    sink.on("close", onSinkClose);
    sink.on("drain", onSinkDrain);
    sink.on("error", ignore);
    req.on("error", ignore);
  }

  hookRequest(): void {
    if (this.hooked) return;
    this.hooked = true;
    // An empty request can have ended already: node may read its END_STREAM (and emit 'end',
    // with no listener) while the call waits for its upstream session, the first call to a new
    // upstream. That 'end' is gone, so it is replayed; without it the upstream never got
    // END_STREAM and the call hung until its deadline (the conformance suite's no-request cases).
    if (this.req.readableEnded) {
      process.nextTick(replayEnd, this);
      return;
    }
    this.req.on("data", onReqData);
    this.req.on("end", onReqEnd);
  }

  onReqData(chunk: Buffer): void {
    if (this.dec === null) {
      this.emit("data", chunk);
      return;
    }
    const r = decodeBase64Chunk(this.dec, chunk);
    if (!r.ok) return this.badBody(r.error);
    if (r.bytes.length > 0) this.emit("data", Buffer.from(r.bytes.buffer, r.bytes.byteOffset, r.bytes.length));
  }

  onReqEnd(): void {
    if (this.dec !== null) {
      const r = finishBase64(this.dec);
      if (!r.ok) return this.badBody(r.error);
    }
    this.readableEnded = true;
    this.emit("end");
  }

  private badBody(why: string): void {
    this.req.pause();
    this.call?.finish(outcome(Code.INTERNAL, `grpc-web-text request body: ${why}`, "bad_request"));
  }

  pause(): this {
    this.req.pause();
    return this;
  }

  resume(): this {
    this.req.resume();
    return this;
  }

  /** The response head: Trailers-Only when `endStream`, else headers now and the trailer frame at end(). */
  respond(h: OutgoingHeaders | readonly string[], opts?: RespondOptions): void {
    if (this.headersSent) throw new Error("response head already sent");
    // (the Call gives a flat list only to a native stream; a filter may give either)
    const head = isList(h) ? headerObject(h) : h;
    const out: Record<string, string | string[]> = {};
    for (const name in head) {
      if (name.charCodeAt(0) === 58 /* : */ || NOT_DOWNSTREAM.has(name)) continue;
      const v = head[name]!;
      out[name] = typeof v === "number" ? String(v) : v;
    }
    out["content-type"] = webResponseContentType(this.web);
    if (this.cors !== null) Object.assign(out, this.cors);
    this.headersSent = true;
    if (opts?.endStream === true) {
      // Trailers-Only: the status in the head (what grpc-web#962 asks CORS to expose) and again
      // as a trailer frame, the one place every gRPC-Web client reads it from.
      const body = this.encode(encodeTrailerFrame(statusFields(head)), true);
      this.sendHead(out);
      this.writableEnded = true;
      this.endSink(body);
      return;
    }
    this.trailersWanted = opts?.waitForTrailers === true;
    this.sendHead(out);
  }

  private sendHead(out: Record<string, string | string[]>): void {
    if (this.h1 !== undefined) {
      this.h1.writeHead(200, out);
      // Send the head now: a server stream's first message may be a while away.
      this.h1.flushHeaders();
    } else this.h2!.respond({ ":status": 200, ...out });
  }

  /** Bytes queued for the client and not yet taken by its socket (the response-buffer guard reads it, observe/overload.ts). */
  get writableLength(): number {
    return this.h1 !== undefined ? this.h1.writableLength : this.h2!.writableLength;
  }

  write(chunk: Buffer, cb?: (err?: Error | null) => void): boolean {
    const b = this.enc === null ? chunk : this.encode(chunk, false);
    if (cb === undefined) return this.h1 !== undefined ? this.h1.write(b) : this.h2!.write(b);
    return this.h1 !== undefined ? this.h1.write(b, cb) : this.h2!.write(b, cb);
  }

  /**
   * Ends the response body; the status follows as the trailer frame. A last piece (only a fault
   * filter's raw `http` reply passes one) is not gRPC-Web and is dropped: respond() already
   * answered that reply with a gRPC-Web head.
   */
  end(_chunk?: Buffer | string): this {
    if (this.writableEnded) return this;
    this.writableEnded = true;
    // The Call ends its side, then supplies the status in 'wantTrailers' (as node:http2 does).
    if (this.trailersWanted) process.nextTick(emitWantTrailers, this);
    else this.endSink(undefined);
    return this;
  }

  sendTrailers(t: OutgoingHeaders): void {
    if (!this.trailersWanted) throw new Error("trailers not expected");
    this.trailersWanted = false;
    this.endSink(this.encode(encodeTrailerFrame(fieldsOf(t)), true));
  }

  /**
   * node:http2's close(code): NO_ERROR after the response is complete (grpc-go's early server
   * closure) only stops reading a request the client still sends; any other code cuts the
   * response short (the client reads a broken body, as a browser would a reset).
   */
  close(code?: number): void {
    if (code === http2.constants.NGHTTP2_NO_ERROR && this.writableEnded) {
      this.req.resume(); // let what is left drain away
      return;
    }
    if (this.closed) return;
    this.rstCode = code;
    if (this.h1 !== undefined) this.h1.destroy();
    else this.h2!.close(code);
  }

  private encode(bytes: Uint8Array, final: boolean): Buffer {
    const u = this.enc === null ? bytes : encodeBase64Chunk(this.enc, bytes, final);
    return Buffer.from(u.buffer, u.byteOffset, u.length);
  }

  private endSink(last: Buffer | undefined): void {
    if (this.h1 !== undefined) {
      if (last === undefined) this.h1.end();
      else this.h1.end(last);
    } else if (last === undefined) this.h2!.end();
    else this.h2!.end(last);
  }

  onSinkClose(): void {
    if (this.closed) return;
    this.closed = true;
    this.destroyed = true;
    const complete = this.h1 !== undefined ? this.h1.writableFinished : this.h2!.rstCode === http2.constants.NGHTTP2_NO_ERROR && this.writableEnded;
    if (!complete) {
      this.aborted = true;
      this.rstCode ??= this.h2?.rstCode ?? http2.constants.NGHTTP2_CANCEL;
    } else this.rstCode ??= http2.constants.NGHTTP2_NO_ERROR;
    this.emit("close");
  }
}

function ignore(): void {}
function isList(h: OutgoingHeaders | readonly string[]): h is readonly string[] {
  return Array.isArray(h);
}
function onNewListener(this: WebDownstream, event: string | symbol): void {
  if (event === "data") this.hookRequest();
}
function onReqData(this: Carrier, chunk: Buffer): void {
  this[kWeb]!.onReqData(chunk);
}
function replayEnd(w: WebDownstream): void {
  w.onReqEnd();
}
function onReqEnd(this: Carrier): void {
  this[kWeb]!.onReqEnd();
}
function onSinkClose(this: Carrier): void {
  this[kWeb]!.onSinkClose();
}
function onSinkDrain(this: Carrier): void {
  this[kWeb]!.emit("drain");
}
function emitWantTrailers(w: WebDownstream): void {
  if (!w.closed) w.emit("wantTrailers");
}

/** A header block's fields as name/value pairs (arrays as repeated fields), pseudo-headers left out. */
function fieldsOf(t: OutgoingHeaders): [string, string][] {
  const out: [string, string][] = [];
  for (const name in t) {
    if (name.charCodeAt(0) === 58) continue;
    const v = t[name]!;
    if (Array.isArray(v)) for (const x of v) out.push([name, x]);
    else out.push([name, String(v)]);
  }
  return out;
}

/** The status fields of a Trailers-Only head (the trailer frame that repeats it). */
function statusFields(head: OutgoingHeaders): [string, string][] {
  const out: [string, string][] = [];
  for (const name of STATUS_FIELDS) {
    const v = head[name];
    if (v !== undefined) out.push([name, String(v)]);
  }
  return out;
}

// === entry points: the listener hands a gRPC-Web request here ===

/**
 * The request head the Call reads, as node:http2 would have parsed it for the native call:
 * pseudo-headers, the native content type, and the forwardable fields as flat raw pairs
 * (names lower-cased; HTTP/1.1 connection fields dropped).
 */
function nativeHead(method: string, path: string, authority: string | undefined, web: WebContentType, raw: readonly string[]): { headers: IncomingHttpHeaders; raw: string[] } {
  const ct = upstreamContentType(web);
  const headers: IncomingHttpHeaders = { ":method": method, ":path": path, ":scheme": "http", "content-type": ct };
  if (authority !== undefined) headers[":authority"] = authority;
  const out: string[] = [":method", method, ":path", path, "content-type", ct];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (name.charCodeAt(0) === 58 || NOT_UPSTREAM.has(name)) continue;
    const value = raw[i + 1]!;
    out.push(name, value);
    if (name === "grpc-timeout" || name === "x-request-id" || name === "grpc-previous-rpc-attempts") headers[name] = value;
  }
  return { headers, raw: out };
}

function startCall(ctx: CallContext, w: WebDownstream, headers: IncomingHttpHeaders, raw: string[]): void {
  const call = new Call(ctx, w, headers, w.protocol);
  w.call = call;
  call.start(headers, 0, raw);
}

/** A gRPC-Web request over HTTP/1.1 (the listener's http1Address server). Content type already checked. */
export function handleWebHttp1(ctx: CallContext, web: WebContentType, req: IncomingMessage, res: ServerResponse, cors: CorsHeaders): void {
  const w = new WebDownstream(web, req, res, undefined, cors);
  const n = nativeHead(req.method ?? "", req.url ?? "", req.headers.host, web, req.rawHeaders);
  startCall(ctx, w, n.headers, n.raw);
}

/**
 * Refuses a gRPC-Web request over HTTP/1.1 before any call is made, as a Trailers-Only gRPC-Web
 * response (HTTP 200, the status in the headers and again as the trailer frame, CORS exposed):
 * what REFUSED_STREAM is on HTTP/2 (the overload manager's refusal), in a shape a browser reads.
 */
export function refuseWebHttp1(web: WebContentType, res: ServerResponse, cors: CorsHeaders, code: Code, message: string): void {
  const fields: [string, string][] = [
    ["grpc-status", String(code)],
    ["grpc-message", encodeGrpcMessage(message)],
  ];
  const frame = encodeTrailerFrame(fields);
  const body = web.text ? encodeBase64Chunk(newBase64Encoder(), frame, true) : frame;
  res.writeHead(200, { ...cors, "content-type": webResponseContentType(web), ...Object.fromEntries(fields) });
  res.end(Buffer.from(body.buffer, body.byteOffset, body.length));
}

/** A gRPC-Web request on the h2c listener (HTTP/2). */
export function handleWebHttp2(ctx: CallContext, web: WebContentType, stream: ServerHttp2Stream, h: IncomingHttpHeaders, raw: readonly string[], cors: CorsHeaders): void {
  const w = new WebDownstream(web, stream, undefined, stream, cors);
  const p = h[":path"];
  const a = h[":authority"] ?? h["host"];
  const n = nativeHead(String(h[":method"] ?? ""), typeof p === "string" ? p : "", typeof a === "string" ? a : undefined, web, raw);
  startCall(ctx, w, n.headers, n.raw);
}
