// The request body, client → upstream: each DATA chunk is scanned for the message-size limit,
// kept for a retry (the retry buffer, or the one chunk a transparent retry may replay), passed
// through the filters and written to the current attempt; the request's end likewise. Module
// functions taking the Call (no per-call object); the stream listeners are call.ts's.
import { Code, atMessageBoundary, outcome, scanChunk } from "../../translate/index.js";
import type { Call } from "./call.js";
import { runRequestData, runRequestEnd } from "./filter-run.js";

/** A DATA chunk from the client. */
export function requestData(c: Call, chunk: Buffer): void {
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
export function requestEnd(c: Call): void {
  c.reqEnded = true;
  const r = c.retry;
  if (r !== null && r.buffer !== null) r.buffer.end();
  if (c.filters !== null && !runRequestEnd(c, 0)) return;
  endRequest(c);
}

/** The request's end goes to the current attempt (after the filters' onRequestEnd). */
export function endRequest(c: Call): void {
  const a = c.attempt;
  if (c.done || a === null) return;
  // A native stream is known to be reset before its 'end' (attempt.ts endRequest); the
  // gRPC-Web adapter learns of a reset only at its 'close': decided in the check phase.
  a.endRequest(c.clientProtocol !== undefined);
}

/** AttemptOwner.mayEndRequest: may END_STREAM go upstream now? */
export function mayEndRequest(c: Call): boolean {
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
