import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { KeyedBuckets, msUntilToken, newBucket, take } from "../../src/translate/token-bucket.js";

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
});
