// Scripts for the raw node:http2 upstream of test/helpers/peers.ts (startRawUpstream): what a
// misbehaving upstream writes on the wire (HTTP answers, resets, Trailers-Only, dropped
// connections), plus a bounded wait for a /metrics sample. Test-only; imports nothing from src.
import http2, { type ServerHttp2Stream } from "node:http2";
import { frame, sample, scrape } from "./peers.js";

const { NGHTTP2_FLAG_END_STREAM } = http2.constants;

/** The response HEADERS of a well-behaved gRPC upstream. */
export const GRPC_RESPONSE_HEADERS: http2.OutgoingHttpHeaders = Object.freeze({ ":status": 200, "content-type": "application/grpc" });

/** True when the HEADERS frame carried END_STREAM (a Trailers-Only response). */
export function hasEndStream(flags: number | undefined): boolean {
  return flags !== undefined && (flags & NGHTTP2_FLAG_END_STREAM) !== 0;
}

/** Runs `fn` once the request stream has ended (the proxy's END_STREAM arrived). */
export function afterRequest(s: ServerHttp2Stream, fn: () => void): void {
  if (s.readableEnded) fn();
  else s.once("end", fn);
}

/** A normal gRPC reply: HEADERS, one DATA per message, trailers (grpc-status 0 unless given). */
export function replyGrpc(s: ServerHttp2Stream, messages: readonly Buffer[], trailers: http2.OutgoingHttpHeaders = { "grpc-status": "0" }): void {
  s.respond(GRPC_RESPONSE_HEADERS, { waitForTrailers: true });
  s.once("wantTrailers", () => s.sendTrailers(trailers));
  for (const m of messages) s.write(frame(m));
  s.end();
}

/**
 * RST_STREAM(code) as the stream's first and only response frame. The stream was never
 * responded, so node's close(code) does not first end the writable side with DATA(END_STREAM)
 * (spec §10.2 P1): the code goes on the wire as given.
 */
export function resetBeforeHeaders(s: ServerHttp2Stream, code: number): void {
  s.close(code);
}

/**
 * Response HEADERS, one message, then RST_STREAM(code) once that DATA frame was written.
 * `waitForTrailers` keeps close(code) from becoming DATA(END_STREAM) + RST(NO_ERROR) (P1), and
 * waiting for the write callback keeps the RST from overtaking (and discarding) the DATA.
 */
export function resetAfterMessage(s: ServerHttp2Stream, code: number, payload: Buffer): void {
  s.respond(GRPC_RESPONSE_HEADERS, { waitForTrailers: true });
  s.write(frame(payload), () => s.close(code));
}

/**
 * Polls /metrics until the sample matching `labels` reaches `want` (the proxy counts a call when
 * its downstream stream closes, which can be a moment after the client saw the status). Resolves
 * with the last value read, so the caller's expect() shows the actual number on failure.
 */
export async function sampleReaching(adminAddress: string | undefined, name: string, labels: Record<string, string>, want: number, timeoutMs = 2000): Promise<number> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = sample(await scrape(adminAddress), name, labels);
    if (v >= want || Date.now() >= until) return v;
    await new Promise((r) => setTimeout(r, 10));
  }
}

// Kept here for the files that import it from this module; defined once in fixtures.ts.
export { Cleanup } from "./fixtures.js";
