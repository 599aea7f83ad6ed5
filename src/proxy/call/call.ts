// One gRPC call: the client (downstream) stream, the deadline budget, the route, and the
// attempt that carries it upstream (attempt.ts: one upstream stream on one session). The call
// gathers facts (what its attempt reports, the clock) and asks src/translate what the status is;
// its only exits are forwardStatus() (the upstream's own grpc-status) and finish(outcome)
// (dojang's), each of which runs at most once. The commit point: with no retry policy (none
// exists yet) a call commits to its first attempt at once, so nothing is buffered.
//
// Hot-path rules (style.md §3.7): stream listeners are module-level functions that find the
// call in one symbol slot on the stream, so no closure is created per call or per chunk;
// payload chunks are passed on unchanged (the prefix scanner only reads bytes by index).
import http2, { type ClientHttp2Stream, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import { randomBytes } from "node:crypto";
import {
  Code,
  atMessageBoundary,
  classifyResponseHead,
  codeName,
  decodeGrpcMessage,
  decodeTimeout,
  encodeGrpcMessage,
  encodeTimeout,
  forwardedBytes,
  forwardedMessages,
  isGrpcContentType,
  newScanner,
  outcome,
  parseGrpcStatus,
  refusedBytes,
  scanChunk,
  statusTrailers,
  trailersOnlyHeaders,
  MAX_INT64_NS,
  type DecidedBy,
  type FrameScanner,
  type Outcome,
} from "../../translate/index.js";
import type { CompiledRoute, Router } from "../router.js";
import type { Cluster } from "../upstream/cluster.js";
import type { Metrics, MethodSeries } from "../observe/metrics.js";
import type { AccessRecord, Journal } from "../observe/log.js";
import type { Logger } from "pino";
import { copyHeaders, copyRequestHeaders, type OutgoingHeaders } from "./headers.js";
import { Attempt, type AttemptOwner } from "./attempt.js";
import type { CallFilter, FilterCall, FilterFactory } from "./filter.js";
import type { RetryBuffer } from "./retry-buffer.js";

const { NGHTTP2_FLAG_END_STREAM } = http2.constants;
const kCall = Symbol("dojang.call");
/** setTimeout's limit (2^31−1 ms); longer budgets re-arm (grpc-js deadline.ts does the same). */
const MAX_TIMER_MS = 2_147_483_647;
/** Request ids made here: a random per-process prefix and a counter, unique without a
 * UUID's cost per call (x-request-id from the client is kept as it is). */
const ID_PREFIX = randomBytes(6).toString("hex");
let idCounter = 0;
function newRequestId(): string {
  return `${ID_PREFIX}-${(++idCounter).toString(36)}`;
}
/** A deadline timer may fire up to a tick late; an upstream CANCEL that lands this close to
 * the deadline is the deadline (spec §11.2). */
const DEADLINE_SLACK_MS = 2;
/** A client's deadline is anchored before dojang's (at its send time, not at dojang's t0), so
 * its own timer usually fires first and it resets the stream with CANCEL a transit time before
 * dojang's timer would: a client reset this close to the deadline is the deadline deciding. */
const CLIENT_DEADLINE_SLACK_MS = 10;

/**
 * One listener's part of a config snapshot (src/proxy/snapshot.ts): its compiled routes and
 * filter chain. Immutable; a call keeps the one it started with until it ends.
 */
export interface ListenerRoutes {
  readonly router: Router<Cluster>;
  /** the filter chain, compiled once; null when empty (one test per call) */
  readonly filters: readonly FilterFactory[] | null;
}

/**
 * The swap point: Dojang stores the current snapshot's ListenerRoutes here (a reload stores a
 * new one); each call reads it once, when its stream arrives.
 */
export interface RoutesCell {
  current: ListenerRoutes;
}

/** What every call on one listener shares; built once at start. */
export interface CallContext {
  readonly listener: string;
  readonly routes: RoutesCell;
  readonly metrics: Metrics;
  readonly log: Logger;
  /** where access lines go (asynchronous) */
  readonly access: Logger;
  readonly accessLog: boolean;
  /** monotonic milliseconds */
  readonly now: () => number;
  /** recent calls (GET /calls); size 0 keeps none */
  readonly journal: Journal;
  /** calls in flight on this listener (drain: what is left at the timeout gets 14 "shutdown") */
  readonly active: Set<Call>;
  /** called when a call's downstream stream has closed (drain bookkeeping) */
  readonly onCallClosed: () => void;
  /** the listener's streamIdleTimeout (ms, 0 = never; set by Listener from its config) */
  readonly streamIdleTimeoutMs?: number;
}

type DownStream = ServerHttp2Stream & { [kCall]?: Call };

export class Call implements AttemptOwner, FilterCall {
  readonly ctx: CallContext;
  /** the routes and filters of the snapshot this call started with (kept to its end) */
  readonly routes: ListenerRoutes;
  readonly down: ServerHttp2Stream;
  readonly t0: number;
  readonly series: MethodSeries;
  readonly path: string;
  readonly authority: string | undefined;
  requestId = "";
  prevAttempts: string | undefined = undefined;
  route: CompiledRoute<Cluster> | undefined = undefined;
  /** the current attempt (the only one, until retries exist) */
  attempt: Attempt | null = null;
  /**
   * The request chunks kept for another attempt (retry-buffer.ts). null once the call has
   * committed to its attempt, and from the start when the route has no retry policy (none has
   * yet): the commit point is then the call's start, and the hot path pays one null test.
   */
  retryBuffer: RetryBuffer | null = null;
  /** absolute monotonic ms; Infinity when there is no budget */
  deadlineAt = Infinity;
  budgetInMs: number | undefined = undefined;
  budgetOutMs: number | undefined = undefined;
  timer: NodeJS.Timeout | undefined = undefined;
  readonly reqScan: FrameScanner = newScanner();
  readonly respScan: FrameScanner = newScanner();
  /** respond() was called downstream (Trailers-Only is no longer possible) */
  responded = false;
  /** the final status is fixed (forwarded from upstream or synthesized); later events are ignored */
  done = false;
  code = -1;
  message: string | undefined = undefined;
  /** `message` is a header value as the upstream sent it (percent-encoded), not plain text */
  messageEncoded = false;
  decidedBy: DecidedBy = "upstream";
  pendingTrailers: OutgoingHeaders | undefined = undefined;
  /** the filters acting on this call; null on the normal path (one null test per hook point) */
  filters: CallFilter[] | null = null;
  /** a response head a filter holds (continueResponseHead sends it) */
  heldHead: { headers: IncomingHttpHeaders; flags: number; raw: readonly string[] } | undefined = undefined;
  /** the upstream stream closed while the head was held: decided once the head has gone out */
  upCloseDeferred = false;
  /** a filter owns the rest of the response (takeOverResponse): upstream events are dropped */
  responseTakenOver = false;
  /** a filter holds the upstream's trailers (continueTrailers forwards them): not asked twice */
  trailersHeld = false;
  /** the request head every attempt starts from (a filter may change it before the attempt) */
  upHeaders: OutgoingHeaders | undefined = undefined;
  upEndStream = false;
  /** the upstream's trailers, held until its readable side has ended */
  upTrailers: OutgoingHeaders | undefined = undefined;
  /** the request body is being read (its listeners are on the client stream) */
  private reading = false;
  /** 'drain' is listened to on the first write() that returns false (most calls never need it) */
  private downDrainHooked = false;
  /**
   * streamIdleTimeout (issue 10 item 12): one timer per call, armed only when the timeout is on
   * and shorter than the call's deadline, and never reset per chunk: when it fires it compares
   * the bytes scanned both ways (counters the hot path keeps anyway) with what it saw last
   * time; if they moved it re-arms, else nothing moved for a whole period and the call ends.
   * A call is cut after between one and two idle periods without a frame.
   */
  idleTimer: NodeJS.Timeout | undefined = undefined;
  idleMs = 0;
  idleSeen = 0;

  constructor(ctx: CallContext, down: ServerHttp2Stream, headers: IncomingHttpHeaders) {
    this.ctx = ctx;
    this.routes = ctx.routes.current;
    this.down = down;
    this.t0 = ctx.now();
    const p = headers[":path"];
    this.path = typeof p === "string" ? p : "";
    const a = headers[":authority"] ?? headers["host"];
    this.authority = typeof a === "string" ? a : undefined;
    this.series = ctx.metrics.seriesFor(this.path);
    (down as DownStream)[kCall] = this;
    down.on("close", onDownClose);
    down.on("error", onDownError);
    down.on("wantTrailers", onDownWantTrailers);
    const live = ctx.metrics.live;
    live.activeCalls++;
    live.startedCalls++;
    ctx.active.add(this);
  }

  // === request headers → upstream request ===

  start(headers: IncomingHttpHeaders, flags: number, raw: readonly string[]): void {
    // Read from node's parsed headers (a lookup, not another pass over rawHeaders; copyHeaders
    // below is the one pass, and it forwards every field as sent).
    const ridv = headers["x-request-id"];
    const rid = typeof ridv === "string" ? ridv : undefined;
    const prev = headers["grpc-previous-rpc-attempts"];
    this.prevAttempts = typeof prev === "string" ? prev : undefined;
    this.requestId = rid ?? newRequestId();

    // Early aborts mirror grpc-go's server (spec §11.7): these go out with their HTTP status.
    const method = headers[":method"];
    if (method !== "POST") {
      return this.finish(outcome(Code.INTERNAL, `Received a HEADERS frame with :method "${String(method)}" which should be POST`, "bad_request", 405));
    }
    const ct = headers["content-type"];
    if (!isGrpcContentType(ct)) {
      return this.finish(outcome(Code.INVALID_ARGUMENT, `invalid gRPC request content-type "${ct ?? ""}"`, "bad_request", 415));
    }
    let clientMs: number | undefined;
    const gt = headers["grpc-timeout"];
    if (typeof gt === "string") {
      const d = decodeTimeout(gt);
      if (!d.ok) return this.finish(outcome(Code.INTERNAL, `malformed grpc-timeout: ${d.error}`, "bad_request", 400));
      clientMs = Number(d.ns) / 1e6;
      this.budgetInMs = clientMs;
      this.ctx.metrics.budgetInNoLabels.observe(clientMs / 1000);
    }

    const route = this.routes.router.match(this.path, this.authority);
    if (route === undefined) {
      return this.finish(outcome(Code.UNIMPLEMENTED, `no route for ${this.path} on listener ${this.ctx.listener}`, "no_route"));
    }
    this.route = route;

    // The budget: the client's grpc-timeout capped by the route's timeout; the clock started
    // when the request headers arrived (t0).
    let budget = clientMs;
    if (route.timeoutMs !== null && (budget === undefined || route.timeoutMs < budget)) budget = route.timeoutMs;
    let timeoutHeader: string | undefined;
    if (budget !== undefined) {
      this.deadlineAt = this.t0 + budget;
      const left = this.deadlineAt - this.ctx.now();
      // grpc-go's client never sends a call whose time is up (createHeaderFields): neither do we.
      if (left <= 0) return this.finish(outcome(Code.DEADLINE_EXCEEDED, "context deadline exceeded", "deadline"));
      const ns = left * 1e6;
      timeoutHeader = encodeTimeout(ns >= 9.2e18 ? MAX_INT64_NS : BigInt(Math.ceil(ns)));
      this.budgetOutMs = left;
      this.ctx.metrics.budgetOutNoLabels.observe(left / 1000);
      this.armTimer(left);
    }
    const idle = route.streamIdleTimeoutMs ?? this.ctx.streamIdleTimeoutMs ?? 0;
    if (idle > 0 && this.deadlineAt - this.t0 > idle) {
      this.idleMs = idle > MAX_TIMER_MS ? MAX_TIMER_MS : idle;
      this.idleTimer = setTimeout(onIdleTimer, this.idleMs, this);
    }

    const out: OutgoingHeaders = {
      ":method": "POST",
      ":scheme": "http",
      ":path": this.path,
      ":authority": this.authority ?? "",
    };
    // Checked in the same pass that copies: a field an upstream would take for a connection
    // error (bad -bin base64, a name or value gRPC forbids) is this call's error alone, 400 +
    // 13 as grpc-go's server answers malformed binary metadata (issue 10 item 9).
    const bad = copyRequestHeaders(out, raw, "grpc-timeout");
    if (bad !== null) return this.finish(outcome(Code.INTERNAL, bad, "bad_request", 400));
    if (timeoutHeader !== undefined) out["grpc-timeout"] = timeoutHeader;
    if (out["te"] === undefined) out["te"] = "trailers";
    if (rid === undefined) out["x-request-id"] = this.requestId;

    this.upHeaders = out;
    this.upEndStream = (flags & NGHTTP2_FLAG_END_STREAM) !== 0;
    const factories = this.routes.filters;
    if (factories !== null) {
      let fs: CallFilter[] | null = null;
      for (let i = 0; i < factories.length; i++) {
        const f = factories[i]!.forCall(this, route, raw);
        if (f !== null) (fs ??= []).push(f);
      }
      if (fs !== null) {
        this.filters = fs;
        if (!this.runRequestHead(0)) return;
      }
    }
    this.proceed();
  }

  /** FilterCall: the current attempt's upstream stream (undefined until it is open). */
  get upstream(): ClientHttp2Stream | undefined {
    return this.attempt?.up;
  }

  /** Picks an endpoint and starts the attempt. */
  private proceed(): void {
    if (this.done) return;
    const cluster = this.route!.cluster;
    const ep = cluster.pick();
    if (ep === undefined) return this.finish(outcome(Code.UNAVAILABLE, `cluster ${cluster.name} has no endpoints`, "upstream_unreachable"));
    const fs = this.filters;
    const a = new Attempt(this, ep, this.upHeaders!, this.upEndStream, fs !== null && resetsWithCodes(fs));
    this.attempt = a;
    this.upHeaders = undefined;
    if (fs !== null) {
      for (let i = 0; i < fs.length; i++) {
        const f = fs[i]!;
        if (f.onAttemptStart !== undefined && !f.onAttemptStart(this, a)) return;
        if (this.done) return;
      }
    }
    a.start();
  }

  // === AttemptOwner: what the attempt reports ===

  onAttemptOpen(a: Attempt): void {
    // Only now does the request body flow: until here it waits in the stream (flow-controlled).
    if (!this.reading) {
      this.reading = true;
      const down = this.down;
      down.on("data", onDownData);
      down.on("end", onDownEnd);
    }
    const fs = this.filters;
    if (fs !== null) {
      for (let i = 0; i < fs.length && !this.done; i++) fs[i]!.onAttemptOpen?.(this, a);
    }
  }

  onAttemptFailed(_a: Attempt, o: Outcome): void {
    this.finish(o);
  }

  onAttemptHead(a: Attempt, headers: IncomingHttpHeaders, flags: number, raw: readonly string[]): void {
    if (this.done) return;
    if (this.filters !== null) {
      this.heldHead = { headers, flags, raw };
      if (!this.runResponseHead(0)) {
        // Held: nothing of the response may reach the client before its head, so the attempt
        // stops reading (its DATA waits in the stream, flow-controlled) until continueResponseHead.
        if (this.heldHead !== undefined && !this.done) a.pause();
        return;
      }
      this.heldHead = undefined;
    }
    this.onResponse(headers, flags, raw);
  }

  onAttemptEnd(_a: Attempt): void {
    // (a held head: continueResponseHead forwards the trailers once the head is out)
    if (this.upTrailers !== undefined && !this.done && this.heldHead === undefined) this.forwardStatus(this.upTrailers, false);
  }

  onAttemptDrain(_a: Attempt): void {
    if (!this.done) this.down.resume();
  }

  mayEndRequest(): boolean {
    const down = this.down;
    if (this.done || down.aborted || down.destroyed) return false;
    // END_STREAM inside a message (a prefix or body cut short) is the client's error, decided
    // at once (issue 10 item 12): grpc-go's server reads it as io.ErrUnexpectedEOF and answers
    // 13 "unexpected EOF" (spec §3). Decided here, in the check phase, not at 'end', so a
    // client's RST_STREAM (which ends node's readable side too) stays a cancel. The upstream
    // gets CANCEL (finish cancels the attempt), never END_STREAM after half a message.
    if (!atMessageBoundary(this.reqScan)) {
      this.finish(outcome(Code.INTERNAL, "unexpected EOF", "bad_request"));
      return false;
    }
    return true;
  }

  private armTimer(ms: number): void {
    this.timer = setTimeout(onDeadlineTimer, ms > MAX_TIMER_MS ? MAX_TIMER_MS : ms, this);
  }

  onDeadline(): void {
    this.timer = undefined;
    if (this.done) return;
    const left = this.deadlineAt - this.ctx.now();
    if (left > DEADLINE_SLACK_MS) return this.armTimer(left);
    this.finish(outcome(Code.DEADLINE_EXCEEDED, "context deadline exceeded", "deadline"));
  }

  onIdleTimer(): void {
    this.idleTimer = undefined;
    if (this.done) return;
    const moved = this.reqScan.bytes + this.respScan.bytes + (this.responded ? 1 : 0);
    if (moved !== this.idleSeen) {
      this.idleSeen = moved;
      this.idleTimer = setTimeout(onIdleTimer, this.idleMs, this);
      return;
    }
    // 14: an intermediary giving up on a silent stream, as a connection idle timeout surfaces
    // in gRPC; 4 would blame a deadline the client never set (Envoy answers 408 "stream timeout").
    this.finish(outcome(Code.UNAVAILABLE, `stream idle timeout: nothing moved either way for ${this.idleMs} ms`, "stream_idle"));
  }

  // === request body ===

  onRequestData(chunk: Buffer): void {
    const a = this.attempt;
    if (this.done || a === null) return;
    const route = this.route!;
    if (!scanChunk(this.reqScan, chunk, route.maxRequestMessageBytes)) {
      // Refused at the prefix: the over-limit message (and this chunk) never goes upstream.
      return this.finish(
        outcome(Code.RESOURCE_EXHAUSTED, `grpc: received message larger than max (${this.reqScan.overLimit} vs. ${route.maxRequestMessageBytes})`, "message_too_large"),
      );
    }
    const rb = this.retryBuffer;
    if (rb !== null && !rb.push(chunk)) this.commit(); // over the cap: no other attempt is possible
    const fs = this.filters;
    if (fs !== null) {
      for (let i = 0; i < fs.length; i++) {
        const f = fs[i]!;
        if (f.onRequestData !== undefined && f.onRequestData(this, chunk)) return;
      }
    }
    if (!a.write(chunk)) this.down.pause();
  }

  /** The call stays with its current attempt whatever happens: the retry buffer lets go. */
  commit(): void {
    const rb = this.retryBuffer;
    if (rb === null) return;
    rb.commit();
    this.retryBuffer = null;
  }

  onRequestEnd(): void {
    if (this.retryBuffer !== null) this.retryBuffer.end();
    if (this.filters !== null && !this.runRequestEnd(0)) return;
    this.endRequest();
  }

  private endRequest(): void {
    const a = this.attempt;
    if (this.done || a === null) return;
    a.endRequest();
  }

  // === response ===

  private onResponse(headers: IncomingHttpHeaders, flags: number, raw: readonly string[]): void {
    const st = headers[":status"];
    const ct = headers["content-type"];
    const gs = headers["grpc-status"];
    const endStream = (flags & NGHTTP2_FLAG_END_STREAM) !== 0;
    const v = classifyResponseHead({
      status: typeof st === "number" ? st : undefined,
      contentType: typeof ct === "string" ? ct : undefined,
      grpcStatus: typeof gs === "string" ? gs : undefined,
      endStream,
    });
    if (v.kind === "skip") return;
    if (v.kind === "synthesize") return this.finish(v.outcome);
    const out: OutgoingHeaders = copyHeaders({ ":status": 200 }, raw, undefined);
    const fs = this.filters;
    if (fs !== null) for (let i = 0; i < fs.length; i++) fs[i]!.shapeResponseHead?.(this, out);
    if (endStream) {
      // Trailers-Only stays Trailers-Only: A6 retries depend on no headers going out first.
      return this.forwardStatus(out, endStream);
    }
    try {
      this.down.respond(out, { waitForTrailers: true });
      this.responded = true;
      if (fs !== null) for (let i = 0; i < fs.length && !this.done; i++) fs[i]!.onResponseHeadSent?.(this);
    } catch (err) {
      this.finish(outcome(Code.INTERNAL, `invalid response headers from upstream: ${(err as Error).message}`, "upstream_protocol"));
    }
  }

  onAttemptData(_a: Attempt, chunk: Buffer): void {
    if (this.done) return;
    const route = this.route!;
    if (!scanChunk(this.respScan, chunk, route.maxResponseMessageBytes)) {
      // The whole messages before the refused prefix still reach the client (a view, no copy).
      const at = this.respScan.overLimitAt;
      if (at > 0) this.down.write(chunk.subarray(0, at));
      return this.finish(
        outcome(Code.RESOURCE_EXHAUSTED, `grpc: received message larger than max (${this.respScan.overLimit} vs. ${route.maxResponseMessageBytes})`, "message_too_large"),
      );
    }
    const fs = this.filters;
    if (fs !== null) {
      if (this.responseTakenOver) return;
      for (let i = 0; i < fs.length; i++) {
        const f = fs[i]!;
        if (f.onResponseData !== undefined && f.onResponseData(this, chunk)) return;
      }
    }
    if (!this.down.write(chunk)) {
      this.attempt!.pause();
      if (!this.downDrainHooked) {
        this.downDrainHooked = true;
        this.down.on("drain", onDownDrain);
      }
    }
  }

  onAttemptTrailers(_a: Attempt, raw: readonly string[]): void {
    if (this.done) return;
    if (this.filters !== null) {
      if (this.responseTakenOver) return;
      if (this.heldHead !== undefined) {
        // A delayed response head: the trailers wait behind it (and behind the data).
        this.upTrailers = copyHeaders({}, raw, undefined);
        return;
      }
    }
    if (!this.responded) {
      // Trailers without response headers cannot happen in HTTP/2 (the first HEADERS is the
      // response); guard anyway so the status still reaches the client.
      return this.finish(outcome(Code.INTERNAL, "upstream sent trailers before response headers", "upstream_protocol"));
    }
    // node emits 'trailers' as soon as the frame is parsed, even while DATA read before it is
    // still buffered behind backpressure: forward the status only after 'end', once every
    // message has been passed on, or the client would get OK with its last messages missing.
    this.upTrailers = copyHeaders({}, raw, undefined);
    if (this.attempt!.ended) this.forwardStatus(this.upTrailers, false);
  }

  /**
   * The upstream's own status block (trailers, or Trailers-Only when `trailersOnly`). A block
   * without a parsable grpc-status still ends with a readable stamp: 2 UNKNOWN, as grpc-go's
   * client would decide (spec §4.1), and dojang says it decided.
   */
  private forwardStatus(block: OutgoingHeaders, trailersOnly: boolean): void {
    const fs = this.filters;
    if (fs !== null) {
      if (this.responseTakenOver || this.trailersHeld) return;
      if (trailersOnly) {
        const extra = this.filterExtra();
        if (extra !== undefined) Object.assign(block, extra);
      } else if (!this.runTrailers(0, block)) {
        if (!this.done) this.trailersHeld = true; // held back by a filter (continueTrailers goes on)
        return;
      }
    }
    this.forwardStatusNow(block, trailersOnly);
  }

  private forwardStatusNow(block: OutgoingHeaders, trailersOnly: boolean): void {
    this.done = true;
    this.clearTimer();
    const gsRaw = block["grpc-status"];
    const gs = parseGrpcStatus(typeof gsRaw === "string" ? gsRaw : undefined);
    const gm = block["grpc-message"];
    if (gs === undefined) {
      const why = gsRaw === undefined ? "missing grpc-status in upstream " + (trailersOnly ? "response" : "trailers") : `malformed grpc-status: ${String(gsRaw)}`;
      this.code = Code.UNKNOWN;
      this.message = typeof gm === "string" && gm !== "" ? gm : encodeGrpcMessage(why);
      this.messageEncoded = true;
      this.decidedBy = "upstream_protocol";
      block["grpc-status"] = "2";
      if (typeof gm !== "string" || gm === "") block["grpc-message"] = encodeGrpcMessage(why);
      if (trailersOnly && block["content-type"] === undefined) block["content-type"] = "application/grpc";
    } else {
      this.code = gs;
      this.attempt!.status = gs;
      // Forwarded unchanged; decoded only when logged (the log shows what the client reads).
      this.message = typeof gm === "string" ? gm : undefined;
      this.messageEncoded = true;
      this.decidedBy = "upstream";
    }
    const down = this.down;
    if (down.destroyed || down.closed) return;
    if (trailersOnly) {
      try {
        down.respond(block, { endStream: true });
        this.responded = true;
        closeRequestSide(down);
      } catch (err) {
        this.respondLocal(outcome(Code.INTERNAL, `invalid response headers from upstream: ${(err as Error).message}`, "upstream_protocol"), undefined);
      }
      return;
    }
    this.pendingTrailers = block;
    down.end();
  }

  onAttemptClose(_a: Attempt): void {
    if (this.done) return;
    if (this.filters !== null) {
      if (this.responseTakenOver) return;
      if (this.heldHead !== undefined) {
        this.upCloseDeferred = true; // decided once the delayed head has gone out
        return;
      }
    }
    this.decideAfterUpstreamClose();
  }

  private decideAfterUpstreamClose(): void {
    if (this.upTrailers !== undefined) return this.forwardStatus(this.upTrailers, false);
    const o = this.attempt!.outcomeAtClose(this.responded, this.ctx.now() >= this.deadlineAt - DEADLINE_SLACK_MS);
    if (o !== null) this.finish(o);
  }

  // === ends ===

  /** dojang's own status for the call; cancels the upstream if it is still open. */
  finish(o: Outcome, extra?: OutgoingHeaders): void {
    if (this.done) return;
    this.done = true;
    this.clearTimer();
    this.code = o.code;
    this.message = o.message;
    this.decidedBy = o.decidedBy;
    const a = this.attempt;
    if (a !== null) a.cancel();
    this.respondLocal(o, extra ?? this.filterExtra());
  }

  // === filter chain (filter.ts): hook runs, and FilterCall's continuations ===

  private filterIndex(from: CallFilter): number {
    return this.filters!.indexOf(from) + 1;
  }

  /** Request head hooks from `start`; true when every filter let the call go on. */
  private runRequestHead(start: number): boolean {
    const fs = this.filters!;
    for (let i = start; i < fs.length; i++) {
      const f = fs[i]!;
      if (f.onRequestHead !== undefined && !f.onRequestHead(this)) return false;
      if (this.done) return false;
    }
    return true;
  }

  private runResponseHead(start: number): boolean {
    const fs = this.filters!;
    for (let i = start; i < fs.length; i++) {
      const f = fs[i]!;
      if (f.onResponseHead !== undefined && !f.onResponseHead(this)) return false;
      if (this.done) return false;
    }
    return true;
  }

  private runRequestEnd(start: number): boolean {
    const fs = this.filters!;
    for (let i = start; i < fs.length; i++) {
      const f = fs[i]!;
      if (f.onRequestEnd !== undefined && !f.onRequestEnd(this)) return false;
      if (this.done) return false;
    }
    return true;
  }

  private runTrailers(start: number, block: OutgoingHeaders): boolean {
    const fs = this.filters!;
    for (let i = start; i < fs.length; i++) {
      const f = fs[i]!;
      if (f.onTrailers !== undefined && !f.onTrailers(this, block)) return false;
      if (this.done) return false;
    }
    return true;
  }

  /** The chain's extra status fields (a rule trailer), merged in chain order. */
  private filterExtra(): OutgoingHeaders | undefined {
    const fs = this.filters;
    if (fs === null) return undefined;
    let out: OutgoingHeaders | undefined;
    for (let i = 0; i < fs.length; i++) {
      const e = fs[i]!.statusExtra;
      if (e !== undefined) out = out === undefined ? e : { ...out, ...e };
    }
    return out;
  }

  continueRequestHead(from: CallFilter): void {
    if (this.done) return;
    if (this.runRequestHead(this.filterIndex(from))) this.proceed();
  }

  continueResponseHead(from: CallFilter): void {
    const h = this.heldHead;
    if (h === undefined || this.done) return;
    if (!this.runResponseHead(this.filterIndex(from))) return;
    this.heldHead = undefined;
    // Reading resumes before the head goes out: 'data' flows from the next tick, so a filter's
    // onResponseHeadSent may still pause it again in this one (a stall).
    this.attempt!.resume();
    this.onResponse(h.headers, h.flags, h.raw);
    if (this.done) return;
    if (this.upCloseDeferred) this.decideAfterUpstreamClose();
    else if (this.upTrailers !== undefined && this.attempt!.ended) this.forwardStatus(this.upTrailers, false);
  }

  continueTrailers(from: CallFilter, block: OutgoingHeaders): void {
    if (this.done || this.responseTakenOver) return;
    if (this.runTrailers(this.filterIndex(from), block)) this.forwardStatusNow(block, false);
  }

  continueRequestEnd(from: CallFilter): void {
    if (this.done) return;
    if (this.runRequestEnd(this.filterIndex(from))) this.endRequest();
  }

  finishLocal(o: Outcome, extra?: OutgoingHeaders): void {
    this.finish(o, extra);
  }

  recordEnd(code: number, message: string, decidedBy: DecidedBy): void {
    if (this.done) return;
    this.done = true;
    this.responded = true;
    this.clearTimer();
    this.code = code;
    this.message = message;
    this.decidedBy = decidedBy;
  }

  endWithTrailers(block: OutgoingHeaders, code: number, message: string, decidedBy: DecidedBy): void {
    if (this.done) return;
    this.done = true;
    this.clearTimer();
    this.code = code;
    this.message = message;
    this.decidedBy = decidedBy;
    const down = this.down;
    if (down.destroyed || down.closed) return;
    this.pendingTrailers = block;
    down.end();
  }

  takeOverResponse(): void {
    this.responseTakenOver = true;
  }

  lowestStreamIdOnSession(): number {
    const session = this.down.session;
    let low = this.down.id ?? 1;
    for (const c of this.ctx.active) {
      const id = c.down.id;
      if (c.down.session === session && id !== undefined && id < low && !c.down.closed) low = id;
    }
    return low;
  }

  private respondLocal(o: Outcome, extra: OutgoingHeaders | undefined): void {
    const down = this.down;
    if (down.destroyed || down.closed) return;
    if (!this.responded) {
      this.responded = true;
      try {
        down.respond(extra === undefined ? trailersOnlyHeaders(o) : { ...trailersOnlyHeaders(o), ...extra }, { endStream: true });
        closeRequestSide(down);
      } catch {
        down.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
      }
      return;
    }
    // Headers went out: the status follows the messages already forwarded, as trailers.
    this.pendingTrailers = extra === undefined ? statusTrailers(o) : { ...statusTrailers(o), ...extra };
    if (!down.writableEnded) down.end();
  }

  onWantTrailers(): void {
    const down = this.down;
    const t = this.pendingTrailers ?? statusTrailers(outcome(Code.INTERNAL, "proxy ended the stream without a status", "upstream_protocol"));
    try {
      down.sendTrailers(t);
    } catch {
      down.sendTrailers(statusTrailers(outcome(Code.INTERNAL, "upstream trailers could not be forwarded", "upstream_protocol")));
    }
    // A close() in the same tick would discard the trailers just submitted (probed on Node 24).
    if (!down.readableEnded) setImmediate(closeRequestSide, down);
    const fs = this.filters;
    if (fs !== null) for (let i = 0; i < fs.length; i++) fs[i]!.onTrailersSent?.(this);
  }

  onDownstreamClose(): void {
    if (!this.done) {
      // The client went away (RST_STREAM CANCEL or a dropped connection): cancel upstream now.
      // PROTOCOL_ERROR: nghttp2 reset a malformed request (e.g. DATA beyond its content-length,
      // issue 10 item 11), or the client said its own stream was broken: not a cancel.
      if (this.down.rstCode === http2.constants.NGHTTP2_PROTOCOL_ERROR) this.finish(outcome(Code.INTERNAL, "request stream reset with PROTOCOL_ERROR (malformed request, e.g. DATA beyond its content-length)", "bad_request"));
      else if (this.ctx.now() >= this.deadlineAt - CLIENT_DEADLINE_SLACK_MS) this.finish(outcome(Code.DEADLINE_EXCEEDED, "context deadline exceeded", "deadline"));
      else this.finish(outcome(Code.CANCELLED, "client cancelled the call", "client_cancel"));
    }
    this.clearTimer();
    this.commit();
    const fs = this.filters;
    if (fs !== null) for (let i = 0; i < fs.length; i++) fs[i]!.onEnd?.(this);
    const ctx = this.ctx;
    ctx.active.delete(this);
    const m = ctx.metrics;
    m.live.activeCalls--;
    const code = this.code;
    m.countCall(this.series, code, this.decidedBy, fs === null ? undefined : faultRuleLabel(fs));
    const dur = ctx.now() - this.t0;
    this.series.duration.observe(dur / 1000);
    // What was forwarded, not what was read: a message refused at its prefix is not counted
    // (issue 10 item 8); the bytes dropped go to req_/resp_refused_bytes.
    // The request side drops a refused chunk whole; the response side still forwards the whole
    // messages before the refused prefix (onAttemptData).
    const reqMessages = forwardedMessages(this.reqScan, false);
    const respMessages = forwardedMessages(this.respScan, true);
    if (reqMessages > 0) this.series.reqMessages.inc(reqMessages);
    if (respMessages > 0) this.series.respMessages.inc(respMessages);
    m.live.forwardedBytes += this.reqScan.bytes + this.respScan.bytes;
    const logIt = ctx.accessLog && ctx.access.isLevelEnabled("info");
    if (logIt || ctx.journal.size > 0) {
      const prev = this.prevAttempts;
      const rec: AccessRecord = {
        request_id: this.requestId,
        path: this.path,
        authority: this.authority,
        grpc_code: code,
        grpc_status: codeName(code),
        decided_by: this.decidedBy,
        grpc_message: this.messageEncoded && this.message !== undefined ? decodeGrpcMessage(this.message) : this.message,
        route: this.route?.label,
        upstream: this.attempt?.session?.endpoint.label,
        budget_in_ms: this.budgetInMs,
        budget_out_ms: this.budgetOutMs,
        duration_ms: Math.round(dur * 1000) / 1000,
        req_messages: reqMessages,
        req_bytes: forwardedBytes(this.reqScan, false),
        req_refused_bytes: refusedBytes(this.reqScan, false),
        resp_messages: respMessages,
        resp_bytes: forwardedBytes(this.respScan, true),
        resp_refused_bytes: refusedBytes(this.respScan, true),
        faults: undefined,
        fault_kinds: undefined,
        attempt: prev === undefined ? 1 : (Number.parseInt(prev, 10) || 0) + 1,
        start_ms: Math.round(performance.timeOrigin + this.t0),
      };
      if (fs !== null) for (let i = 0; i < fs.length; i++) fs[i]!.annotate?.(rec);
      ctx.journal.push(rec);
      if (logIt) ctx.access.info(rec, "call");
    }
    ctx.onCallClosed();
  }

  private clearTimer(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    if (this.idleTimer !== undefined) {
      clearTimeout(this.idleTimer);
      this.idleTimer = undefined;
    }
  }
}

function resetsWithCodes(fs: readonly CallFilter[]): boolean {
  for (let i = 0; i < fs.length; i++) if (fs[i]!.resetsWithCodes) return true;
  return false;
}

/** The call metric's fault_rule label: the filters' labels joined (undefined when none has one). */
function faultRuleLabel(fs: readonly CallFilter[]): string | undefined {
  let out: string | undefined;
  for (let i = 0; i < fs.length; i++) {
    const l = fs[i]!.faultRule;
    if (l !== undefined) out = out === undefined ? l : `${out},${l}`;
  }
  return out;
}

/**
 * After the final status, a client still sending gets RST_STREAM(NO_ERROR), as grpc-go's
 * server does (spec §4.1 "early server closure"). node does this by itself only for a stream it
 * never read from, and dojang always reads; without it the stream stays half-open until the
 * client leaves, holding a stream slot.
 */
function closeRequestSide(down: ServerHttp2Stream): void {
  if (!down.closed && !down.destroyed && !down.readableEnded) down.close(http2.constants.NGHTTP2_NO_ERROR);
}

// === module-level listeners: `this` is the stream, the call is in its kCall slot ===

function callOf(s: unknown): Call {
  return (s as DownStream)[kCall]!;
}
function onDeadlineTimer(c: Call): void {
  c.onDeadline();
}
function onIdleTimer(c: Call): void {
  c.onIdleTimer();
}
function onDownData(this: ServerHttp2Stream, chunk: Buffer): void {
  callOf(this).onRequestData(chunk);
}
function onDownEnd(this: ServerHttp2Stream): void {
  callOf(this).onRequestEnd();
}
function onDownDrain(this: ServerHttp2Stream): void {
  const c = callOf(this);
  if (!c.done) c.attempt?.resume();
}
function onDownClose(this: ServerHttp2Stream): void {
  callOf(this).onDownstreamClose();
}
function onDownError(this: ServerHttp2Stream): void {
  // The stream's 'close' follows and decides; an error listener keeps the process alive.
}
function onDownWantTrailers(this: ServerHttp2Stream): void {
  callOf(this).onWantTrailers();
}
/** The listener's 'stream' handler. */
export function handleStream(ctx: CallContext, stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number, raw: string[]): void {
  const call = new Call(ctx, stream, headers);
  call.start(headers, flags, raw);
}
