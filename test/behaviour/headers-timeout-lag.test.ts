// requestHeadersTimeout on a busy process (seen in the `dojang upgrade` load test: TLS connections
// cut while the new process's start took the CPU). The timeout is meant for a client that sends no
// request. On a process whose event loop lags, a timer that expired during the lag runs before
// the loop reads its sockets (node runs the timers phase before the poll phase), so a connection
// whose first request had arrived in time, and sat unread in its socket, was closed as if it had
// sent nothing: with those bytes unread the kernel resets it (RFC 1122 §4.2.2.13). The request
// must be read first and the connection kept.
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startBackend, type Backend } from "../helpers/backends.js";
import { useFixtures } from "../helpers/fixtures.js";
import { FLAG_END_HEADERS, FLAG_END_STREAM, FRAME, FrameReader, PREFACE, encodeFrame, encodeHeaderBlock, settingsFrame } from "../helpers/h2-frames.js";
import { grpcRequestFields } from "../helpers/raw-h2-client.js";

const f = useFixtures();
let backend: Backend;

beforeAll(async () => {
  backend = await startBackend("echo");
});
afterAll(async () => {
  await backend.close();
});

/** Blocks this thread (the process's event loop: dojang's, in this process) for `ms`. */
function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    /* a lagging event loop */
  }
}

describe("requestHeadersTimeout on a lagging event loop", () => {
  it("a first request that arrived before the timeout, unread while the loop lagged past it, is served; the connection is not closed", { timeout: 30_000 }, async () => {
    const px = await f.proxyFor(backend.address, { listener: { requestHeadersTimeout: "1s" } });
    const [host, port] = px.address.split(":");
    const sock = f.track(net.connect(Number(port), host), (s) => s.destroy());
    const reader = new FrameReader(false);
    const frames: number[] = [];
    let ended = "";
    sock.on("data", (d: Buffer) => {
      for (const fr of reader.push(d)) frames.push(fr.type);
    });
    sock.on("error", (e: NodeJS.ErrnoException) => (ended = e.code ?? e.message));
    sock.on("close", () => (ended ||= "closed"));
    await new Promise<void>((r) => sock.once("connect", () => r()));
    sock.write(Buffer.concat([PREFACE, settingsFrame([])]));
    // the request goes out 0.8 s into the 1 s, then the loop stalls until 1.3 s: the request is
    // in dojang's socket before the timeout, and the loop's next turn begins with the timers. The
    // stall is in the check phase (setImmediate), after this turn's poll: as on a loaded process,
    // where bytes that arrive while callbacks run are read on the next turn, after its timers.
    await new Promise((r) => setTimeout(r, 800));
    setImmediate(() => {
      sock.write(encodeFrame(FRAME.HEADERS, FLAG_END_HEADERS | FLAG_END_STREAM, 1, encodeHeaderBlock(grpcRequestFields("/test.Echo/Unary"))));
      busy(500);
    });
    // a response HEADERS on stream 1, and the connection still open
    const deadline = performance.now() + 5000;
    while (!frames.includes(FRAME.HEADERS) && ended === "" && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(ended, "the connection's end").toBe("");
    expect(frames).toContain(FRAME.HEADERS);
  });
});
