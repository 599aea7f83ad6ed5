// The fault filter's per-call part (the wire side: this file and filter.ts are the only ones of
// the folder that may use node:* and timers; the rule side beside them is pure, and
// test/proxy/filters/fault/actions.test.ts checks it file by file): executes the fault actions selected for one call
// through the filter hooks (src/proxy/call/filter.ts). A call without faults has no filter at
// all, so it pays one null test per hook point.
//
// Hook points (the call's own state machine stays in call.ts):
//   onRequestHead    terminal actions that never reach the upstream, GOAWAY, a delay before the
//                    request is forwarded
//   onAttemptStart   per attempt: unreachable, deadline tampering on the attempt's headers
//   onAttemptOpen    per attempt: an upstream reset before any request message
//   onResponseHead   a delay before response headers; shapeResponseHead: content-type shape
//                    faults; onResponseHeadSent: resets and aborts right after the headers
//   Pump (per direction, onRequestData/onResponseData)  message-level work: cut chunks at
//                    message boundaries (views, no copies, except the two shape faults that
//                    rewrite a prefix), delays before messages, bandwidth, aborts/resets after N
//                    messages, closing the connection after N bytes, stalls, an upstream reset
//                    after N request messages
//   onTrailers       a delay before trailers, trailer shape faults
import http2, { type ClientHttp2Stream } from "node:http2";
import {
  Code,
  codeFromHttpStatus,
  codeFromRstCode,
  completedMessages,
  decodeTimeout,
  encodeTimeout,
  atMessageBoundary,
  MESSAGE_PREFIX_BYTES,
  messageLength,
  newScanner,
  nextBoundary,
  outcome,
  prefixFlag,
  rstCodeName,
  writePrefix,
  type FrameScanner,
} from "../../../translate/index.js";
import { drawDelayMs, tamperTimeoutNs } from "./actions.js";
import type {
  AbortAction,
  CloseConnectionAction,
  DeadlineAction,
  DelayAction,
  FaultAction,
  GoawayAction,
  ResetAction,
  ShapeAction,
  UpstreamResetAction,
} from "../../../config/faults/model.js";
import { mulberry32 } from "./prng.js";
import type { OutgoingHeaders } from "../../call/headers.js";
import type { Downstream } from "../../call/downstream.js";
import type { Attempt } from "../../call/attempt.js";
import type { CallFilter, CallWire, FilterCall, WireNeeds } from "../../call/filter.js";
import type { AccessRecord } from "../../observe/log.js";

const { NGHTTP2_NO_ERROR } = http2.constants;
const TICK_MS = 50;


export class FaultExec implements CallFilter {
  readonly ruleIds: readonly string[];
  readonly kinds: readonly string[];
  /** injected resets carry any code (the upstream request is opened with waitForTrailers); the metric's fault_rule */
  readonly wire: WireNeeds;
  /** the call's wire (its streams, and the ends this filter puts on them itself) */
  readonly w: CallWire;
  private readonly rand: () => number;
  // compiled from the action list (first of each kind wins; see filters/fault docs for stacking)
  readonly before: FaultAction | null = null; // abort(Trailers-Only) | http | unreachable | blackhole | reset before_headers
  readonly abortAfter: AbortAction | null = null;
  readonly reset: ResetAction | null = null; // after_headers | after_messages | mid_message
  readonly shape: ShapeAction | null = null;
  readonly closeConn: CloseConnectionAction | null = null;
  readonly goaway: GoawayAction | null = null;
  readonly deadline: DeadlineAction | null = null;
  readonly upReset: UpstreamResetAction | null = null;
  readonly delays: readonly DelayAction[] = [];
  readonly bandwidth: { request: number; response: number } = { request: 0, response: 0 };
  readonly stall: { request: boolean; response: boolean } = { request: false, response: false };
  /** extra trailer/header fields every status of this call carries (the rule trailer) */
  readonly extra: OutgoingHeaders | undefined;
  readonly statusExtra: OutgoingHeaders | undefined;
  resp: Pump | null = null;
  req: Pump | null = null;
  private timers: NodeJS.Timeout[] = [];
  /** the first response head has been seen (a 1xx head before it does not delay twice) */
  private headSeen = false;

  constructor(
    readonly call: FilterCall,
    actions: readonly FaultAction[],
    ruleIds: readonly string[],
    seed: number,
    ruleTrailer: boolean,
    private release: (() => void) | null,
  ) {
    this.ruleIds = ruleIds;
    this.wire = { resetsWithCodes: true, faultRule: ruleIds.join(",") };
    this.w = call.wire();
    this.kinds = actions.map((a) => a.kind);
    this.rand = mulberry32(seed);
    const self = this as { -readonly [K in keyof FaultExec]: FaultExec[K] };
    const delays: DelayAction[] = [];
    for (const a of actions) {
      switch (a.kind) {
        case "abort":
          if (a.afterMessages === null) self.before ??= a;
          else self.abortAfter ??= a;
          break;
        case "http":
        case "unreachable":
        case "blackhole":
          self.before ??= a;
          break;
        case "reset":
          if (a.at === "before_headers") self.before ??= a;
          else self.reset ??= a;
          break;
        case "shape":
          self.shape ??= a;
          break;
        case "close_connection":
          self.closeConn ??= a;
          break;
        case "goaway":
          self.goaway ??= a;
          break;
        case "deadline":
          self.deadline ??= a;
          break;
        case "upstream_reset":
          self.upReset ??= a;
          break;
        case "delay":
          delays.push(a);
          if (a.jitterSeed !== 0) this.rand = mulberry32(a.jitterSeed);
          break;
        case "bandwidth":
          if (self.bandwidth[a.direction] === 0) self.bandwidth[a.direction] = a.bytesPerSecond;
          break;
        case "stall":
          self.stall[a.direction] = true;
          break;
      }
    }
    self.delays = delays;
    self.extra = ruleTrailer ? { "x-dojang-fault": ruleIds.join(",") } : undefined;
    self.statusExtra = self.extra;
    const respWork =
      this.abortAfter !== null ||
      (this.reset !== null && this.reset.at !== "after_headers") ||
      this.closeConn !== null ||
      this.bandwidth.response > 0 ||
      this.stall.response ||
      (this.shape !== null && (this.shape.shape === "compressed_flag" || this.shape.shape === "truncated_message")) ||
      delays.some((d) => d.at === "message" && d.direction === "response");
    if (respWork) this.resp = new Pump(this, "response");
    const reqWork = this.upReset !== null || this.bandwidth.request > 0 || this.stall.request || delays.some((d) => d.at === "message" && d.direction === "request");
    if (reqWork) this.req = new Pump(this, "request");
  }

  delayMs(at: DelayAction["at"], direction: "request" | "response", message: number): number {
    for (const d of this.delays) {
      if (d.at !== at) continue;
      if (at === "message" && (d.direction !== direction || (d.message !== null && d.message !== message))) continue;
      return drawDelayMs(d.delay, this.rand);
    }
    return -1;
  }

  after(ms: number, f: () => void): void {
    const t = setTimeout(() => {
      this.timers = this.timers.filter((x) => x !== t);
      if (!this.call.done) f();
    }, ms);
    this.timers.push(t);
  }

  /** The call ended: timers off, and the call no longer counts against maxActiveFaults. */
  onEnd(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers = [];
    const r = this.release;
    this.release = null;
    if (r !== null) r();
  }

  // === before the upstream ===

  onRequestHead(): boolean {
    // A request delay runs first and the rest after it: delay, then abort (Envoy's order too).
    const wait = this.delayMs("request", "request", 0);
    if (wait >= 0) {
      this.after(wait, () => {
        if (this.runBeforeUpstream()) this.call.continueRequestHead(this);
      });
      return false;
    }
    return this.runBeforeUpstream();
  }

  /** true: on to the upstream. */
  private runBeforeUpstream(): boolean {
    const c = this.call;
    const w = this.w;
    const g = this.goaway;
    if (g !== null) sendGoaway(w, g);
    const b = this.before;
    if (b !== null) {
      switch (b.kind) {
        case "abort":
          c.finishLocal(outcome(b.code, b.message, "fault"), this.withDetails(b));
          return false;
        case "unreachable":
          // Acts per attempt (onAttemptStart): each attempt finds its endpoint unreachable.
          return true;
        case "blackhole":
          // Accept and never answer: only the client's deadline (or dojang's) ends the call.
          return false;
        case "http": {
          const down = w.down;
          try {
            down.respond({ ":status": b.status, "content-type": b.contentType });
            down.end(b.body);
          } catch {
            down.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
          }
          // What a grpc-go client makes of it (HTTPStatusConvTab), for metrics and the journal.
          w.recordEnd(b.status === 200 ? Code.UNKNOWN : codeFromHttpStatus(b.status), `fault: HTTP ${b.status}`, "fault");
          return false;
        }
        case "reset":
          w.down.close(b.code);
          w.recordEnd(codeFromRstCode(b.code), `fault: RST_STREAM ${rstCodeName(b.code)} before headers`, "fault");
          return false;
      }
    }
    return true;
  }

  /** Per attempt, before its stream opens: unreachable, and deadline tampering on its headers. */
  onAttemptStart(c: FilterCall, a: Attempt): boolean {
    if (this.before?.kind === "unreachable") {
      // Retried like a real connect failure (transparently once, then per the route's policy).
      c.failAttempt(a, outcome(Code.UNAVAILABLE, "fault: upstream made unreachable", "fault"), "unreachable", this.extra);
      return false;
    }
    const dl = this.deadline;
    const h = a.headers;
    if (dl !== null && h !== undefined) {
      const cur = h["grpc-timeout"];
      const d = typeof cur === "string" ? decodeTimeout(cur) : undefined;
      const ns = tamperTimeoutNs(dl, d !== undefined && d.ok ? d.ns : null);
      if (ns === null) delete h["grpc-timeout"];
      else h["grpc-timeout"] = encodeTimeout(ns);
    }
    return true;
  }

  /** The attempt's stream is open: an upstream_reset after 0 request messages fires now. */
  onAttemptOpen(c: FilterCall, a: Attempt): void {
    const u = this.upReset;
    if (u === null || u.afterRequestMessages !== 0) return;
    const up = a.up;
    if (up !== undefined && !up.closed) up.close(u.code);
    // Per attempt: the route's retry policy may retry it like a real reset.
    c.failAttempt(a, outcome(codeFromRstCode(u.code), `fault: upstream stream reset with ${rstCodeName(u.code)} before any request message`, "fault"), "reset", this.extra);
  }

  private withDetails(a: AbortAction): OutgoingHeaders | undefined {
    if (a.details === null) return this.extra;
    return { ...this.extra, "grpc-status-details-bin": a.details };
  }

  // === response headers ===

  /** false when the head is held back by a delay (continueResponseHead later). */
  onResponseHead(): boolean {
    if (this.headSeen) return true;
    this.headSeen = true;
    const wait = this.delayMs("response_headers", "response", 0);
    if (wait < 0) return true;
    this.w.upstream?.pause();
    this.after(wait, () => {
      this.call.continueResponseHead(this);
      if (this.resp === null || !this.resp.busy) this.w.upstream?.resume();
    });
    return false;
  }

  /** Content-type shape faults on the headers dojang is about to send. */
  shapeResponseHead(_c: FilterCall, out: OutgoingHeaders): void {
    const s = this.shape;
    if (s === null) return;
    if (s.shape === "wrong_content_type") out["content-type"] = s.contentType ?? "text/plain";
    else if (s.shape === "missing_content_type") delete out["content-type"];
  }

  /** After the response headers went out. */
  onResponseHeadSent(): void {
    const r = this.reset;
    if (r !== null && (r.at === "after_headers" || (r.at === "after_messages" && r.messages === 0))) {
      // close() in the same tick as respond() would lose the headers: next turn. Until then
      // nothing more of the upstream's response may reach the client.
      this.w.takeOverResponse();
      setImmediate(() => this.resetDown(r, "after headers"));
      return;
    }
    if (this.abortAfter !== null && this.abortAfter.afterMessages === 0) this.abortNow(this.abortAfter);
    if (this.stall.response) this.w.upstream?.pause();
  }

  resetDown(r: ResetAction, where: string): void {
    const c = this.call;
    if (c.done) return;
    const w = this.w;
    w.recordEnd(codeFromRstCode(r.code), `fault: RST_STREAM ${rstCodeName(r.code)} ${where}`, "fault");
    const up = w.upstream;
    if (up !== undefined && !up.closed) up.close(http2.constants.NGHTTP2_CANCEL);
    if (!w.down.closed) w.down.close(r.code);
  }

  abortNow(a: AbortAction): void {
    this.call.finishLocal(outcome(a.code, a.message, "fault"), this.withDetails(a));
  }

  // === trailers ===

  /** Shape and delay the upstream's trailers; returns false when held back (or ended here). */
  onTrailers(_c: FilterCall, block: OutgoingHeaders): boolean {
    const s = this.shape;
    if (s !== null) {
      if (s.shape === "no_trailers") {
        for (const k of Object.keys(block)) delete block[k];
      } else if (s.shape === "trailers_without_status") {
        delete block["grpc-status"];
        delete block["grpc-message"];
        // node sends an empty trailer block as DATA(END_STREAM), not HEADERS: keep one field
        // so a real trailers frame without grpc-status goes out.
        if (Object.keys(block).length === 0) block["x-dojang-fault-shape"] = "trailers_without_status";
      }
    }
    if (this.extra !== undefined && s?.shape !== "no_trailers") Object.assign(block, this.extra);
    if (this.resp !== null && !this.resp.idle()) {
      // Behind the response messages still queued: released when the pump is idle.
      this.resp.onIdle = () => this.trailersReady(block, false);
      return false;
    }
    return this.trailersReady(block, true);
  }

  /** The trailers may go (after a delay if one is asked); `inline`: the chain is still running. */
  private trailersReady(block: OutgoingHeaders, inline: boolean): boolean {
    const wait = this.delayMs("trailers", "response", 0);
    if (wait >= 0) {
      this.after(wait, () => this.releaseTrailers(block));
      return false;
    }
    if (inline && !this.brokenEnding()) return true;
    this.releaseTrailers(block);
    return false;
  }

  /** no_trailers and trailers_without_status send the (reshaped) block as it is. */
  private brokenEnding(): boolean {
    const sh = this.shape?.shape;
    return sh === "no_trailers" || sh === "trailers_without_status";
  }

  private releaseTrailers(block: OutgoingHeaders): void {
    const c = this.call;
    const sh = this.shape?.shape;
    if (sh === "no_trailers" || sh === "trailers_without_status") {
      // The broken ending is the fault: send it as it is, and count what a client makes of it.
      if (sh === "no_trailers") this.w.endWithTrailers(block, Code.INTERNAL, "fault: stream ended without trailers", "fault");
      else this.w.endWithTrailers(block, Code.UNKNOWN, "fault: trailers without grpc-status", "fault");
      return;
    }
    c.continueTrailers(this, block);
  }

  /** After trailers were sent: RST_STREAM(NO_ERROR) for the rst_after_trailers shape. */
  onTrailersSent(): void {
    const down = this.w.down;
    if (this.shape?.shape === "rst_after_trailers") setImmediate(() => !down.closed && down.close(NGHTTP2_NO_ERROR));
  }

  /** A request chunk: through the request pump when one runs. */
  onRequestData(_c: FilterCall, chunk: Buffer): boolean {
    if (this.req === null) return false;
    this.req.push(chunk);
    return true;
  }

  /** A response chunk: through the response pump when one runs. */
  onResponseData(_c: FilterCall, chunk: Buffer): boolean {
    if (this.resp === null) return false;
    this.resp.push(chunk);
    return true;
  }

  /** The request body ended: after queued request pieces (if any). */
  onRequestEnd(): boolean {
    if (this.req !== null && !this.req.idle()) {
      this.req.onIdle = () => this.call.continueRequestEnd(this);
      return false;
    }
    return true;
  }

  annotate(rec: AccessRecord): void {
    rec.faults = this.ruleIds;
    rec.fault_kinds = this.kinds;
  }
}

function sendGoaway(c: CallWire, g: GoawayAction): void {
  const down = c.down;
  const session = down.session;
  // (a gRPC-Web call over HTTP/1.1 has no HTTP/2 session: no GOAWAY to send)
  if (session === undefined || typeof session.goaway !== "function" || session.closed || session.destroyed) return;
  const id = down.id ?? 1;
  if (g.mode === "graceful") {
    // last-stream-id = the newest stream: every in-flight call finishes, no new ones start.
    session.goaway(g.code, id);
    return;
  }
  // Abrupt: last-stream-id below every in-flight stream on this connection (node maps 0 to
  // "last processed", so the lowest it can say is 1), then the connection closes.
  session.goaway(g.code, Math.max(1, c.lowestStreamIdOnSession() - 2));
  setTimeout(() => {
    if (!session.destroyed) session.destroy();
  }, 20);
}

/**
 * One direction of a faulted call's body: chunks are queued, cut at message boundaries with
 * views, and written with the delays, throttling and cut-offs the actions ask for. The source
 * stream is paused while the pump has queued work, so flow control still reaches the sender.
 */
export class Pump {
  private readonly s: FrameScanner = newScanner();
  private readonly queue: Buffer[] = [];
  private offset = 0;
  /** a timer or a full destination holds the pump */
  busy = false;
  private stopped = false;
  /** message numbers whose pre-message delay already ran */
  private delayed = 0;
  private tokens = 0;
  private lastRefill = 0;
  private written = 0;
  private drainHooked = false;
  onIdle: (() => void) | null = null;

  constructor(
    readonly exec: FaultExec,
    readonly dir: "request" | "response",
  ) {}

  private get src(): ClientHttp2Stream | Downstream | undefined {
    return this.dir === "response" ? this.exec.w.upstream : this.exec.w.down;
  }
  private get dst(): ClientHttp2Stream | Downstream | undefined {
    return this.dir === "response" ? this.exec.w.down : this.exec.w.upstream;
  }

  idle(): boolean {
    return this.queue.length === 0 && !this.busy;
  }

  push(chunk: Buffer): void {
    if (this.stopped) return;
    this.queue.push(chunk);
    if (this.exec.stall[this.dir]) {
      // Stop reading: what arrived stays queued, the sender runs out of window.
      this.src?.pause();
      return;
    }
    if (!this.busy) this.run();
  }

  private hold(): void {
    this.busy = true;
    this.src?.pause();
  }

  private release(): void {
    this.busy = false;
    this.run();
  }

  private run(): void {
    const ex = this.exec;
    const call = ex.call;
    while (this.queue.length > 0) {
      if (call.done || this.stopped) {
        this.queue.length = 0;
        return;
      }
      const chunk = this.queue[0]!;
      const from = this.offset;
      const starts = atMessageBoundary(this.s);
      const k = this.s.messages + 1; // the message a piece starting here begins
      if (starts && from < chunk.length) {
        if (this.beforeMessage(k)) return;
      }
      const s = this.s;
      this.mark();
      let end = nextBoundary(s, chunk, from);
      let piece = chunk.subarray(from, end);
      let cutAfter = false;
      const r = ex.reset;
      if (this.dir === "response" && r !== null && r.at === "mid_message" && starts && k === r.messages + 1) {
        // A message cut in half: part of it goes out, then RST_STREAM.
        const half = Math.max(1, Math.floor(piece.length / 2));
        piece = piece.subarray(0, Math.min(half, piece.length));
        cutAfter = true;
      }
      if (this.dir === "response" && starts && k === 1 && ex.shape !== null) piece = this.reshape(piece, ex.shape);
      // Bandwidth: as many bytes as the tokens allow; the rest waits for the next tick.
      const bps = ex.bandwidth[this.dir];
      if (bps > 0 && !cutAfter) {
        this.refill(bps);
        if (this.tokens < 1) {
          this.unscan();
          this.hold();
          ex.after(TICK_MS, () => this.release());
          return;
        }
        if (piece.length > this.tokens) {
          const take = Math.floor(this.tokens);
          this.unscan();
          end = from + take;
          nextBoundaryExact(s, chunk, from, end);
          piece = chunk.subarray(from, end);
        }
        this.tokens -= piece.length;
      }
      const cc = ex.closeConn;
      let closeAfter = false;
      if (this.dir === "response" && cc !== null && this.written + piece.length >= cc.afterBytes) {
        piece = piece.subarray(0, cc.afterBytes - this.written);
        closeAfter = true;
      }
      this.offset = end;
      if (this.offset >= chunk.length) {
        this.queue.shift();
        this.offset = 0;
      }
      this.written += piece.length;
      const dst = this.dst;
      if (dst === undefined) return;
      if (cutAfter) {
        this.stopped = true;
        dst.write(piece, () => ex.resetDown(r!, `in the middle of message ${k}`));
        return;
      }
      if (closeAfter) {
        this.stopped = true;
        const down = ex.w.down;
        ex.w.recordEnd(Code.UNAVAILABLE, `fault: connection closed after ${cc!.afterBytes} response bytes`, "fault");
        const close = (): void => {
          down.session?.destroy();
        };
        if (piece.length > 0) dst.write(piece, close);
        else close();
        return;
      }
      const ok = piece.length === 0 ? true : dst.write(piece);
      if (this.dir === "request" && ex.upReset !== null && completedMessages(s) >= ex.upReset.afterRequestMessages && atMessageBoundary(s)) {
        this.stopped = true;
        const u = ex.upReset;
        const up = ex.w.upstream;
        // The upstream sees exactly this code; the client gets what that code maps to.
        if (up !== undefined && !up.closed) up.close(u.code);
        call.finishLocal(
          outcome(codeFromRstCode(u.code), `fault: upstream stream reset with ${rstCodeName(u.code)} after ${u.afterRequestMessages} request messages`, "fault"),
          ex.extra,
        );
        return;
      }
      if (this.dir === "response") {
        const a = ex.abortAfter;
        if (a !== null && a.afterMessages !== null && atMessageBoundary(s) && completedMessages(s) >= a.afterMessages) {
          this.stopped = true;
          return ex.abortNow(a);
        }
        const rr = ex.reset;
        if (rr !== null && rr.at === "after_messages" && atMessageBoundary(s) && completedMessages(s) >= rr.messages) {
          this.stopped = true;
          (dst as Downstream).write(Buffer.alloc(0), () => ex.resetDown(rr, `after ${rr.messages} messages`));
          return;
        }
      }
      if (!ok) {
        this.hold();
        if (!this.drainHooked) {
          this.drainHooked = true;
          dst.on("drain", () => {
            if (this.busy && !this.stopped) this.release();
          });
        }
        return;
      }
    }
    if (this.onIdle !== null) {
      const f = this.onIdle;
      this.onIdle = null;
      f();
      return;
    }
    if (!this.exec.stall[this.dir]) this.src?.resume();
  }

  /** true when a delay before message k holds the pump. */
  private beforeMessage(k: number): boolean {
    if (this.delayed >= k) return false;
    this.delayed = k;
    const ex = this.exec;
    // Response messages before the first abort/reset point count too.
    const wait = ex.delayMs("message", this.dir, k);
    if (wait < 0) return false;
    this.hold();
    ex.after(wait, () => this.release());
    return true;
  }

  private refill(bps: number): void {
    const now = performance.now();
    if (this.lastRefill === 0) {
      this.lastRefill = now;
      this.tokens = Math.max(1, bps * (TICK_MS / 1000));
      return;
    }
    this.tokens = Math.min(bps, this.tokens + ((now - this.lastRefill) / 1000) * bps);
    this.lastRefill = now;
  }

  /** Rolls the boundary scanner back to mark() (bandwidth re-cuts a piece). */
  private unscan(): void {
    Object.assign(this.s, this.snapshot);
  }
  private readonly snapshot: FrameScanner = newScanner();

  /** The two shape faults that rewrite a prefix: a copy of the piece (the fault path may copy). */
  private reshape(piece: Buffer, sh: ShapeAction): Buffer {
    if (piece.length < MESSAGE_PREFIX_BYTES) return piece;
    if (sh.shape === "compressed_flag") {
      const b = Buffer.from(piece);
      writePrefix(b, 0, 1, messageLength(b));
      return b;
    }
    if (sh.shape === "truncated_message") {
      const b = Buffer.from(piece);
      writePrefix(b, 0, prefixFlag(b), messageLength(b) + 16);
      // What follows is dropped, so the declared length is more than ever arrives.
      this.stopped = true;
      this.queue.length = 0;
      setImmediate(() => this.exec.call.continueTrailers(this.exec, { "grpc-status": "0", "grpc-message": "", ...this.exec.extra }));
      return b;
    }
    return piece;
  }

  /** Called before scanning a piece so unscan() can restore. */
  mark(): void {
    Object.assign(this.snapshot, this.s);
  }
}

/** Advances the scanner exactly over chunk[from, end) (for a piece cut short by bandwidth). */
function nextBoundaryExact(s: FrameScanner, chunk: Buffer, from: number, end: number): void {
  const view = chunk.subarray(0, end);
  let at = from;
  while (at < end) at = nextBoundary(s, view, at);
}
