// A cluster's endpoint set as a set of addresses with weights: the change from one list to the
// next (diffEndpoints), and a list with a change applied (applyEndpointDelta). An EDS update, a
// DNS re-resolution or a reload that moves endpoints changes one endpoint of thousands; the
// cluster then touches only what changed (its kept endpoints keep their sessions, in-flight
// counts, health and ejections), and under `workers: N` the primary hands this delta to the
// workers instead of the whole list. Pure: no I/O, no clock.
//
// Identity is the address (host and port, as the endpoint's label writes it); order is not part
// of the set (a list that only reorders is no change). Weights are whole numbers ≥ 1 (a missing
// or smaller one is 1), as the picker takes them.

export interface Address {
  readonly host: string;
  readonly port: number;
}

export interface WeightedAddress extends Address {
  readonly weight: number;
}

/** What goes (by address) and what comes or changes weight; empty lists: no change. */
export interface EndpointDelta {
  readonly remove: readonly Address[];
  /** new addresses, and kept ones whose weight changed, with their weight */
  readonly upsert: readonly WeightedAddress[];
}

/** The label an endpoint is known by ("10.0.0.1:50051", "[::1]:50051"): its identity in a set. */
export function addressLabel(host: string, port: number): string {
  return `${host.includes(":") ? `[${host}]` : host}:${port}`;
}

/** The weight the picker gives: a whole number ≥ 1. */
export function normalWeight(w: number | undefined): number {
  return w === undefined || !(w >= 1) ? 1 : Math.floor(w);
}

/**
 * The change from `old` to `next` (each with its weights by position; a later duplicate of an
 * address is ignored, as the cluster ignores it). The common prefix and suffix (same address and
 * weight at the same place) are skipped without building a key, so one endpoint replaced, added
 * or removed in a list of 10,000 costs two comparisons per endpoint and a few map entries; only
 * the differing middle is compared as sets.
 */
export function diffEndpoints<A extends Address, B extends Address>(
  old: readonly A[],
  oldWeight: (a: A, i: number) => number | undefined,
  next: readonly B[],
  nextWeight: (b: B, i: number) => number | undefined,
): EndpointDelta {
  const same = (i: number, j: number): boolean => {
    const a = old[i]!;
    const b = next[j]!;
    return a.port === b.port && a.host === b.host && normalWeight(oldWeight(a, i)) === normalWeight(nextWeight(b, j));
  };
  let p = 0;
  const max = Math.min(old.length, next.length);
  while (p < max && same(p, p)) p++;
  let s = 0;
  while (s < max - p && same(old.length - 1 - s, next.length - 1 - s)) s++;
  const oldEnd = old.length - s;
  const nextEnd = next.length - s;
  if (p === oldEnd && p === nextEnd) return { remove: [], upsert: [] };
  // the middles as sets; a duplicate later in a list is ignored (the first one counts)
  const before = new Map<string, number>();
  for (let i = p; i < oldEnd; i++) {
    const a = old[i]!;
    const k = addressLabel(a.host, a.port);
    if (!before.has(k)) before.set(k, normalWeight(oldWeight(a, i)));
  }
  const after = new Map<string, WeightedAddress>();
  for (let j = p; j < nextEnd; j++) {
    const b = next[j]!;
    const k = addressLabel(b.host, b.port);
    if (!after.has(k)) after.set(k, { host: b.host, port: b.port, weight: normalWeight(nextWeight(b, j)) });
  }
  const remove: Address[] = [];
  for (let i = p; i < oldEnd; i++) {
    const a = old[i]!;
    const k = addressLabel(a.host, a.port);
    if (!after.has(k) && before.delete(k)) remove.push({ host: a.host, port: a.port });
  }
  const upsert: WeightedAddress[] = [];
  for (const [k, b] of after) {
    const w = before.get(k);
    if (w === undefined || w !== b.weight) upsert.push(b);
  }
  return { remove, upsert };
}

/** Whether a delta changes nothing. */
export function isEmptyDelta(d: EndpointDelta): boolean {
  return d.remove.length === 0 && d.upsert.length === 0;
}

/**
 * `list` (with its weights by position) with `delta` applied: the removed addresses left out,
 * kept ones reweighted in place, new ones appended in the delta's order. O(n) with a map of the
 * list when the delta is large; a small one is looked for by a scan that builds no key.
 */
export function applyEndpointDelta(list: readonly Address[], weights: readonly number[], delta: EndpointDelta): { endpoints: Address[]; weights: number[] } {
  const n = list.length;
  const small = delta.remove.length + delta.upsert.length <= 8;
  let index: Map<string, number> | undefined;
  const find = (a: Address): number => {
    if (small) {
      for (let i = 0; i < n; i++) if (list[i]!.port === a.port && list[i]!.host === a.host) return i;
      return -1;
    }
    if (index === undefined) {
      index = new Map();
      for (let i = n - 1; i >= 0; i--) index.set(addressLabel(list[i]!.host, list[i]!.port), i);
    }
    return index.get(addressLabel(a.host, a.port)) ?? -1;
  };
  const gone = new Set<number>();
  for (const r of delta.remove) {
    const i = find(r);
    if (i >= 0) gone.add(i);
  }
  const reweight = new Map<number, number>();
  const added: WeightedAddress[] = [];
  for (const u of delta.upsert) {
    const i = find(u);
    if (i >= 0 && !gone.has(i)) reweight.set(i, normalWeight(u.weight));
    else added.push(u);
  }
  const endpoints: Address[] = [];
  const ws: number[] = [];
  for (let i = 0; i < n; i++) {
    if (gone.has(i)) continue;
    endpoints.push(list[i]!);
    ws.push(reweight.get(i) ?? normalWeight(weights[i]));
  }
  for (const a of added) {
    endpoints.push({ host: a.host, port: a.port });
    ws.push(normalWeight(a.weight));
  }
  return { endpoints, weights: ws };
}
