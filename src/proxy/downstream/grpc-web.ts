// The second kind of client side: a gRPC-Web request (application/grpc-web, +proto, -text;
// HTTP/1.1 through the listener's http1Address server, or HTTP/2 on its h2c port) drives the same
// Call as a native gRPC stream. The Call writes to its client side through the Downstream
// contract (src/proxy/call/downstream.ts), which a native ServerHttp2Stream meets as it is;
// WebDownstream implements it and translates, so deadline, routing, retries, filters, limits
// and the access log are the native path's own, and the native path is untouched.
//
// Translation (grpc/grpc doc/PROTOCOL-WEB.md; pure parts in src/translate/grpc-web.ts):
// - request: the content type becomes application/grpc(+subtype) upstream; -text bodies are
//   base64-decoded incrementally (4-character groups carried across chunks); the head is
//   bridge.ts's bridgeHead (hop-by-hop fields never go upstream), less x-grpc-web.
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
import type { ServerHttp2Stream } from "node:http2";
import type { ServerResponse } from "node:http";
import type { Readable } from "node:stream";
import { Code, encodeGrpcMessage, outcome } from "../../translate/index.js";
import {
  decodeBase64Chunk,
  encodeBase64Chunk,
  encodeTrailerFrame,
  finishBase64,
  newBase64Decoder,
  newBase64Encoder,
  parseWebContentType,
  upstreamContentType,
  webResponseContentType,
  type Base64Decoder,
  type Base64Encoder,
  type WebContentType,
} from "../../translate/grpc-web.js";
import type { OutgoingHeaders } from "../call/headers.js";
import { BridgeDownstream, bridgeHead, startCall, type Bridge, type BridgeHead } from "./bridge.js";
import { responseCors, type CorsHeaders } from "./cors.js";

/**
 * The fields of a Trailers-Only status that are repeated as its trailer frame: the status, and a
 * rate-limit refusal's hint (src/proxy/filters/rate-limit), which gRPC reads from trailers.
 */
const STATUS_FIELDS = new Set([
  "grpc-status", "grpc-message", "grpc-status-details-bin",
  "grpc-retry-pushback-ms", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset",
]);
/** Response fields HTTP/1.1 must not carry from an HTTP/2 head (and our own content type). */
const NOT_DOWNSTREAM = new Set(["content-type", "content-length", "transfer-encoding", "connection", "keep-alive"]);


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
    this.owner?.finish(outcome(Code.INTERNAL, `grpc-web-text request body: ${why}`, "bad_request"));
  }

  /** Headers now; the status follows as the trailer frame at end(). */
  protected respondHead(head: OutgoingHeaders): void {
    this.sendHead(200, this.webHead(head), true);
  }

  /**
   * Trailers-Only: the status in the head (what grpc-web#962 asks CORS to expose) and again as a
   * trailer frame, the one place every gRPC-Web client reads it from.
   */
  protected respondTrailersOnly(head: OutgoingHeaders): void {
    const out = this.webHead(head);
    const body = this.encode(encodeTrailerFrame(statusFields(head)), true);
    this.sendHead(200, out, true);
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

// === the row's bridge: how the listener's table (dispatch.ts) takes a gRPC-Web request ===

/** gRPC-Web's own request fields (beside its content type): never forwarded. */
function webField(_h: BridgeHead, name: string): boolean {
  return name === "x-grpc-web";
}

function head(web: WebContentType, method: string, target: string, authority: string | undefined, raw: readonly string[], h2: boolean): BridgeHead {
  return bridgeHead(target, false, authority, upstreamContentType(web), raw, h2, webField, undefined, method);
}

function contentTypeOf(v: string | string[] | undefined): string | undefined {
  return typeof v === "string" ? v : undefined;
}

export const GRPC_WEB_BRIDGE: Bridge<WebContentType> = {
  // (any method: a call whose :method is not POST is answered 405 by the Call, in gRPC-Web's form)
  classifyH2: (_l, h) => parseWebContentType(contentTypeOf(h["content-type"])),
  serveH2(l, web, stream, h, raw) {
    const origin = h["origin"];
    const w = new WebDownstream(web, stream, undefined, stream, responseCors(l.cors, typeof origin === "string" ? origin : undefined));
    const p = h[":path"];
    const a = h[":authority"] ?? h["host"];
    // (the client's :method: the Call answers one that is not POST with 405, in gRPC-Web's form)
    startCall(l.ctx, w, head(web, String(h[":method"] ?? ""), typeof p === "string" ? p : "", typeof a === "string" ? a : undefined, raw, true));
  },
  // HTTP/1.1: POST only (another method with a gRPC-Web content type is the listener's 405)
  classifyH1: (_l, req) => (req.method === "POST" ? parseWebContentType(req.headers["content-type"]) : null),
  serveH1(l, web, req, res) {
    const w = new WebDownstream(web, req, res, undefined, responseCors(l.cors, req.headers.origin));
    startCall(l.ctx, w, head(web, "POST", req.url ?? "", req.headers.host, req.rawHeaders, false));
  },
  /**
   * A Trailers-Only gRPC-Web response (HTTP 200, the status in the headers and again as the
   * trailer frame, CORS exposed): what REFUSED_STREAM is on HTTP/2, in a shape a browser reads.
   */
  refuseH1(l, web, req, res, message) {
    const fields: [string, string][] = [
      ["grpc-status", String(Code.UNAVAILABLE)],
      ["grpc-message", encodeGrpcMessage(message)],
    ];
    const frame = encodeTrailerFrame(fields);
    const body = web.text ? encodeBase64Chunk(newBase64Encoder(), frame, true) : frame;
    res.writeHead(200, { ...responseCors(l.cors, req.headers.origin), "content-type": webResponseContentType(web), ...Object.fromEntries(fields) });
    res.end(Buffer.from(body.buffer, body.byteOffset, body.length));
  },
  ownsType: (ct) => parseWebContentType(ct) !== null,
};
