// Issue 12, the floods node's nghttp2 stops by itself (PING, SETTINGS, empty DATA, CONTINUATION
// without end, invalid frames): each ends the attacker's connection within a bound with a GOAWAY
// whose code says why (ENHANCE_YOUR_CALM where the cause is abuse: listener.ts guardedDestroy),
// while a well-behaved grpc-js client on the same dojang is served.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { echoClient, startProxy, startRawUpstream, type EchoClient, type RawUpstream } from "../helpers/peers.js";
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

describe("attack: floods nghttp2 stops", () => {
  for (const f of NGHTTP2_FLOODS) {
    it(`${f.name} flood: the connection gets GOAWAY and is closed within 5 s; a bystander's calls all succeed`, { timeout: 30_000 }, async () => {
      const by = echoClient(px.address);
      clients.push(by);
      const bystander = runBystander(by, 100, 10);
      const atk = await connectRawH2(px.address);
      raws.push(atk);
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

// WINDOW_UPDATE floods: node gives JS no hook per WINDOW_UPDATE frame, so dojang cannot count
// them as Envoy does (max_inbound_window_update_frames_per_data_frame_sent). What bounds them:
// they ask for no reply (nothing is queued, unlike PING or SETTINGS) and cost nghttp2's parsing
// only, and a window pushed past 2^31−1 is a FLOW_CONTROL_ERROR that ends the connection.
describe("attack: WINDOW_UPDATE floods", () => {
  it("60,000 increments of 1 (connection and stream) queue nothing: dojang still answers the attacker's PING within 1 s and a bystander's calls all succeed", { timeout: 30_000 }, async () => {
    const by = echoClient(px.address);
    clients.push(by);
    const bystander = runBystander(by, 100, 10);
    const atk = await connectRawH2(px.address);
    raws.push(atk);
    atk.headers(1, grpcRequestFields("/test.Stream/Held"));
    const t0 = performance.now();
    for (let i = 0; i < 3; i++) atk.write(Buffer.concat([manyFrames(windowUpdate(0, 1), 10_000), manyFrames(windowUpdate(1, 1), 10_000)]));
    atk.write(encodeFrame(FRAME.PING, 0, 0, Buffer.from("wuflood!")));
    const pingAck = (): boolean => atk.on(0).some((f) => f.type === FRAME.PING && (f.flags & 0x1) !== 0);
    while (performance.now() - t0 < 5000 && !pingAck() && !atk.closed) await sleep(5);
    const ms = performance.now() - t0;
    const r = await bystander;
    console.log(`WINDOW_UPDATE flood (60,000 frames): PING answered after ${Math.round(ms)} ms, connection closed ${atk.closed}`);
    expect(pingAck()).toBe(true);
    expect(ms).toBeLessThan(1000);
    expect(r.failures).toEqual([]);
  });

  it("a window pushed past 2^31−1 ends the connection with GOAWAY FLOW_CONTROL_ERROR within 5 s; a bystander's calls all succeed", { timeout: 30_000 }, async () => {
    const by = echoClient(px.address);
    clients.push(by);
    const bystander = runBystander(by, 100, 10);
    const atk = await connectRawH2(px.address);
    raws.push(atk);
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
