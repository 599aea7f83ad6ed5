// The request body, client → upstream: each DATA chunk is scanned for the message-size limit,
// kept for a retry (the retry buffer, or the one chunk a transparent retry may replay), passed
// through the filters and written to the current attempt; the request's end likewise. Module
// functions taking the call's RequestHost (no per-call object); the stream listeners are
// call.ts's. The request's fields (reqEnded, replayChunk) are written here only.
import { Code, atMessageBoundary, outcome, scanChunk, type FrameScanner, type Outcome } from "../../translate/index.js";
import type { CompiledRoute } from "../router.js";
import type { Cluster } from "../upstream/cluster.js";
import type { Downstream } from "./downstream.js";
import { runRequestData, runRequestEnd, type ChainHost } from "./filter-run.js";
import type { RetryController } from "./retry.js";

/** What the request side needs of a call, and the fields it owns (implemented by Call). */
export interface RequestHost extends ChainHost {
  readonly route: CompiledRoute<Cluster> | undefined;
  readonly reqScan: FrameScanner;
  readonly retry: RetryController | null;
  readonly down: Downstream;
  /** undefined: a native stream (it learns of a reset before its 'end') */
  readonly clientProtocol: string | undefined;
  /** the client's request has ended (a retried attempt ends its request too) */
  reqEnded: boolean;
  /**
   * Without a policy: the one request chunk read so far, kept by reference for a transparent
   * retry (undefined: none read yet; null: not replayable, a second chunk came or the response
   * started, or the call has a policy and its retry buffer).
   */
  replayChunk: Buffer | null | undefined;
  finish(o: Outcome): void;
}

/** No transparent replay from here on (the call has a retry buffer, or the upstream took the stream). */
export function replayNoMore(c: RequestHost): void {
  c.replayChunk = null;
}

/** A DATA chunk from the client. */
export function requestData(c: RequestHost, chunk: Buffer): void {
  if (c.done) return;
  const route = c.route!;
  if (!scanChunk(c.reqScan, chunk, route.maxRequestMessageBytes)) {
    // Refused at the prefix: the over-limit message (and this chunk) never goes upstream.
    return c.finish(
      outcome(Code.RESOURCE_EXHAUSTED, `grpc: received message larger than max (${c.reqScan.overLimit} vs. ${route.maxRequestMessageBytes})`, "message_too_large"),
    );
  }
  const r = c.retry;
  if (r !== null && r.buffer !== null) {
    if (!r.buffer.push(chunk) && !r.commitOnOverflow()) return; // over the cap: no other attempt is possible
  } else {
    const r = c.replayChunk;
    if (r !== null) c.replayChunk = r === undefined ? chunk : null;
  }
  const a = c.attempt;
  // Between attempts (or before a retried one is open) the chunk waits in the retry buffer.
  if (a === null || a.up === undefined) return;
  if (c.filters !== null && runRequestData(c, chunk)) return;
  if (!a.write(chunk)) c.down.pause();
}

/** The client's request ended. */
export function requestEnd(c: RequestHost): void {
  c.reqEnded = true;
  const r = c.retry;
  if (r !== null && r.buffer !== null) r.buffer.end();
  if (c.filters !== null && !runRequestEnd(c, 0)) return;
  endRequest(c);
}

/** The request's end goes to the current attempt (after the filters' onRequestEnd). */
export function endRequest(c: RequestHost): void {
  const a = c.attempt;
  if (c.done || a === null) return;
  // A native stream is known to be reset before its 'end' (attempt.ts endRequest); the
  // gRPC-Web adapter learns of a reset only at its 'close': decided in the check phase.
  a.endRequest(c.clientProtocol !== undefined);
}

/** AttemptOwner.mayEndRequest: may END_STREAM go upstream now? */
export function mayEndRequest(c: RequestHost): boolean {
  const down = c.down;
  if (c.done || down.aborted || down.destroyed) return false;
  // END_STREAM inside a message (a prefix or body cut short) is the client's error, decided
  // at once (issue 10 item 12): grpc-go's server reads it as io.ErrUnexpectedEOF and answers
  // 13 "unexpected EOF" (spec §3). A client's RST_STREAM ends node's readable side too, but
  // marks the stream aborted first (attempt.ts endRequest), so it stays a cancel here. The
  // upstream gets CANCEL (finish cancels the attempt), never END_STREAM after half a message.
  if (!atMessageBoundary(c.reqScan)) {
    c.finish(outcome(Code.INTERNAL, "unexpected EOF", "bad_request"));
    return false;
  }
  return true;
}
