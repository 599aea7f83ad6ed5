import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { KeyedBuckets, msUntilToken, newBucket, rateLimitHint, take } from "../../src/translate/token-bucket.js";

describe("token bucket", () => {
  it("allows the burst at once, then the rate", () => {
    const cfg = { ratePerSecond: 10, burst: 3 };
    const b = newBucket(cfg, 0);
    expect([0, 0, 0, 0].map(() => take(b, cfg, 0))).toEqual([true, true, true, false]);
    expect(msUntilToken(b, cfg)).toBe(100);
    expect(take(b, cfg, 99)).toBe(false);
    expect(take(b, cfg, 100)).toBe(true);
    expect(take(b, cfg, 10_000)).toBe(true); // refilled to the burst, no more
    expect([0, 0, 0].map(() => take(b, cfg, 10_000))).toEqual([true, true, false]);
  });

  it("never grants more than burst + rate × elapsed, whatever the timing", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1000 }), fc.integer({ min: 1, max: 50 }), fc.array(fc.integer({ min: 0, max: 500 }), { maxLength: 300 }), (rate, burst, gaps) => {
        const cfg = { ratePerSecond: rate, burst };
        const b = newBucket(cfg, 0);
        let t = 0;
        let granted = 0;
        for (const g of gaps) {
          t += g;
          if (take(b, cfg, t)) granted++;
        }
        expect(granted).toBeLessThanOrEqual(burst + Math.floor((rate * t) / 1000));
      }),
    );
  });

  it("keeps at most maxKeys buckets, evicting the least recently used", () => {
    const k = new KeyedBuckets({ ratePerSecond: 1, burst: 1 }, 2);
    expect(k.take("a", 0)).toBe(true);
    expect(k.take("b", 0)).toBe(true);
    expect(k.take("a", 0)).toBe(false); // a is now the most recent
    expect(k.take("c", 0)).toBe(true); // evicts b
    expect(k.size).toBe(2);
    expect(k.take("a", 0)).toBe(false); // a kept its empty bucket
    expect(k.take("b", 0)).toBe(true); // b starts afresh
  });

  it("a refusal's hint: the bucket's size, 0 left, and the wait until the next token in whole seconds and in milliseconds (rounded up)", () => {
    const cfg = { ratePerSecond: 0.4, burst: 3 };
    const b = newBucket(cfg, 0);
    for (let i = 0; i < 3; i++) expect(take(b, cfg, 0)).toBe(true);
    expect(take(b, cfg, 1000)).toBe(false); // 0.4 of a token back
    expect(rateLimitHint(b, cfg)).toEqual({ limit: 3, remaining: 0, resetSeconds: 2, pushbackMs: 1500 });
    expect(take(b, cfg, 2499)).toBe(false);
    expect(rateLimitHint(b, cfg).pushbackMs).toBe(1); // 0.9996 of a token: 1 ms, never 0 while refused
    expect(rateLimitHint(b, cfg).resetSeconds).toBe(1);
    expect(take(b, cfg, 2500)).toBe(true); // the pushback was right: a token at 2500 ms
  });

  it("waiting the pushback always finds a token (no other taker)", () => {
    fc.assert(
      fc.property(fc.double({ min: 0.01, max: 1000, noNaN: true }), fc.integer({ min: 1, max: 20 }), fc.integer({ min: 0, max: 100_000 }), (rate, burst, at) => {
        const cfg = { ratePerSecond: rate, burst };
        const b = newBucket(cfg, 0);
        const t = at;
        while (take(b, cfg, t)) {} // empty it
        const h = rateLimitHint(b, cfg);
        expect(h.pushbackMs).toBeGreaterThan(0);
        expect(h.resetSeconds).toBe(Math.ceil(h.pushbackMs / 1000));
        expect(take(b, cfg, t + h.pushbackMs)).toBe(true);
      }),
    );
  });

  it("peek shows a key's bucket without touching the least-recently-used order", () => {
    const k = new KeyedBuckets({ ratePerSecond: 1, burst: 1 }, 2);
    expect(k.peek("a")).toBeUndefined();
    k.take("a", 0);
    k.take("b", 0);
    expect(k.peek("a")?.tokens).toBe(0);
    k.take("c", 0); // evicts a: peeking did not make it recent
    expect(k.peek("a")).toBeUndefined();
  });
});
