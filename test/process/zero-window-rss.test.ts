// Issue 22 item 1, "a stalled reader costs what the proxy has promised, not what the upstream
// can send": with no memory limit configured, clients that open 1,000 calls at window 0 (one
// connection × 1,000 streams, 10 connections × 100, and 1 × 1,000 with the window closed only
// after the streams opened) whose upstream answers each with 2 MiB.
// Asserted: the upstream could hand dojang no more than each call's window (dojang stops
// reading a call once one frame waits for its client; the cluster's initialWindowSize, 64 KiB
// by default, is what the paused stream may still send), RSS growth under BOUND_MIB, and a
// well-behaved client's calls through the same dojang all succeed meanwhile, and so does one
// call of a client on its own connection that also starts at window 0 but opens it (the unread
// budget cuts the attacker's calls, not its). A real dojang process (dist/cli.js, or
// ATTACK_CLI: another build's, to measure the figure before), a raw node:http2 upstream, a
// raw-frame attacker and a grpc-js bystander, all on loopback; no cgroup.
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { echoClient, type EchoClient } from "../helpers/peers.js";
import { BYSTANDER_PATH, echoOr, runBystander } from "../helpers/bystander.js";
import { connectRawH2, grpcRequestFields, type RawH2Client } from "../helpers/raw-h2-client.js";
import { FRAME, SETTING, encodeFrame, settingsFrame } from "../helpers/h2-frames.js";
import { rssMiB, startTarget } from "../helpers/attacks.js";
import { assertDistBuilt, killSpawned, sleep, tempDir } from "../helpers/process.js";

const tmp = tempDir();
const BIG_PATH = "/test.Big/Unary";
/** what the upstream answers each attacker call with: 2 MiB in 64 KiB messages */
const RESPONSE_BYTES = 2 * 1024 * 1024;
const MESSAGE = Buffer.alloc(64 * 1024, 7);
MESSAGE[0] = 0;
MESSAGE.writeUInt32BE(MESSAGE.length - 5, 1);

let upstream: { address: string; server: http2.Http2Server; big: number; sent: number };
const upSessions = new Set<http2.ServerHttp2Session>();

/** The upstream's answer to an attacker call: 2 MiB, as fast as dojang's window lets it, then OK. */
function bigResponse(stream: http2.ServerHttp2Stream): void {
  upstream.big++;
  stream.on("error", () => {});
  stream.resume();
  stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
  stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
  let left = RESPONSE_BYTES;
  const pump = (): void => {
    while (left > 0 && !stream.destroyed && !stream.closed) {
      left -= MESSAGE.length;
      upstream.sent += MESSAGE.length;
      if (left <= 0) return void stream.end(MESSAGE);
      if (!stream.write(MESSAGE)) return void stream.once("drain", pump);
    }
  };
  pump();
}

const clients: EchoClient[] = [];
const raws: RawH2Client[] = [];
beforeAll(async () => {
  assertDistBuilt();
  // node's default maxSessionMemory (10 MiB) would make the upstream itself refuse streams with
  // hundreds of 2 MiB answers queued on one session; the test is about dojang's memory.
  const server = http2.createServer({ maxSessionMemory: 4096 });
  const handler = echoOr(bigResponse);
  server.on("session", (s) => {
    upSessions.add(s);
    s.on("close", () => upSessions.delete(s));
    s.on("error", () => {});
  });
  server.on("stream", (stream, headers) => {
    stream.on("error", () => {});
    handler(stream, headers);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  upstream = { address: `127.0.0.1:${(server.address() as AddressInfo).port}`, server, big: 0, sent: 0 };
});
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const r of raws.splice(0)) r.close();
  await killSpawned();
});
afterAll(async () => {
  for (const s of upSessions) s.destroy();
  await new Promise((r) => upstream.server.close(r));
  tmp.remove();
});

const ENHANCE_YOUR_CALM = 0xb;
const REFUSED_STREAM = 0x7;
/**
 * The streams a window-0 connection may have open, and the unread calls the process keeps: 12
 * and 51 (docs/concepts/protections.md: 80 KiB a call against 1 MiB per connection and 4 MiB
 * per process). Written out, not read from dojang's constants: the test says what the docs promise.
 */
const UNREAD_STREAMS = 12;
const UNREAD_PROCESS_CALLS = 51;
/**
 * RSS growth of the dojang process over its warmed-up figure: the issue's 32 MiB. A connection
 * whose client advertises a window under one frame may open only as many streams as its unread
 * budget covers (12; downstream/guards.ts): +5 to +7 MiB (1 × 1,000) and +16 to +17 MiB
 * (10 × 100) on a quiet 2-CPU machine. Opened at the default window and closed after (late), the
 * streams are taken and the unread budget cuts them as they stall: +18 to +26 MiB on a loaded
 * machine, mostly node:http2's stream state for 1,000 streams on both legs (~18 KiB each).
 * Before the admission rule, 10 × 100 took +27 to +39; before the unread budget +50 to +79;
 * the build before issue 22 +87 and +145 (ATTACK_CLI; docs/contributing/performance.md).
 */
const BOUND_MIB = 32;
const WINDOW_UPDATE = (streamId: number, increment: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(increment, 0);
  return encodeFrame(FRAME.WINDOW_UPDATE, 0, streamId, b);
};
/**
 * What the test upstream may have written per call: node's own 64 KiB stream buffer plus what
 * dojang's window let through (64 KiB) and a frame's slack. The build before took 430-590 MiB
 * for 1,000 calls (its 1 MiB window, refilled while node's 64 KiB buffers filled).
 */
const SENT_PER_CALL = 64 * 1024 + 64 * 1024 + 64 * 1024;

/**
 * late: the attacker opens its streams at the default window and sends SETTINGS with window 0
 * right after them (the streams are taken; their windows then close), so the admission rule for
 * window-0 connections (downstream/guards.ts, onClientSettings) does not refuse them and the
 * unread budget's cuts are what bounds it.
 */
/**
 * refused: the streams past each window-0 connection's 12 (RST_STREAM REFUSED_STREAM before any
 * upstream call). minCut: the attacker's calls the unread budget must cut (RST_STREAM
 * ENHANCE_YOUR_CALM, or a Trailers-Only 8 when cut at its head): none of one connection's 12
 * (they fit its 1 MiB); of ten connections' 120, all but the process's 51; of 1,000 taken before
 * the window closed, all but the connection's 12 (less those that got a frame first: a slow
 * reader's, which the idle rule governs). minCutAtHead: of those, the ones cut at their response
 * heads, before any of their DATA was taken (a call on a connection whose window is under one
 * frame is unread from its head, observe/overload.ts unreadAtHead); the build before counted
 * them from their first stall and cut only 532 to 765 of the late case's 987 there.
 */
const CASES = [
  { name: "1 connection × 1,000 streams", connections: 1, streams: 1000, late: false, refused: 988, minCut: 0, minCutAtHead: 0 },
  { name: "10 connections × 100 streams", connections: 10, streams: 100, late: false, refused: 880, minCut: 120 - UNREAD_PROCESS_CALLS, minCutAtHead: 0 },
  { name: "1 connection × 1,000 streams, window 0 sent after them", connections: 1, streams: 1000, late: true, refused: 0, minCut: 1000 - UNREAD_STREAMS, minCutAtHead: 950 },
] as const;

describe("attack: 1,000 calls at window 0 with 2 MiB answers, no memory limit (real dojang process)", () => {
  it.each(CASES)(`$name: RSS grows under ${BOUND_MIB} MiB, a bystander's calls all succeed, a window-0 client that reads gets its whole answer`, { timeout: 90_000 }, async ({ connections, streams, late, refused, minCut, minCutAtHead }) => {
    const { p, address } = await startTarget(tmp, upstream.address);
    const by = echoClient(address);
    clients.push(by);
    // warm up (code paths, buffers, both upstream paths) so the baseline is the steady process
    await runBystander(by, 200, 10);
    const warm = await connectRawH2(address);
    raws.push(warm);
    for (let i = 0; i < 20; i++) {
      warm.headers(1 + 2 * i, grpcRequestFields(BIG_PATH));
      warm.data(1 + 2 * i, Buffer.from([0, 0, 0, 0, 0]), true);
    }
    await sleep(500);
    warm.close();
    await sleep(500);
    let before = rssMiB(p.pid);
    for (let t = 0; t < 5; t++) {
      await sleep(100);
      before = Math.min(before, rssMiB(p.pid));
    }
    upstream.sent = 0;
    upstream.big = 0;

    const atks: RawH2Client[] = [];
    for (let c = 0; c < connections; c++) {
      const atk = await connectRawH2(address, late ? {} : { settings: [[SETTING.INITIAL_WINDOW_SIZE, 0]] });
      raws.push(atk);
      atks.push(atk);
    }
    // (one write per connection: with a frame per write, a loaded machine could pause this process
    // between the streams and the late SETTINGS long enough for dojang to answer some streams at
    // the open window first, which is not the case under test: a full-suite run cut 765 of 987 at
    // their heads that way)
    const ids = atks.map((atk) => {
      const out: number[] = [];
      atk.together(() => {
        for (let i = 0; i < streams; i++) {
          const id = 1 + 2 * i;
          out.push(id);
          atk.headers(id, grpcRequestFields(BIG_PATH));
          atk.data(id, Buffer.from([0, 0, 0, 0, 0]), true);
        }
        if (late) atk.write(settingsFrame([[SETTING.INITIAL_WINDOW_SIZE, 0]]));
      });
      return out;
    });
    const bystander = runBystander(by, 200, 10);
    // A client that also starts at window 0 but does read: one call, its window opened 300 ms
    // into the attack (the unread budget cuts the connection with the most unread calls, not it).
    const reader = await connectRawH2(address, { settings: [[SETTING.INITIAL_WINDOW_SIZE, 0], [SETTING.HEADER_TABLE_SIZE, 0]] });
    raws.push(reader);
    reader.headers(1, grpcRequestFields(BIG_PATH));
    reader.data(1, Buffer.from([0, 0, 0, 0, 0]), true);
    await sleep(300);
    reader.write(Buffer.concat([WINDOW_UPDATE(0, 8 * 1024 * 1024), WINDOW_UPDATE(1, 8 * 1024 * 1024)]));
    let peak = before;
    for (let t = 0; t < 30; t++) {
      await sleep(100);
      peak = Math.max(peak, rssMiB(p.pid));
    }
    const r = await bystander;
    peak = Math.max(peak, rssMiB(p.pid));
    const count = (pred: (atk: RawH2Client, id: number) => boolean): number => atks.reduce((n, atk, i) => n + ids[i]!.filter((id) => pred(atk, id)).length, 0);
    const rst = (atk: RawH2Client, id: number, code: number) => atk.on(id).some((f) => f.type === FRAME.RST_STREAM && f.errorCode === code);
    // cut: RST_STREAM ENHANCE_YOUR_CALM, or cut at its head (a Trailers-Only 8; grpc-status's value is sent raw)
    const cutNow = () => count((atk, id) => rst(atk, id, ENHANCE_YOUR_CALM) || atk.headerBlocks(id).some((b) => b.some(([, v]) => v === "8")));
    const readOne = count((atk, id) => atk.on(id).some((f) => f.type === FRAME.DATA));
    // The budget cuts a call when it stalls, and on a loaded machine the last stalls come later
    // than 3 s (a full-suite run counted 956 of 984 cut by then): keep sampling the RSS, up to
    // 12 s more, until the cuts are in. The bound below then holds over the longer window too.
    for (let t = 0; t < 120 && cutNow() < minCut - readOne; t++) {
      await sleep(100);
      peak = Math.max(peak, rssMiB(p.pid));
    }
    const growth = peak - before;
    const cut = cutNow();
    const refusedN = count((atk, id) => rst(atk, id, REFUSED_STREAM));
    const cutAtHead = count((atk, id) => atk.headerBlocks(id).some((b) => b.some(([, v]) => v === "8")));
    const answered = count((atk, id) => atk.on(id).some((f) => f.type === FRAME.HEADERS));
    console.log(
      `zero-window ${connections}×${streams}: rss before ${before.toFixed(1)} MiB, peak ${peak.toFixed(1)} MiB (+${growth.toFixed(1)}); upstream saw ${upstream.big} calls and sent ${(upstream.sent / 2 ** 20).toFixed(1)} MiB; attacker streams answered ${answered}, refused ${refusedN}, cut ${cut} (${cutAtHead} at their heads), given a frame ${readOne}; bystander ${r.ok}/200`,
    );
    const readerBytes = reader.on(1).reduce((n, f) => n + (f.type === FRAME.DATA ? f.length : 0), 0);
    // the trailers: node sends grpc-status's name Huffman-coded (decodeHeaderBlock shows it so), its value raw
    const readerBlocks = reader.headerBlocks(1);
    const readerStatus = readerBlocks.length === 2 ? readerBlocks[1]!.map(([, v]) => v).join() : undefined;
    console.log(`zero-window ${connections}×${streams}: the window-0 reader got ${readerBytes} bytes, grpc-status ${readerStatus}`);
    expect(readerBytes).toBe(RESPONSE_BYTES);
    expect(reader.ended(1)).toBe(true);
    expect(readerStatus).toBe("0");
    expect(r.failures).toEqual([]);
    expect(r.ok).toBe(200);
    expect(upstream.sent).toBeLessThanOrEqual(connections * streams * SENT_PER_CALL);
    // admission: a window-0 connection's streams past its unread budget's 12 never reach the
    // upstream (the reader's one call aside)
    if (!late) expect(upstream.big).toBeLessThanOrEqual(connections * UNREAD_STREAMS + 1);
    expect(refusedN).toBe(refused);
    expect(answered).toBeLessThanOrEqual(connections * streams - refused);
    if (minCut === 0) expect(cut).toBe(0);
    else expect(cut).toBeGreaterThanOrEqual(minCut - readOne);
    expect(cutAtHead).toBeGreaterThanOrEqual(minCutAtHead);
    expect(growth).toBeLessThan(BOUND_MIB);
  });
});
