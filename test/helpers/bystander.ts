// The other client in the "one client's mistake must never cost another client's call" tests
// (issue 10 items 9-12): a well-behaved grpc-js client running unary calls through the same
// dojang to the same upstream while a raw-frame client misbehaves, plus a raw node:http2
// upstream script that echoes those calls and records every stream it sees (so a test can
// show that a refused call never reached it). Test-only; imports nothing from src.
import type http2 from "node:http2";
import { unary, type EchoClient } from "./peers.js";

/** The path the bystander calls; everything else is the hostile client's. */
export const BYSTANDER_PATH = "/test.Echo/Unary";

/**
 * A raw upstream script: echoes BYSTANDER_PATH calls (the request bytes back, then
 * grpc-status 0), and hands every other stream to `other` (default: read it, never answer).
 */
export function echoOr(other: (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => void = () => {}) {
  return (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void => {
    if (headers[":path"] !== BYSTANDER_PATH) return other(stream, headers);
    const body: Buffer[] = [];
    stream.on("data", (d: Buffer) => body.push(d));
    stream.on("end", () => {
      if (stream.destroyed || stream.closed) return;
      stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(Buffer.concat(body));
    });
  };
}

export interface BystanderResult {
  readonly ok: number;
  /** "code: details" of each failed call */
  readonly failures: string[];
}

/**
 * Runs `total` unary calls, `concurrency` at a time, each checked to echo its own payload;
 * resolves when all have ended. Calls carry a generous deadline so a hang shows as a failure.
 */
export async function runBystander(c: EchoClient, total = 200, concurrency = 10): Promise<BystanderResult> {
  let next = 0;
  let ok = 0;
  const failures: string[] = [];
  const worker = async (): Promise<void> => {
    while (next < total) {
      const i = next++;
      const payload = Buffer.from(`bystander-${i}`);
      const r = await unary(c, payload, undefined, { deadline: Date.now() + 15_000 });
      if (r.err === null && r.res?.equals(payload) === true) ok++;
      else failures.push(r.err === null ? `call ${i}: wrong echo` : `call ${i}: ${r.err.code}: ${r.err.details}`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { ok, failures };
}
