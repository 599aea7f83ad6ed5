// The third kind of client side: a Connect request (connectrpc.com/docs/protocol), unary (POST
// application/proto or application/json, or GET with the message in the query) or streaming
// (application/connect+<codec>), over HTTP/2 on the listener's port or HTTP/1.1 on http1Address,
// drives the same Call as a native gRPC stream, as gRPC-Web does (grpc-web.ts): ConnectDownstream
// implements the Downstream contract and translates; the upstream sees a gRPC call. Pure parts in
// src/translate/connect.ts.
//
// - codec: the upstream gets application/grpc (proto) or application/grpc+<codec> (json): dojang
//   does not convert JSON to protobuf, so a JSON client needs an upstream that takes the json codec
//   (grpc-go with a json codec registered, connect-go, the conformance reference server).
// - unary request: the bare body becomes one gRPC message; with a content-length it is prefixed at
//   once and streams through unchanged, without one it is buffered to its end (bounded by
//   MAX_UNARY_BODY). A compressed body (content-encoding) is one compressed gRPC message (flag 1,
//   grpc-encoding), so dojang never decompresses; connect-timeout-ms becomes grpc-timeout, so the
//   deadline budget, its cap by the route's timeout, and the upstream's grpc-timeout are the
//   native path's.
// - unary response: the status decides the HTTP status, so the answer waits for the trailers:
//   the one message is held (the response-message limit bounds it) and sent bare with the head's
//   metadata as headers and the trailers as trailer-<name>; an error is the code's HTTP status and
//   Connect's error JSON (details from grpc-status-details-bin).
// - streaming: envelopes pass through unchanged both ways (gRPC's flag 1 is Connect's compressed
//   flag); the trailers become the end-of-stream envelope (flag 0x02, JSON error and metadata);
//   a Trailers-Only reply is HTTP 200 with that one envelope.
import type { IncomingHttpHeaders, ServerHttp2Stream } from "node:http2";
import type { ServerResponse } from "node:http";
import type { Readable } from "node:stream";
import { Code, MESSAGE_PREFIX_BYTES, decodeGrpcMessage, outcome, parseGrpcStatus, prefixAcross, writePrefix } from "../../translate/index.js";
import {
  CONNECT_REQUEST_ONLY,
  GRPC_RESPONSE_ONLY,
  REQUEST_RENAMES,
  RESPONSE_ENCODING,
  connectErrorFor,
  connectHttpStatus,
  connectLocalHttpStatus,
  connectResponseContentType,
  encodeEndStream,
  grpcContentType,
  grpcTimeoutForConnect,
  parseConnectTimeout,
  isConnectGet,
  parseConnectContentType,
  parseGetQuery,
  type ConnectContentType,
} from "../../translate/connect.js";
import type { OutgoingHeaders } from "../call/headers.js";
import { BridgeDownstream, BridgeHead, bridgeHead, endH2With, ignore, startCall, type Bridge } from "./bridge.js";
import { responseCors, type CorsHeaders } from "./cors.js";

/**
 * A unary body without content-length is held to its end: at most the route's
 * maxRequestMessageBytes, and never more than this.
 */
const MAX_UNARY_BODY = 64 * 1024 * 1024;

/** One Connect request as the listener classified it. */
export interface ConnectRequest {
  readonly ct: ConnectContentType;
  /** the GET form: the message from the query (the body is empty) */
  readonly getBody: Uint8Array | null;
  /** unary: the body's compression (content-encoding, or the GET's compression), null = identity */
  readonly encoding: string | null;
  /** unary: the body's declared length, or -1 (buffered to its end) */
  readonly contentLength: number;
}

/** The client side of one Connect call: a BridgeDownstream that translates (see the file comment). */
export class ConnectDownstream extends BridgeDownstream {
  /** the access log's protocol: "connect" (unary, POST or GET) or "connect-stream" */
  readonly protocol: string;
  /** unary request: bytes seen (with content-length) or the buffered chunks (without) */
  private reqSeen = 0;
  private reqChunks: Buffer[] | null = null;
  private prefixed = false;
  /** unary response: the head's metadata and encoding, and the message bytes, until the trailers */
  private head: Record<string, string | string[]> | null = null;
  private encoding: string | undefined = undefined;
  private resChunks: Buffer[] = [];

  constructor(
    readonly req: ConnectRequest,
    src: Readable,
    h1: ServerResponse | undefined,
    h2: ServerHttp2Stream | undefined,
    private readonly cors: CorsHeaders,
  ) {
    super(src, h1, h2);
    this.protocol = req.ct.kind === "unary" ? "connect" : "connect-stream";
    if (req.ct.kind === "unary" && req.getBody === null && req.contentLength < 0) this.reqChunks = [];
  }

  override onReqData(chunk: Buffer): void {
    const r = this.req;
    if (r.ct.kind === "stream") {
      this.emit("data", chunk);
      return;
    }
    if (r.getBody !== null) return; // a GET has no body
    if (this.reqChunks !== null) {
      this.reqSeen += chunk.length;
      // held to its end: no more than the route's message limit (the call has its route by now)
      const limit = Math.min(MAX_UNARY_BODY, this.owner?.route?.maxRequestMessageBytes ?? MAX_UNARY_BODY);
      if (this.reqSeen > limit) {
        this.src.pause();
        this.reqChunks = null;
        this.owner?.finish(outcome(Code.RESOURCE_EXHAUSTED, `grpc: received message larger than max (${this.reqSeen} vs. ${limit})`, "message_too_large"));
        return;
      }
      this.reqChunks.push(chunk);
      return;
    }
    this.reqSeen += chunk.length;
    if (this.reqSeen > r.contentLength) return this.badBody(`request body longer than its content-length ${r.contentLength}`);
    if (!this.prefixed) this.emitPrefix(r.contentLength);
    this.emit("data", chunk);
  }

  override onReqEnd(): void {
    const r = this.req;
    if (r.ct.kind === "unary") {
      if (r.getBody !== null) {
        this.emitPrefix(r.getBody.length);
        if (r.getBody.length > 0) this.emit("data", view(r.getBody));
      } else if (this.reqChunks !== null) {
        this.emitPrefix(this.reqSeen);
        for (const c of this.reqChunks) this.emit("data", c);
        this.reqChunks = null;
      } else {
        if (this.reqSeen !== r.contentLength) return this.badBody(`request body of ${this.reqSeen} bytes, content-length ${r.contentLength}`);
        if (!this.prefixed) this.emitPrefix(0);
      }
    }
    this.endRequest();
  }

  private emitPrefix(length: number): void {
    this.prefixed = true;
    const p = Buffer.allocUnsafe(MESSAGE_PREFIX_BYTES);
    writePrefix(p, 0, this.req.encoding !== null ? 1 : 0, length);
    this.emit("data", p);
  }

  private badBody(why: string): void {
    this.src.pause();
    this.owner?.finish(outcome(Code.INVALID_ARGUMENT, `connect request body: ${why}`, "bad_request"));
  }

  /** Unary: the head's metadata is kept until the status; streaming: the head goes out now. */
  protected respondHead(head: OutgoingHeaders): void {
    const meta = metadataOf(head);
    this.keepEncoding(head);
    if (this.req.ct.kind === "unary") this.head = meta;
    else this.answerHead(200, this.streamHead(head, meta));
  }

  /** Trailers-Only: the head is the status and the trailers. */
  protected respondTrailersOnly(head: OutgoingHeaders): void {
    this.keepEncoding(head);
    this.writableEnded = true;
    if (this.req.ct.kind === "unary") this.finishUnary({}, head);
    else {
      this.answerHead(200, this.streamHead(head, {}));
      this.endSink(view(endStreamOf(head)));
    }
  }

  private keepEncoding(head: OutgoingHeaders): void {
    const enc = head["grpc-encoding"];
    this.encoding = enc === undefined ? undefined : String(enc);
  }

  private streamHead(head: OutgoingHeaders, meta: Record<string, string | string[]>): Record<string, string | string[]> {
    const out = meta;
    out["content-type"] = connectResponseContentType(this.req.ct);
    const names = RESPONSE_ENCODING.stream;
    const enc = head["grpc-encoding"];
    if (enc !== undefined) out[names.encoding] = String(enc);
    const acc = head["grpc-accept-encoding"];
    if (acc !== undefined) out[names.accept] = String(acc);
    return out;
  }

  /** Unary: the answer, once the status is known (trailers, or a Trailers-Only head). `leading`: the head's metadata, this call's own (the answer's head is built in it). */
  private finishUnary(leading: Record<string, string | string[]>, trailers: OutgoingHeaders): void {
    const code = parseGrpcStatus(trailers["grpc-status"] === undefined ? undefined : String(trailers["grpc-status"]));
    const out = leading;
    const tmeta = metadataOf(trailers);
    for (const n in tmeta) out[`trailer-${n}`] = tmeta[n]!;
    let status = code ?? Code.UNKNOWN;
    let message = code === undefined ? "upstream response without a valid grpc-status" : decodeGrpcMessage(str(trailers["grpc-message"]));
    // the one message, as the chunks it came in (a view of each: never joined into one copy)
    const chunks = this.resChunks;
    let ok = false;
    let compressed = false;
    if (status === Code.OK) {
      let total = 0;
      for (const c of chunks) total += c.length;
      const p = { flag: 0, length: 0 };
      if (!prefixAcross(chunks, p) || total !== MESSAGE_PREFIX_BYTES + p.length) {
        status = Code.INTERNAL;
        message = total === 0 ? "unary call: the upstream sent no response message" : "unary call: the upstream sent more than one response message";
      } else {
        compressed = (p.flag & 1) === 1;
        ok = true;
      }
    }
    this.resChunks = [];
    if (this.cors !== null) Object.assign(out, this.cors);
    if (ok) {
      out["content-type"] = connectResponseContentType(this.req.ct);
      if (compressed && this.encoding !== undefined) out[RESPONSE_ENCODING.unary.encoding] = this.encoding;
      this.answerHead(200, out);
      this.endMessage(chunks);
      return;
    }
    const err = connectErrorFor(status, message, trailers["grpc-status-details-bin"] === undefined ? undefined : str(trailers["grpc-status-details-bin"]));
    out["content-type"] = "application/json";
    this.answerHead(connectLocalHttpStatus(status, this.owner?.decidedBy), out);
    this.endSink(Buffer.from(JSON.stringify(err)));
  }

  /** Sends the held message without its prefix, the last piece with the end. */
  private endMessage(chunks: readonly Buffer[]): void {
    let skip = MESSAGE_PREFIX_BYTES;
    for (let i = 0; i < chunks.length; i++) {
      const c = chunks[i]!;
      const piece = skip === 0 ? c : c.subarray(Math.min(skip, c.length));
      skip = Math.max(0, skip - c.length);
      if (i === chunks.length - 1) this.endSink(piece);
      else if (piece.length > 0) this.writeSink(piece);
    }
  }

  /** The answer's head (a stream's with CORS, sent at once over HTTP/1.1: its messages may be a while away). */
  private answerHead(status: number, out: Record<string, string | string[]>): void {
    const stream = this.req.ct.kind === "stream";
    if (stream && this.cors !== null) Object.assign(out, this.cors);
    this.sendHead(status, out, stream);
  }

  write(chunk: Buffer, cb?: (err?: Error | null) => void): boolean {
    if (this.req.ct.kind === "unary") {
      this.resChunks.push(chunk);
      if (cb !== undefined) process.nextTick(cb);
      return true;
    }
    return this.writeSink(chunk, cb);
  }

  /** end() with no status: INTERNAL, in the unary or the streaming form. */
  protected endWithoutStatus(): void {
    if (this.req.ct.kind === "unary") this.finishUnary(this.head ?? {}, { "grpc-status": String(Code.INTERNAL), "grpc-message": "response ended without a status" });
    else this.endSink(view(encodeEndStream(connectErrorFor(Code.INTERNAL, "response ended without a status"), [])));
  }

  /** The status: the unary answer, or the end-of-stream envelope. */
  protected answerTrailers(t: OutgoingHeaders): void {
    if (this.req.ct.kind === "unary") this.finishUnary(this.head ?? {}, t);
    else this.endSink(view(endStreamOf(t)));
  }
}

/** A Buffer over the same bytes (Buffer.from(Uint8Array) would copy them). */
function view(u: Uint8Array): Buffer {
  return Buffer.from(u.buffer, u.byteOffset, u.length);
}
function one(v: string | string[] | undefined): string | undefined {
  return typeof v === "string" ? v : undefined;
}
function str(v: string | number | readonly string[] | undefined): string {
  if (v === undefined) return "";
  return Array.isArray(v) ? String(v[0] ?? "") : String(v);
}
/** A gRPC head or trailer block's metadata (gRPC's own fields and pseudo-headers left out). */
function metadataOf(h: OutgoingHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const name in h) {
    if (name.charCodeAt(0) === 58 || GRPC_RESPONSE_ONLY.has(name)) continue;
    const v = h[name]!;
    out[name] = Array.isArray(v) ? [...(v as string[])] : String(v);
  }
  return out;
}

/** The end-of-stream envelope for a trailer block (or a Trailers-Only head). */
function endStreamOf(t: OutgoingHeaders): Uint8Array {
  const code = parseGrpcStatus(t["grpc-status"] === undefined ? undefined : String(t["grpc-status"]));
  // the metadata as name/value pairs, straight from the block (metadataOf's record is not needed)
  const fields: [string, string][] = [];
  for (const name in t) {
    if (name.charCodeAt(0) === 58 || GRPC_RESPONSE_ONLY.has(name)) continue;
    const v = t[name]!;
    if (Array.isArray(v)) for (const x of v as string[]) fields.push([name, x]);
    else fields.push([name, String(v)]);
  }
  if (code === Code.OK) return encodeEndStream(null, fields);
  const details = t["grpc-status-details-bin"];
  const err = code === undefined
    ? connectErrorFor(Code.UNKNOWN, "upstream response without a valid grpc-status")
    : connectErrorFor(code, decodeGrpcMessage(str(t["grpc-message"])), details === undefined ? undefined : str(details));
  return encodeEndStream(err, fields);
}

// === entry points: the listener hands a Connect request here ===

export type Classified = { readonly ok: true; readonly req: ConnectRequest; readonly path: string } | { readonly ok: false; readonly kind: "unary" | "stream"; readonly codec: string; readonly error: string };

/**
 * A request's Connect form from its method, path (with query) and content type, or null when it
 * is not Connect (the listener goes on to the native call). A Connect request with a bad query or
 * an unknown protocol version is classified with its error (answered without a call).
 */
export function classifyConnect(method: string, path: string, h: IncomingHttpHeaders): Classified | null {
  const ct = parseConnectContentType(h["content-type"]);
  const v = one(h["connect-protocol-version"]);
  if (method === "GET") {
    const q = path.indexOf("?");
    if (q < 0) return null;
    const query = path.slice(q + 1);
    if (!isConnectGet(query)) return null;
    const g = parseGetQuery(query);
    if (!g.ok) return { ok: false, kind: "unary", codec: "json", error: g.error };
    const gct: ConnectContentType = { kind: "unary", codec: g.codec };
    if (g.codec !== "proto" && g.codec !== "json") return { ok: false, kind: "unary", codec: "json", error: `encoding "${g.codec}" is not proto or json` };
    return { ok: true, path: path.slice(0, q), req: { ct: gct, getBody: g.message, encoding: g.compression, contentLength: -1 } };
  }
  if (ct === null || method !== "POST") return null;
  if (v !== undefined && v !== "1") return { ok: false, kind: ct.kind, codec: ct.codec, error: `connect-protocol-version must be "1": got "${v.slice(0, 32)}"` };
  const ce = ct.kind === "unary" ? one(h["content-encoding"])?.trim().toLowerCase() : undefined;
  const cl = ct.kind === "unary" ? one(h["content-length"]) : undefined;
  const len = cl !== undefined && /^[0-9]{1,15}$/.test(cl) ? Number(cl) : -1;
  return { ok: true, path, req: { ct, getBody: null, encoding: ce === undefined || ce === "" || ce === "identity" ? null : ce, contentLength: len } };
}

/** What Connect's field rule needs of the request: its kind (unary or streaming). */
function connectField(h: BridgeHead, name: string, value: string, r: ConnectRequest): boolean {
  if (name === "connect-timeout-ms") {
    const t = parseConnectTimeout(value);
    if (!t.ok) h.error = t.error;
    else h.add("grpc-timeout", grpcTimeoutForConnect(t.ms));
    return true;
  }
  const renamed = REQUEST_RENAMES[r.ct.kind][name];
  if (renamed !== undefined) {
    // unary's encoding was added first; identity is no encoding at all (gRPC would read it as a name)
    if (!(renamed === "grpc-encoding" && (r.ct.kind === "unary" || value.trim().toLowerCase() === "identity"))) h.add(renamed, value);
    return true;
  }
  // Connect's own fields, and a gRPC deadline a Connect client does not send (connect-timeout-ms is its)
  return CONNECT_REQUEST_ONLY.has(name) || name === "grpc-timeout";
}

/**
 * The request head (bridge.ts bridgeHead): the URL read as the method, the gRPC content type, the
 * encodings renamed, connect-timeout-ms as grpc-timeout, Connect's own fields dropped. A bad
 * connect-timeout-ms is an error string.
 */
function connectHead(path: string, authority: string | undefined, r: ConnectRequest, raw: readonly string[], h2: boolean): BridgeHead | string {
  // unary: the body's encoding is the one message's (a GET names it in its query): first, as a
  // rename would have put it
  const withEncoding = r.encoding === null ? raw : ["grpc-encoding", r.encoding, ...raw];
  const h = bridgeHead(path, true, authority, grpcContentType(r.ct.codec), withEncoding, h2, connectField, r);
  return h.error ?? h;
}

/** Answers a Connect request dojang refuses before any call (bad query, timeout, protocol version). */
function refuse(kind: "unary" | "stream", codec: string, code: number, message: string, send: (status: number, head: Record<string, string>, body: Buffer) => void, cors: CorsHeaders): void {
  const err = connectErrorFor(code, message);
  if (kind === "unary") send(connectHttpStatus(code), { ...cors, "content-type": "application/json" }, Buffer.from(JSON.stringify(err)));
  else send(200, { ...cors, "content-type": `application/connect+${codec}` }, view(encodeEndStream(err, [])));
}

/** What a request is refused for before any call: its kind and codec (the answer's form), and why. */
type Refusal = { readonly kind: "unary" | "stream"; readonly codec: string; readonly error: string };

/** The call's head, or why the request is refused before any call (its query, its protocol version, its timeout). */
function prepare(c: Classified, authority: string | undefined, raw: readonly string[], h2: boolean): BridgeHead | Refusal {
  if (!c.ok) return c;
  const h = connectHead(c.path, authority, c.req, raw, h2);
  return typeof h === "string" ? { kind: c.req.ct.kind, codec: c.req.ct.codec, error: h } : h;
}

type Send = (status: number, head: Record<string, string>, body: Buffer) => void;

function h2Send(stream: ServerHttp2Stream): Send {
  return (status, head, body) => {
    stream.on("error", ignore);
    stream.respond({ ":status": status, ...head });
    endH2With(stream, body);
  };
}

function h1Send(res: ServerResponse): Send {
  return (status, head, body) => {
    res.writeHead(status, head);
    res.end(body);
  };
}

function classifyH2(h: IncomingHttpHeaders): Classified | null {
  const p = h[":path"];
  return classifyConnect(String(h[":method"] ?? ""), typeof p === "string" ? p : "", h);
}

// === the row's bridge: how the listener's table (dispatch.ts) takes a Connect request ===

export const CONNECT_BRIDGE: Bridge<Classified> = {
  classifyH2: (_l, h) => classifyH2(h),
  serveH2(l, c, stream, h, raw) {
    const origin = h["origin"];
    const cors = responseCors(l.cors, typeof origin === "string" ? origin : undefined);
    const a = h[":authority"] ?? h["host"];
    const p = prepare(c, typeof a === "string" ? a : undefined, raw, true);
    if (p instanceof BridgeHead) startCall(l.ctx, new ConnectDownstream((c as { req: ConnectRequest }).req, stream, undefined, stream, cors), p);
    else refuse(p.kind, p.codec, Code.INVALID_ARGUMENT, p.error, h2Send(stream), cors);
  },
  classifyH1: (_l, req) => classifyConnect(req.method ?? "", req.url ?? "", req.headers),
  serveH1(l, c, req, res) {
    const cors = responseCors(l.cors, req.headers.origin);
    const p = prepare(c, req.headers.host, req.rawHeaders, false);
    if (p instanceof BridgeHead) startCall(l.ctx, new ConnectDownstream((c as { req: ConnectRequest }).req, req, res, undefined, cors), p);
    else refuse(p.kind, p.codec, Code.INVALID_ARGUMENT, p.error, h1Send(res), cors);
  },
  /** 14 UNAVAILABLE in Connect's form (unary: the error JSON with its HTTP status; streaming: the end-of-stream envelope). */
  refuseH1(l, c, req, res, message) {
    const kind = c.ok ? c.req.ct.kind : c.kind;
    const codec = c.ok ? c.req.ct.codec : c.codec;
    refuse(kind, codec, Code.UNAVAILABLE, message, h1Send(res), responseCors(l.cors, req.headers.origin));
  },
  ownsType: (ct) => parseConnectContentType(ct) !== null,
};
