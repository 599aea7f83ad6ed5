// Issue 12, rapid reset (CVE-2023-44487): a client that opens streams and resets each at once
// makes the proxy start and cancel work for every one of them at no cost to itself. dojang counts
// premature resets per connection and ends it with GOAWAY ENHANCE_YOUR_CALM past the budget
// (listener.ts, PREMATURE_RESET_MIN), while a well-behaved client on the same dojang is served.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { echoClient, startProxy, startRawUpstream, type EchoClient, type RawUpstream } from "../helpers/peers.js";
import { BYSTANDER_PATH, echoOr, runBystander } from "../helpers/bystander.js";
import { connectRawH2, grpcRequestFields, type RawH2Client } from "../helpers/raw-h2-client.js";
import { FRAME } from "../helpers/h2-frames.js";
import { sleep } from "../helpers/process.js";
import { PREMATURE_RESET_MIN } from "../../src/proxy/listener.js";
import type { DojangHandle } from "../../src/index.js";

const CANCEL = 0x8;
const ENHANCE_YOUR_CALM = 0xb;
/** connections the attacker opens, and streams it opens and resets on each (bounded) */
const CONNECTIONS = 5;
const STREAMS = 1000;

let upstream: RawUpstream;
const clients: EchoClient[] = [];
const raws: RawH2Client[] = [];
const proxies: DojangHandle[] = [];
beforeAll(async () => {
  upstream = await startRawUpstream(echoOr());
});
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const r of raws.splice(0)) r.close();
  for (const px of proxies.splice(0)) await px.close(0);
});
afterAll(async () => {
  await upstream.close();
});

/** HEADERS then RST_STREAM(code) on `n` streams, as fast as the socket takes them; stops once closed. */
async function resetFlood(c: RawH2Client, n: number, code: number): Promise<number> {
  let sent = 0;
  for (let i = 0; i < n && !c.closed; i++) {
    const id = 1 + 2 * i;
    c.headers(id, grpcRequestFields("/test.Stream/Reset"));
    c.rst(id, code);
    sent++;
    if (i % 50 === 49) await sleep(1); // let dojang's replies in (GOAWAY) between bursts
  }
  return sent;
}

describe("attack: rapid reset", () => {
  it(`${CONNECTIONS} connections opening and resetting ${STREAMS} streams each get GOAWAY ENHANCE_YOUR_CALM; a bystander's calls all succeed`, { timeout: 60_000 }, async () => {
    const px = await startProxy(upstream.address);
    proxies.push(px);
    const by = echoClient(px.address);
    clients.push(by);
    const bystander = runBystander(by, 200, 10);
    const t0 = performance.now();
    const atks = await Promise.all(Array.from({ length: CONNECTIONS }, () => connectRawH2(px.address)));
    raws.push(...atks);
    const sent = await Promise.all(atks.map((c) => resetFlood(c, STREAMS, CANCEL)));
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline && atks.some((c) => !c.closed)) await sleep(20);
    const closedMs = performance.now() - t0;
    const r = await bystander;
    for (const c of atks) {
      expect(c.closed).toBe(true);
      const g = c.goaway();
      expect(g?.type).toBe(FRAME.GOAWAY);
      expect(g?.errorCode).toBe(ENHANCE_YOUR_CALM);
    }
    // each connection was cut soon after the budget, not after the whole flood
    for (const n of sent) expect(n).toBeLessThan(STREAMS);
    console.log(`rapid reset: streams sent per connection before the cut ${sent.join(", ")}; all closed within ${Math.round(closedMs)} ms`);
    expect(r.failures).toEqual([]);
    expect(r.ok).toBe(200);
    expect(upstream.seen.filter((s) => s.headers[":path"] !== BYSTANDER_PATH).length).toBeLessThan(CONNECTIONS * STREAMS);
  });

  it("a client that cancels some of its calls is not cut (the resets are fewer than half of its streams)", { timeout: 30_000 }, async () => {
    const px = await startProxy(upstream.address);
    proxies.push(px);
    const c = await connectRawH2(px.address);
    raws.push(c);
    // 3 × PREMATURE_RESET_MIN streams: every third one reset at once, the others left open
    const n = 3 * PREMATURE_RESET_MIN;
    for (let i = 0; i < n; i++) {
      const id = 1 + 2 * i;
      c.headers(id, grpcRequestFields("/test.Stream/Held"));
      if (i % 3 === 0) c.rst(id, CANCEL);
    }
    await sleep(500);
    expect(c.ended(3)).toBe(false); // a held call is still open
    expect(c.closed).toBe(false);
    expect(c.goaway()).toBeUndefined();
  });
});
