// The fault filter's per-call part (the wire side: this file, pump.ts and filter.ts are the only
// ones of the folder that may use node:* and timers; the rule side beside them is pure, and
// test/proxy/filters/fault/actions.test.ts checks it file by file): executes the fault actions
// selected for one call, compiled by actions.ts compileActions, through the filter hooks
// (src/proxy/call/filter.ts). A call without faults has no filter at all, so it pays one null
// test per hook point.
//
// Hook points (the call's own state machine stays in call.ts):
//   onRequestHead    terminal actions that never reach the upstream, GOAWAY, a delay before the
//                    request is forwarded
//   onAttemptStart   per attempt: unreachable, deadline tampering on the attempt's headers
//   onAttemptOpen    per attempt: an upstream reset before any request message
//   onResponseHead   a delay before response headers; shapeResponseHead: content-type shape
//                    faults; onResponseHeadSent: resets and aborts right after the headers
//   onRequestData/onResponseData  message-level work, in a Pump per direction (pump.ts)
//   onTrailers       a delay before trailers, trailer shape faults
import http2 from "node:http2";
import {
  Code,
  codeFromHttpStatus,
  codeFromRstCode,
  decodeTimeout,
  encodeTimeout,
  outcome,
  rstCodeName,
} from "../../../translate/index.js";
import { compileActions, drawDelayMs, tamperTimeoutNs } from "./actions.js";
import { Pump, type PumpHost } from "./pump.js";
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
import type { Attempt } from "../../call/attempt.js";
import type { CallFilter, CallWire, FilterCall, WireNeeds } from "../../call/filter.js";
import type { AccessRecord } from "../../observe/log.js";

const { NGHTTP2_NO_ERROR } = http2.constants;

export class FaultExec implements CallFilter, PumpHost {
  readonly ruleIds: readonly string[];
  readonly kinds: readonly string[];
  /** injected resets carry any code (the upstream request is opened with waitForTrailers); the metric's fault_rule */
  readonly wire: WireNeeds;
  /** the call's wire (its streams, and the ends this filter puts on them itself) */
  readonly w: CallWire;
  private readonly rand: () => number;
  // compiled from the action list (actions.ts compileActions: first of each kind wins)
  readonly before: FaultAction | null;
  readonly abortAfter: AbortAction | null;
  readonly reset: ResetAction | null;
  readonly shape: ShapeAction | null;
  readonly closeConn: CloseConnectionAction | null;
  readonly goaway: GoawayAction | null;
  readonly deadline: DeadlineAction | null;
  readonly upReset: UpstreamResetAction | null;
  readonly delays: readonly DelayAction[];
  readonly bandwidth: { readonly request: number; readonly response: number };
  readonly stall: { readonly request: boolean; readonly response: boolean };
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
    const c = compileActions(actions);
    this.before = c.before;
    this.abortAfter = c.abortAfter;
    this.reset = c.reset;
    this.shape = c.shape;
    this.closeConn = c.closeConn;
    this.goaway = c.goaway;
    this.deadline = c.deadline;
    this.upReset = c.upReset;
    this.delays = c.delays;
    this.bandwidth = c.bandwidth;
    this.stall = c.stall;
    if (c.jitterSeed !== null) this.rand = mulberry32(c.jitterSeed);
    this.extra = ruleTrailer ? { "x-dojang-fault": ruleIds.join(",") } : undefined;
    this.statusExtra = this.extra;
    if (c.responseWork) this.resp = new Pump(this, "response");
    if (c.requestWork) this.req = new Pump(this, "request");
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
