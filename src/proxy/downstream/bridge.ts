// What the client-side bridges share: gRPC-Web (grpc-web.ts), Connect (connect.ts) and JSON
// transcoding (transcode.ts) each answer a Call through the Downstream contract
// (src/proxy/call/downstream.ts) while speaking another protocol to the client, over HTTP/1.1
// (node:http's response) or HTTP/2 (the request's own ServerHttp2Stream).
//
// - Bridge: what a protocol's file gives the listener's table (dispatch.ts): how it recognises an
//   HTTP/2 stream and an HTTP/1.1 request as its own, how it serves each, how it words an
//   overload refusal.
// - bridgeHead(): the one builder of the request head a bridged call starts from, for every
//   bridge: the call's method name (a Connect URL normalised into it here), the gRPC content type,
//   and the client's fields minus one not-forwarded rule (translate/headers.ts isNotForwarded:
//   pseudo-headers, hop-by-hop fields, host; plus what the Connection header names, RFC 9110
//   §7.6.1, and the body's own content-type and content-length), each protocol adding only what
//   is its own (its renames, its markers). startCall() makes the Call from it.
//
// BridgeDownstream owns the contract's machinery, the same for every bridge:
// - the state flags (closed, destroyed, aborted, headersSent, writableEnded, readableEnded,
//   rstCode, writableLength) and the client connection (`session`: the HTTP/2 session, or the
//   HTTP/1.1 socket's stand-in, http1Session);
// - the sink's events: its 'close' (complete or aborted, the rstCode the call reads) and 'drain'
//   become the Downstream's own; 'wantTrailers' is emitted after end() when trailers follow;
// - the request: once the Call listens for 'data', the client's body is fed to it ('data', 'end',
//   pause/resume), an 'end' node emitted before anyone listened replayed;
// - the response's order: respond() once, end(), sendTrailers() in 'wantTrailers', close(code).
// A subclass supplies its protocol's translation: respondHead / respondTrailersOnly (the head, or
// a Trailers-Only status), write(), answerTrailers (the status at the end), endWithoutStatus, and,
// where the body needs it, onReqData / onReqEnd (or readRequest, for a body read before the call).
// It sees its call only as a DownstreamOwner (finish, the route's request limit, decidedBy).
//
// Hot path: the listeners on the request and the sink are module-level functions that find the
// adapter in one symbol slot; nothing here allocates a closure or an object per call but the
// one write callback of a response that ends with a last piece (endH2With).
import { EventEmitter } from "node:events";
import http2, { type IncomingHttpHeaders, type ServerHttp2Session, type ServerHttp2Stream } from "node:http2";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Readable } from "node:stream";
import type { TLSSocket } from "node:tls";
import { connectionOptions, isNotForwarded, methodPathFromUrl } from "../../translate/index.js";
import { Call } from "../call/call.js";
import type { CallContext } from "../call/context.js";
import type { Downstream, DownstreamOwner, RespondOptions } from "../call/downstream.js";
import { headerList, headerObject, isSingleValueField, kClientCert, kPeer, type ClientPeer, type OutgoingHeaders } from "../call/headers.js";
import type { CorsPolicy } from "./cors.js";
import { clientPeer } from "./peer.js";
import { xfccOf } from "./tls.js";

/**
 * Ends an HTTP/2 response with a last piece: the piece is written, and END_STREAM follows in an
 * empty DATA frame once node:http2 has taken it. Not end(last), which puts END_STREAM on the
 * piece's own frame: when the request has ended too, nghttp2 closes the stream as it sends that
 * frame, node:http2 destroys the stream there and then, and the write's completion, which comes
 * after, finds it destroyed; node then builds an ERR_STREAM_DESTROYED error that no one reads,
 * with its stack trace, on every such response (measured: ~4 % of a JSON call's CPU, 9 % of a bare
 * node:http2 server's; the empty frame costs less, docs/contributing/performance.md). A trailered
 * (gRPC) response never meets it: its last write completes before the trailers go.
 */
export function endH2With(stream: ServerHttp2Stream, last: Buffer | Uint8Array | string): void {
  if (last.length === 0) {
    stream.end();
    return;
  }
  stream.write(last, (err) => {
    if (err == null && !stream.destroyed) stream.end();
  });
}

// === a protocol, as the listener's table (dispatch.ts) sees it ===

/** What a bridge reads of the listener it serves: the call context and the CORS policy. */
export interface ListenerSide {
  readonly ctx: CallContext;
  readonly cors: CorsPolicy | null;
}

/**
 * One protocol's way in. `C`: what recognising a request found (its content type, its Connect
 * form, its JSON rule), handed to serve / refuse so nothing is parsed twice. A method returns
 * null when the request is not its protocol's; the listener then asks the next row.
 */
export interface Bridge<C = unknown> {
  classifyH2(l: ListenerSide, h: IncomingHttpHeaders): C | null;
  serveH2(l: ListenerSide, c: C, stream: ServerHttp2Stream, h: IncomingHttpHeaders, raw: readonly string[]): void;
  classifyH1(l: ListenerSide, req: IncomingMessage): C | null;
  serveH1(l: ListenerSide, c: C, req: IncomingMessage, res: ServerResponse): void;
  /** HTTP/1.1 under overload (the native port's REFUSED_STREAM): 14 UNAVAILABLE in the protocol's own form, no call made */
  refuseH1(l: ListenerSide, c: C, req: IncomingMessage, res: ServerResponse, message: string): void;
  /** a stream no row took: answered in this protocol's form (JSON's unknownPaths: notFound), true; false: not answered */
  unclaimedH2?(l: ListenerSide, stream: ServerHttp2Stream, h: IncomingHttpHeaders): boolean;
  unclaimedH1?(l: ListenerSide, req: IncomingMessage, res: ServerResponse): boolean;
  /** HTTP/1.1: the content type is this protocol's (a request of it with another method is 405) */
  ownsType?(ct: string | undefined): boolean;
}

// === the request head ===

/**
 * A protocol's own handling of one client field, before the shared rule keeps it: true when it
 * took the field (dropped it, or added it to `h` renamed or converted); it may set `h.error` to
 * refuse the request. A module-level function, given the request's facts as `r` (no closure).
 */
export type FieldRule<R> = (h: BridgeHead, name: string, value: string, r: R) => boolean;

/**
 * The request head a bridged call starts from, as node:http2 would have parsed it for a native
 * call: `headers` (what the Call reads: :path, content-type, grpc-timeout, x-request-id,
 * grpc-previous-rpc-attempts, the trace context...) and `raw`, the flat name/value list the
 * upstream head is copied from (names lower-case).
 */
export class BridgeHead {
  readonly headers: IncomingHttpHeaders;
  readonly raw: string[];
  /** set by a FieldRule: the request is refused with this (no call is made) */
  error: string | null = null;

  constructor(path: string, authority: string | undefined, contentType: string, method: string) {
    this.headers = { ":method": method, ":path": path, ":scheme": "http", "content-type": contentType };
    if (authority !== undefined) this.headers[":authority"] = authority;
    this.raw = [":method", method, ":path", path, "content-type", contentType];
  }

  /** A field for the call (a repeated one joined with ", " in `headers`, as node does; single-value fields keep the first). */
  add(name: string, value: string): void {
    this.raw.push(name, value);
    const prev = this.headers[name];
    if (prev === undefined) this.headers[name] = value;
    else if (!isSingleValueField(name)) this.headers[name] = `${String(prev)}, ${value}`;
  }
}

/**
 * The one head builder (see the file comment). `target`: the :path the client sent, or the
 * method a protocol names (a JSON rule's); with `url` (Connect) it is a URL, normalised here into
 * the method name as Envoy normalises a path before any rule reads it (translate/grpc-path.ts
 * methodPathFromUrl); a target that names no method is kept as it came, and the Call refuses it.
 * `raw`: the client's fields as node gives them, `h2` saying from which transport: HTTP/2's names
 * are lower-case already (nghttp2 refuses a request with an upper-case one, RFC 9113 §8.2.1) and
 * it has no Connection header (§8.2.2), so only HTTP/1.1's are lower-cased and read for one.
 * `rule` and `r`: the protocol's own field handling (null: none). `method`: the :method the Call
 * checks (it refuses anything but POST with 405, in the protocol's form): the client's own where
 * the protocol's request is a POST as gRPC's is (gRPC-Web on HTTP/2), else POST.
 */
export function bridgeHead<R>(target: string, url: boolean, authority: string | undefined, contentType: string, raw: readonly string[], h2: boolean, rule: FieldRule<R> | null, r: R, method = "POST"): BridgeHead {
  const path = url ? (methodPathFromUrl(target) ?? target) : target;
  const h = new BridgeHead(path, authority, contentType, method);
  // HTTP/1.1's Connection header names more hop-by-hop fields (RFC 9110 §7.6.1)
  let nominated: string[] | null = null;
  if (!h2) {
    for (let i = 0; i + 1 < raw.length; i += 2) {
      const n = raw[i]!;
      if (n.length === 10 && n.toLowerCase() === "connection") (nominated ??= []).push(...connectionOptions(raw[i + 1]!));
    }
  }
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = h2 ? raw[i]! : raw[i]!.toLowerCase();
    const value = raw[i + 1]!;
    if (isNotForwarded(name, value) || name === "content-type" || name === "content-length") continue;
    if (nominated !== null && nominated.includes(name)) continue;
    if (rule !== null && rule(h, name, value, r)) {
      if (h.error !== null) return h;
      continue;
    }
    h.add(name, value);
  }
  return h;
}

/** Starts the Call a bridge serves: `d` answers it, `h` is its request head. */
export function startCall(ctx: CallContext, d: BridgeDownstream, h: BridgeHead): void {
  const call = new Call(ctx, d, h.headers, d.protocol);
  d.owner = call;
  call.start(h.headers, 0, h.raw);
}

// === the client side ===

/**
 * What a Call reads of its client connection (`down.session`) when that connection is HTTP/1.1:
 * the socket (a rate limit keyed by client address, a fault that drops the connection) and the
 * verified client certificate (x-forwarded-client-cert). One per socket, made at its first
 * bridged request. Over HTTP/2 the request stream's own session serves.
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

function http1Session(socket: Socket): Http1Session {
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

/**
 * The one symbol slot a client's request (and its response) carries its handler in: the
 * BridgeDownstream, and before it exists a bridge's own request reader (transcode.ts JsonRequest).
 * One property for both, so node's stream objects take one more shape, not two.
 */
export const kBridge = Symbol("dojang.bridge");
type Carrier = EventEmitter & { [kBridge]?: BridgeDownstream };

/** The client side of one bridged call: a Downstream whose subclass translates (see the file comment). */
export abstract class BridgeDownstream extends EventEmitter implements Downstream {
  /** what the access record says about the client side ("grpc-web", "connect", "json"...) */
  abstract readonly protocol: string;
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
  /** the call this side answers (startCall), as much of it as a bridge may use */
  owner: DownstreamOwner | undefined = undefined;
  /** respond() asked for trailers: end() waits for sendTrailers() */
  protected trailersWanted = false;
  private hooked = false;

  /**
   * `src`: the client's request (node:http's IncomingMessage, or the HTTP/2 stream); the response
   * goes to `h1` (HTTP/1.1) or `h2` (the same HTTP/2 stream), whichever is given.
   */
  constructor(
    protected readonly src: Readable,
    protected readonly h1: ServerResponse | undefined,
    protected readonly h2: ServerHttp2Stream | undefined,
  ) {
    super();
    this.session = h2 !== undefined ? h2.session : h1 !== undefined ? http1Session(h1.socket ?? (src as IncomingMessage).socket) : undefined;
    const sink: EventEmitter = h1 ?? h2!;
    (sink as Carrier)[kBridge] = this;
    sink.on("close", onSinkClose);
    sink.on("drain", onSinkDrain);
    sink.on("error", ignore);
    // (over HTTP/2 the request is the sink itself)
    if (src !== sink) src.on("error", ignore);
  }

  /** The request body flows only once the Call listens for it (after its attempt is open): its 'data' listener hooks the request. */
  override on(event: string | symbol, listener: (...args: any[]) => void): this {
    super.on(event, listener);
    if (event === "data" && !this.hooked) this.hookRequest();
    return this;
  }

  override addListener(event: string | symbol, listener: (...args: any[]) => void): this {
    return this.on(event, listener);
  }

  hookRequest(): void {
    if (this.hooked) return;
    this.hooked = true;
    this.readRequest();
  }

  /** Feeds the client's body to the Call through onReqData / onReqEnd. */
  protected readRequest(): void {
    // An empty request can have ended already: node may read its END_STREAM (and emit 'end',
    // with no listener) while the call waits for its upstream session, the first call to a new
    // upstream. That 'end' is gone, so it is replayed; without it the upstream never got
    // END_STREAM and the call hung until its deadline (the conformance suite's no-request cases).
    if (this.src.readableEnded) {
      process.nextTick(replayEnd, this);
      return;
    }
    (this.src as Carrier)[kBridge] = this;
    this.src.on("data", onReqData);
    this.src.on("end", onReqEnd);
  }

  /** A chunk of the client's body: as it is, unless the subclass translates. */
  onReqData(chunk: Buffer): void {
    this.emit("data", chunk);
  }

  /** The client's body ended. */
  onReqEnd(): void {
    this.endRequest();
  }

  /** The request, as the Call reads it, is complete. */
  protected endRequest(): void {
    this.readableEnded = true;
    this.emit("end");
  }

  pause(): this {
    this.src.pause();
    return this;
  }

  resume(): this {
    this.src.resume();
    return this;
  }

  /** The response head: a Trailers-Only status when `endStream`, else the head, with the status to follow. */
  respond(h: OutgoingHeaders | readonly string[], opts?: RespondOptions): void {
    if (this.headersSent) throw new Error("response head already sent");
    // (the Call gives a flat list only to a native stream; a filter may give either)
    const head = isList(h) ? headerObject(h) : h;
    this.headersSent = true;
    if (opts?.endStream === true) {
      this.respondTrailersOnly(head);
      return;
    }
    this.trailersWanted = opts?.waitForTrailers === true;
    this.respondHead(head);
  }

  /** The head of a response whose status follows (in answerTrailers, or endWithoutStatus). */
  protected abstract respondHead(head: OutgoingHeaders): void;
  /** A Trailers-Only reply: the head is the status. Sets writableEnded (where its protocol puts it) and ends the response. */
  protected abstract respondTrailersOnly(head: OutgoingHeaders): void;
  /** The trailers, the call's status: the response's end on the client's wire. */
  protected abstract answerTrailers(t: OutgoingHeaders): void;
  /** end() when no trailers were asked for. */
  protected abstract endWithoutStatus(): void;

  abstract write(chunk: Buffer, cb?: (err?: Error | null) => void): boolean;

  /** Bytes queued for the client and not yet taken by its socket (the response-buffer guard reads it, observe/overload.ts). */
  get writableLength(): number {
    return this.h1 !== undefined ? this.h1.writableLength : this.h2!.writableLength;
  }

  /**
   * Ends the response body (a fault filter's raw last piece is dropped: respond() already answered
   * that reply in the client's protocol). With trailers asked for, the Call supplies the status in
   * 'wantTrailers', emitted on the next tick as node:http2 does.
   */
  end(_chunk?: Buffer | string): this {
    if (this.writableEnded) return this;
    this.writableEnded = true;
    if (this.trailersWanted) process.nextTick(emitWantTrailers, this);
    else this.endWithoutStatus();
    return this;
  }

  sendTrailers(t: OutgoingHeaders): void {
    if (!this.trailersWanted) throw new Error("trailers not expected");
    this.trailersWanted = false;
    this.answerTrailers(t);
  }

  /**
   * node:http2's close(code): NO_ERROR after the response is complete (grpc-go's early server
   * closure) only stops reading a request the client still sends; any other code cuts the
   * response short (the client reads a broken body, as a browser would a reset).
   */
  close(code?: number): void {
    if (code === http2.constants.NGHTTP2_NO_ERROR && this.writableEnded) {
      this.stopReading();
      return;
    }
    if (this.closed) return;
    this.rstCode = code;
    this.reset(code);
  }

  /** close(NO_ERROR) after a complete response: what is left of the request drains away. */
  protected stopReading(): void {
    this.src.resume();
  }

  /** close(code) before the response is complete. */
  protected reset(code: number | undefined): void {
    if (this.h1 !== undefined) this.h1.destroy();
    else this.h2!.close(code);
  }

  /**
   * The response head to the client, the one place a bridge sends one: over HTTP/1.1 node:http's
   * writeHead (`flush`: sent now, not with the first piece of body: a stream's first message may
   * be a while away); over HTTP/2 a flat list (headerList, :status first), which node encodes as
   * it is, where an object would be copied and its keys listed first.
   */
  protected sendHead(status: number, fields: Record<string, string | string[]>, flush: boolean): void {
    if (this.h1 !== undefined) {
      this.h1.writeHead(status, fields);
      if (flush) this.h1.flushHeaders();
    } else this.h2!.respond(headerList(fields, status));
  }

  /** Writes response bytes to the client, as they are. */
  protected writeSink(b: Buffer, cb?: (err?: Error | null) => void): boolean {
    if (cb === undefined) return this.h1 !== undefined ? this.h1.write(b) : this.h2!.write(b);
    return this.h1 !== undefined ? this.h1.write(b, cb) : this.h2!.write(b, cb);
  }

  /** Ends the response to the client, with a last piece or none. */
  protected endSink(last: Buffer | undefined): void {
    if (this.h1 !== undefined) {
      if (last === undefined) this.h1.end();
      else this.h1.end(last);
    } else if (last === undefined) this.h2!.end();
    else endH2With(this.h2!, last);
  }

  /** The sink closed: complete, or cut short (aborted, with the reset's code). */
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

export function ignore(): void {}
function isList(h: OutgoingHeaders | readonly string[]): h is readonly string[] {
  return Array.isArray(h);
}
function onReqData(this: Carrier, chunk: Buffer): void {
  this[kBridge]!.onReqData(chunk);
}
function replayEnd(w: BridgeDownstream): void {
  w.onReqEnd();
}
function onReqEnd(this: Carrier): void {
  this[kBridge]!.onReqEnd();
}
function onSinkClose(this: Carrier): void {
  this[kBridge]!.onSinkClose();
}
function onSinkDrain(this: Carrier): void {
  this[kBridge]!.emit("drain");
}
function emitWantTrailers(w: BridgeDownstream): void {
  if (!w.closed) w.emit("wantTrailers");
}
