import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { patchList } from "../../src/translate/endpoint-set.js";
import { cumulativeWeights, eligible, patchRotation, pickLeastRequest, pickRandom, rotation, roundRobinSchedule, MAX_SCHEDULE } from "../../src/translate/pick.js";

const count = (xs: readonly number[]): Map<number, number> => {
  const m = new Map<number, number>();
  for (const x of xs) m.set(x, (m.get(x) ?? 0) + 1);
  return m;
};

describe("eligible()", () => {
  it("keeps the usable endpoints, and all of them when none is (panic)", () => {
    expect(eligible([true, false, true])).toEqual({ indices: [0, 2], panic: false });
    expect(eligible([false, false])).toEqual({ indices: [0, 1], panic: true });
    expect(eligible([])).toEqual({ indices: [], panic: false });
  });
});

describe("roundRobinSchedule()", () => {
  it("is the indices in order when unweighted", () => {
    expect(roundRobinSchedule([0, 2, 3], [1, 1, 1, 1])).toEqual([0, 2, 3]);
  });

  it("spreads a heavy endpoint smoothly (nginx's smooth weighted round robin)", () => {
    expect(roundRobinSchedule([0, 1], [3, 1])).toEqual([0, 0, 1, 0]);
    expect(roundRobinSchedule([0, 1, 2], [5, 1, 1])).toEqual([0, 0, 1, 0, 2, 0, 0]);
  });

  it("gives each endpoint picks in proportion to its weight (exactly, up to the schedule cap)", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 20 }), { minLength: 1, maxLength: 8 }), (ws) => {
        const idx = ws.map((_, i) => i);
        const s = roundRobinSchedule(idx, ws);
        const c = count(s);
        const g = ws.reduce((a, b) => { while (b) [a, b] = [b, a % b]; return a; });
        for (const i of idx) expect(c.get(i)).toBe(ws[i]! / g);
        // no endpoint waits longer than the schedule
        expect(s.length).toBeLessThanOrEqual(MAX_SCHEDULE);
      }),
    );
  });

  it("caps the schedule for huge weights and keeps every endpoint in it", () => {
    const s = roundRobinSchedule([0, 1, 2], [100000, 3, 1]);
    expect(s.length).toBeLessThanOrEqual(MAX_SCHEDULE + 3);
    expect(new Set(s)).toEqual(new Set([0, 1, 2]));
  });
});

describe("pickRandom()", () => {
  it("maps the draw onto cumulative weights", () => {
    const idx = [4, 7];
    const cum = cumulativeWeights(idx, [1, 1, 1, 1, 3, 1, 1, 1]);
    expect(cum).toEqual([3, 4]);
    expect([0, 0.5, 0.74, 0.75, 0.99].map((d) => pickRandom(idx, cum, d))).toEqual([4, 4, 4, 7, 7]);
  });

  it("always returns one of the candidates", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 9 }), { minLength: 1, maxLength: 10 }), fc.double({ min: 0, max: 1, noNaN: true }), (ws, d) => {
        const idx = ws.map((_, i) => i);
        expect(idx).toContain(pickRandom(idx, cumulativeWeights(idx, ws), d));
      }),
    );
  });

  it("without sums (null: every weight 1) picks what the search over 1, 2 … n picks, and so does least request (property)", () => {
    const draw = fc.oneof(fc.double({ min: -1, max: 2, noNaN: true }), fc.constantFrom(0, 0.5, 0.999999999, 0.9999999999, 1));
    fc.assert(
      fc.property(fc.uniqueArray(fc.nat({ max: 50 }), { minLength: 1, maxLength: 40 }), draw, draw, fc.array(fc.nat({ max: 5 }), { minLength: 51, maxLength: 51 }), (idx, d1, d2, active) => {
        const ones = Array.from({ length: 51 }, () => 1);
        const cum = cumulativeWeights(idx, ones);
        expect(pickRandom(idx, null, d1)).toBe(pickRandom(idx, cum, d1));
        expect(pickLeastRequest(idx, null, ones, (i) => active[i]!, d1, d2)).toBe(pickLeastRequest(idx, cum, ones, (i) => active[i]!, d1, d2));
      }),
      { numRuns: 500 },
    );
  });
});

describe("pickLeastRequest()", () => {
  it("takes the less loaded of two distinct endpoints", () => {
    const idx = [0, 1, 2];
    const w = [1, 1, 1];
    const cum = cumulativeWeights(idx, w);
    const active = [5, 1, 9];
    expect(pickLeastRequest(idx, cum, w, (i) => active[i]!, 0.1, 0.5)).toBe(1);
    expect(pickLeastRequest(idx, cum, w, (i) => active[i]!, 0.1, 0.9)).toBe(0);
  });

  it("never returns the more loaded endpoint of the two it drew, and never one outside the candidates", () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ w: fc.integer({ min: 1, max: 5 }), a: fc.integer({ min: 0, max: 50 }) }), { minLength: 1, maxLength: 8 }),
        fc.double({ min: 0, max: 0.999, noNaN: true }),
        fc.double({ min: 0, max: 0.999, noNaN: true }),
        (eps, d1, d2) => {
          const idx = eps.map((_, i) => i);
          const w = eps.map((e) => e.w);
          const cum = cumulativeWeights(idx, w);
          const p = pickLeastRequest(idx, cum, w, (i) => eps[i]!.a, d1, d2);
          expect(idx).toContain(p);
          const first = pickRandom(idx, cum, d1);
          // the winner is never worse than the first draw
          expect(eps[p]!.a / eps[p]!.w).toBeLessThanOrEqual(eps[first]!.a / eps[first]!.w);
        },
      ),
    );
  });

  it("spreads load away from a busy endpoint over many picks", () => {
    const idx = [0, 1, 2, 3];
    const w = [1, 1, 1, 1];
    const cum = cumulativeWeights(idx, w);
    const active = [100, 0, 0, 0];
    let seed = 1;
    const rnd = (): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const picks = Array.from({ length: 1000 }, () => pickLeastRequest(idx, cum, w, (i) => active[i]!, rnd(), rnd()));
    expect(count(picks).get(0) ?? 0).toBe(0);
  });
});

// The rotation a cluster keeps across changes (patchRotation) against the one computed from
// scratch over the same lists (rotation): equal after every change of a random sequence.
describe("patchRotation() (property)", () => {
  it.each([
    ["copies", false],
    ["patched in place (own: the cluster's)", true],
  ])("equals rotation() over the patched lists after each change of a random sequence: lists %s", (_, own) => {
    const item = fc.record({ usable: fc.boolean(), weight: fc.integer({ min: 1, max: 3 }) });
    const change = fc.record({ removed: fc.array(fc.nat(), { maxLength: 3 }), added: fc.array(item, { maxLength: 3 }), set: fc.array(fc.record({ index: fc.nat(), usable: fc.boolean(), weight: fc.integer({ min: 1, max: 3 }) }), { maxLength: 3 }) });
    fc.assert(
      fc.property(fc.array(item, { maxLength: 12 }), fc.array(change, { maxLength: 15 }), (start, changes) => {
        let r = rotation(
          start.map((x) => x.usable),
          start.map((x) => x.weight),
        );
        let usable = start.map((x) => x.usable);
        let weights = start.map((x) => x.weight);
        for (const c0 of changes) {
          // (indices that exist: the removed ones in the old list, ascending and distinct; the set ones in the new)
          const removed = [...new Set(c0.removed.filter((i) => i < usable.length))].sort((x, y) => x - y);
          const n = usable.length - removed.length + c0.added.length;
          const set = n === 0 ? [] : c0.set.map((s) => ({ ...s, index: s.index % n }));
          const c = { removed, added: c0.added, set };
          const before = { usable: [...r.usable], weights: [...r.weights] };
          const held = r;
          r = patchRotation(r, c, own);
          // copies leave the rotation given as it was; in place, its lists are the result's
          if (!own) expect({ usable: held.usable, weights: held.weights }).toEqual(before);
          else {
            expect(r.usable).toBe(held.usable);
            expect(r.weights).toBe(held.weights);
          }
          usable = patchList(usable, removed, c.added.map((a) => a.usable));
          weights = patchList(weights, removed, c.added.map((a) => a.weight));
          for (const s of set) {
            usable[s.index] = s.usable;
            weights[s.index] = s.weight;
          }
          const whole = rotation(usable, weights);
          expect({ ...r, indices: [...r.indices] }).toEqual({ ...whole, indices: [...whole.indices] });
          expect(r.unusable).toBe(usable.filter((u) => !u).length);
          expect(r.heavy).toBe(weights.filter((w) => w >= 2).length);
        }
      }),
      { numRuns: 300 },
    );
  });

  it("keeps the eligible indices (the same array) when one usable endpoint replaces another", () => {
    const r = rotation([true, false, true, true], [1, 1, 2, 1]);
    const p = patchRotation(r, { removed: [2], added: [{ usable: true, weight: 1 }], set: [] });
    expect(p.indices).toBe(r.indices);
    expect(p.indices).toEqual([0, 2, 3]);
    expect(p.heavy).toBe(0);
    expect(patchRotation(p, { removed: [], added: [], set: [{ index: 1, usable: true, weight: 1 }] }).indices).toEqual([0, 1, 2, 3]);
  });
});
