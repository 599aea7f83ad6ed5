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
//
// Cost, for one endpoint changed in 10,000 (bench/eds.mjs): the common prefix and suffix are
// compared field by field, without a key or a closure per endpoint; a list is changed by copying
// it and patching the few places that change.

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
 * A list's weights: by position in `weights`, or (null) each item's own `weight` field; a
 * missing one is 1.
 */
type Weights = readonly number[] | null;

function weightAt(list: readonly (Address & { readonly weight?: number })[], weights: Weights, i: number): number {
  return normalWeight(weights === null ? list[i]!.weight : weights[i]);
}

/**
 * The change from `old` to `next` (each with its weights: by position, or null for each item's
 * own `weight`; a later duplicate of an address is ignored, as the cluster ignores it). The
 * common prefix and suffix (same address and weight at the same place) are skipped without
 * building a key, so one endpoint replaced, added or removed in a list of 10,000 costs two
 * comparisons per endpoint and a few map entries; only the differing middle is compared as sets.
 */
export function diffEndpoints(old: readonly (Address & { readonly weight?: number })[], oldWeights: Weights, next: readonly (Address & { readonly weight?: number })[], nextWeights: Weights): EndpointDelta {
  const max = Math.min(old.length, next.length);
  let p = 0;
  while (p < max) {
    const a = old[p]!;
    const b = next[p]!;
    if (a.port !== b.port || a.host !== b.host || weightAt(old, oldWeights, p) !== weightAt(next, nextWeights, p)) break;
    p++;
  }
  let s = 0;
  while (s < max - p) {
    const i = old.length - 1 - s;
    const j = next.length - 1 - s;
    const a = old[i]!;
    const b = next[j]!;
    if (a.port !== b.port || a.host !== b.host || weightAt(old, oldWeights, i) !== weightAt(next, nextWeights, j)) break;
    s++;
  }
  const oldEnd = old.length - s;
  const nextEnd = next.length - s;
  if (p === oldEnd && p === nextEnd) return { remove: [], upsert: [] };
  // the middles as sets; a duplicate later in a list is ignored (the first one counts)
  const before = new Map<string, number>();
  for (let i = p; i < oldEnd; i++) {
    const a = old[i]!;
    const k = addressLabel(a.host, a.port);
    if (!before.has(k)) before.set(k, weightAt(old, oldWeights, i));
  }
  const after = new Map<string, WeightedAddress>();
  for (let j = p; j < nextEnd; j++) {
    const b = next[j]!;
    const k = addressLabel(b.host, b.port);
    if (!after.has(k)) after.set(k, { host: b.host, port: b.port, weight: weightAt(next, nextWeights, j) });
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
 * Where a delta lands in `list`: the indices of the addresses it removes (ascending; one it does
 * not have is skipped), the kept ones it reweights, and the addresses it adds.
 */
export function placeDelta(list: readonly Address[], delta: EndpointDelta): { readonly removed: number[]; readonly reweighted: [number, number][]; readonly added: WeightedAddress[] } {
  const n = list.length;
  // a small delta is looked for by a scan that builds no key; a large one through a map of the list
  let index: Map<string, number> | undefined;
  const find = (a: Address): number => {
    if (delta.remove.length + delta.upsert.length <= 16) {
      for (let i = 0; i < n; i++) if (list[i]!.port === a.port && list[i]!.host === a.host) return i;
      return -1;
    }
    if (index === undefined) {
      index = new Map();
      for (let i = n - 1; i >= 0; i--) index.set(addressLabel(list[i]!.host, list[i]!.port), i);
    }
    return index.get(addressLabel(a.host, a.port)) ?? -1;
  };
  const out = new Set<number>();
  for (const r of delta.remove) {
    const i = find(r);
    if (i >= 0) out.add(i);
  }
  const removed = [...out].sort((x, y) => x - y);
  const reweighted: [number, number][] = [];
  const added: WeightedAddress[] = [];
  for (const u of delta.upsert) {
    const i = find(u);
    if (i >= 0 && !out.has(i)) reweighted.push([i, normalWeight(u.weight)]);
    else added.push({ host: u.host, port: u.port, weight: normalWeight(u.weight) });
  }
  return { removed, reweighted, added };
}

/**
 * `list` patched in place of a copy: each added item takes the place of a removed one, in order
 * (so one endpoint replaced keeps the list's length and every other index), the removed places
 * left over are taken out, and the added items left over go at the end. The cluster orders its
 * endpoints by the same rule, so /config and /clusters list them alike.
 */
export function patchList<T>(list: readonly T[], removed: readonly number[], added: readonly T[]): T[] {
  // (spread, not slice(): V8 copies a frozen array, as the cluster's endpoint list is, with
  // slice() element by element, ~70 times slower for 10,000 endpoints)
  const out = [...list];
  const k = Math.min(removed.length, added.length);
  for (let i = 0; i < k; i++) out[removed[i]!] = added[i]!;
  for (let i = removed.length - 1; i >= k; i--) out.splice(removed[i]!, 1);
  for (let i = k; i < added.length; i++) out.push(added[i]!);
  return out;
}

/** `list` (with its weights by position) with `delta` applied (placeDelta, patchList). */
export function applyEndpointDelta(list: readonly Address[], weights: readonly number[], delta: EndpointDelta): { endpoints: Address[]; weights: number[] } {
  const { removed, reweighted, added } = placeDelta(list, delta);
  const ws: number[] = weights.length === list.length ? [...weights] : Array.from({ length: list.length }, (_, i) => normalWeight(weights[i]));
  for (const [i, w] of reweighted) ws[i] = w;
  return {
    endpoints: patchList(list, removed, added.map((a) => ({ host: a.host, port: a.port }))),
    weights: patchList(ws, removed, added.map((a) => a.weight)),
  };
}
