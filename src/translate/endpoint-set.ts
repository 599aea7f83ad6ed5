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
// compared field by field, without a key or a closure per endpoint; where a delta lands is found
// in an index kept beside the list (made once, then handed from list to list); a list is changed
// by copying it (a native copy) and patching the few places that change.

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
    // (the raw weights first: equal ones need no normalWeight; the same address object needs no field compared)
    const wa = oldWeights === null ? a.weight : oldWeights[p];
    const wb = nextWeights === null ? b.weight : nextWeights[p];
    if ((a !== b && (a.port !== b.port || a.host !== b.host)) || (wa !== wb && normalWeight(wa) !== normalWeight(wb))) break;
    p++;
  }
  let s = 0;
  while (s < max - p) {
    const i = old.length - 1 - s;
    const j = next.length - 1 - s;
    const a = old[i]!;
    const b = next[j]!;
    const wa = oldWeights === null ? a.weight : oldWeights[i];
    const wb = nextWeights === null ? b.weight : nextWeights[j];
    if ((a !== b && (a.port !== b.port || a.host !== b.host)) || (wa !== wb && normalWeight(wa) !== normalWeight(wb))) break;
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

// Each list's index (address label → first place), kept beside the list rather than in it: made
// on the first delta the list takes and handed on to the list that delta makes (patched where the
// delta lands), so a change of one endpoint in 10,000 costs a few map operations, not a pass. The
// lists are snapshots (never changed once made); a place found is checked against the list all
// the same, and a list whose index does not hold gets a new one.
const indexes = new WeakMap<readonly Address[], Map<string, number>>();

function indexOf(list: readonly Address[]): Map<string, number> {
  let m = indexes.get(list);
  if (m === undefined) {
    m = new Map();
    // from the end, so that the first of duplicates is the place kept
    for (let i = list.length - 1; i >= 0; i--) m.set(addressLabel(list[i]!.host, list[i]!.port), i);
    indexes.set(list, m);
  }
  return m;
}

/**
 * Where a delta lands in `list`: the indices of the addresses it removes (ascending; one it does
 * not have is skipped), the kept ones it reweights, and the addresses it adds.
 */
export function placeDelta(list: readonly Address[], delta: EndpointDelta): { readonly removed: number[]; readonly reweighted: [number, number][]; readonly added: WeightedAddress[] } {
  let index = indexOf(list);
  const find = (a: Address): number => {
    let i = index.get(addressLabel(a.host, a.port));
    if (i !== undefined && (list[i]?.port !== a.port || list[i]!.host !== a.host)) {
      // (a list changed after it was indexed: indexed again)
      indexes.delete(list);
      index = indexOf(list);
      i = index.get(addressLabel(a.host, a.port));
    }
    return i ?? -1;
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
 * Hands `list`'s index on to `next` (patchList(list, removed, added)): the removed addresses
 * out, the added ones in at their places, the places after a removed one left over shifted. Not
 * when either list has an address twice (the index keeps the first; `next` indexes itself if
 * asked).
 */
function passIndex(list: readonly Address[], next: readonly Address[], removed: readonly number[], added: readonly Address[]): void {
  const m = indexes.get(list);
  if (m === undefined || m.size !== list.length) return;
  indexes.delete(list);
  for (const i of removed) m.delete(addressLabel(list[i]!.host, list[i]!.port));
  const k = Math.min(removed.length, added.length);
  for (let j = 0; j < k; j++) m.set(addressLabel(added[j]!.host, added[j]!.port), removed[j]!);
  const from = removed.length > k ? removed[k]! : next.length - (added.length - k);
  for (let i = from; i < next.length; i++) m.set(addressLabel(next[i]!.host, next[i]!.port), i);
  if (m.size === next.length) indexes.set(next, m);
}

/**
 * `list` patched in place of a copy: each added item takes the place of a removed one, in order
 * (so one endpoint replaced keeps the list's length and every other index), the removed places
 * left over are taken out, and the added items left over go at the end. The cluster orders its
 * endpoints by the same rule, so /config and /clusters list them alike.
 */
export function patchList<T>(list: readonly T[], removed: readonly number[], added: readonly T[]): T[] {
  // (spread, not slice(): V8 copies a frozen array with slice() element by element, ~70 times
  // slower for 10,000 endpoints)
  return patchListInPlace([...list], removed, added);
}

/**
 * patchList on `out` itself, for a list its owner keeps across changes (the cluster's endpoints
 * and rotation): one endpoint replaced costs one store, not a copy of the list; a place taken out
 * moves what follows it (a native move).
 */
export function patchListInPlace<T>(out: T[], removed: readonly number[], added: readonly T[]): T[] {
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
  const fresh = added.map((a) => ({ host: a.host, port: a.port }));
  const endpoints = patchList(list, removed, fresh);
  passIndex(list, endpoints, removed, fresh);
  return { endpoints, weights: patchList(ws, removed, added.map((a) => a.weight)) };
}
