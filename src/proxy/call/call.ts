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
  classifyResponseHead,
  codeName,
  decodeGrpcMessage,
  decodeTimeout,
  encodeGrpcMessage,
  encodeTimeout,
  isGrpcContentType,
  newScanner,
  outcome,
  parseGrpcStatus,
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
import { copyHeaders, type OutgoingHeaders } from "./headers.js";
import type { FaultExec, FaultableCall } from "./faults.js";
import { Attempt, type AttemptOwner } from "./attempt.js";

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

/** What every call on one listener shares; built once at start. */
export interface CallContext {
  readonly listener: string;
  readonly router: Router<Cluster>;
  readonly metrics: Metrics;
  readonly log: Logger;
  /** where access lines go (asynchronous) */
  readonly access: Logger;
  readonly accessLog: boolean;
  /** monotonic milliseconds */
  readonly now: () => number;
  /** fault selection for a call on a route; null when the listener can have no faults at all */
  readonly faultsFor: ((call: Call, route: CompiledRoute<Cluster>, raw: readonly string[]) => FaultExec | null) | null;
  /** recent calls (GET /calls); size 0 keeps none */
  readonly journal: Journal;
  /** calls in flight on this listener (drain: what is left at the timeout gets 14 "shutdown") */
  readonly active: Set<Call>;
  /** called when a call's downstream stream has closed (drain bookkeeping) */
  readonly onCallClosed: () => void;
}

type DownStream = ServerHttp2Stream & { [kCall]?: Call };

export class Call implements AttemptOwner, FaultableCall {
  readonly ctx: CallContext;
  readonly down: ServerHttp2Stream;
  readonly t0: number;
  readonly series: MethodSeries;
  readonly path: string;
  readonly authority: string | undefined;
  requestId = "";
  prevAttempts: string | undefined = undefined;
  route: CompiledRoute<Cluster> | undefined = undefined;
  /** the attempt the call is committed to (the only one, until retries exist) */
  attempt: Attempt | null = null;
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
  /** the faults selected for this call; null on the normal path (one null test per hook) */
  fault: FaultExec | null = null;
  heldHead: { headers: IncomingHttpHeaders; flags: number; raw: readonly string[] } | undefined = undefined;
  faultTrailersReady = false;
  faultHeadSeen = false;
  upCloseDeferred = false;
  /** the request head every attempt starts from (a filter may change it before the attempt) */
  upHeaders: OutgoingHeaders | undefined = undefined;
  upEndStream = false;
  /** the upstream's trailers, held until its readable side has ended */
  upTrailers: OutgoingHeaders | undefined = undefined;
  /** the request body is being read (its listeners are on the client stream) */
  private reading = false;
  /** 'drain' is listened to on the first write() that returns false (most calls never need it) */
  private downDrainHooked = false;

  constructor(ctx: CallContext, down: ServerHttp2Stream, headers: IncomingHttpHeaders) {
    this.ctx = ctx;
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

    const route = this.ctx.router.match(this.path, this.authority);
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

    const out: OutgoingHeaders = {
      ":method": "POST",
      ":scheme": "http",
      ":path": this.path,
      ":authority": this.authority ?? "",
    };
    copyHeaders(out, raw, "grpc-timeout");
    if (timeoutHeader !== undefined) out["grpc-timeout"] = timeoutHeader;
    if (out["te"] === undefined) out["te"] = "trailers";
    if (rid === undefined) out["x-request-id"] = this.requestId;

    this.upHeaders = out;
    this.upEndStream = (flags & NGHTTP2_FLAG_END_STREAM) !== 0;
    const faultsFor = this.ctx.faultsFor;
    if (faultsFor !== null) {
      const f = faultsFor(this, route, raw);
      if (f !== null) {
        this.fault = f;
        return f.beforeUpstream();
      }
    }
    this.proceed();
  }

  /** The current attempt's upstream stream (undefined until it is open). */
  get up(): ClientHttp2Stream | undefined {
    return this.attempt?.up;
  }

  /** Picks an endpoint and starts the attempt (FaultableCall: also after a delay). */
  proceed(): void {
    if (this.done) return;
    const a = new Attempt(this, this.route!.cluster.pick(), this.upHeaders!, this.upEndStream, this.upResetByClose);
    this.attempt = a;
    this.upHeaders = undefined;
    a.start();
  }

  // === AttemptOwner: what the attempt reports ===

  onAttemptOpen(_a: Attempt): void {
    // Only now does the request body flow: until here it waits in the stream (flow-controlled).
    if (!this.reading) {
      this.reading = true;
      const down = this.down;
      down.on("data", onDownData);
      down.on("end", onDownEnd);
    }
    if (this.fault !== null) this.fault.onUpstreamOpen();
  }

  onAttemptFailed(_a: Attempt, o: Outcome): void {
    this.finish(o);
  }

  onAttemptHead(_a: Attempt, headers: IncomingHttpHeaders, flags: number, raw: readonly string[]): void {
    this.onResponse(headers, flags, raw);
  }

  onAttemptData(_a: Attempt, chunk: Buffer): void {
    this.onResponseData(chunk);
  }

  onAttemptTrailers(_a: Attempt, raw: readonly string[]): void {
    this.onTrailers(raw);
  }

  onAttemptEnd(_a: Attempt): void {
    if (this.upTrailers !== undefined && !this.done) this.forwardStatus(this.upTrailers, false);
  }

  onAttemptDrain(_a: Attempt): void {
    if (!this.done) this.down.resume();
  }

  mayEndRequest(): boolean {
    const down = this.down;
    return !this.done && !down.aborted && !down.destroyed;
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
    if (this.fault !== null && this.fault.req !== null) return this.fault.req.push(chunk);
    if (!a.write(chunk)) this.down.pause();
  }

  onRequestEnd(): void {
    if (this.fault !== null) return this.fault.onRequestEnd();
    this.endRequestContinue();
  }

  // === response ===

  onResponse(headers: IncomingHttpHeaders, flags: number, raw: readonly string[]): void {
    if (this.done) return;
    if (this.fault !== null && this.heldHead === undefined && !this.faultHeadSeen) {
      this.faultHeadSeen = true;
      if (this.fault.delayResponseHead()) {
        this.heldHead = { headers, flags, raw };
        return;
      }
    }
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
    if (this.fault !== null) this.fault.shapeHead(out);
    if (endStream) {
      // Trailers-Only stays Trailers-Only: A6 retries depend on no headers going out first.
      return this.forwardStatus(out, endStream);
    }
    try {
      this.down.respond(out, { waitForTrailers: true });
      this.responded = true;
      if (this.fault !== null) this.fault.onHeadersSent();
    } catch (err) {
      this.finish(outcome(Code.INTERNAL, `invalid response headers from upstream: ${(err as Error).message}`, "upstream_protocol"));
    }
  }

  onResponseData(chunk: Buffer): void {
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
    if (this.fault !== null) {
      if (this.fault.discarding) return;
      if (this.fault.resp !== null) return this.fault.resp.push(chunk);
    }
    if (!this.down.write(chunk)) {
      this.attempt!.pause();
      if (!this.downDrainHooked) {
        this.downDrainHooked = true;
        this.down.on("drain", onDownDrain);
      }
    }
  }

  onTrailers(raw: readonly string[]): void {
    if (this.done) return;
    if (this.fault !== null) {
      if (this.fault.discarding) return;
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
    const f = this.fault;
    if (f !== null) {
      if (f.discarding) return;
      if (!trailersOnly && !this.faultTrailersReady && !f.onTrailers(block)) return; // held back by a fault
      if (trailersOnly && f.extra !== undefined) Object.assign(block, f.extra);
      const sh = f.shape?.shape;
      if (!trailersOnly && (sh === "no_trailers" || sh === "trailers_without_status")) {
        // The broken ending is the fault: send it as it is, and count what a client makes of it.
        this.done = true;
        this.clearTimer();
        this.code = sh === "no_trailers" ? Code.INTERNAL : Code.UNKNOWN;
        this.message = sh === "no_trailers" ? "fault: stream ended without trailers" : "fault: trailers without grpc-status";
        this.decidedBy = "fault";
        if (this.down.destroyed || this.down.closed) return;
        this.pendingTrailers = block;
        this.down.end();
        return;
      }
    }
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
    if (this.fault !== null) {
      if (this.fault.discarding) return;
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
    this.respondLocal(o, extra ?? this.fault?.extra);
  }

  // === FaultableCall (src/proxy/call/faults.ts) ===

  finishFault(code: number, message: string, extra: OutgoingHeaders | undefined): void {
    this.finish(outcome(code, message, "fault"), extra);
  }

  recordFault(code: number, message: string): void {
    if (this.done) return;
    this.done = true;
    this.responded = true;
    this.clearTimer();
    this.code = code;
    this.message = message;
    this.decidedBy = "fault";
  }

  onResponseHeadContinue(): void {
    const h = this.heldHead;
    this.heldHead = undefined;
    if (h === undefined) return;
    this.onResponse(h.headers, h.flags, h.raw);
    if (this.done) return;
    if (this.upCloseDeferred) this.decideAfterUpstreamClose();
    else if (this.upTrailers !== undefined && this.attempt!.ended) this.forwardStatus(this.upTrailers, false);
  }

  forwardTrailersContinue(block: OutgoingHeaders): void {
    this.faultTrailersReady = true;
    this.forwardStatus(block, false);
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

  endRequestContinue(): void {
    const a = this.attempt;
    if (this.done || a === null) return;
    a.endRequest();
  }

  /**
   * How the upstream request is opened and reset (see Attempt.resetByClose); fixed when the call
   * starts (its faults are chosen before the upstream is asked): with faults, because an
   * injected upstream_reset carries any code.
   */
  private get upResetByClose(): boolean {
    return this.fault !== null;
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
    if (this.fault !== null) this.fault.afterTrailersSent(down);
  }

  onDownstreamClose(): void {
    if (!this.done) {
      // The client went away (RST_STREAM CANCEL or a dropped connection): cancel upstream now.
      if (this.ctx.now() >= this.deadlineAt - CLIENT_DEADLINE_SLACK_MS) this.finish(outcome(Code.DEADLINE_EXCEEDED, "context deadline exceeded", "deadline"));
      else this.finish(outcome(Code.CANCELLED, "client cancelled the call", "client_cancel"));
    }
    this.clearTimer();
    if (this.fault !== null) this.fault.clear();
    const ctx = this.ctx;
    ctx.active.delete(this);
    const m = ctx.metrics;
    m.live.activeCalls--;
    const code = this.code;
    const f = this.fault;
    m.countCall(this.series, code, this.decidedBy, f === null ? undefined : f.ruleIds.join(","));
    const dur = ctx.now() - this.t0;
    this.series.duration.observe(dur / 1000);
    if (this.reqScan.messages > 0) this.series.reqMessages.inc(this.reqScan.messages);
    if (this.respScan.messages > 0) this.series.respMessages.inc(this.respScan.messages);
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
        req_messages: this.reqScan.messages,
        req_bytes: this.reqScan.bytes,
        resp_messages: this.respScan.messages,
        resp_bytes: this.respScan.bytes,
        faults: f === null ? undefined : f.ruleIds,
        fault_kinds: f === null ? undefined : f.kinds,
        attempt: prev === undefined ? 1 : (Number.parseInt(prev, 10) || 0) + 1,
        start_ms: Math.round(performance.timeOrigin + this.t0),
      };
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
  }
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
