// The response body and trailers, upstream → client: each DATA chunk commits a retrying call
// to its attempt, is scanned for the message-size limit, passed through the filters and written
// to the client (a stall pauses the attempt and counts against the response-buffer budgets);
// the trailers wait until every message has gone out. Module functions taking the call's
// ResponseHost (no per-call object); the call's forwardStatus is the exit. The upstream's
// trailers (upTrailers) are written here only.
import { Code, outcome, scanChunk, type FrameScanner, type Outcome } from "../../translate/index.js";
// issue 12 (protections): stalled calls count against the response-buffer budgets
import { responseBuffers, type StalledCall } from "../observe/overload.js";
import type { CompiledRoute } from "../router.js";
import type { Cluster } from "../upstream/cluster.js";
import type { Attempt } from "./attempt.js";
import type { Downstream } from "./downstream.js";
import { runResponseData, type ChainHost } from "./filter-run.js";
import { copyHeaders, type OutgoingHeaders } from "./headers.js";
import { BY_RETRY, type HeldResponse } from "./held.js";
import type { RetryController } from "./retry.js";

/** What the response side needs of a call, and the field it owns (implemented by Call). */
export interface ResponseHost extends ChainHost, StalledCall {
  readonly attempt: Attempt | null;
  readonly down: Downstream;
  readonly route: CompiledRoute<Cluster> | undefined;
  readonly respScan: FrameScanner;
  readonly retry: RetryController | null;
  readonly held: HeldResponse | undefined;
  readonly responded: boolean;
  readonly responseTakenOver: boolean;
  /** the upstream's trailers, held until its readable side has ended */
  upTrailers: OutgoingHeaders | undefined;
  finish(o: Outcome): void;
  forwardStatus(block: OutgoingHeaders, trailersOnly: boolean): void;
  waitForDrain(): void;
}

/** The attempt given up for a retry: its trailers, if any came, are not the next one's. */
export function forgetTrailers(c: ResponseHost): void {
  c.upTrailers = undefined;
}

/**
 * What one call may queue towards a client that has not yet shown it reads, before its upstream
 * stream is paused (issue 22: a stalled reader costs what the proxy has promised): one DATA
 * frame. A paused upstream stream can still send what is left of its window (the cluster's
 * initialWindowSize), so such a call holds at most this, one buffered frame and that window.
 */
export const STREAM_QUEUE_BYTES = 16 * 1024;
/**
 * The client stream's high-water mark once it has drained after a stall: its client reads, and
 * node's own 64 KiB lets a fast stream run without pausing its upstream at every frame (at one
 * frame, every full 16 KiB write returns false: measured 1.26× the CPU per MiB streaming). The
 * values differ from node's default (65,536) and from each other because the mark is also the
 * call's state: 16 KiB until the first stall, 16 KiB + 1 after it, this once it drained.
 */
const READER_QUEUE_BYTES = 64 * 1024 + 1;
const STALLED_ONCE = STREAM_QUEUE_BYTES + 1;

/** node's Writable state (node:http2 streams have it; the gRPC-Web adapter does not). */
interface WithWritableState {
  readonly _writableState?: { highWaterMark: number };
}

interface WithReadableState {
  readonly _readableState?: { highWaterMark: number };
}

/** AttemptOwner.onAttemptData: a DATA chunk from the upstream. */
export function responseData(c: ResponseHost, a: Attempt, chunk: Buffer): void {
  if (c.done || a !== c.attempt) return;
  const r = c.retry;
  if (r !== null && r.buffer !== null) {
    // The first response message: the call commits to this attempt.
    r.commitHeld(a);
    if (c.done) return;
    if (c.held !== undefined) {
      // A filter holds the head now released: the chunk waits in the stream behind it.
      a.pause();
      a.up!.unshift(chunk);
      return;
    }
  }
  const route = c.route!;
  if (!scanChunk(c.respScan, chunk, route.maxResponseMessageBytes)) {
    // The whole messages before the refused prefix still reach the client (a view, no copy).
    const at = c.respScan.overLimitAt;
    if (at > 0) c.down.write(chunk.subarray(0, at));
    return c.finish(
      outcome(Code.RESOURCE_EXHAUSTED, `grpc: received message larger than max (${c.respScan.overLimit} vs. ${route.maxResponseMessageBytes})`, "message_too_large"),
    );
  }
  if (c.filters !== null && (c.responseTakenOver || runResponseData(c, chunk))) return;
  const down = c.down;
  const ws = (down as WithWritableState)._writableState;
  // The client's queue is held to STREAM_QUEUE_BYTES (node's own high-water mark is 64 KiB)
  // until the client has shown it reads: write() then returns false, and the upstream is
  // paused, once one frame waits for it. Set at the first chunk (the gRPC-Web adapter has no
  // such state).
  let hwm = 0;
  if (ws !== undefined) {
    hwm = ws.highWaterMark;
    if (hwm !== STREAM_QUEUE_BYTES && hwm !== STALLED_ONCE && hwm !== READER_QUEUE_BYTES) ws.highWaterMark = hwm = STREAM_QUEUE_BYTES;
  }
  if (!down.write(chunk)) {
    // A second stall: data flows again only after the client stream drained (the upstream
    // stays paused until then), so this client reads; give it node's own queue from now on.
    if (hwm !== 0) ws!.highWaterMark = hwm === STREAM_QUEUE_BYTES ? STALLED_ONCE : READER_QUEUE_BYTES;
    // Paused, the upstream stream still takes DATA into its readable buffer, and node keeps
    // opening its window until that buffer reaches its high-water mark (64 KiB by default):
    // hold it to one frame, so what a stalled call holds is its queue, one frame and the
    // upstream window.
    const rs = (a.up as WithReadableState | undefined)?._readableState;
    if (rs !== undefined) rs.highWaterMark = STREAM_QUEUE_BYTES;
    c.attempt!.pause();
    // The client is behind: this call's buffers now count against the budgets (overload.ts). At
    // a first stall, a client whose advertised stream window is under one frame tells an unread
    // call (one frame cannot reach it), which the guard may cut at once.
    responseBuffers.stall(c, hwm === STREAM_QUEUE_BYTES);
    if (c.done) return;
    c.waitForDrain();
  }
}

/** AttemptOwner.onAttemptTrailers: the upstream's trailers (forwarded once its body has ended). */
export function responseTrailers(c: ResponseHost, a: Attempt, raw: readonly string[]): void {
  if (c.done || a !== c.attempt) return;
  const h = c.held;
  if (h !== undefined && h.by === BY_RETRY) {
    c.upTrailers = copyHeaders({}, raw, undefined);
    if (a.ended) c.retry!.onHeldStatus(a);
    return;
  }
  if (c.filters !== null) {
    if (c.responseTakenOver) return;
    if (h !== undefined) {
      // A delayed response head: the trailers wait behind it (and behind the data).
      c.upTrailers = copyHeaders({}, raw, undefined);
      return;
    }
  }
  if (!c.responded) {
    // Trailers without response headers cannot happen in HTTP/2 (the first HEADERS is the
    // response); guard anyway so the status still reaches the client.
    return c.finish(outcome(Code.INTERNAL, "upstream sent trailers before response headers", "upstream_protocol"));
  }
  // node emits 'trailers' as soon as the frame is parsed, even while DATA read before it is
  // still buffered behind backpressure: forward the status only after 'end', once every
  // message has been passed on, or the client would get OK with its last messages missing.
  c.upTrailers = copyHeaders({}, raw, undefined);
  if (c.attempt!.ended) c.forwardStatus(c.upTrailers, false);
}
