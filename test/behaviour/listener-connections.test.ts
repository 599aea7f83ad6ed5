// Contract (issue 11): "Downstream: maxConnectionAge (+ grace) with GOAWAY so clients rebalance
// behind an L4 load balancer, as grpc-go's MaxConnectionAge does; idle timeout." Observed from
// raw node:http2 clients (their 'goaway' and 'close' events) against a real upstream.
import http2 from "node:http2";
import { describe, expect, it } from "vitest";
import { jitteredAge } from "../../src/proxy/downstream/lifetime.js";
import { startBackend, type Backend } from "../helpers/backends.js";
import { useFixtures, waitFor } from "../helpers/fixtures.js";
import { frame, rawCall, statusOf } from "../helpers/peers.js";

const fx = useFixtures();

async function backend(name: string): Promise<Backend> {
  return fx.track(await startBackend(name), (b) => b.close());
}

function connect(address: string): { s: http2.ClientHttp2Session; goaways: { code: number; lastStreamId: number; at: number }[]; closedAt: () => number | undefined } {
  const s = fx.track(http2.connect(`http://${address}`), (x) => x.destroy());
  s.on("error", () => {});
  const goaways: { code: number; lastStreamId: number; at: number }[] = [];
  let closedAt: number | undefined;
  const t0 = performance.now();
  s.on("goaway", (code, lastStreamId) => goaways.push({ code, lastStreamId, at: performance.now() - t0 }));
  s.on("close", () => (closedAt = performance.now() - t0));
  return { s, goaways, closedAt: () => closedAt };
}

const call = (address: string, session: http2.ClientHttp2Session) => rawCall(address, {}, frame(Buffer.from("x")), { session });

describe('"maxConnectionAge (+ grace) with GOAWAY, as grpc-go\'s MaxConnectionAge"', () => {
  it("jitters the age by ±10 %, as grpc-go does", () => {
    expect(jitteredAge(1000, 0)).toBe(900);
    expect(jitteredAge(1000, 0.5)).toBe(1000);
    expect(jitteredAge(1000, 0.999999)).toBe(1100);
  });

  it("sends GOAWAY once the connection is maxConnectionAge old; a call in flight on it completes within the grace", async () => {
    const up = await backend("up");
    up.delayMs = 800;
    const px = await fx.proxyFor(up.address, { listener: { maxConnectionAge: "300ms", maxConnectionAgeGrace: "5s" } });
    const c = connect(px.address);
    const inFlight = call(px.address, c.s);
    await waitFor("a GOAWAY", () => c.goaways.length > 0, 3000);
    // within the age and its +10 % jitter (and some scheduling slack)
    expect(c.goaways[0]!.at).toBeGreaterThanOrEqual(250);
    expect(c.goaways[0]!.at).toBeLessThan(1000);
    // grpc-go's two steps: first "no new streams" with the largest id (streams already on their
    // way are still taken), then, after a PING round trip, the last stream really processed.
    expect(c.goaways[0]).toMatchObject({ code: http2.constants.NGHTTP2_NO_ERROR, lastStreamId: 2 ** 31 - 1 });
    await waitFor("the second GOAWAY", () => c.goaways.length === 2, 3000);
    expect(c.goaways[1]).toMatchObject({ code: http2.constants.NGHTTP2_NO_ERROR, lastStreamId: 1 });
    const r = await inFlight;
    expect(statusOf(r)).toBe("0");
    expect(r.data.subarray(5).toString()).toBe("up");
    // the connection ends by itself once its last call has
    await waitFor("the connection to close", () => c.closedAt() !== undefined, 3000);
    // a client that reconnects is served again
    const again = await rawCall(px.address, {}, frame(Buffer.from("y")));
    expect(statusOf(again)).toBe("0");
  });

  it("ends what still runs after the grace with 14 UNAVAILABLE (decided_by shutdown) and closes the connection", async () => {
    const up = await backend("up");
    up.delayMs = 10_000;
    const px = await fx.proxyFor(up.address, { listener: { maxConnectionAge: "200ms", maxConnectionAgeGrace: "300ms" } });
    const c = connect(px.address);
    const t0 = performance.now();
    const r = await call(px.address, c.s);
    const took = performance.now() - t0;
    expect(statusOf(r)).toBe("14");
    expect(took).toBeGreaterThan(400);
    expect(took).toBeLessThan(3000);
    expect(px.calls.at(-1)).toMatchObject({ grpc_code: 14, decided_by: "shutdown" });
    await waitFor("the connection to close", () => c.closedAt() !== undefined, 3000);
  });

  it("keeps connections open forever without maxConnectionAge (the default)", async () => {
    const up = await backend("up");
    const px = await fx.proxyFor(up.address);
    const c = connect(px.address);
    expect(statusOf(await call(px.address, c.s))).toBe("0");
    await new Promise((r) => setTimeout(r, 500));
    expect(c.goaways).toEqual([]);
    expect(c.closedAt()).toBeUndefined();
  });
});

describe('"idle timeout": a connection with no open stream for idleTimeout gets GOAWAY and is closed', () => {
  it("closes an idle connection, but not one with a call open for longer than the timeout", async () => {
    const up = await backend("up");
    up.delayMs = 1200;
    const px = await fx.proxyFor(up.address, { listener: { idleTimeout: "300ms" } });
    const idle = connect(px.address);
    const busy = connect(px.address);
    // the idle one has served a call, then nothing
    up.delayMs = 0;
    expect(statusOf(await call(px.address, idle.s))).toBe("0");
    up.delayMs = 1200;
    const long = call(px.address, busy.s);
    await waitFor("the idle connection to close", () => idle.closedAt() !== undefined, 3000);
    expect(idle.goaways.length).toBeGreaterThan(0);
    // the busy one is still open and its call completes
    expect(busy.goaways).toEqual([]);
    expect(busy.closedAt()).toBeUndefined();
    const r = await long;
    expect(statusOf(r)).toBe("0");
    // and once it has been idle for the timeout, it goes too
    await waitFor("the busy connection to close once idle", () => busy.closedAt() !== undefined, 3000);
  });
});
