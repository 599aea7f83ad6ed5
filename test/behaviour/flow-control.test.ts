// End-to-end flow control: dojang honours write()/'drain' on both legs, so a reader that stops
// reading stalls the writer on the far side, and dojang's memory stays bounded by windows and
// small buffers, not by the size of the stream (256 MiB here). dojang runs in this process, so
// process.memoryUsage().arrayBuffers covers its buffers (and the peers'; the peers reuse one
// chunk, so growth while a reader is paused is what dojang and node hold in flight).
import { afterEach, describe, expect, it } from "vitest";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { frame, startProxy } from "../helpers/peers.js";
import type { DojangHandle } from "../../src/index.js";

const cleanups: (() => unknown)[] = [];
function track<T>(value: T, close: (v: T) => unknown): T {
  cleanups.push(() => close(value));
  return value;
}
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

const MiB = 1 << 20;
const TOTAL_PAYLOAD = 256 * MiB;
/** One framed 64 KiB message, written again and again (no allocation per write). */
const CHUNK = frame(Buffer.alloc(64 * 1024, 0x5a));
const CHUNKS = TOTAL_PAYLOAD / (64 * 1024);
const TOTAL_WIRE = CHUNKS * CHUNK.length;
/** How long a reader stops reading. */
const PAUSE_MS = 1000;
/** Upper bounds from the contract: far above windows + buffers (a few MiB), far below 256 MiB. */
const MAX_WRITTEN_WHILE_PAUSED = 40 * MiB;
const MAX_MEMORY_GROWTH = 64 * MiB;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
async function waitFor(what: string, pred: () => boolean, timeoutMs = 20_000): Promise<void> {
  const end = performance.now() + timeoutMs;
  while (!pred()) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(2);
  }
}

/** A plain node:http2 upstream (the shared raw upstream keeps every body chunk, 256 MiB here). */
async function upstream(onStream: (s: http2.ServerHttp2Stream) => void): Promise<string> {
  const server = http2.createServer();
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s) => {
    sessions.add(s);
    s.on("error", () => {});
    s.on("close", () => sessions.delete(s));
  });
  server.on("stream", (s) => {
    s.on("error", () => {});
    onStream(s);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  track(server, (srv) => new Promise<void>((r) => {
    for (const s of sessions) s.destroy();
    srv.close(() => r());
  }));
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function proxyFor(address: string): Promise<DojangHandle> {
  return track(await startProxy(address), (p) => p.close(0));
}

function connect(address: string): http2.ClientHttp2Session {
  const s = track(http2.connect(`http://${address}`), (x) => x.destroy());
  s.on("error", () => {});
  return s;
}

/** Writes `count` copies of CHUNK honouring write()/'drain'; `onWrite` sees the running total. */
async function pump(w: http2.Http2Stream, count: number, onWrite: (bytes: number) => void): Promise<void> {
  let bytes = 0;
  for (let i = 0; i < count; i++) {
    if (w.destroyed) return;
    const ok = w.write(CHUNK);
    bytes += CHUNK.length;
    onWrite(bytes);
    if (!ok) await new Promise<void>((r) => w.once("drain", r));
  }
}

/** Samples arrayBuffers every 20 ms over `ms`; returns the peak growth over `base`. */
async function peakGrowthOver(base: number, ms: number): Promise<number> {
  let peak = 0;
  const end = performance.now() + ms;
  while (performance.now() < end) {
    peak = Math.max(peak, process.memoryUsage().arrayBuffers - base);
    await sleep(20);
  }
  return peak;
}

describe('"flow control is end to end: a slow reader stalls the writer and dojang memory stays bounded"', () => {
  it("stalls a fast upstream while the client stops reading a 256 MiB server stream, with bounded memory", { timeout: 40_000 }, async () => {
    let upWritten = 0;
    const address = await upstream((stream) => {
      stream.resume();
      stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      void pump(stream, CHUNKS, (b) => (upWritten = b)).then(() => stream.end());
    });
    const px = await proxyFor(address);
    const req = connect(px.address).request(
      { ":method": "POST", ":path": "/test.Echo/ServerStream", "content-type": "application/grpc", te: "trailers" },
      { endStream: false },
    );
    req.on("error", () => {});
    let received = 0;
    let trailers: http2.IncomingHttpHeaders | undefined;
    req.on("trailers", (t) => (trailers = t));
    req.on("data", (d: Buffer) => (received += d.length));
    const ended = new Promise<void>((r) => req.on("close", r));
    req.end(frame(Buffer.from("go")));

    await waitFor("the first 4 MiB", () => received >= 4 * MiB);
    req.pause();
    const writtenAtPause = upWritten;
    const memAtPause = process.memoryUsage().arrayBuffers;
    const growth = await peakGrowthOver(memAtPause, PAUSE_MS / 2);
    const writtenMid = upWritten;
    const growth2 = await peakGrowthOver(memAtPause, PAUSE_MS / 2);
    const writtenWhilePaused = upWritten - writtenAtPause;
    const writtenLateInPause = upWritten - writtenMid;

    expect(writtenWhilePaused).toBeLessThan(MAX_WRITTEN_WHILE_PAUSED);
    expect(writtenLateInPause).toBeLessThan(1 * MiB); // stalled, not merely slowed
    expect(Math.max(growth, growth2)).toBeLessThan(MAX_MEMORY_GROWTH);
    expect(upWritten).toBeLessThan(TOTAL_WIRE / 2);

    req.resume();
    await ended;
    expect(received).toBe(TOTAL_WIRE);
    expect(trailers?.["grpc-status"]).toBe("0");
  });

  it("stalls a fast client while the upstream stops reading a 256 MiB request stream, with bounded memory", { timeout: 40_000 }, async () => {
    let upRead = 0;
    let upStream: http2.ServerHttp2Stream | undefined;
    const address = await upstream((stream) => {
      upStream = stream;
      stream.pause(); // a slow reader: nothing is read until the test says so
      stream.on("data", (d: Buffer) => (upRead += d.length));
      stream.on("end", () => {
        stream.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": upRead === TOTAL_WIRE ? "0" : "13" }, { endStream: true });
      });
    });
    const px = await proxyFor(address);
    const req = connect(px.address).request(
      { ":method": "POST", ":path": "/test.Echo/ClientStream", "content-type": "application/grpc", te: "trailers" },
      { endStream: false },
    );
    req.on("error", () => {});
    let status: string | undefined;
    req.on("response", (h) => (status = String(h["grpc-status"])));
    req.resume();
    const ended = new Promise<void>((r) => req.on("close", r));
    let clientWritten = 0;
    const pumping = pump(req, CHUNKS, (b) => (clientWritten = b)).then(() => req.end());

    await waitFor("the upstream stream", () => upStream !== undefined);
    const writtenAtPause = clientWritten;
    const memAtPause = process.memoryUsage().arrayBuffers;
    const growth = await peakGrowthOver(memAtPause, PAUSE_MS / 2);
    const writtenMid = clientWritten;
    const growth2 = await peakGrowthOver(memAtPause, PAUSE_MS / 2);

    expect(clientWritten).toBeLessThan(MAX_WRITTEN_WHILE_PAUSED); // everything so far was written while upstream was paused
    expect(clientWritten - writtenMid).toBeLessThan(1 * MiB);
    expect(writtenAtPause).toBeLessThan(MAX_WRITTEN_WHILE_PAUSED);
    expect(Math.max(growth, growth2)).toBeLessThan(MAX_MEMORY_GROWTH);
    expect(upRead).toBe(0);

    upStream!.resume();
    await pumping;
    await ended;
    expect(upRead).toBe(TOTAL_WIRE);
    expect(status).toBe("0");
  });
});
