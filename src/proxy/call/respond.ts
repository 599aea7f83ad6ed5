// Writing the response to the client side (downstream.ts): the upstream's response head
// (classified, copied from rawHeaders, shaped by the filters), a status block as Trailers-Only or
// as trailers after the messages, dojang's own local replies, and the trailers when the client
// stream asks for them. The call decides when (its two exits, forwardStatus and finish); this
// file says how. Module functions taking the call's RespondHost: no per-call object. It changes
// the call's state only through settle(), markResponded() and setPendingTrailers().
import http2, { type IncomingHttpHeaders } from "node:http2";
import { Code, classifyResponseHead, encodeGrpcMessage, outcome, parseGrpcStatus, statusTrailers, trailersOnlyHeaders, type DecidedBy, type Outcome } from "../../translate/index.js";
import type { Attempt } from "./attempt.js";
import type { CallContext } from "./context.js";
import { pastDeadline } from "./deadline.js";
import type { Downstream } from "./downstream.js";
import { runResponseHeadSent, runTrailersSent, shapeResponseHead, type ChainHost } from "./filter-run.js";
import { copyHeaders, headerList, type OutgoingHeaders } from "./headers.js";

/** What writing the response needs of a call (implemented by Call). */
export interface RespondHost extends ChainHost {
  readonly ctx: CallContext;
  readonly down: Downstream;
  readonly attempt: Attempt | null;
  /** undefined: a native stream (it takes a response head as node's flat list) */
  readonly clientProtocol: string | undefined;
  /** the content-type of a status dojang writes itself */
  readonly replyType: string;
  readonly responded: boolean;
  readonly attempts: number;
  readonly pendingTrailers: OutgoingHeaders | undefined;
  /** the call's deadline (its ctx.now() clock; Infinity without one) */
  readonly deadlineAt: number;
  /** fixes the call's status once (false: it was fixed already); `encoded`: the message is a header value as the upstream sent it */
  settle(code: number, message: string | undefined, decidedBy: DecidedBy, encoded?: boolean): boolean;
  /** respond() was called downstream (Trailers-Only is no longer possible) */
  markResponded(): void;
  /** the status block 'wantTrailers' sends */
  setPendingTrailers(t: OutgoingHeaders): void;
  finish(o: Outcome): void;
  forwardStatus(block: OutgoingHeaders, trailersOnly: boolean): void;
}

const { NGHTTP2_FLAG_END_STREAM, NGHTTP2_INTERNAL_ERROR, NGHTTP2_NO_ERROR } = http2.constants;
/** respond()'s options for a response head with trailers to follow (node only reads them) */
const RESPOND_WAIT_TRAILERS = { waitForTrailers: true } as const;
const RESPOND_END = { endStream: true } as const;

/**
 * The upstream's own status block goes out (the call's forwardStatus, once no filter holds it):
 * the call's status is fixed from it. A block without a parsable grpc-status still ends with a
 * readable stamp: 2 UNKNOWN, as grpc-go's client would decide (spec §4.1), and dojang says it decided.
 */
export function forwardUpstreamStatus(c: RespondHost, block: OutgoingHeaders, trailersOnly: boolean): void {
  const gsRaw = block["grpc-status"];
  const gs = parseGrpcStatus(typeof gsRaw === "string" ? gsRaw : undefined);
  const gm = block["grpc-message"];
  if (gs === undefined) {
    const why = gsRaw === undefined ? "missing grpc-status in upstream " + (trailersOnly ? "response" : "trailers") : `malformed grpc-status: ${String(gsRaw)}`;
    if (!c.settle(Code.UNKNOWN, typeof gm === "string" && gm !== "" ? gm : encodeGrpcMessage(why), "upstream_protocol", true)) return;
    block["grpc-status"] = "2";
    if (typeof gm !== "string" || gm === "") block["grpc-message"] = encodeGrpcMessage(why);
    if (trailersOnly && block["content-type"] === undefined) block["content-type"] = c.replyType;
  } else {
    // Forwarded unchanged; decoded only when logged (the log shows what the client reads).
    // The upstream's DEADLINE_EXCEEDED once the call's own deadline has passed is the deadline
    // deciding: the upstream counts down the budget dojang sent it, so its timer and dojang's
    // expire together, and which of the two a loaded process handles first is node's event
    // order (a turn reads its I/O before its timers run), not who decided.
    const by: DecidedBy = gs === Code.DEADLINE_EXCEEDED && pastDeadline(c) ? "deadline" : "upstream";
    if (!c.settle(gs, typeof gm === "string" ? gm : undefined, by, true)) return;
    c.attempt!.status = gs;
  }
  writeStatus(c, block, trailersOnly);
}

/** The upstream's response head, released (no retry or filter holds it): to the client, or the call's end. */
export function respondHead(c: RespondHost, headers: IncomingHttpHeaders, flags: number, raw: readonly string[]): void {
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
  if (v.kind === "synthesize") return c.finish(v.outcome);
  const out: OutgoingHeaders = copyHeaders({ ":status": 200 }, raw, undefined);
  if (c.ctx.attemptsHeader === true) attemptsField(c, out);
  const fs = c.filters;
  if (fs !== null) shapeResponseHead(c, out);
  if (endStream) {
    // Trailers-Only stays Trailers-Only: A6 retries depend on no headers going out first.
    return c.forwardStatus(out, endStream);
  }
  try {
    // (a gRPC-Web adapter takes the object; a native stream the list, which node copies less)
    c.down.respond(c.clientProtocol === undefined ? headerList(out) : out, RESPOND_WAIT_TRAILERS);
    c.markResponded();
    if (fs !== null) runResponseHeadSent(c);
  } catch (err) {
    c.finish(outcome(Code.INTERNAL, `invalid response headers from upstream: ${(err as Error).message}`, "upstream_protocol"));
  }
}

/** The upstream's status block (already checked and recorded by the call) goes out: Trailers-Only, or trailers at the end. */
export function writeStatus(c: RespondHost, block: OutgoingHeaders, trailersOnly: boolean): void {
  const down = c.down;
  if (down.destroyed || down.closed) return;
  if (trailersOnly) {
    try {
      down.respond(block, RESPOND_END);
      c.markResponded();
      closeRequestSide(down);
    } catch (err) {
      respondLocal(c, outcome(Code.INTERNAL, `invalid response headers from upstream: ${(err as Error).message}`, "upstream_protocol"), undefined);
    }
    return;
  }
  c.setPendingTrailers(block);
  down.end();
}

/** dojang's own status: Trailers-Only when nothing went out yet, else trailers after what did. */
export function respondLocal(c: RespondHost, o: Outcome, extra: OutgoingHeaders | undefined): void {
  const down = c.down;
  if (down.destroyed || down.closed) return;
  if (!c.responded) {
    c.markResponded();
    try {
      let head = extra === undefined ? trailersOnlyHeaders(o, c.replyType) : { ...trailersOnlyHeaders(o, c.replyType), ...extra };
      if (c.ctx.attemptsHeader === true) {
        if (extra === undefined) head = { ...head };
        attemptsField(c, head);
      }
      down.respond(head, RESPOND_END);
      closeRequestSide(down);
    } catch {
      down.close(NGHTTP2_INTERNAL_ERROR);
    }
    return;
  }
  // Headers went out: the status follows the messages already forwarded, as trailers.
  c.setPendingTrailers(extra === undefined ? statusTrailers(o) : { ...statusTrailers(o), ...extra });
  if (!down.writableEnded) down.end();
}

/** The client stream's 'wantTrailers': the call's pending status block goes out. */
export function sendTrailers(c: RespondHost): void {
  const down = c.down;
  const t = c.pendingTrailers ?? statusTrailers(outcome(Code.INTERNAL, "proxy ended the stream without a status", "upstream_protocol"));
  try {
    down.sendTrailers(t);
  } catch {
    down.sendTrailers(statusTrailers(outcome(Code.INTERNAL, "upstream trailers could not be forwarded", "upstream_protocol")));
  }
  // A close() in the same tick would discard the trailers just submitted (probed on Node 24).
  if (!down.readableEnded) setImmediate(closeRequestSide, down);
  if (c.filters !== null) runTrailersSent(c);
}

/** x-dojang-attempts on the response head (the listener's attemptsHeader). */
function attemptsField(c: RespondHost, out: OutgoingHeaders): void {
  out["x-dojang-attempts"] = String(c.attempts);
}

/**
 * After the final status, a client still sending gets RST_STREAM(NO_ERROR), as grpc-go's
 * server does (spec §4.1 "early server closure"). node does this by itself only for a stream it
 * never read from, and dojang always reads; without it the stream stays half-open until the
 * client leaves, holding a stream slot.
 */
export function closeRequestSide(down: Downstream): void {
  if (!down.closed && !down.destroyed && !down.readableEnded) down.close(NGHTTP2_NO_ERROR);
}
