// The immutable pickers (balancer.ts over src/translate/pick.ts): only eligible endpoints are
// picked (all of them in panic), `avoid` is skipped whenever another eligible endpoint exists,
// and the draws come from the injected rand. Property-tested with fast-check.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { buildPicker } from "../../../src/proxy/upstream/balancer.js";
import { LB_POLICIES } from "../../../src/translate/pick.js";

interface E {
  readonly id: number;
  active: number;
}

/** A deterministic rand from a seed (xorshift), so fast-check can shrink. */
function seeded(seed: number): () => number {
  let x = seed | 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 4294967296;
  };
}

const arbSetup = fc.record({
  policy: fc.constantFrom(...LB_POLICIES),
  eps: fc.array(fc.record({ usable: fc.boolean(), weight: fc.integer({ min: 1, max: 5 }), active: fc.nat(10) }), { minLength: 1, maxLength: 8 }),
  seed: fc.integer(),
  avoid: fc.nat(7),
});

describe("buildPicker()", () => {
  it("picks only usable endpoints, or any in panic; never `avoid` when another eligible one exists", () => {
    fc.assert(
      fc.property(arbSetup, ({ policy, eps, seed, avoid }) => {
        const list: E[] = eps.map((e, id) => ({ id, active: e.active }));
        const p = buildPicker({ policy, endpoints: list, usable: eps.map((e) => e.usable), weights: eps.map((e) => e.weight), active: (e) => e.active, rand: seeded(seed) });
        const anyUsable = eps.some((e) => e.usable);
        expect(p.panic).toBe(!anyUsable);
        const eligible = new Set(anyUsable ? list.filter((_, i) => eps[i]!.usable) : list);
        expect(new Set(p.eligible)).toEqual(eligible);
        const av = list[avoid % list.length]!;
        for (let k = 0; k < 20; k++) {
          const e = p.pick()!;
          expect(eligible.has(e)).toBe(true);
          const f = p.pick(av)!;
          expect(eligible.has(f)).toBe(true);
          if (eligible.size >= 2 && eligible.has(av)) expect(f).not.toBe(av);
        }
      }),
      { numRuns: 300 },
    );
  });

  it("is undefined with no endpoints at all", () => {
    for (const policy of LB_POLICIES) {
      const p = buildPicker<E>({ policy, endpoints: [], usable: [], weights: [], active: () => 0, rand: Math.random });
      expect(p.pick()).toBeUndefined();
      expect(p.panic).toBe(false);
    }
  });

  it("round robin follows the weights exactly over each schedule, from the place rand chose", () => {
    const list: E[] = [0, 1, 2].map((id) => ({ id, active: 0 }));
    const p = buildPicker({ policy: "round_robin", endpoints: list, usable: [true, true, true], weights: [1, 2, 3], active: (e) => e.active, rand: () => 0.5 });
    const counts = [0, 0, 0];
    for (let k = 0; k < 60; k++) counts[p.pick()!.id]!++;
    expect(counts).toEqual([10, 20, 30]);
  });

  it("least_request prefers the endpoint with fewer attempts in flight, reading them at pick time", () => {
    const list: E[] = [0, 1].map((id) => ({ id, active: 0 }));
    const p = buildPicker({ policy: "least_request", endpoints: list, usable: [true, true], weights: [1, 1], active: (e) => e.active, rand: seeded(7) });
    list[0]!.active = 5;
    for (let k = 0; k < 20; k++) expect(p.pick()!.id).toBe(1);
    list[0]!.active = 0;
    list[1]!.active = 5;
    for (let k = 0; k < 20; k++) expect(p.pick()!.id).toBe(0);
  });
});
