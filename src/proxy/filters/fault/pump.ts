// One direction of a faulted call's body (the fault filter's message-level work, wire side: it
// uses timers and node's streams, as exec.ts does): chunks are cut at message boundaries with
// views (no copies, except the two shape faults that rewrite a prefix), delayed before messages,
// throttled to a bandwidth, stalled, and cut off by aborts and resets after N messages or by
// closing the connection after N bytes. exec.ts creates a pump per direction that has such work
// (actions.ts compileActions says which) and feeds it from onRequestData/onResponseData.
import type { ClientHttp2Stream } from "node:http2";
import {
  Code,
  codeFromRstCode,
  completedMessages,
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
import type { AbortAction, CloseConnectionAction, ResetAction, ShapeAction, UpstreamResetAction } from "../../../config/faults/model.js";
import type { OutgoingHeaders } from "../../call/headers.js";
import type { Downstream } from "../../call/downstream.js";
import type { CallFilter, CallWire, FilterCall } from "../../call/filter.js";

/** The bandwidth limiter's refill period. */
const TICK_MS = 50;

/**
 * What a pump needs of its call's fault execution: the compiled actions, the call's wire, and
 * the ends the execution puts on the call. exec.ts FaultExec implements it; declared here so that
 * the two files do not import each other.
 */
export interface PumpHost extends CallFilter {
  readonly call: FilterCall;
  readonly w: CallWire;
  /** the rule trailer every status of the call carries */
  readonly extra: OutgoingHeaders | undefined;
  readonly abortAfter: AbortAction | null;
  readonly reset: ResetAction | null;
  readonly shape: ShapeAction | null;
  readonly closeConn: CloseConnectionAction | null;
  readonly upReset: UpstreamResetAction | null;
  readonly bandwidth: { readonly request: number; readonly response: number };
  readonly stall: { readonly request: boolean; readonly response: boolean };
  /** ms to wait before message `message` of `direction`, or -1 for no delay */
  delayMs(at: "message", direction: "request" | "response", message: number): number;
  /** runs f after ms, unless the call has ended by then */
  after(ms: number, f: () => void): void;
  abortNow(a: AbortAction): void;
  resetDown(r: ResetAction, where: string): void;
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
    readonly exec: PumpHost,
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
