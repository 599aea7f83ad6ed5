// The endpoint set's arithmetic (src/translate/endpoint-set.ts): the change from one list to the
// next, and a list with a change applied. Vectors for the cases an EDS update or a DNS answer
// makes (one replaced, added, removed; a weight; a reorder), and properties over arbitrary lists:
// applying diff(old, next) to old gives next's set with next's weights; a list's diff with itself
// is empty whatever its order.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { addressLabel, applyEndpointDelta, diffEndpoints, isEmptyDelta, patchList, placeDelta, type Address } from "../../src/translate/endpoint-set.js";

const A = (port: number, host = "10.0.0.1"): Address => ({ host, port });
const diff = (old: readonly Address[], next: readonly Address[], ow: readonly number[] = [], nw: readonly number[] = []) => diffEndpoints(old, ow, next, nw);

/** A list as its set: label → weight (the first of a duplicated address counts). */
function asSet(list: readonly Address[], weights: readonly number[]): Map<string, number> {
  const m = new Map<string, number>();
  list.forEach((a, i) => {
    const k = addressLabel(a.host, a.port);
    if (!m.has(k)) m.set(k, Math.max(1, Math.floor(weights[i] ?? 1)));
  });
  return m;
}

describe("addressLabel()", () => {
  it("writes host:port, an IPv6 host in brackets", () => {
    expect(addressLabel("10.0.0.1", 50051)).toBe("10.0.0.1:50051");
    expect(addressLabel("::1", 50051)).toBe("[::1]:50051");
    expect(addressLabel("svc.local", 80)).toBe("svc.local:80");
  });
});

describe("diffEndpoints()", () => {
  const list = Array.from({ length: 10 }, (_, i) => A(1000 + i));

  it("says nothing changed for the same list, and for the same set in another order", () => {
    expect(diff(list, list)).toEqual({ remove: [], upsert: [] });
    expect(diff(list, [...list].reverse())).toEqual({ remove: [], upsert: [] });
    expect(isEmptyDelta(diff([], []))).toBe(true);
  });

  it("names one endpoint replaced in the middle, and nothing else", () => {
    const next = list.map((a, i) => (i === 4 ? A(2000) : a));
    expect(diff(list, next)).toEqual({ remove: [A(1004)], upsert: [{ ...A(2000), weight: 1 }] });
  });

  it("names an endpoint added at the front, one removed at the end", () => {
    expect(diff(list, [A(999), ...list])).toEqual({ remove: [], upsert: [{ ...A(999), weight: 1 }] });
    expect(diff(list, list.slice(0, 9))).toEqual({ remove: [A(1009)], upsert: [] });
  });

  it("names a kept endpoint whose weight changed, with its new weight; a missing or fractional weight is a whole number ≥ 1", () => {
    expect(diff([A(1), A(2)], [A(1), A(2)], [1, 1], [1, 5])).toEqual({ remove: [], upsert: [{ ...A(2), weight: 5 }] });
    expect(diff([A(1)], [A(1)], [], [1])).toEqual({ remove: [], upsert: [] });
    expect(diff([A(1)], [A(1)], [2.7], [2])).toEqual({ remove: [], upsert: [] });
    expect(diff([A(1)], [A(1)], [1], [0])).toEqual({ remove: [], upsert: [] });
  });

  it("reads each item's own weight when the weights are null (the cluster's endpoints)", () => {
    expect(diffEndpoints([{ ...A(1), weight: 2 }], null, [A(1)], [3])).toEqual({ remove: [], upsert: [{ ...A(1), weight: 3 }] });
    expect(diffEndpoints([{ ...A(1), weight: 2 }], null, [{ ...A(1), weight: 2 }], null)).toEqual({ remove: [], upsert: [] });
  });

  it("tells hosts apart from ports (10.0.0.1:80 and 10.0.0.2:80 are two endpoints)", () => {
    expect(diff([A(80, "10.0.0.1")], [A(80, "10.0.0.2")])).toEqual({ remove: [A(80, "10.0.0.1")], upsert: [{ ...A(80, "10.0.0.2"), weight: 1 }] });
  });
});

describe("applyEndpointDelta()", () => {
  it("puts a new endpoint in a removed one's place (one replaced: the same length, every other index kept), reweights kept ones in place", () => {
    const r = applyEndpointDelta([A(1), A(2), A(3)], [1, 2, 3], { remove: [A(2)], upsert: [{ ...A(3), weight: 7 }, { ...A(4), weight: 2 }] });
    expect(r).toEqual({ endpoints: [A(1), A(4), A(3)], weights: [1, 2, 7] });
  });

  it("takes out the removed places left over, appends the new ones left over", () => {
    expect(applyEndpointDelta([A(1), A(2), A(3)], [], { remove: [A(3), A(1)], upsert: [{ ...A(9), weight: 1 }] })).toEqual({ endpoints: [A(9), A(2)], weights: [1, 1] });
    expect(applyEndpointDelta([A(1)], [], { remove: [], upsert: [{ ...A(8), weight: 1 }, { ...A(9), weight: 4 }] })).toEqual({ endpoints: [A(1), A(8), A(9)], weights: [1, 1, 4] });
  });

  it("ignores a removal of an address it does not have", () => {
    expect(applyEndpointDelta([A(1)], [], { remove: [A(9)], upsert: [] })).toEqual({ endpoints: [A(1)], weights: [1] });
  });

  it("places a large delta as it places a small one", () => {
    const old = Array.from({ length: 50 }, (_, i) => A(i));
    const remove = old.filter((_, i) => i % 3 === 0);
    const upsert = [...Array.from({ length: 20 }, (_, i) => ({ ...A(100 + i), weight: 2 })), { ...A(1), weight: 5 }];
    expect(placeDelta(old, { remove, upsert })).toEqual({
      removed: remove.map((a) => a.port),
      reweighted: [[1, 5]],
      added: upsert.slice(0, 20),
    });
    expect(placeDelta(old, { remove: remove.slice(0, 2), upsert: [upsert[0]!, upsert[20]!] })).toEqual({ removed: [0, 3], reweighted: [[1, 5]], added: [upsert[0]] });
  });

  it("patchList() does not touch the list it is given", () => {
    const l = Object.freeze([1, 2, 3]);
    expect(patchList(l, [1], [9])).toEqual([1, 9, 3]);
    expect(l).toEqual([1, 2, 3]);
  });
});

describe("diff and apply together (properties)", () => {
  const address = fc.record({ host: fc.constantFrom("10.0.0.1", "10.0.0.2", "::1", "svc"), port: fc.integer({ min: 1, max: 12 }) });
  const weighted = fc.array(fc.tuple(address, fc.integer({ min: 0, max: 4 })), { maxLength: 30 });

  it("applying diff(old, next) to old gives next's set, with next's weights", () => {
    fc.assert(
      fc.property(weighted, weighted, (o, n) => {
        const old = o.map(([a]) => a);
        const ow = o.map(([, w]) => w);
        const next = n.map(([a]) => a);
        const nw = n.map(([, w]) => w);
        // (a list with an address twice is deduplicated first, as the cluster does)
        const dedupe = (l: Address[], w: number[]): [Address[], number[]] => {
          const seen = new Set<string>();
          const out: [Address[], number[]] = [[], []];
          l.forEach((a, i) => {
            const k = addressLabel(a.host, a.port);
            if (seen.has(k)) return;
            seen.add(k);
            out[0].push(a);
            out[1].push(w[i]!);
          });
          return out;
        };
        const [old1, ow1] = dedupe(old, ow);
        const [next1, nw1] = dedupe(next, nw);
        const d = diff(old1, next1, ow1, nw1);
        const r = applyEndpointDelta(old1, ow1, d);
        expect(asSet(r.endpoints, r.weights)).toEqual(asSet(next1, nw1));
        expect(r.endpoints.length).toBe(next1.length);
      }),
    );
  });

  it("finds no change between a list and any reordering of it", () => {
    fc.assert(
      fc.property(fc.uniqueArray(address, { selector: (a) => addressLabel(a.host, a.port), maxLength: 30 }), fc.integer(), (l, seed) => {
        const shuffled = [...l].sort((x, y) => ((addressLabel(x.host, x.port).length * 31 + x.port * seed) % 7) - ((addressLabel(y.host, y.port).length * 31 + y.port * seed) % 7));
        expect(isEmptyDelta(diffEndpoints(l, [], shuffled, []))).toBe(true);
      }),
    );
  });

  // The index placeDelta keeps beside a list is handed from list to list; the places it finds
  // must be the ones a scan of the list finds (the first of an address), whatever came before.
  it("places each delta of a random sequence where a scan of the list places it (the index handed on matches)", () => {
    const scanPlace = (list: readonly Address[], d: { remove: readonly Address[]; upsert: readonly (Address & { weight: number })[] }) => {
      const find = (a: Address) => list.findIndex((b) => b.host === a.host && b.port === a.port);
      const out = new Set<number>();
      for (const r of d.remove) if (find(r) >= 0) out.add(find(r));
      const reweighted: [number, number][] = [];
      const added: (Address & { weight: number })[] = [];
      for (const u of d.upsert) {
        const i = find(u);
        const w = u.weight >= 1 ? Math.floor(u.weight) : 1;
        if (i >= 0 && !out.has(i)) reweighted.push([i, w]);
        else added.push({ host: u.host, port: u.port, weight: w });
      }
      return { removed: [...out].sort((x, y) => x - y), reweighted, added };
    };
    const delta = fc.record({ remove: fc.array(address, { maxLength: 4 }), upsert: fc.array(fc.record({ host: address.map((a) => a.host), port: fc.integer({ min: 1, max: 12 }), weight: fc.integer({ min: 0, max: 3 }) }), { maxLength: 4 }) });
    fc.assert(
      fc.property(fc.array(address, { maxLength: 20 }), fc.array(delta, { maxLength: 12 }), (start, deltas) => {
        let list: readonly Address[] = start;
        let weights: readonly number[] = start.map(() => 1);
        for (const d of deltas) {
          expect(placeDelta(list, d)).toEqual(scanPlace(list, d));
          const p = scanPlace(list, d);
          const r = applyEndpointDelta(list, weights, d);
          expect(r.endpoints).toEqual(patchList(list, p.removed, p.added.map((a) => ({ host: a.host, port: a.port }))));
          list = r.endpoints;
          weights = r.weights;
        }
      }),
    );
  });
});
