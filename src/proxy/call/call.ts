// One gRPC call: the client (downstream) stream, the deadline budget, the route, and the
// attempt that carries it upstream (attempt.ts: one upstream stream on one session). The call
// gathers facts (what its attempt reports, the clock) and asks src/translate what the status is;
// its only exits are forwardStatus() (the upstream's own grpc-status) and finish(outcome)
// (dojang's), each of which runs at most once.
//
// Retries and transparent retries: retry.ts (RetryController), null on a call whose route has
// no retry policy, made lazily for the one transparent retry such a call may need. Beside it,
// as module functions taking the call: deadline.ts (its clocks), request-body.ts (client DATA
// → upstream), response-body.ts (upstream DATA and trailers → client), respond.ts (writes).
//
// One writer per field (issue 30 item 2): each helper file declares the narrow host it sees
// (RetryHost, ClockHost, RequestHost, ResponseHost, RespondHost, WireHost, RecordedCall, …) and
// Call implements them all; none of them imports Call. The status (done, code, message,
// messageEncoded, decidedBy) is fixed in settle() only; respond.ts and wire.ts change the call
// only through settle(), markResponded() and setPendingTrailers(). The few fields a helper owns
// (the clocks in deadline.ts and idle.ts, the request's in request-body.ts, upTrailers in
// response-body.ts, retry in retry.ts) are written there only: test/architecture/layers.test.ts
// maps every mutable field to its one file.
//
// Hot-path rules (style.md §3.7): stream listeners are module-level functions that find the
// call in one symbol slot on the stream, so no closure is created per call or per chunk;
// payload chunks are passed on unchanged (the prefix scanner only reads bytes by index).
import http2, { type IncomingHttpHeaders } from "node:http2";
import { Code, GRPC_CONTENT_TYPE, grpcReplyContentType, isMethodPath, newScanner, outcome, redactTarget, type DecidedBy, type FrameScanner, type Outcome } from "../../translate/index.js";
import { goQuote } from "../../translate/go-text.js";
import type { CompiledRoute } from "../router.js";
import type { ActiveCall } from "./active.js";
import type { CallContext, ListenerRoutes } from "./context.js";
import type { Cluster } from "../upstream/cluster.js";
import type { MethodSeries } from "../observe/metrics.js";
import type { Trace } from "../observe/tracing.js";
import type { AttemptEnd } from "../../translate/retry.js";
import { kPeer, kRequestBytes, type ClientPeer, type OutgoingHeaders, type PeerSession } from "./headers.js";
import type { Downstream, DownstreamOwner } from "./downstream.js";
import { Attempt, type AttemptOwner } from "./attempt.js";
import type { CallFilter, CallWire, FilterCall } from "./filter.js";
import { RetryController, retryFromClose, tryRetry, type RetryHost } from "./retry.js";
import { BY_FILTER, BY_RETRY, HeldResponse } from "./held.js";
import { recordCall, type RecordedCall } from "./record.js";
import { Wire, type WireHost } from "./wire.js";
import { forwardUpstreamStatus, respondHead, respondLocal, sendTrailers, type RespondHost } from "./respond.js";
import { forgetTrailers, responseData, responseTrailers, type ResponseHost } from "./response-body.js";
import { filtersFor, nextAfter, resetsWithCodes, runAttemptOpen, runAttemptStart, runEnd, runRequestEnd, runRequestHead, runResponseHead, runTrailers, statusExtra } from "./filter-run.js";
import { checkRequestHead, newRequestId, timeoutHeaderFor, upstreamHead, type HeadHost } from "./request-head.js";
import type { IdleGroup } from "./idle.js";
import { clientPastDeadline, idleTimedOut, pastDeadline, startClocks, stopClocks, type ClockHost } from "./deadline.js";
import { endRequest, mayEndRequest, replayNoMore, requestData, requestEnd, type RequestHost } from "./request-body.js";
// issue 12 (protections): stalled calls count against the response-buffer budgets
import { responseBuffers } from "../observe/overload.js";

const { NGHTTP2_FLAG_END_STREAM } = http2.constants;
const kCall = Symbol("dojang.call");

type CallCarrier = Downstream & { [kCall]?: Call };

export class Call
  implements AttemptOwner, FilterCall, DownstreamOwner, ActiveCall, RetryHost, ClockHost, HeadHost, RequestHost, ResponseHost, RespondHost, WireHost, RecordedCall
{
  readonly ctx: CallContext;
  /** the routes and filters of the snapshot this call started with (kept to its end) */
  readonly routes: ListenerRoutes;
  /** the client side (downstream.ts): a native ServerHttp2Stream, or the gRPC-Web adapter */
  readonly down: Downstream;
  readonly t0: number;
  readonly series: MethodSeries;
  /**
   * The call's one canonical method name, "/pkg.Svc/Method" (src/translate/grpc-path.ts), derived
   * once, here: routing, rbac and the other filters, rate-limit descriptors, fault matching, metric
   * labels, the access record, span names and the :path sent upstream all read it, never the
   * client's :path (issue 0.5.1 item 1). "" when the call's :path is not a method path.
   */
  readonly path: string;
  /** the client's :path when it is not a method path (the call is refused before routing); else undefined */
  readonly refusedTarget: string | undefined;
  readonly authority: string | undefined;
  /** who the client is (its connection's facts, read once per connection: headers.ts kPeer) */
  readonly peer: ClientPeer | undefined;
  requestId = "";
  prevAttempts: string | undefined = undefined;
  route: CompiledRoute<Cluster> | undefined = undefined;
  /** the current attempt (null before the first and between attempts) */
  attempt: Attempt | null = null;
  /**
   * The retry rules acting on this call (retry.ts): made at the start on a route with a retry
   * policy, else only when an attempt ends refused (a transparent retry); null on the hot path.
   */
  retry: RetryController | null = null;
  /** upstream attempts started (the access record's `attempts`) */
  attempts = 0;
  /**
   * Without a policy: the one request chunk read so far, kept by reference for a transparent
   * retry (undefined: none read yet; null: not replayable, a second chunk came or the response
   * started, or the call has a policy and its retry buffer).
   */
  replayChunk: Buffer | null | undefined = undefined;
  /** the client's request has ended (a retried attempt ends its request too) */
  reqEnded = false;
  /** the request head retries copy (the first attempt's own object; a retry copies it) */
  headBase: OutgoingHeaders | undefined = undefined;
  /** this call counts in its cluster's breaker.activeCalls (maxCalls) */
  countedCall = false;
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
  /**
   * The response head held back (held.ts): by the retry controller until the call commits, then
   * by a filter until continueResponseHead; undefined when nothing holds it (the normal path).
   */
  held: HeldResponse | undefined = undefined;
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
  reading = false;
  /** 'drain' is listened to on the first write() that returns false (most calls never need it) */
  private downDrainHooked = false;
  /** a response head came while its client's window was under one frame: the guard counted the call as unread (onAttemptHead) */
  private countedAtHead = false;
  /**
   * streamIdleTimeout (issue 10 item 12): watched only when the timeout is on and shorter than
   * the call's deadline, never reset per chunk, and without a timer of its own (idle.ts: one
   * timer per period for all calls, which compares what each call moved with what it saw a
   * period before). A call is cut after between one and two idle periods without a frame.
   */
  idleGroup: IdleGroup | undefined = undefined;
  idleMs = 0;
  idleSeen = -1;
  idleSlot = -1;
  activeSlot = -1;
  /**
   * gRPC-Web (src/proxy/downstream/grpc-web.ts): "grpc-web" or "grpc-web-text" when `down` is
   * the gRPC-Web adapter (a Downstream that translates); undefined for a native stream, which
   * alone takes a response head as node's flat list and learns of a reset before its 'end'.
   */
  readonly clientProtocol: string | undefined;
  /** the call's trace (config `tracing`; observe/tracing.ts); null when tracing is off */
  trace: Trace | null = null;
  /** the content-type of a status dojang writes itself: the request's own gRPC subtype (respond.ts) */
  replyType = GRPC_CONTENT_TYPE;

  /**
   * The :path must be a method path as it is: a bridge's head (downstream/bridge.ts bridgeHead)
   * carries the method it names there (a Connect URL normalised, a JSON rule's method).
   */
  constructor(ctx: CallContext, down: Downstream, headers: IncomingHttpHeaders, clientProtocol?: string) {
    this.ctx = ctx;
    this.routes = ctx.routes.current;
    this.down = down;
    this.clientProtocol = clientProtocol;
    this.t0 = ctx.now();
    // The one canonical name, once. A method path (the common case) is validated in one pass and
    // kept as the same string: no allocation.
    const p = headers[":path"];
    const target = typeof p === "string" ? p : "";
    if (isMethodPath(target)) {
      this.path = target;
      this.refusedTarget = undefined;
      this.series = ctx.metrics.seriesFor(target);
    } else {
      this.path = "";
      this.refusedTarget = target;
      this.series = ctx.metrics.malformed;
    }
    const a = headers[":authority"] ?? headers["host"];
    this.authority = typeof a === "string" ? a : undefined;
    // (a reference: node has let go of down.session by the time the access record is made)
    this.peer = (down.session as PeerSession | undefined)?.[kPeer];
    (down as CallCarrier)[kCall] = this;
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
    const tracing = this.ctx.tracing;
    if (tracing !== null) {
      const red = this.ctx.accessLogRedact;
      this.trace = tracing.begin(headers, this.path, this.t0, red !== null && red.includes("client_address") ? undefined : this.peer?.address);
    }

    const ct = headers["content-type"];
    if (ct !== GRPC_CONTENT_TYPE) this.replyType = grpcReplyContentType(ct);
    // Early aborts mirror grpc-go's server (spec §11.7): these go out with their HTTP status.
    const checked = checkRequestHead(headers);
    if (typeof checked === "object") return this.finish(checked);
    const clientMs = checked;
    if (clientMs !== undefined) {
      this.budgetInMs = clientMs;
      this.ctx.metrics.budgetInNoLabels.observe(clientMs / 1000);
    }

    // A :path outside the gRPC grammar names no method: refused before any rule reads it, 12 as
    // grpc-go's server answers a malformed method name (spec sheet §1.1); the record and the
    // message show it with its query redacted.
    const refused = this.refusedTarget;
    if (refused !== undefined) return this.finish(outcome(Code.UNIMPLEMENTED, `malformed method name: ${goQuote(redactTarget(refused))}`, "no_route"));
    const route = this.routes.router.match(this.path, this.authority);
    if (route === undefined) {
      return this.finish(outcome(Code.UNIMPLEMENTED, `no route for ${this.path} on listener ${this.ctx.listener}`, "no_route"));
    }
    this.route = route;
    // maxCalls is asked here, at the call (upstream/breaker.ts): overflow answers 14 at once,
    // before anything goes upstream.
    const cluster = route.cluster;
    const overflow = cluster.breaker.admitCall();
    if (overflow !== undefined) return this.finish(outcome(Code.UNAVAILABLE, overflow, "overflow"));
    this.countedCall = true;
    cluster.budget.deposit(this.t0);
    const policy = route.retry;
    if (policy !== null) {
      RetryController.forRoute(this, policy);
      replayNoMore(this);
    }

    const timeoutHeader = startClocks(this, clientMs, route);
    if (timeoutHeader === null) return;

    const out = upstreamHead(this, cluster, raw, timeoutHeader, rid === undefined ? this.requestId : undefined);
    if (typeof out === "string") return this.finish(outcome(Code.INTERNAL, out, "bad_request", 400));
    this.upHeaders = out;
    this.headBase = out;
    this.upEndStream = (flags & NGHTTP2_FLAG_END_STREAM) !== 0;
    const factories = this.routes.filters;
    if (factories !== null) {
      const fs = filtersFor(this, factories, route, raw);
      if (fs !== null) {
        this.filters = fs;
        if (!runRequestHead(this, 0)) return;
      }
    }
    this.startAttempt();
  }

  /** FilterCall: the client's address ("" when unknown). */
  get clientAddress(): string {
    // read once per connection (downstream/peer.ts): no getpeername per call
    return this.peer?.address ?? "";
  }

  /** FilterCall: the wire capability (wire.ts; stateless, a filter keeps the one it got). */
  wire(): CallWire {
    return new Wire(this);
  }

  /**
   * Picks an endpoint (avoiding the one the last attempt failed on) and starts an attempt. The
   * first takes the request head as it is; a retry copies it with grpc-previous-rpc-attempts
   * (the count of previous attempts, gRFC A6) and what is left of the deadline as grpc-timeout.
   */
  startAttempt(): void {
    if (this.done) return;
    const cluster = this.route!.cluster;
    const r = this.retry;
    const ep = cluster.pick(r === null ? undefined : r.avoid);
    if (ep === undefined) return this.finish(outcome(Code.UNAVAILABLE, `cluster ${cluster.name} has no endpoints`, "upstream_unreachable"));
    const n = this.attempts++;
    let head: OutgoingHeaders;
    if (n === 0) {
      head = this.upHeaders!;
      this.upHeaders = undefined;
      // budget out: the grpc-timeout the upstream gets (a call refused before this sends none)
      if (this.budgetOutMs !== undefined) this.ctx.metrics.budgetOutNoLabels.observe(this.budgetOutMs / 1000);
    } else {
      head = { ...this.headBase! };
      head["grpc-previous-rpc-attempts"] = String(n);
      if (this.deadlineAt !== Infinity) head["grpc-timeout"] = timeoutHeaderFor(this.deadlineAt - this.ctx.now());
    }
    if (this.trace !== null) this.ctx.tracing!.attemptStart(this.trace, n + 1, ep.host, ep.port, head);
    const fs = this.filters;
    const a = new Attempt(this, ep, head, this.upEndStream, fs !== null && resetsWithCodes(fs));
    this.attempt = a;
    if (r !== null) r.onAttemptStarting(a);
    if (fs !== null && !runAttemptStart(this, a)) return;
    a.start();
  }

  // === retries (retry.ts: the rules, tryRetry, retryFromClose; these are the call's side) ===

  /** RetryController: `a` is given up for another attempt (started now or after the back-off). */
  abandon(a: Attempt): void {
    this.attempt = null;
    forgetTrailers(this);
    this.held = undefined;
    if (this.trace !== null) this.ctx.tracing!.attemptAbandoned(this.trace, a.status, a.up === undefined ? "no stream reached the upstream" : "no status came; given up for a retry");
    a.cancel();
    // The request waits in the client stream (flow-controlled) until the next attempt is open.
    if (this.reading) this.down.pause();
  }

  /** AttemptOwner: the attempt's per-try timer (armed by the retry controller) ran out. */
  onAttemptTimeout(a: Attempt): void {
    if (this.done || a !== this.attempt) return;
    if (tryRetry(this, a, "per_try_timeout", undefined, undefined)) return;
    this.finish(outcome(Code.DEADLINE_EXCEEDED, `per-try timeout of ${this.retry!.policy!.perTryTimeoutMs} ms passed on attempt ${this.attempts}`, "deadline"));
  }

  /** FilterCall: a filter failed attempt `a` (an injected unreachable or upstream reset): retried as a real one would be, else `o` ends the call. */
  failAttempt(a: Attempt, o: Outcome, kind: "unreachable" | "reset", extra?: OutgoingHeaders): void {
    if (this.done || a !== this.attempt) return;
    const end: AttemptEnd = kind === "unreachable" ? "refused" : a.requestEnded ? "reset_after_request_end" : "reset_before_request_end";
    if (tryRetry(this, a, end, undefined, undefined)) return;
    this.finish(o, extra);
  }

  // === AttemptOwner: what the attempt reports ===

  onAttemptOpen(a: Attempt): void {
    // Only now does the request body flow: until here it waits in the stream (flow-controlled).
    if (!this.reading) {
      this.reading = true;
      const down = this.down;
      down.on("data", onDownData);
      down.on("end", onDownEnd);
      // An empty request can have ended already: node may read its END_STREAM (a DATA frame
      // after the HEADERS) and emit 'end' with no listener while the attempt waited for a new
      // upstream session. That 'end' is replayed, or END_STREAM never went upstream and the call
      // hung to its deadline (the conformance suite's no-request cases, the first call to a new
      // upstream).
      if (down.readableEnded) process.nextTick(replayDownEnd, down);
    } else if (this.attempts > 1 && this.retry!.replayInto(a)) this.down.resume();
    if (this.filters !== null) runAttemptOpen(this, a);
  }

  onAttemptFailed(a: Attempt, o: Outcome): void {
    if (a !== this.attempt) return;
    // A circuit breaker refused it at its start: no attempt was made (the record's attempts).
    if (o.decidedBy === "overflow") this.attempts--;
    // No stream reached the upstream (connect failed, session closed before it was ready).
    if (o.decidedBy === "upstream_unreachable" && tryRetry(this, a, "refused", undefined, undefined)) return;
    this.finish(o);
  }

  onAttemptHead(a: Attempt, headers: IncomingHttpHeaders, flags: number, raw: readonly string[]): void {
    if (this.done || a !== this.attempt) return;
    // issue 22: a call whose client's window is under one frame is unread from its head: counted
    // now, and cut here past the unread budgets, before its DATA is taken (observe/overload.ts);
    // one test on the normal path.
    if (responseBuffers.narrowClients) {
      this.countedAtHead = true;
      if (responseBuffers.unreadAtHead(this)) return;
    }
    replayNoMore(this); // the upstream took the stream: no transparent retry from here on
    // A retry is still possible (the buffer is kept): a status decides it, a message commits.
    const r = this.retry;
    if (r !== null && r.buffer !== null && r.onHead(a, headers, flags, raw)) return;
    this.deliverHead(a, headers, flags, raw);
  }

  /** RetryHost: the head waits (BY_RETRY) for the status or the first message (held.ts). */
  holdHead(headers: IncomingHttpHeaders, flags: number, raw: readonly string[]): void {
    this.held = new HeldResponse(headers, flags, raw, BY_RETRY);
  }

  /**
   * The response head goes the normal way: through the filters' hooks, then to the client.
   * `released`: the head the retry controller held until the commit (it passes to the filters).
   */
  deliverHead(a: Attempt, headers: IncomingHttpHeaders, flags: number, raw: readonly string[], released?: HeldResponse): void {
    if (released !== undefined) this.held = undefined;
    if (this.filters !== null) {
      let h = released;
      if (h === undefined) h = new HeldResponse(headers, flags, raw, BY_FILTER);
      else h.by = BY_FILTER;
      this.held = h;
      if (!runResponseHead(this, 0)) {
        // Held: nothing of the response may reach the client before its head, so the attempt
        // stops reading (its DATA waits in the stream, flow-controlled) until continueResponseHead.
        if (this.held !== undefined && !this.done) a.pause();
        return;
      }
      this.held = undefined;
    }
    respondHead(this, headers, flags, raw);
  }

  onAttemptEnd(a: Attempt): void {
    if (a !== this.attempt) return;
    const h = this.held;
    if (h !== undefined && h.by === BY_RETRY) {
      // Headers, then trailers with no message between: the status counts (the grpcio shape).
      if (this.upTrailers !== undefined && !this.done) this.retry!.onHeldStatus(a);
      return; // ended without trailers: decided at close
    }
    // (a head a filter holds: continueResponseHead forwards the trailers once the head is out)
    if (this.upTrailers !== undefined && !this.done && h === undefined) this.forwardStatus(this.upTrailers, false);
  }

  onAttemptDrain(a: Attempt): void {
    if (!this.done && a === this.attempt) this.down.resume();
  }

  mayEndRequest(): boolean {
    return mayEndRequest(this);
  }

  /** IdleWatched: what moved either way (compared between ticks of the idle watch). */
  idleMoved(): number {
    return this.reqScan.bytes + this.respScan.bytes + (this.responded ? 1 : 0);
  }

  /** IdleWatched: nothing moved for a whole period (deadline.ts). */
  onIdle(): void {
    idleTimedOut(this);
  }

  // === request body: request-body.ts ===

  // === response ===

  onAttemptData(a: Attempt, chunk: Buffer): void {
    responseData(this, a, chunk);
  }

  onAttemptTrailers(a: Attempt, raw: readonly string[]): void {
    responseTrailers(this, a, raw);
  }

  /** The client is behind (a write returned false): the attempt resumes on its 'drain' (listened to once). */
  waitForDrain(): void {
    if (!this.downDrainHooked) {
      this.downDrainHooked = true;
      this.down.on("drain", onDownDrain);
    }
  }

  /**
   * The upstream's own status block (trailers, or Trailers-Only when `trailersOnly`). A block
   * without a parsable grpc-status still ends with a readable stamp: 2 UNKNOWN, as grpc-go's
   * client would decide (spec §4.1), and dojang says it decided.
   */
  forwardStatus(block: OutgoingHeaders, trailersOnly: boolean): void {
    const fs = this.filters;
    if (fs !== null) {
      if (this.responseTakenOver || this.trailersHeld) return;
      if (trailersOnly) {
        const extra = statusExtra(fs);
        if (extra !== undefined) Object.assign(block, extra);
      } else if (!runTrailers(this, 0, block)) {
        if (!this.done) this.trailersHeld = true; // held back by a filter (continueTrailers goes on)
        return;
      }
    }
    forwardUpstreamStatus(this, block, trailersOnly);
  }

  onAttemptClose(a: Attempt): void {
    if (this.done || a !== this.attempt) return;
    const byRetry = this.held !== undefined && this.held.by === BY_RETRY;
    if (byRetry || !this.responded) {
      // No status came: a reset, a lost connection, a refused stream, or END_STREAM without
      // trailers. Retried when the decision allows; else the held head goes out first.
      if (retryFromClose(this, a)) return;
      if (byRetry) {
        this.retry!.commitHeld(a);
        if (this.done) return;
      }
    }
    if (this.filters !== null) {
      if (this.responseTakenOver) return;
      const h = this.held;
      if (h !== undefined) {
        h.closeDeferred = true; // decided once the delayed head has gone out
        return;
      }
    }
    this.decideAfterUpstreamClose();
  }

  private decideAfterUpstreamClose(): void {
    if (this.upTrailers !== undefined) return this.forwardStatus(this.upTrailers, false);
    const a = this.attempt!;
    const o = a.outcomeAtClose(this.responded, pastDeadline(this));
    if (o === null) return;
    // A reset after the whole request was sent, on a route whose policy would retry a reset:
    // told apart, because the upstream may have done the work (not retried unless the route
    // says retryResetAfterRequest).
    if (this.retry !== null && this.retry.policy !== null && this.respScan.bytes === 0 && a.requestEnded && a.mayHaveProcessed && (o.decidedBy === "upstream_reset" || o.decidedBy === "upstream_connection_lost")) {
      return this.finish(outcome(o.code, `${o.message} (after the request was fully sent)`, "upstream_reset_after_request"));
    }
    this.finish(o);
  }

  // === ends ===

  /**
   * Fixes the call's status once (the upstream's, dojang's own, or one a filter put on the wire);
   * its timers stop. The one writer of done, code, message, messageEncoded and decidedBy. false:
   * the status was fixed already. `encoded`: `message` is a header value as the upstream sent it.
   */
  settle(code: number, message: string | undefined, decidedBy: DecidedBy, encoded = false): boolean {
    if (this.done) return false;
    this.done = true;
    stopClocks(this);
    this.code = code;
    this.message = message;
    this.messageEncoded = encoded;
    this.decidedBy = decidedBy;
    return true;
  }

  /** RespondHost, WireHost: respond() was called downstream (Trailers-Only is no longer possible). */
  markResponded(): void {
    this.responded = true;
  }

  /** RespondHost, WireHost: the status block the client stream's 'wantTrailers' sends. */
  setPendingTrailers(t: OutgoingHeaders): void {
    this.pendingTrailers = t;
  }

  /** WireHost: a filter owns the rest of the response; upstream events are dropped. */
  takeOverResponse(): void {
    this.responseTakenOver = true;
  }

  /** dojang's own status for the call; cancels the upstream if it is still open. */
  finish(o: Outcome, extra?: OutgoingHeaders): void {
    if (!this.settle(o.code, o.message, o.decidedBy)) return;
    const a = this.attempt;
    if (a !== null) a.cancel();
    respondLocal(this, o, extra ?? statusExtra(this.filters));
  }

  // === FilterCall: the chain's continuations (filter-run.ts runs the hooks) ===

  continueRequestHead(from: CallFilter): void {
    if (this.done) return;
    if (runRequestHead(this, nextAfter(this, from))) this.startAttempt();
  }

  continueResponseHead(from: CallFilter): void {
    const h = this.held;
    // (a head the retry controller holds is not the filters' to release)
    if (h === undefined || h.by !== BY_FILTER || this.done) return;
    if (!runResponseHead(this, nextAfter(this, from))) return;
    this.held = undefined;
    // Reading resumes before the head goes out: 'data' flows from the next tick, so a filter's
    // onResponseHeadSent may still pause it again in this one (a stall).
    this.attempt!.resume();
    respondHead(this, h.headers, h.flags, h.raw);
    if (this.done) return;
    if (h.closeDeferred) this.decideAfterUpstreamClose();
    else if (this.upTrailers !== undefined && this.attempt!.ended) this.forwardStatus(this.upTrailers, false);
  }

  continueTrailers(from: CallFilter, block: OutgoingHeaders): void {
    if (this.done || this.responseTakenOver) return;
    if (runTrailers(this, nextAfter(this, from), block)) forwardUpstreamStatus(this, block, false);
  }

  continueRequestEnd(from: CallFilter): void {
    if (this.done) return;
    if (runRequestEnd(this, nextAfter(this, from))) endRequest(this);
  }

  finishLocal(o: Outcome, extra?: OutgoingHeaders): void {
    this.finish(o, extra);
  }

  /**
   * The response-buffer guard cuts this stalled call (observe/overload.ts): 8 RESOURCE_EXHAUSTED
   * as the status, but the client is not reading, so the stream is reset (ENHANCE_YOUR_CALM)
   * to drop what is queued for it; the upstream stream is cancelled by finish().
   */
  cutForOverload(message: string): void {
    this.finish(outcome(Code.RESOURCE_EXHAUSTED, message, "overload"));
    const down = this.down;
    if (!down.destroyed) down.close(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM);
  }

  onDownstreamClose(): void {
    if (this.downDrainHooked || this.countedAtHead) responseBuffers.unstall(this);
    if (!this.done) {
      // The client went away (RST_STREAM CANCEL or a dropped connection): cancel upstream now.
      // PROTOCOL_ERROR: nghttp2 reset a malformed request (e.g. DATA beyond its content-length,
      // issue 10 item 11), or the client said its own stream was broken: not a cancel.
      if (this.down.rstCode === http2.constants.NGHTTP2_PROTOCOL_ERROR) this.finish(outcome(Code.INTERNAL, "request stream reset with PROTOCOL_ERROR (malformed request, e.g. DATA beyond its content-length)", "bad_request"));
      else if (clientPastDeadline(this)) this.finish(outcome(Code.DEADLINE_EXCEEDED, "context deadline exceeded", "deadline"));
      else this.finish(outcome(Code.CANCELLED, "client cancelled the call", "client_cancel"));
    }
    stopClocks(this);
    const r = this.retry;
    if (r !== null) r.commit(); // the retry buffer lets go
    if (this.filters !== null) runEnd(this);
    const ctx = this.ctx;
    ctx.active.delete(this);
    if (this.countedCall) this.route!.cluster.breaker.releaseCall();
    if (r !== null) r.releaseSlot();
    recordCall(this);
    ctx.onCallClosed();
  }
}

// === module-level listeners: `this` is the stream, the call is in its kCall slot ===

function callOf(s: unknown): Call {
  return (s as CallCarrier)[kCall]!;
}
function onDownData(this: Downstream, chunk: Buffer): void {
  // what the connection delivered as requests (the listener's unproductive-bytes guard)
  const s = this.session;
  if (s !== undefined) s[kRequestBytes] = (s[kRequestBytes] ?? 0) + chunk.length;
  requestData(callOf(this), chunk);
}
function onDownEnd(this: Downstream): void {
  requestEnd(callOf(this));
}
function replayDownEnd(down: Downstream): void {
  const c = callOf(down);
  if (!c.reqEnded) requestEnd(c);
}
function onDownDrain(this: Downstream): void {
  const c = callOf(this);
  responseBuffers.unstall(c);
  if (!c.done) c.attempt?.resume();
}
function onDownClose(this: Downstream): void {
  callOf(this).onDownstreamClose();
}
function onDownError(this: Downstream): void {
  // The stream's 'close' follows and decides; an error listener keeps the process alive.
}
function onDownWantTrailers(this: Downstream): void {
  sendTrailers(callOf(this));
}
/** The listener's 'stream' handler. */
export function handleStream(ctx: CallContext, stream: Downstream, headers: IncomingHttpHeaders, flags: number, raw: string[]): void {
  const call = new Call(ctx, stream, headers);
  call.start(headers, flags, raw);
}
