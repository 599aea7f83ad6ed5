// The arithmetic of GET /stats (src/proxy/observe/stats.ts): the latency bins, quantiles read from
// them, and merging workers' rows. The oracle for a quantile is the exact one of the durations
// sorted, and HdrHistogram's (hdr-histogram-js) beside it; the bins' promise is stated as a
// bound: within one bin (at most 25 % of its lower bound, 16 µs under 64 µs).
import * as hdr from "hdr-histogram-js";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { LATENCY_BINS, binRange, finishRow, finishStats, latencyBin, mergeRawStats, quantileUs, type RawStats } from "../../src/proxy/observe/stats.js";

/** The exact q-quantile: the value of rank ceil(q·n) of the sorted durations (HdrHistogram's definition). */
function exact(sorted: readonly number[], q: number): number {
  return sorted[Math.max(1, Math.ceil(q * sorted.length)) - 1]!;
}

function binsOf(us: readonly number[]): [number, number][] {
  const m = new Map<number, number>();
  for (const u of us) m.set(latencyBin(u), (m.get(latencyBin(u)) ?? 0) + 1);
  return [...m];
}

describe("latency bins", () => {
  it("cover 0 µs to 268 s without gaps: each bin starts where the one before ends", () => {
    expect(binRange(0)).toEqual([0, 16]);
    for (let b = 1; b < LATENCY_BINS; b++) expect(binRange(b)[0], `bin ${b}`).toBe(binRange(b - 1)[1]);
    expect(binRange(LATENCY_BINS - 1)[1]).toBe(2 ** 28);
  });

  it("put each duration in the bin whose range holds it (property)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 28 - 1 }), (us) => {
        const [lo, hi] = binRange(latencyBin(us));
        return lo <= us && us < hi;
      }),
      { numRuns: 5000 },
    );
  });

  it("are at most 25 % wider than their lower bound above 64 µs (four per power of two)", () => {
    for (let b = 4; b < LATENCY_BINS; b++) {
      const [lo, hi] = binRange(b);
      expect((hi - lo) / lo).toBeLessThanOrEqual(0.25);
    }
    expect([latencyBin(64), latencyBin(79), latencyBin(80), latencyBin(1_000), latencyBin(1_000_000)]).toEqual([4, 4, 5, 19, 59]);
  });

  it("put what is above 268 s, and what is not a number, in the last bin", () => {
    expect(latencyBin(2 ** 28)).toBe(LATENCY_BINS - 1);
    expect(latencyBin(3.6e9)).toBe(LATENCY_BINS - 1);
    expect(latencyBin(Number.NaN)).toBe(LATENCY_BINS - 1);
  });
});

describe("quantiles from the bins", () => {
  it("are within one bin of the exact quantile (property, against sorting and HdrHistogram)", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 50, max: 30_000_000 }), { minLength: 1, maxLength: 400 }), fc.constantFrom(0.5, 0.9, 0.95, 0.99, 1), (us, q) => {
        const sorted = [...us].sort((a, b) => a - b);
        const want = exact(sorted, q);
        const got = quantileUs(binsOf(us), q);
        // inside the bin that holds the exact value: never more than that bin's width away
        const [lo, hi] = binRange(latencyBin(want));
        expect(got).toBeGreaterThanOrEqual(lo);
        expect(got).toBeLessThanOrEqual(hi);
        const h = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 2 ** 31, numberOfSignificantValueDigits: 3 });
        for (const u of us) h.recordValue(u);
        const theirs = h.getValueAtPercentile(q * 100);
        h.destroy();
        // HdrHistogram (3 significant digits) lands in the same bin, or at its edge
        expect(Math.abs(got - theirs)).toBeLessThanOrEqual(hi - lo + theirs * 0.001 + 1);
      }),
      { numRuns: 300 },
    );
  });

  it("p50, p95 and p99 of 1,000 known durations (1 ms … 1000 ms), within 25 %", () => {
    const us = Array.from({ length: 1000 }, (_, i) => (i + 1) * 1000);
    const bins = binsOf(us);
    for (const [q, want] of [
      [0.5, 500_000],
      [0.95, 950_000],
      [0.99, 990_000],
    ] as const) {
      const got = quantileUs(bins, q);
      expect(Math.abs(got - want) / want, `p${q * 100}`).toBeLessThan(0.25);
    }
  });

  it("are NaN without calls", () => {
    expect(quantileUs([], 0.5)).toBeNaN();
  });
});

describe("rows: merged over workers, then finished", () => {
  const part = (rps: number, outcomes: [number, string, number][], bins: [number, number][]): RawStats => ({
    window: "1m",
    windowSeconds: 60,
    rows: { method: [{ key: "pkg.Svc/M", rps, outcomes, bins }], route: [], endpoint: [] },
    folded: { method: 1, route: 0, endpoint: 0 },
  });

  it("sums rates, status pairs, bins and folded keys row by row", () => {
    const m = mergeRawStats([part(2, [[0, "upstream", 100], [14, "upstream_reset", 20]], [[19, 120]]), part(1.5, [[0, "upstream", 50], [4, "deadline", 5]], [[19, 50], [40, 5]])])!;
    expect(m.folded.method).toBe(2);
    const r = m.rows.method[0]!;
    expect(r.rps).toBe(3.5);
    expect(r.outcomes).toEqual([
      [0, "upstream", 150],
      [14, "upstream_reset", 20],
      [4, "deadline", 5],
    ]);
    expect(r.bins).toEqual([
      [19, 170],
      [40, 5],
    ]);
    const f = finishRow(r);
    expect(f.calls).toBe(175);
    expect(f.failed).toBe(25);
    expect(f.success).toBeCloseTo(150 / 175, 10);
    expect(f.failed_by).toEqual({ upstream_reset: 20, deadline: 5 });
    expect(f.outcomes[0]).toEqual({ grpc_code: 0, grpc_status: "OK", decided_by: "upstream", calls: 150 });
    expect(f.outcomes[1]).toEqual({ grpc_code: 14, grpc_status: "UNAVAILABLE", decided_by: "upstream_reset", calls: 20 });
  });

  it("the total is every method row summed; an empty window has null rates and latencies", () => {
    const v = finishStats(mergeRawStats([part(1, [[0, "upstream", 3]], [[10, 3]])])!);
    expect(v.total.calls).toBe(3);
    expect(v.total.success).toBe(1);
    const empty = finishStats({ window: "10s", windowSeconds: 10, rows: { method: [], route: [], endpoint: [] }, folded: { method: 0, route: 0, endpoint: 0 } });
    expect(empty.total).toMatchObject({ calls: 0, success: null, p50_ms: null, p99_ms: null });
    expect(mergeRawStats([])).toBeUndefined();
  });

  it("names a code outside 0-16 OTHER", () => {
    expect(finishRow({ key: "k", rps: 0, outcomes: [[17, "other", 2]], bins: [] }).outcomes[0]).toMatchObject({ grpc_status: "OTHER", grpc_code: 17 });
  });
});
