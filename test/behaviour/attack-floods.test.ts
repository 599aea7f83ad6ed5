// Issue 12, the floods node's nghttp2 stops by itself (PING, SETTINGS, empty DATA, CONTINUATION
// without end, invalid frames): each ends the attacker's connection within a bound with a GOAWAY
// whose code says why (ENHANCE_YOUR_CALM where the cause is abuse: listener.ts guardedDestroy),
// while a well-behaved grpc-js client on the same dojang is served.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { echoClient, startProxy, startRawUpstream, unary, type EchoClient, type RawUpstream } from "../helpers/peers.js";
import { echoOr, runBystander } from "../helpers/bystander.js";
import { connectRawH2, grpcRequestFields, type RawH2Client } from "../helpers/raw-h2-client.js";
import { FRAME, encodeFrame } from "../helpers/h2-frames.js";
import { sleep } from "../helpers/process.js";
import { NGHTTP2_FLOODS, manyFrames, windowUpdate } from "../helpers/attacks.js";
import type { DojangHandle } from "../../src/index.js";

const ENHANCE_YOUR_CALM = 0xb;

let upstream: RawUpstream;
let px: DojangHandle;
const clients: EchoClient[] = [];
const raws: RawH2Client[] = [];
beforeAll(async () => {
  upstream = await startRawUpstream(echoOr());
  px = await startProxy(upstream.address);
});
afterEach(() => {
  for (const c of clients.splice(0)) c.close();
  for (const r of raws.splice(0)) r.close();
});
afterAll(async () => {
  await px.close(0);
  await upstream.close();
});

/** A raw-frame attacker on its own connection, and a grpc-js bystander making `calls` calls meanwhile. */
async function attacker(calls: number): Promise<{ atk: RawH2Client; bystander: ReturnType<typeof runBystander> }> {
  const by = echoClient(px.address);
  clients.push(by);
  const bystander = runBystander(by, calls, 10);
  const atk = await connectRawH2(px.address);
  raws.push(atk);
  return { atk, bystander };
}

describe("attack: floods nghttp2 stops", () => {
  for (const f of NGHTTP2_FLOODS) {
    it(`${f.name} flood: the connection gets GOAWAY and is closed within 5 s; a bystander's calls all succeed`, { timeout: 30_000 }, async () => {
      const { atk, bystander } = await attacker(100);
      const t0 = performance.now();
      atk.write(f.bytes());
      while (performance.now() - t0 < 5000 && !atk.closed) await sleep(10);
      const ms = performance.now() - t0;
      const r = await bystander;
      console.log(`${f.name} flood: closed ${atk.closed} after ${Math.round(ms)} ms, GOAWAY code ${atk.goaway()?.errorCode}`);
      expect(atk.closed).toBe(true);
      expect(atk.goaway()?.errorCode).toBe(ENHANCE_YOUR_CALM);
      expect(r.failures).toEqual([]);
    });
  }
});

const FLOW_CONTROL_ERROR = 0x3;

// WINDOW_UPDATE floods: node gives JS no event per WINDOW_UPDATE frame, so dojang cannot count
// them as Envoy does (max_inbound_window_update_frames_per_data_frame_sent); it measures instead
// what each connection's socket read that was neither a request nor its body (listener.ts,
// sweepUnproductive: 1 MiB per second plus a quarter of what dojang sent it). A burst under that
// asks for no reply and queues nothing; a sustained flood is cut with GOAWAY ENHANCE_YOUR_CALM;
// a window pushed past 2^31−1 is a FLOW_CONTROL_ERROR.
describe("attack: WINDOW_UPDATE floods", () => {
  it("a burst of 60,000 increments of 1 (under the allowance) queues nothing and is not cut: dojang still answers the attacker's PING within 1 s, the connection stays open without a GOAWAY past the next sweep, and a bystander's calls all succeed", { timeout: 30_000 }, async () => {
    const { atk, bystander } = await attacker(100);
    atk.headers(1, grpcRequestFields("/test.Stream/Held"));
    // past the connection's first sweep, which only takes its baseline (what came before it is
    // never counted): the burst then falls in metered seconds, where a smaller allowance cuts it
    await sleep(1100);
    const t0 = performance.now();
    for (let i = 0; i < 3; i++) atk.write(Buffer.concat([manyFrames(windowUpdate(0, 1), 10_000), manyFrames(windowUpdate(1, 1), 10_000)]));
    atk.write(encodeFrame(FRAME.PING, 0, 0, Buffer.from("wuflood!")));
    const pingAck = (): boolean => atk.on(0).some((f) => f.type === FRAME.PING && (f.flags & 0x1) !== 0);
    while (performance.now() - t0 < 5000 && !pingAck() && !atk.closed) await sleep(5);
    const ms = performance.now() - t0;
    const r = await bystander;
    console.log(`WINDOW_UPDATE burst (60,000 frames): PING answered after ${Math.round(ms)} ms, connection closed ${atk.closed}`);
    expect(pingAck()).toBe(true);
    expect(ms).toBeLessThan(1000);
    expect(r.failures).toEqual([]);
    // not cut: still open, no GOAWAY, after the once-a-second sweep has measured the burst
    // (sweepUnproductive runs every second; the bystander's calls took at least that long)
    await sleep(1500);
    expect(atk.goaway(), "the burst under the allowance got a GOAWAY").toBeUndefined();
    expect(atk.closed).toBe(false);
  });

  it("a sustained flood (40,000 increments of 1 every 100 ms, ~5 MB/s, one call held open) is cut with GOAWAY ENHANCE_YOUR_CALM within 8 s; a bystander's calls all succeed", { timeout: 30_000 }, async () => {
    const { atk, bystander } = await attacker(200);
    atk.headers(1, grpcRequestFields("/test.Stream/Held"));
    const burst = manyFrames(windowUpdate(0, 1), 40_000);
    const t0 = performance.now();
    while (performance.now() - t0 < 8000 && !atk.closed) {
      if (atk.goaway() === undefined) atk.write(burst);
      await sleep(100);
    }
    const ms = performance.now() - t0;
    const r = await bystander;
    console.log(`WINDOW_UPDATE sustained flood: closed ${atk.closed} after ${Math.round(ms)} ms, GOAWAY code ${atk.goaway()?.errorCode}`);
    expect(atk.closed).toBe(true);
    expect(atk.goaway()?.errorCode).toBe(ENHANCE_YOUR_CALM);
    expect(r.failures).toEqual([]);
  });

  it("a client that uploads and downloads megabytes is not cut (request bodies and what dojang sends it count for it)", { timeout: 30_000 }, async () => {
    const by = echoClient(px.address);
    clients.push(by);
    const big = Buffer.alloc(3 * 1_048_576, 7);
    const t0 = performance.now();
    let n = 0;
    while (performance.now() - t0 < 3000) {
      const res = await unary(by, big, undefined, { deadline: Date.now() + 10_000 });
      expect(res.err).toBeNull();
      expect(res.res?.length).toBe(big.length);
      n++;
    }
    console.log(`uploads: ${n} calls of 3 MiB each way in 3 s on one connection, none cut`);
    expect(n).toBeGreaterThan(2);
  });

  it("a window pushed past 2^31−1 ends the connection with GOAWAY FLOW_CONTROL_ERROR within 5 s; a bystander's calls all succeed", { timeout: 30_000 }, async () => {
    const { atk, bystander } = await attacker(100);
    const t0 = performance.now();
    atk.write(manyFrames(windowUpdate(0, 0x7fffffff), 20_000));
    while (performance.now() - t0 < 5000 && !atk.closed) await sleep(10);
    const ms = performance.now() - t0;
    const r = await bystander;
    console.log(`WINDOW_UPDATE overflow flood: closed ${atk.closed} after ${Math.round(ms)} ms, GOAWAY code ${atk.goaway()?.errorCode}`);
    expect(atk.closed).toBe(true);
    expect(atk.goaway()?.errorCode).toBe(FLOW_CONTROL_ERROR);
    expect(r.failures).toEqual([]);
  });
});
