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
import { Code, GRPC_CONTENT_TYPE, MESSAGE_PREFIX_BYTES, decodeGrpcMessage, messageLength, normalizeTarget, outcome, prefixFlag, type NormalizedTarget } from "../../translate/index.js";
import { DescriptorError, TranscodeInputError, Transcoder, httpStatusOfCode, type RuleMatch, type TranscodeRule } from "../../translate/transcode.js";
import type { CallContext } from "../call/context.js";
import type { OutgoingHeaders } from "../call/headers.js";
import { BridgeDownstream, bridgeHead, endH2With, ignore, kBridge, startCall, type Bridge, type BridgeHead, type ListenerSide } from "./bridge.js";

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
  readonly protocol = "json";
  /** response bytes not yet cut into messages (views of the chunks as they came), their total, and what the next message needs */
  private pending: Buffer[] | null = null;
  private pendingBytes = 0;
  private needed = MESSAGE_PREFIX_BYTES;
  /** unary: the response message */
  private message: Uint8Array | null = null;
  private messages = 0;
  /** the upstream's response metadata, kept for the HTTP head */
  private meta: Record<string, string | string[]> = {};
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
    this.keepMeta(head);
  }

  protected respondTrailersOnly(head: OutgoingHeaders): void {
    this.keepMeta(head);
    this.writableEnded = true;
    this.finish(head);
  }

  private keepMeta(head: OutgoingHeaders): void {
    for (const name in head) {
      if (name.charCodeAt(0) === 58 || NOT_DOWNSTREAM.has(name)) continue;
      const v = head[name]!;
      this.meta[name] = typeof v === "number" ? String(v) : v;
    }
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
    while (!this.failed && buf.length >= MESSAGE_PREFIX_BYTES) {
      const end = MESSAGE_PREFIX_BYTES + messageLength(buf);
      if (buf.length < end) break;
      if (prefixFlag(buf) !== 0) {
        this.fail("a compressed response message (the transcoder asks for none)");
        break;
      }
      const msg = buf.subarray(MESSAGE_PREFIX_BYTES, end);
      buf = buf.subarray(end);
      this.messages++;
      if (!this.rule.serverStreaming) {
        if (this.messages > 1) this.fail("more than one response message for a unary method");
        else this.message = msg;
      } else ok = this.streamMessage(msg) && ok;
    }
    if (buf.length > 0) {
      this.pending = [buf];
      this.pendingBytes = buf.length;
      this.needed = MESSAGE_PREFIX_BYTES + (buf.length >= MESSAGE_PREFIX_BYTES ? messageLength(buf) : 0);
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
      this.jsonHead(200);
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
      this.jsonHead(200, body.contentType);
    }
    return this.h1 !== undefined ? this.h1.write(body.data) : this.h2!.write(body.data);
  }

  /** A response the transcoder cannot read: the call ends INTERNAL (the Call's own exit). */
  private fail(why: string): void {
    this.failed = true;
    this.owner?.finish(outcome(Code.INTERNAL, `transcoding: ${why}`, "upstream_protocol"));
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
        this.jsonHead(200);
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
        this.jsonHead(200, raw.contentType);
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
      this.jsonHead(200);
      this.endBody(body);
      return;
    }
    this.answerStatus(code, message, details);
  }

  private answerStatus(code: number, message: string, details: Uint8Array | undefined): void {
    // a Status body, JSON whatever the rule streams
    this.jsonHead(httpStatusOfCode(code), JSON_TYPE);
    this.endBody(this.tc.transcoder.status(code, message, details));
  }

  /** The response head (the upstream's metadata, kept for it); `contentType` is an HttpBody's own ("" for none). */
  private jsonHead(status: number, contentType?: string): void {
    if (this.h1 !== undefined ? this.h1.headersSent : this.h2!.headersSent || this.h2!.destroyed) return;
    const out = this.meta;
    if (contentType === undefined) out["content-type"] = this.rule.serverStreaming && this.tc.cfg.streamFormat === "ndjson" ? "application/x-ndjson" : JSON_TYPE;
    else if (contentType !== "") out["content-type"] = contentType;
    this.sendHead(status, out, this.rule.serverStreaming);
  }

  private endBody(last: string | Uint8Array): void {
    if (this.h1 !== undefined) this.h1.end(last);
    else if (!this.h2!.destroyed) endH2With(this.h2!, last);
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

// === the row's bridge: how the listener's table (dispatch.ts) takes a JSON request ===

/** JSON's own request fields: the response is dojang's JSON, and the request frame it made is uncompressed. */
const JSON_OWN = new Set(["accept-encoding", "grpc-encoding", "grpc-accept-encoding"]);
function jsonField(_h: BridgeHead, name: string): boolean {
  return JSON_OWN.has(name);
}

/** A plain answer made before any call (no rule, bad body): a google.rpc.Status JSON body. */
function statusBody(tc: JsonTranscoding, code: number, message: string): string {
  return tc.transcoder.status(code, message, undefined);
}

/** A request a rule matched: the rule and its path variables, and the query. */
export interface JsonMatch {
  readonly m: RuleMatch;
  readonly query: string;
}

/** (the request carries its JsonRequest in the bridges' slot, until its JsonDownstream takes it: after the body's end) */
type BodyCarrier = Readable & { [kBridge]?: unknown };

/**
 * One JSON request on its way to a call, over either transport (`src`: the HTTP/2 stream, `h2`
 * the same; or node:http's request, `h1res` its response): the body read whole (at most maxBodyBytes; past it the rest is not read, the
 * answer is 413 and the request is closed), the request message made, the call started; a bad
 * request answered here, with no call made. One object a request: the body's listeners are
 * module-level functions that find it in the bridges' symbol slot (no closure per call).
 */
class JsonRequest {
  /** the body: its first chunk, the rest (only when it came in more than one), their total */
  private first: Buffer | null = null;
  private more: Buffer[] | null = null;
  private size = 0;
  private over = false;

  constructor(
    private readonly ctx: CallContext,
    private readonly tc: JsonTranscoding,
    private readonly j: JsonMatch,
    private readonly src: Readable,
    private readonly authority: string | undefined,
    private readonly raw: readonly string[],
    private readonly h2: ServerHttp2Stream | undefined,
    private readonly h1res: ServerResponse | undefined,
  ) {}

  run(): void {
    if (this.j.m.rule.body === "") {
      // no body is read: whatever the client sent is drained
      this.src.resume();
      this.start(Buffer.alloc(0));
      return;
    }
    const src = this.src as BodyCarrier;
    src[kBridge] = this;
    src.on("data", onBodyData);
    src.on("end", onBodyEnd);
    src.on("error", ignore);
  }

  onData(c: Buffer): void {
    if (this.over) return;
    this.size += c.length;
    if (this.size > this.tc.cfg.maxBodyBytes) {
      this.over = true;
      this.src.pause();
      this.start(null);
      return;
    }
    if (this.first === null) this.first = c;
    else (this.more ??= [this.first]).push(c);
  }

  onEnd(): void {
    if (this.over) return;
    this.start(this.more !== null ? Buffer.concat(this.more, this.size) : (this.first ?? Buffer.alloc(0)));
  }

  /** The body read (null: larger than the limit): the call, or the answer to a bad request. */
  private start(body: Buffer | null): void {
    const tc = this.tc;
    if (body === null) return this.answer(413, statusBody(tc, Code.INVALID_ARGUMENT, `the request body is larger than jsonTranscoding.maxBodyBytes (${tc.cfg.maxBodyBytes})`));
    const m = this.j.m;
    let msg: Uint8Array;
    try {
      msg = tc.transcoder.requestFrame(m, this.j.query, body);
    } catch (err) {
      if (err instanceof TranscodeInputError) return this.answer(400, statusBody(tc, Code.INVALID_ARGUMENT, err.message));
      throw err;
    }
    // the call's method is the rule's (a method path); the head is every bridge's (bridge.ts)
    const d = new JsonDownstream(tc, m.rule, Buffer.from(msg.buffer, msg.byteOffset, msg.length), this.src, this.h1res, this.h2);
    startCall(this.ctx, d, bridgeHead(m.rule.grpcPath, false, this.authority, GRPC_CONTENT_TYPE, this.raw, this.h2 !== undefined, jsonField, undefined));
  }

  private answer(status: number, body: string): void {
    if (this.h2 !== undefined) h2Answer(this.h2, status, body);
    else h1Answer(this.src as IncomingMessage, this.h1res!, status, body);
  }
}

function onBodyData(this: BodyCarrier, c: Buffer): void {
  const r = this[kBridge];
  if (r instanceof JsonRequest) r.onData(c);
}
function onBodyEnd(this: BodyCarrier): void {
  const r = this[kBridge];
  if (r instanceof JsonRequest) r.onEnd();
}

/**
 * The URL as the rules read it: normalised as Envoy normalises a path before its route and RBAC
 * matchers see it (src/translate/grpc-path.ts normalizeTarget: percent-encoded unreserved
 * characters decoded, dot segments removed, the query split off, a fragment refused), so
 * "/v1/./secret" or "/v1/%73ecret" is the rule "/v1/secret" and meets that method's rules
 * (issue 0.5.1 item 1). Slashes are not merged (normalizeTarget's `merge`): a path variable keeps
 * its empty segments, as grpc-gateway's.
 */
function match(tc: JsonTranscoding, method: string, target: string, ct: string | undefined): JsonMatch | null {
  if (!takesJson(ct)) return null;
  const t = normalizeTarget(target, false);
  if (!t.ok) return null;
  const m = tc.transcoder.match(method, t.path);
  return m === null ? null : { m, query: t.query };
}

/** A request no rule takes (a target that is not a path, or no rule for it): 400 / 404 with a Status, or null to hand it on. */
function unclaimed(tc: JsonTranscoding, method: string, target: string, ct: string | undefined): [number, string] | null {
  // (a CORS preflight no rule names is not JSON's to answer: a CORS protocol's, or the native path's)
  if (tc.cfg.unknownPaths === "passthrough" || !takesJson(ct) || method === "OPTIONS") return null;
  const t = normalizeTarget(target, false);
  return [t.ok ? 404 : 400, statusBody(tc, t.ok ? Code.NOT_FOUND : Code.INVALID_ARGUMENT, noRule(method, t))];
}

/** JSON transcoding for one listener: its compiled descriptor set, and the row's bridge over it. */
export class JsonBridge implements Bridge<JsonMatch> {
  constructor(readonly tc: JsonTranscoding) {}

  classifyH2(_l: ListenerSide, h: IncomingHttpHeaders): JsonMatch | null {
    const target = h[":path"];
    return typeof target === "string" ? match(this.tc, String(h[":method"] ?? ""), target, contentTypeOf(h["content-type"])) : null;
  }

  serveH2(l: ListenerSide, j: JsonMatch, stream: ServerHttp2Stream, h: IncomingHttpHeaders, raw: readonly string[]): void {
    stream.on("error", ignore);
    const a = h[":authority"] ?? h["host"];
    new JsonRequest(l.ctx, this.tc, j, stream, typeof a === "string" ? a : undefined, raw, stream, undefined).run();
  }

  classifyH1(_l: ListenerSide, req: IncomingMessage): JsonMatch | null {
    return match(this.tc, req.method ?? "", req.url ?? "", req.headers["content-type"]);
  }

  serveH1(l: ListenerSide, j: JsonMatch, req: IncomingMessage, res: ServerResponse): void {
    new JsonRequest(l.ctx, this.tc, j, req, req.headers.host, req.rawHeaders, undefined, res).run();
  }

  /** 14 UNAVAILABLE as JSON transcoding answers a status: its HTTP status (503) and a google.rpc.Status body. */
  refuseH1(_l: ListenerSide, _j: JsonMatch, req: IncomingMessage, res: ServerResponse, message: string): void {
    h1Answer(req, res, httpStatusOfCode(Code.UNAVAILABLE), statusBody(this.tc, Code.UNAVAILABLE, message));
  }

  /** unknownPaths: notFound answers what no row took (not gRPC's content types: those are gRPC's to refuse). */
  unclaimedH2(_l: ListenerSide, stream: ServerHttp2Stream, h: IncomingHttpHeaders): boolean {
    const target = h[":path"];
    if (typeof target !== "string") return false;
    const a = unclaimed(this.tc, String(h[":method"]), target, contentTypeOf(h["content-type"]));
    if (a === null) return false;
    stream.on("error", ignore);
    h2Answer(stream, a[0], a[1]);
    return true;
  }

  unclaimedH1(_l: ListenerSide, req: IncomingMessage, res: ServerResponse): boolean {
    const a = unclaimed(this.tc, req.method ?? "", req.url ?? "", req.headers["content-type"]);
    if (a === null) return false;
    h1Answer(req, res, a[0], a[1]);
    return true;
  }
}

/** The bridge for a listener's jsonTranscoding (its descriptor set read and compiled now; throws as loadJsonTranscoding). */
export function jsonBridge(cfg: JsonTranscodingConfig): JsonBridge {
  return new JsonBridge(loadJsonTranscoding(cfg));
}

function contentTypeOf(v: string | string[] | undefined): string | undefined {
  return typeof v === "string" ? v : undefined;
}

/** A plain answer made before any call, over HTTP/2. */
function h2Answer(stream: ServerHttp2Stream, status: number, body: string): void {
  if (stream.destroyed || stream.headersSent) return;
  stream.respond({ ":status": status, "content-type": JSON_TYPE });
  // a request still being sent (a body over the limit, a path no rule takes): once the answer
  // is out, RST_STREAM(NO_ERROR) tells the client to stop sending (RFC 9113 §8.1)
  stream.end(body, () => {
    if (!stream.closed && !stream.readableEnded) stream.close(http2.constants.NGHTTP2_NO_ERROR);
  });
}

/** A plain answer made before any call, over HTTP/1.1. */
function h1Answer(req: IncomingMessage, res: ServerResponse, status: number, body: string): void {
  if (res.headersSent) return;
  // a request still being sent is not read to its end: the connection closes after the answer
  res.writeHead(status, req.complete ? { "content-type": JSON_TYPE } : { "content-type": JSON_TYPE, connection: "close" });
  res.end(body);
}
