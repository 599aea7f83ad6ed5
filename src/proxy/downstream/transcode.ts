// The third kind of client side: a JSON/HTTP request (HTTP/2 on the listener's port, HTTP/1.1 on
// http1Address) that matches a google.api.http rule of the listener's descriptor set
// (jsonTranscoding) drives a Call as a native gRPC stream to the rule's /pkg.Service/Method.
// As for gRPC-Web (grpc-web.ts), the Call writes to its client side through the Downstream
// contract; JsonDownstream implements it and translates, so routing, deadline, retries, filters,
// limits and the access log are the native path's own.
//
// - request: the JSON body is read whole (at most maxBodyBytes) and, with the path's variables and
//   the query, becomes one request message (src/translate/transcode.ts), sent as one gRPC frame.
//   A body or parameter that does not fit the message is answered 400 here, with no call made.
// - response (unary): the one message is held until the trailers; grpc-status 0 answers 200 with
//   its JSON, any other status the standard HTTP status with a google.rpc.Status JSON body. A
//   google.api.HttpBody response is answered as its own bytes with its content type (streamed:
//   each message's bytes in turn, the first one's content type).
// - response (server streaming): 200 at the first message, then each message as it comes, as
//   one JSON array ("array") or a JSON object a line ("ndjson"). A status other than OK after
//   the first message: "ndjson" writes {"error": Status} as the last line; "array" cuts the
//   response (RST_STREAM / the HTTP/1.1 connection closed) so a client never reads a
//   well-formed, truncated array as a whole one.
//
// Nothing here runs for a listener without jsonTranscoding (the listener tests one field).
import { readFileSync } from "node:fs";
import http2, { type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Readable } from "node:stream";
import type { JsonTranscodingConfig } from "../../config/index.js";
import { Code, decodeGrpcMessage, frameMessage, normalizeTarget, outcome, type NormalizedTarget } from "../../translate/index.js";
import { DescriptorError, TranscodeInputError, Transcoder, httpStatusOfCode, type RuleMatch, type TranscodeRule } from "../../translate/transcode.js";
import { Call } from "../call/call.js";
import type { CallContext } from "../call/context.js";
import type { OutgoingHeaders } from "../call/headers.js";
import { BridgeDownstream, ignore } from "./bridge.js";

/** What a listener keeps of its jsonTranscoding: the config and the compiled descriptor set. */
export interface JsonTranscoding {
  readonly cfg: JsonTranscodingConfig;
  readonly transcoder: Transcoder;
}

/** Reads and compiles the descriptor set; throws an Error that names the file and the problem. */
export function loadJsonTranscoding(cfg: JsonTranscodingConfig): JsonTranscoding {
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(cfg.descriptorSet);
  } catch (err) {
    throw new Error(`jsonTranscoding.descriptorSet ${JSON.stringify(cfg.descriptorSet)}: ${(err as Error).message}`);
  }
  try {
    return { cfg, transcoder: new Transcoder(bytes, { emitDefaults: cfg.emitDefaults, ignoreUnknownFields: cfg.ignoreUnknownFields }) };
  } catch (err) {
    if (err instanceof DescriptorError) throw new Error(`jsonTranscoding.descriptorSet ${JSON.stringify(cfg.descriptorSet)}: ${err.message}`);
    throw err;
  }
}

const JSON_TYPE = "application/json";
/** Request fields that never go upstream: HTTP/1.1 connection fields, the body's own, and gRPC's framing fields. */
const NOT_UPSTREAM = new Set([
  "host", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "content-length", "content-type", "te",
  "accept-encoding", "grpc-encoding", "grpc-accept-encoding", "http2-settings",
]);
/** Upstream response fields not repeated in the JSON response. */
const NOT_DOWNSTREAM = new Set(["content-type", "content-length", "transfer-encoding", "connection", "keep-alive", "grpc-encoding", "grpc-accept-encoding", "grpc-status", "grpc-message", "grpc-status-details-bin", "trailer"]);

/** May this request be transcoded? Not when its content type is one of gRPC's (native or gRPC-Web). */
export function takesJson(ct: string | undefined): boolean {
  return ct === undefined || ct.length < 16 || ct.slice(0, 16).toLowerCase() !== "application/grpc";
}

/**
 * The client side of one transcoded call (a BridgeDownstream). Over HTTP/1.1 it wraps node:http's
 * response; over HTTP/2 the request's own ServerHttp2Stream. The request body was read whole
 * before the call: the Call is given the one frame made of it.
 */
export class JsonDownstream extends BridgeDownstream {
  /** response bytes not yet cut into messages (views of the chunks as they came), their total, and what the next message needs */
  private pending: Buffer[] | null = null;
  private pendingBytes = 0;
  private needed = 5;
  /** unary: the response message */
  private message: Uint8Array | null = null;
  private messages = 0;
  /** the upstream's response head (or Trailers-Only status), its metadata read when the HTTP head is built */
  private upHead: OutgoingHeaders | null = null;
  /** streaming: the HTTP head went out */
  private started = false;
  private failed = false;

  constructor(
    private readonly tc: JsonTranscoding,
    private readonly rule: TranscodeRule,
    private readonly frame: Buffer,
    src: Readable,
    h1: ServerResponse | undefined,
    h2: ServerHttp2Stream | undefined,
  ) {
    super(src, h1, h2);
  }

  /** The request body is the one frame made before the call: delivered once the Call reads. */
  protected override readRequest(): void {
    process.nextTick(deliver, this);
  }

  deliverNow(): void {
    if (this.closed) return;
    this.emit("data", this.frame);
    this.endRequest();
  }

  // the body was read before the call: nothing to pause, resume or drain
  override pause(): this {
    return this;
  }

  override resume(): this {
    return this;
  }

  protected override stopReading(): void {}

  protected respondHead(head: OutgoingHeaders): void {
    this.upHead = head;
  }

  protected respondTrailersOnly(head: OutgoingHeaders): void {
    this.upHead = head;
    this.writableEnded = true;
    this.finish(head);
  }

  /** Response bytes from upstream: gRPC frames, cut into messages. */
  write(chunk: Buffer, cb?: (err?: Error | null) => void): boolean {
    let ok = true;
    let buf = chunk;
    if (this.pending !== null) {
      // a message cut across chunks is joined once, when its last byte is here (not once a chunk)
      this.pending.push(chunk);
      this.pendingBytes += chunk.length;
      if (this.pendingBytes < this.needed) {
        if (cb !== undefined) process.nextTick(cb);
        return ok;
      }
      buf = Buffer.concat(this.pending, this.pendingBytes);
      this.pending = null;
    }
    while (!this.failed && buf.length >= 5) {
      const len = buf.readUInt32BE(1);
      if (buf.length < 5 + len) break;
      if (buf[0] !== 0) {
        this.fail("a compressed response message (the transcoder asks for none)");
        break;
      }
      const msg = buf.subarray(5, 5 + len);
      buf = buf.subarray(5 + len);
      this.messages++;
      if (!this.rule.serverStreaming) {
        if (this.messages > 1) this.fail("more than one response message for a unary method");
        else this.message = msg;
      } else ok = this.streamMessage(msg) && ok;
    }
    if (buf.length > 0) {
      this.pending = [buf];
      this.pendingBytes = buf.length;
      this.needed = buf.length >= 5 ? 5 + buf.readUInt32BE(1) : 5;
    }
    if (cb !== undefined) process.nextTick(cb);
    return ok;
  }

  protected endWithoutStatus(): void {
    this.finish({ "grpc-status": String(Code.INTERNAL), "grpc-message": "response ended without a status" });
  }

  protected answerTrailers(t: OutgoingHeaders): void {
    this.finish(t);
  }

  /** close(code) before the response is complete: cut short. */
  protected override reset(): void {
    this.cut();
  }

  // === the JSON side ===

  private streamMessage(msg: Buffer): boolean {
    if (this.rule.httpBody) return this.streamHttpBody(msg);
    let text: string;
    try {
      text = this.tc.transcoder.response(this.rule, msg);
    } catch (err) {
      this.fail(`a response message that is not ${this.rule.method.output.typeName}: ${(err as Error).message}`);
      return true;
    }
    const ndjson = this.tc.cfg.streamFormat === "ndjson";
    let piece: string;
    if (!this.started) {
      this.started = true;
      this.sendHead(200);
      piece = ndjson ? text + "\n" : "[" + text;
    } else piece = ndjson ? text + "\n" : "," + text;
    return this.h1 !== undefined ? this.h1.write(piece) : this.h2!.write(piece);
  }

  /** A streamed google.api.HttpBody: each message's bytes as they come, under the first one's content type. */
  private streamHttpBody(msg: Buffer): boolean {
    let body: { contentType: string; data: Uint8Array };
    try {
      body = this.tc.transcoder.httpBody(this.rule, msg);
    } catch (err) {
      this.fail(`a response message that is not google.api.HttpBody: ${(err as Error).message}`);
      return true;
    }
    if (!this.started) {
      this.started = true;
      this.sendHead(200, body.contentType);
    }
    return this.h1 !== undefined ? this.h1.write(body.data) : this.h2!.write(body.data);
  }

  /** A response the transcoder cannot read: the call ends INTERNAL (the Call's own exit). */
  private fail(why: string): void {
    this.failed = true;
    this.call?.finish(outcome(Code.INTERNAL, `transcoding: ${why}`, "upstream_protocol"));
  }

  /** The call's status (Trailers-Only head or trailers): the HTTP answer. */
  private finish(t: OutgoingHeaders): void {
    const code = Number(t["grpc-status"] ?? Code.UNKNOWN);
    const rawMsg = t["grpc-message"];
    const message = typeof rawMsg === "string" ? decodeGrpcMessage(rawMsg) : "";
    const bin = t["grpc-status-details-bin"];
    const details = typeof bin === "string" ? Buffer.from(bin, "base64") : undefined;
    const ndjson = this.tc.cfg.streamFormat === "ndjson";
    if (this.started) {
      // streaming, head sent: close the array, or report the status after the messages
      if (code === Code.OK) this.endBody(ndjson || this.rule.httpBody ? "" : "]");
      else if (ndjson && !this.rule.httpBody) this.endBody(`{"error":${this.tc.transcoder.status(code, message, details)}}\n`);
      else this.cut();
      return;
    }
    if (code === Code.OK) {
      if (this.rule.serverStreaming) {
        this.sendHead(200);
        this.endBody(ndjson || this.rule.httpBody ? "" : "[]");
        return;
      }
      if (this.rule.httpBody && this.message !== null) {
        let raw: { contentType: string; data: Uint8Array };
        try {
          raw = this.tc.transcoder.httpBody(this.rule, this.message);
        } catch (err) {
          return this.answerStatus(Code.INTERNAL, `transcoding: a response message that is not google.api.HttpBody: ${(err as Error).message}`, undefined);
        }
        this.sendHead(200, raw.contentType);
        this.endBody(raw.data);
        return;
      }
      let body: string | null = null;
      if (this.message !== null) {
        try {
          body = this.tc.transcoder.response(this.rule, this.message);
        } catch (err) {
          return this.answerStatus(Code.INTERNAL, `transcoding: a response message that is not ${this.rule.method.output.typeName}: ${(err as Error).message}`, undefined);
        }
      }
      if (body === null) return this.answerStatus(Code.INTERNAL, "transcoding: the upstream sent no response message", undefined);
      this.sendHead(200);
      this.endBody(body);
      return;
    }
    this.answerStatus(code, message, details);
  }

  private answerStatus(code: number, message: string, details: Uint8Array | undefined): void {
    // a Status body, JSON whatever the rule streams
    this.sendHead(httpStatusOfCode(code), JSON_TYPE);
    this.endBody(this.tc.transcoder.status(code, message, details));
  }

  /** The response head; `contentType` is an HttpBody's own ("" for none). */
  private sendHead(status: number, contentType?: string): void {
    // one object: the status (HTTP/2's pseudo-header), the upstream's metadata, the content type
    const out: Record<string, string | string[] | number> = this.h1 !== undefined ? {} : { ":status": status };
    const head = this.upHead;
    if (head !== null) {
      for (const name in head) {
        if (name.charCodeAt(0) === 58 || NOT_DOWNSTREAM.has(name)) continue;
        const v = head[name]!;
        out[name] = typeof v === "number" ? String(v) : v;
      }
    }
    if (contentType === undefined) out["content-type"] = this.rule.serverStreaming && this.tc.cfg.streamFormat === "ndjson" ? "application/x-ndjson" : JSON_TYPE;
    else if (contentType !== "") out["content-type"] = contentType;
    if (this.h1 !== undefined) {
      if (this.h1.headersSent) return;
      this.h1.writeHead(status, out as Record<string, string | string[]>);
      if (this.rule.serverStreaming) this.h1.flushHeaders();
    } else if (!this.h2!.headersSent && !this.h2!.destroyed) this.h2!.respond(out);
  }

  private endBody(last: string | Uint8Array): void {
    if (this.h1 !== undefined) this.h1.end(last);
    else if (!this.h2!.destroyed) this.h2!.end(last);
  }

  /**
   * Cuts the response short: the client reads a broken body, never a complete one. (On HTTP/2,
   * close(code) after DATA would end the stream with END_STREAM before its RST_STREAM, which a
   * client reads as a complete body; destroy with an error resets it with INTERNAL_ERROR.)
   */
  private cut(): void {
    if (this.h1 !== undefined) this.h1.destroy();
    else this.h2!.destroy(new Error("transcoded response cut short"));
  }
}

/** What a request no rule takes is told (its query never shown: it may carry a credential). */
function noRule(method: string, t: NormalizedTarget): string {
  return t.ok ? `no google.api.http rule matches ${method} ${t.path}` : `the request target: ${t.error}`;
}

function deliver(d: JsonDownstream): void {
  d.deliverNow();
}

// === entry points: the listener hands a request here ===


/** The upstream head: the rule's gRPC path, the gRPC content type, the forwardable fields as flat raw pairs. */
function nativeHead(rule: TranscodeRule, authority: string | undefined, raw: readonly string[]): { headers: IncomingHttpHeaders; raw: string[] } {
  const path = rule.grpcPath;
  const ct = "application/grpc";
  const headers: IncomingHttpHeaders = { ":method": "POST", ":path": path, ":scheme": "http", "content-type": ct };
  if (authority !== undefined) headers[":authority"] = authority;
  const out: string[] = [":method", "POST", ":path", path, "content-type", ct];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (name.charCodeAt(0) === 58 || NOT_UPSTREAM.has(name)) continue;
    const value = raw[i + 1]!;
    out.push(name, value);
    if (name === "grpc-timeout" || name === "x-request-id") headers[name] = value;
  }
  return { headers, raw: out };
}

/** The request message as one gRPC frame (framing.ts's), as a Buffer over the same bytes. */
function frameOf(msg: Uint8Array): Buffer {
  const f = frameMessage(msg);
  return Buffer.from(f.buffer, f.byteOffset, f.length);
}

/** A plain answer made before any call (no rule, bad body): a google.rpc.Status JSON body. */
function statusBody(tc: JsonTranscoding, code: number, message: string): string {
  return tc.transcoder.status(code, message, undefined);
}

/** An answer on HTTP/2 made before any call (no rule, a bad or oversized body). */
function answerHttp2(stream: ServerHttp2Stream, status: number, body: string): void {
  if (stream.destroyed || stream.headersSent) return;
  stream.respond({ ":status": status, "content-type": JSON_TYPE });
  // a request still being sent (a body over the limit, a path no rule takes): once the answer
  // is out, RST_STREAM(NO_ERROR) tells the client to stop sending (RFC 9113 §8.1)
  stream.end(body, () => {
    if (!stream.closed && !stream.readableEnded) stream.close(http2.constants.NGHTTP2_NO_ERROR);
  });
}

/** The same on HTTP/1.1: a request still being sent is not read to its end, the connection closes after the answer. */
function answerHttp1(req: IncomingMessage, res: ServerResponse, status: number, body: string): void {
  if (res.headersSent) return;
  res.writeHead(status, req.complete ? { "content-type": JSON_TYPE } : { "content-type": JSON_TYPE, connection: "close" });
  res.end(body);
}

const EMPTY = Buffer.alloc(0);
const kJsonRequest = Symbol("dojang.jsonRequest");
type BodySource = Readable & { [kJsonRequest]?: JsonRequest };

/**
 * One matched request while its body is read (at most maxBodyBytes), then the request message
 * made and the call started; a bad request is answered 400/413 with no call. The same for both
 * transports (`h1`: node:http's response; else `h2`, the request's own stream). Hot path: one
 * object per request; its listeners are module-level functions that find it in one symbol slot
 * (no closure per call), and a body that comes in one chunk is used as it is (no copy).
 */
class JsonRequest {
  /** the body's first chunk, then (from a second one on) all of them */
  private first: Buffer | null = null;
  private parts: Buffer[] | null = null;
  private size = 0;
  private over = false;

  constructor(
    private readonly ctx: CallContext,
    private readonly tc: JsonTranscoding,
    private readonly m: RuleMatch,
    private readonly query: string,
    private readonly src: Readable,
    private readonly authority: string | undefined,
    private readonly raw: readonly string[],
    private readonly h1: ServerResponse | undefined,
    private readonly h2: ServerHttp2Stream | undefined,
  ) {
    src.on("error", ignore);
    if (m.rule.body === "") {
      // no body is read: whatever the client sent is drained
      src.resume();
      this.start(EMPTY);
      return;
    }
    (src as BodySource)[kJsonRequest] = this;
    src.on("data", onBodyData);
    src.on("end", onBodyEnd);
  }

  onData(c: Buffer): void {
    if (this.over) return;
    this.size += c.length;
    if (this.size > this.tc.cfg.maxBodyBytes) {
      // (the rest is not read: the answer closes the stream or the connection)
      this.over = true;
      this.src.pause();
      this.first = this.parts = null;
      this.answer(413, statusBody(this.tc, Code.INVALID_ARGUMENT, `the request body is larger than jsonTranscoding.maxBodyBytes (${this.tc.cfg.maxBodyBytes})`));
      return;
    }
    if (this.first === null) this.first = c;
    else (this.parts ??= [this.first]).push(c);
  }

  onEnd(): void {
    if (this.over) return;
    this.start(this.parts !== null ? Buffer.concat(this.parts, this.size) : (this.first ?? EMPTY));
  }

  private answer(status: number, body: string): void {
    if (this.h1 !== undefined) answerHttp1(this.src as IncomingMessage, this.h1, status, body);
    else answerHttp2(this.h2!, status, body);
  }

  private start(body: Buffer): void {
    const { tc, m } = this;
    let msg: Uint8Array;
    try {
      msg = tc.transcoder.request(m, this.query, body);
    } catch (err) {
      if (err instanceof TranscodeInputError) return this.answer(400, statusBody(tc, Code.INVALID_ARGUMENT, err.message));
      throw err;
    }
    const down = new JsonDownstream(tc, m.rule, frameOf(msg), this.src, this.h1, this.h2);
    const n = nativeHead(m.rule, this.authority, this.raw);
    const call = new Call(this.ctx, down, n.headers, "json");
    down.call = call;
    call.start(n.headers, 0, n.raw);
  }
}

function onBodyData(this: BodySource, c: Buffer): void {
  this[kJsonRequest]!.onData(c);
}

function onBodyEnd(this: BodySource): void {
  this[kJsonRequest]!.onEnd();
}

/**
 * A request on the HTTP/2 port (not gRPC, not gRPC-Web): true when it was taken (a call, or a
 * 404 under unknownPaths: notFound); false hands it on as if transcoding were off. `handOn`: the
 * listener also takes Connect and this request is a Connect call, so an unmatched one is handed on
 * (to Connect) whatever unknownPaths says.
 */
export function serveJsonHttp2(ctx: CallContext, tc: JsonTranscoding, stream: ServerHttp2Stream, h: IncomingHttpHeaders, raw: readonly string[], handOn = false): boolean {
  const target = h[":path"];
  if (typeof target !== "string") return false;
  // The URL as the rules read it: normalised as Envoy normalises a path before its route and RBAC
  // matchers see it (src/translate/grpc-path.ts normalizeTarget: percent-encoded unreserved
  // characters decoded, dot segments removed, the query split off, a fragment refused), so
  // "/v1/./secret" or "/v1/%73ecret" is the rule "/v1/secret" and meets that method's rules
  // (issue 0.5.1 item 1). The call's method is the rule's: a method path. Slashes are not merged
  // (normalizeTarget's `merge`): a path variable keeps its empty segments, as grpc-gateway's.
  const t = normalizeTarget(target, false);
  const m = t.ok ? tc.transcoder.match(String(h[":method"] ?? ""), t.path) : null;
  if (!t.ok || m === null) {
    // (a CORS preflight no rule names is gRPC-Web's, on a listener with both)
    if (handOn || tc.cfg.unknownPaths === "passthrough" || h[":method"] === "OPTIONS") return false;
    stream.on("error", ignore);
    answerHttp2(stream, t.ok ? 404 : 400, statusBody(tc, t.ok ? Code.NOT_FOUND : Code.INVALID_ARGUMENT, noRule(String(h[":method"]), t)));
    return true;
  }
  const a = h[":authority"] ?? h["host"];
  new JsonRequest(ctx, tc, m, t.query, stream, typeof a === "string" ? a : undefined, raw, undefined, stream);
  return true;
}

/** A request on the HTTP/1.1 socket that is not gRPC-Web: as serveJsonHttp2. */
export function serveJsonHttp1(ctx: CallContext, tc: JsonTranscoding, req: IncomingMessage, res: ServerResponse, handOn = false): boolean {
  const t = normalizeTarget(req.url ?? "", false); // (as serveJsonHttp2 reads it)
  const m = t.ok ? tc.transcoder.match(req.method ?? "", t.path) : null;
  if (!t.ok || m === null) {
    if (handOn || tc.cfg.unknownPaths === "passthrough") return false;
    answerHttp1(req, res, t.ok ? 404 : 400, statusBody(tc, t.ok ? Code.NOT_FOUND : Code.INVALID_ARGUMENT, noRule(req.method ?? "", t)));
    return true;
  }
  new JsonRequest(ctx, tc, m, t.query, req, req.headers.host, req.rawHeaders, res, undefined);
  return true;
}
