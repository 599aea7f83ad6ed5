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
// Hot path: a binary body passes through unchanged (no copy); the Downstream machinery (state,
// events, the request's replay) is BridgeDownstream's (bridge.ts).
import { type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Readable } from "node:stream";
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
import type { OutgoingHeaders } from "../call/headers.js";
import { BridgeDownstream } from "./bridge.js";

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

/** The CORS answer for one request (computed by the listener from its `cors` config): headers to add, or none. */
export type CorsHeaders = Readonly<Record<string, string>> | null;

/**
 * The client side of one gRPC-Web call, a Downstream (BridgeDownstream: the state flags, the
 * events, the request's replay). Over HTTP/1.1 it wraps node:http's request and response; over
 * HTTP/2 the gRPC-Web request's own ServerHttp2Stream.
 */
export class WebDownstream extends BridgeDownstream {
  /** what the access log says about the client side: "grpc-web" or "grpc-web-text" */
  readonly protocol: string;
  private readonly dec: Base64Decoder | null;
  private readonly enc: Base64Encoder | null;

  constructor(
    readonly web: WebContentType,
    req: Readable,
    h1: ServerResponse | undefined,
    h2: ServerHttp2Stream | undefined,
    private readonly cors: CorsHeaders,
  ) {
    super(req, h1, h2);
    this.protocol = web.text ? "grpc-web-text" : "grpc-web";
    this.dec = web.text ? newBase64Decoder() : null;
    this.enc = web.text ? newBase64Encoder() : null;
  }

  override onReqData(chunk: Buffer): void {
    if (this.dec === null) {
      this.emit("data", chunk);
      return;
    }
    const r = decodeBase64Chunk(this.dec, chunk);
    if (!r.ok) return this.badBody(r.error);
    if (r.bytes.length > 0) this.emit("data", Buffer.from(r.bytes.buffer, r.bytes.byteOffset, r.bytes.length));
  }

  override onReqEnd(): void {
    if (this.dec !== null) {
      const r = finishBase64(this.dec);
      if (!r.ok) return this.badBody(r.error);
    }
    this.endRequest();
  }

  private badBody(why: string): void {
    this.src.pause();
    this.call?.finish(outcome(Code.INTERNAL, `grpc-web-text request body: ${why}`, "bad_request"));
  }

  /** Headers now; the status follows as the trailer frame at end(). */
  protected respondHead(head: OutgoingHeaders): void {
    this.sendHead(this.webHead(head));
  }

  /**
   * Trailers-Only: the status in the head (what grpc-web#962 asks CORS to expose) and again as a
   * trailer frame, the one place every gRPC-Web client reads it from.
   */
  protected respondTrailersOnly(head: OutgoingHeaders): void {
    const out = this.webHead(head);
    const body = this.encode(encodeTrailerFrame(statusFields(head)), true);
    this.sendHead(out);
    this.writableEnded = true;
    this.endSink(body);
  }

  /** The upstream's head as gRPC-Web's: HTTP/2-only fields left out, the gRPC-Web content type, CORS. */
  private webHead(head: OutgoingHeaders): Record<string, string | string[]> {
    const out: Record<string, string | string[]> = {};
    for (const name in head) {
      if (name.charCodeAt(0) === 58 /* : */ || NOT_DOWNSTREAM.has(name)) continue;
      const v = head[name]!;
      out[name] = typeof v === "number" ? String(v) : v;
    }
    out["content-type"] = webResponseContentType(this.web);
    if (this.cors !== null) Object.assign(out, this.cors);
    return out;
  }

  private sendHead(out: Record<string, string | string[]>): void {
    if (this.h1 !== undefined) {
      this.h1.writeHead(200, out);
      // Send the head now: a server stream's first message may be a while away.
      this.h1.flushHeaders();
    } else this.h2!.respond({ ":status": 200, ...out });
  }

  write(chunk: Buffer, cb?: (err?: Error | null) => void): boolean {
    return this.writeSink(this.enc === null ? chunk : this.encode(chunk, false), cb);
  }

  /** end() without trailers: the body ends with no trailer frame. */
  protected endWithoutStatus(): void {
    this.endSink(undefined);
  }

  /** The status as the trailer frame at the end of the body. */
  protected answerTrailers(t: OutgoingHeaders): void {
    this.endSink(this.encode(encodeTrailerFrame(fieldsOf(t)), true));
  }

  private encode(bytes: Uint8Array, final: boolean): Buffer {
    const u = this.enc === null ? bytes : encodeBase64Chunk(this.enc, bytes, final);
    return Buffer.from(u.buffer, u.byteOffset, u.length);
  }
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
