import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { ejectionMs, forgive, healthStep, isEjected, maxEjected, newHealthState, newOutlierState, recordResult, type OutlierConfig } from "../../src/translate/outlier.js";

const CFG: OutlierConfig = { consecutiveFailures: 5, baseEjectionMs: 30_000, maxEjectionMs: 300_000, maxEjectionPercent: 50 };

describe("outlier ejection", () => {
  it("ejects after the configured streak of failures, for base × times ejected", () => {
    const s = newOutlierState();
    for (let i = 0; i < 4; i++) expect(recordResult(s, CFG, false, 0, 0, 3)).toBe(false);
    expect(recordResult(s, CFG, false, 1000, 0, 3)).toBe(true);
    expect(isEjected(s, 1000 + 29_999)).toBe(true);
    expect(isEjected(s, 1000 + 30_000)).toBe(false);
    for (let i = 0; i < 5; i++) recordResult(s, CFG, false, 40_000, 0, 3);
    expect(s.timesEjected).toBe(2);
    expect(s.ejectedUntil).toBe(40_000 + 60_000);
  });

  it("a success breaks the streak", () => {
    const s = newOutlierState();
    for (let i = 0; i < 4; i++) recordResult(s, CFG, false, 0, 0, 3);
    recordResult(s, CFG, true, 0, 0, 3);
    for (let i = 0; i < 4; i++) expect(recordResult(s, CFG, false, 0, 0, 3)).toBe(false);
  });

  it("never ejects past maxEjectionPercent, never the last endpoint", () => {
    expect([1, 2, 3, 4, 10].map((n) => maxEjected(n, 50))).toEqual([0, 1, 1, 2, 5]);
    expect(maxEjected(3, 10)).toBe(1);
    expect(maxEjected(4, 100)).toBe(3);
    const s = newOutlierState();
    for (let i = 0; i < 10; i++) expect(recordResult(s, CFG, false, 0, 1, 2)).toBe(false);
    expect(isEjected(s, 1)).toBe(false);
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 200 }), fc.integer({ min: 0, max: 100 }), (n, p) => {
        const m = maxEjected(n, p);
        expect(m).toBeGreaterThanOrEqual(0);
        expect(m).toBeLessThan(Math.max(1, n));
      }),
    );
  });

  it("caps the ejection time and forgives an endpoint that stayed well", () => {
    expect(ejectionMs(CFG, 100)).toBe(300_000);
    const s = { consecutive: 0, timesEjected: 3, ejectedUntil: 1000 };
    forgive(s, CFG, 1000 + 29_999);
    expect(s.timesEjected).toBe(3);
    forgive(s, CFG, 1000 + 30_000);
    expect(s.timesEjected).toBe(2);
  });
});

describe("health thresholds", () => {
  it("turns unhealthy after unhealthyThreshold failures and back after healthyThreshold passes", () => {
    const t = { unhealthyThreshold: 3, healthyThreshold: 2 };
    const s = newHealthState();
    expect([false, false, true, false, false, false].map((p) => healthStep(s, t, p))).toEqual([false, false, false, false, false, true]);
    expect(s.healthy).toBe(false);
    expect([true, false, true, true].map((p) => healthStep(s, t, p))).toEqual([false, false, false, true]);
    expect(s.healthy).toBe(true);
  });

  it("changes only after a full streak, for any sequence", () => {
    fc.assert(
      fc.property(fc.array(fc.boolean(), { maxLength: 60 }), fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 5 }), (seq, u, h) => {
        const s = newHealthState();
        let run = 0;
        let last: boolean | undefined;
        for (const p of seq) {
          run = p === last ? run + 1 : 1;
          last = p;
          const before = s.healthy;
          const changed = healthStep(s, { unhealthyThreshold: u, healthyThreshold: h }, p);
          if (changed) {
            expect(s.healthy).toBe(p);
            expect(run).toBeGreaterThanOrEqual(before ? u : h);
          } else expect(s.healthy).toBe(before);
        }
      }),
    );
  });
});
