// Contract (issue 11, step 2): "Load balancing: round_robin, least_request (power of two
// choices), random; per-endpoint weights." Three grpc-js upstreams behind one dojang cluster;
// each answers with its own name, so the client sees where every call went.
import { describe, expect, it } from "vitest";
import { unary } from "../helpers/peers.js";
import { useFixtures } from "../helpers/fixtures.js";
import { runCalls, startBackend, type Backend } from "../helpers/backends.js";

const fx = useFixtures();

async function three(): Promise<Backend[]> {
  const bs: Backend[] = [];
  for (const n of ["a", "b", "c"]) bs.push(fx.track(await startBackend(n), (b) => b.close()));
  return bs;
}

async function distribution(bs: Backend[], cluster: Record<string, unknown>, n: number, concurrency: number): Promise<{ a: number; b: number; c: number }> {
  const px = await fx.proxyFor(bs[0]!.address, { cluster });
  const c = fx.client(px.address);
  const rs = await runCalls(n, concurrency, () => unary(c, Buffer.from("x")));
  const counts = { a: 0, b: 0, c: 0 };
  for (const r of rs) {
    expect(r.err).toBeNull();
    counts[r.res!.toString() as "a" | "b" | "c"]++;
  }
  return counts;
}

describe('"Load balancing: round_robin, least_request (power of two choices), random; per-endpoint weights"', () => {
  it("round_robin with weights 1, 2, 3: exactly 10, 20, 30 of 60 sequential calls", async () => {
    const bs = await three();
    const endpoints = bs.map((b, i) => ({ address: b.address, weight: i + 1 }));
    expect(await distribution(bs, { endpoints, lb: "round_robin" }, 60, 1)).toEqual({ a: 10, b: 20, c: 30 });
  });

  it("round_robin without weights: each endpoint every third call", async () => {
    const bs = await three();
    expect(await distribution(bs, { endpoints: bs.map((b) => b.address) }, 30, 1)).toEqual({ a: 10, b: 10, c: 10 });
  });

  it("random with weights 1, 1, 2: each share within bounds of 25%, 25%, 50% over 600 calls", async () => {
    const bs = await three();
    const endpoints = bs.map((b, i) => ({ address: b.address, weight: i === 2 ? 2 : 1 }));
    const d = await distribution(bs, { endpoints, lb: "random" }, 600, 8);
    // expected 150, 150, 300; one standard deviation is about 11-12 calls: ±60 is five of them
    expect(d.a).toBeGreaterThan(90);
    expect(d.a).toBeLessThan(210);
    expect(d.b).toBeGreaterThan(90);
    expect(d.b).toBeLessThan(210);
    expect(d.c).toBeGreaterThan(240);
    expect(d.c).toBeLessThan(360);
  });

  it("least_request spreads calls between equal upstreams (no endpoint starved)", async () => {
    const bs = await three();
    const d = await distribution(bs, { endpoints: bs.map((b) => b.address), lb: "least_request" }, 300, 6);
    for (const k of ["a", "b", "c"] as const) expect(d[k]).toBeGreaterThan(40);
  });

  it("least_request avoids a slow upstream: it gets far fewer than a third of the calls", async () => {
    const bs = await three();
    bs[2]!.delayMs = 150;
    const d = await distribution(bs, { endpoints: bs.map((b) => b.address), lb: "least_request" }, 240, 12);
    // round robin would send it 80; P2C sends it a call only when it is drawn against an
    // endpoint with as many calls in flight, which the fast ones rarely have
    expect(d.c).toBeLessThan(40);
    expect(d.a + d.b + d.c).toBe(240);
  });

  it("round_robin sends the slow upstream its full third (the control for the test above)", async () => {
    const bs = await three();
    bs[2]!.delayMs = 20;
    const d = await distribution(bs, { endpoints: bs.map((b) => b.address) }, 60, 6);
    expect(d.c).toBe(20);
  });
});
