// A route's retry.backoff: retry n waits random(0, min(base × 2^(n−1), max)) before it goes
// (gRFC A6's full jitter, as Envoy does). Judged by the upstream: when each attempt of each call
// reached it. The draws are random (dojang's jitter is not seeded), so each assertion is one a
// correct dojang fails with a vanishing chance (worked out beside it), and each is one that a
// dojang ignoring the key (its default base 25ms, max 250ms) fails, on a quiet machine at least.
import * as grpc from "@grpc/grpc-js";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { echoClient, startProxy, unary } from "../helpers/peers.js";
import { Cleanup, GRPC_RESPONSE_HEADERS } from "../helpers/scripted-upstream.js";

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

/** a loaded 2-core machine: timers fire late and a process may wait for a CPU */
const LATE_MS = 1000;

/** An upstream that answers every attempt 14 (Trailers-Only) and logs when each attempt of each call came. */
async function alwaysUnavailable(): Promise<{ address: string; arrivals: Map<string, number[]> }> {
  const arrivals = new Map<string, number[]>();
  const server = http2.createServer();
  server.on("stream", (s, h) => {
    const at = performance.now();
    const chunks: Buffer[] = [];
    s.on("data", (d: Buffer) => chunks.push(d));
    s.on("end", () => {
      const id = Buffer.concat(chunks).subarray(5).toString();
      arrivals.set(id, [...(arrivals.get(id) ?? []), at]);
      if (!s.destroyed) s.respond({ ...GRPC_RESPONSE_HEADERS, "grpc-status": "14", "grpc-message": "try again" }, { endStream: true });
    });
    s.on("error", () => {});
    void h;
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  cleanup.add(server, (x) => new Promise<void>((r) => x.close(() => r())));
  return { address: `127.0.0.1:${(server.address() as AddressInfo).port}`, arrivals };
}

/** `n` concurrent calls, each retried by the policy; the gaps between the attempts of each, in order. */
async function gaps(backoff: { base: string; max: string }, maxAttempts: number, n: number): Promise<number[][]> {
  const up = await alwaysUnavailable();
  // no budget or breaker in the way: every call makes all its attempts
  const px = cleanup.add(
    await startProxy(up.address, {
      route: { retry: { retryOn: ["UNAVAILABLE"], maxAttempts, backoff } },
      cluster: { retryBudget: { percent: 100, minRetriesPerSecond: 1000 }, circuitBreaker: { maxRetries: 1000 } },
    }),
    (p) => p.close(0),
  );
  const c = cleanup.add(echoClient(px.address), (x) => x.close());
  const rs = await Promise.all(Array.from({ length: n }, (_, i) => unary(c, Buffer.from(`call-${i}`), new grpc.Metadata(), { deadline: Date.now() + 30_000 })));
  for (const r of rs) expect(r.err?.code).toBe(grpc.status.UNAVAILABLE);
  return Array.from({ length: n }, (_, i) => {
    const t = up.arrivals.get(`call-${i}`) ?? [];
    expect(t).toHaveLength(maxAttempts);
    return t.slice(1).map((x, k) => x - t[k]!);
  });
}

describe("listeners[].routes[].retry.backoff", () => {
  it("max caps the doubling: base 1s, max 1500ms, 4 calls × 4 retries all follow within 1.5 s (and a loaded machine's lateness)", async () => {
    const g = await gaps({ base: "1s", max: "1500ms" }, 5, 4);
    for (const x of g.flat()) expect(x).toBeLessThan(1500 + LATE_MS);
    // uncapped, retries 3 and 4 would wait random(0, 4 s) and random(0, 8 s): both under 2.5 s
    // with a chance of 0.625 × 0.31, for all four calls 0.13 %
  }, 60_000);

  it("base sets the scale: base 2s, 10 calls × 1 retry each wait random(0, 2 s) before it", async () => {
    const g = (await gaps({ base: "2s", max: "10s" }, 2, 10)).flat();
    for (const x of g) expect(x).toBeLessThan(2000 + LATE_MS);
    // a gap is at least its wait. All ten waits under 500 ms: 0.25^10 ≈ 1e-6. Their sum has mean
    // 10 s and sd 1.8 s: under 3 s is 3.8 sd down (7e-5). With the default base (25ms) the waits
    // are at most 25 ms each: the gaps are the attempts' own time, far below both.
    expect(Math.max(...g)).toBeGreaterThanOrEqual(500);
    expect(g.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(3000);
  }, 60_000);
});
