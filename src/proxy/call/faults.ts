// Executes the fault actions selected for one call. The call reaches this module only through
// `call.fault !== null` checks, so a call without faults pays one null test per hook.
//
// Hook points (the call's own state machine stays in call.ts):
//   beforeUpstream   terminal actions that never reach the upstream, GOAWAY, deadline tampering,
//                    a delay before the request is forwarded
//   onResponseHead   a delay before response headers, content-type shape faults, resets and
//                    aborts right after the headers
//   Pump (per direction)  message-level work: cut chunks at message boundaries (views, no copies,
//                    except the two shape faults that rewrite a prefix), delays before messages,
//                    bandwidth, aborts/resets after N messages, closing the connection after N
//                    bytes, stalls, an upstream reset after N request messages
//   onTrailers       a delay before trailers, trailer shape faults
import http2, { type ClientHttp2Stream, type ServerHttp2Stream } from "node:http2";
import {
  Code,
  codeFromHttpStatus,
  codeFromRstCode,
  completedMessages,
  decodeTimeout,
  encodeTimeout,
  atMessageBoundary,
  newScanner,
  nextBoundary,
  rstCodeName,
  type FrameScanner,
} from "../../translate/index.js";
import { drawDelayMs, tamperTimeoutNs } from "../filters/fault/actions.js";
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
} from "../../config/faults/model.js";
import { mulberry32 } from "../filters/fault/prng.js";
import type { OutgoingHeaders } from "./headers.js";

/** What the executor needs from the call (implemented by Call). */
export interface FaultableCall {
  readonly down: ServerHttp2Stream;
  readonly up: ClientHttp2Stream | undefined;
  readonly done: boolean;
  upHeaders: OutgoingHeaders | undefined;
  /** continue the normal path: pick an endpoint and open the upstream stream */
  proceed(): void;
  /** dojang's status (decided_by "fault"), with extra header fields (details, rule trailer) */
  finishFault(code: number, message: string, extra: OutgoingHeaders | undefined): void;
  /** mark the call done with a status that was put on the wire by the fault itself */
  recordFault(code: number, message: string): void;
  /** the normal response-head path, after a delay */
  onResponseHeadContinue(): void;
  /** the normal end-of-trailers path, after a delay */
  forwardTrailersContinue(block: OutgoingHeaders): void;
  /** the normal end of the request body */
  endRequestContinue(): void;
  /** the lowest stream id of the calls in flight on this call's client connection */
  lowestStreamIdOnSession(): number;
}

const { NGHTTP2_NO_ERROR } = http2.constants;
const TICK_MS = 50;


export class FaultExec {
  readonly ruleIds: readonly string[];
  readonly kinds: readonly string[];
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
  resp: Pump | null = null;
  req: Pump | null = null;
  /** the response is being cut off: upstream DATA and trailers are dropped */
  discarding = false;
  private timers: NodeJS.Timeout[] = [];

  constructor(
    readonly call: FaultableCall,
    actions: readonly FaultAction[],
    ruleIds: readonly string[],
    seed: number,
    ruleTrailer: boolean,
    private release: (() => void) | null,
  ) {
    this.ruleIds = ruleIds;
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
  clear(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers = [];
    const r = this.release;
    this.release = null;
    if (r !== null) r();
  }

  // === before the upstream ===

  beforeUpstream(): void {
    // A request delay runs first and the rest after it: delay, then abort (Envoy's order too).
    const wait = this.delayMs("request", "request", 0);
    if (wait >= 0) return this.after(wait, () => this.runBeforeUpstream());
    this.runBeforeUpstream();
  }

  private runBeforeUpstream(): void {
    const c = this.call;
    const g = this.goaway;
    if (g !== null) sendGoaway(c, g);
    const b = this.before;
    if (b !== null) {
      switch (b.kind) {
        case "abort":
          return c.finishFault(b.code, b.message, this.withDetails(b));
        case "unreachable":
          return c.finishFault(Code.UNAVAILABLE, "fault: upstream made unreachable", this.extra);
        case "blackhole":
          // Accept and never answer: only the client's deadline (or dojang's) ends the call.
          return;
        case "http": {
          const down = c.down;
          try {
            down.respond({ ":status": b.status, "content-type": b.contentType });
            down.end(b.body);
          } catch {
            down.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
          }
          // What a grpc-go client makes of it (HTTPStatusConvTab), for metrics and the journal.
          return c.recordFault(b.status === 200 ? Code.UNKNOWN : codeFromHttpStatus(b.status), `fault: HTTP ${b.status}`);
        }
        case "reset":
          c.down.close(b.code);
          return c.recordFault(codeFromRstCode(b.code), `fault: RST_STREAM ${rstCodeName(b.code)} before headers`);
      }
    }
    const dl = this.deadline;
    if (dl !== null && c.upHeaders !== undefined) {
      const cur = c.upHeaders["grpc-timeout"];
      const d = typeof cur === "string" ? decodeTimeout(cur) : undefined;
      const ns = tamperTimeoutNs(dl, d !== undefined && d.ok ? d.ns : null);
      if (ns === null) delete c.upHeaders["grpc-timeout"];
      else c.upHeaders["grpc-timeout"] = encodeTimeout(ns);
    }
    c.proceed();
  }

  /** The upstream stream is open: an upstream_reset after 0 request messages fires now. */
  onUpstreamOpen(): void {
    const u = this.upReset;
    if (u === null || u.afterRequestMessages !== 0) return;
    const c = this.call;
    if (c.up !== undefined && !c.up.closed) c.up.close(u.code);
    c.finishFault(codeFromRstCode(u.code), `fault: upstream stream reset with ${rstCodeName(u.code)} before any request message`, this.extra);
  }

  private withDetails(a: AbortAction): OutgoingHeaders | undefined {
    if (a.details === null) return this.extra;
    return { ...this.extra, "grpc-status-details-bin": a.details };
  }

  // === response headers ===

  /** true when the head is held back by a delay (the call continues it later). */
  delayResponseHead(): boolean {
    const wait = this.delayMs("response_headers", "response", 0);
    if (wait < 0) return false;
    this.call.up?.pause();
    this.after(wait, () => {
      this.call.onResponseHeadContinue();
      if (this.resp === null || !this.resp.busy) this.call.up?.resume();
    });
    return true;
  }

  /** Content-type shape faults on the headers dojang is about to send. */
  shapeHead(out: OutgoingHeaders): void {
    const s = this.shape;
    if (s === null) return;
    if (s.shape === "wrong_content_type") out["content-type"] = s.contentType ?? "text/plain";
    else if (s.shape === "missing_content_type") delete out["content-type"];
  }

  /** After the response headers went out. */
  onHeadersSent(): void {
    const r = this.reset;
    if (r !== null && (r.at === "after_headers" || (r.at === "after_messages" && r.messages === 0))) {
      // close() in the same tick as respond() would lose the headers: next turn. Until then
      // nothing more of the upstream's response may reach the client.
      this.discarding = true;
      setImmediate(() => this.resetDown(r, "after headers"));
      return;
    }
    if (this.abortAfter !== null && this.abortAfter.afterMessages === 0) this.abortNow(this.abortAfter);
    if (this.stall.response) this.call.up?.pause();
  }

  resetDown(r: ResetAction, where: string): void {
    const c = this.call;
    if (c.done) return;
    c.recordFault(codeFromRstCode(r.code), `fault: RST_STREAM ${rstCodeName(r.code)} ${where}`);
    if (c.up !== undefined && !c.up.closed) c.up.close(http2.constants.NGHTTP2_CANCEL);
    if (!c.down.closed) c.down.close(r.code);
  }

  abortNow(a: AbortAction): void {
    this.call.finishFault(a.code, a.message, this.withDetails(a));
  }

  // === trailers ===

  /** Shape and delay the upstream's trailers; returns false when held back. */
  onTrailers(block: OutgoingHeaders): boolean {
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
      this.resp.onIdle = () => this.onTrailersReady(block);
      return false;
    }
    return this.onTrailersReady(block);
  }

  private onTrailersReady(block: OutgoingHeaders): boolean {
    const wait = this.delayMs("trailers", "response", 0);
    if (wait >= 0) {
      this.after(wait, () => this.call.forwardTrailersContinue(block));
      return false;
    }
    if (this.resp !== null && this.resp.onIdle !== null) {
      // called back from the pump: continue the normal path ourselves
      this.resp.onIdle = null;
      this.call.forwardTrailersContinue(block);
      return false;
    }
    return true;
  }

  /** After trailers were sent: RST_STREAM(NO_ERROR) for the rst_after_trailers shape. */
  afterTrailersSent(down: ServerHttp2Stream): void {
    if (this.shape?.shape === "rst_after_trailers") setImmediate(() => !down.closed && down.close(NGHTTP2_NO_ERROR));
  }

  /** The request body ended: after queued request pieces (if any). */
  onRequestEnd(): void {
    if (this.req !== null && !this.req.idle()) {
      this.req.onIdle = () => this.call.endRequestContinue();
      return;
    }
    this.call.endRequestContinue();
  }
}

function sendGoaway(c: FaultableCall, g: GoawayAction): void {
  const down = c.down;
  const session = down.session;
  if (session === undefined || session.closed || session.destroyed) return;
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

  private get src(): ClientHttp2Stream | ServerHttp2Stream | undefined {
    return this.dir === "response" ? this.exec.call.up : this.exec.call.down;
  }
  private get dst(): ClientHttp2Stream | ServerHttp2Stream | undefined {
    return this.dir === "response" ? this.exec.call.down : this.exec.call.up;
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
        const down = call.down;
        call.recordFault(Code.UNAVAILABLE, `fault: connection closed after ${cc!.afterBytes} response bytes`);
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
        const up = call.up;
        // The upstream sees exactly this code; the client gets what that code maps to.
        if (up !== undefined && !up.closed) up.close(u.code);
        call.finishFault(codeFromRstCode(u.code), `fault: upstream stream reset with ${rstCodeName(u.code)} after ${u.afterRequestMessages} request messages`, ex.extra);
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
          (dst as ServerHttp2Stream).write(Buffer.alloc(0), () => ex.resetDown(rr, `after ${rr.messages} messages`));
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
    if (piece.length < 5) return piece;
    if (sh.shape === "compressed_flag") {
      const b = Buffer.from(piece);
      b[0] = 1;
      return b;
    }
    if (sh.shape === "truncated_message") {
      const b = Buffer.from(piece);
      b.writeUInt32BE(b.readUInt32BE(1) + 16, 1);
      // What follows is dropped, so the declared length is more than ever arrives.
      this.stopped = true;
      this.queue.length = 0;
      setImmediate(() => this.exec.call.forwardTrailersContinue({ "grpc-status": "0", "grpc-message": "", ...this.exec.extra }));
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
