// Endpoint pickers: round robin (smooth weighted), least request (power of two choices) and weighted random, over the endpoints a call may use.
//
// Pure: a picker is built once from an immutable list of endpoints (an "immutable picker", as
// grpc's balancers hand out), and each pick reads only what it is given: the draws in [0, 1),
// the active-call counts, a cursor. The cluster rebuilds the picker when endpoints, weights,
// health or ejections change, never per call.

import { patchList, patchListInPlace } from "./endpoint-set.js";

export const LB_POLICIES = ["round_robin", "least_request", "random"] as const;
export type LbPolicy = (typeof LB_POLICIES)[number];

/** Which endpoints may get calls: healthy and not ejected; when none is, all of them (Envoy's
 * panic mode: a cluster whose health checks all fail still gets traffic rather than none). */
export function eligible(usable: readonly boolean[]): { readonly indices: readonly number[]; readonly panic: boolean } {
  const out: number[] = [];
  for (let i = 0; i < usable.length; i++) if (usable[i] === true) out.push(i);
  if (out.length > 0 || usable.length === 0) return { indices: out, panic: false };
  return { indices: usable.map((_, i) => i), panic: true };
}

/**
 * What a picker is built from, kept with the endpoint list: per endpoint whether it is usable
 * (healthy, not ejected) and its weight, the eligible indices (eligible()), and two counts that
 * let a change skip the passes over the whole list: how many are not usable (none: the eligible
 * indices are 0 … n-1) and how many weigh 2 or more (none: round robin is the eligible indices
 * themselves). patchRotation() gives the same result as rotation() over the patched lists, with
 * work in proportion to the change (test/translate/pick.test.ts checks it on random changes).
 */
export interface Rotation {
  readonly usable: readonly boolean[];
  readonly weights: readonly number[];
  readonly indices: readonly number[];
  readonly panic: boolean;
  /** endpoints not usable */
  readonly unusable: number;
  /** endpoints of weight ≥ 2 */
  readonly heavy: number;
}

/** The rotation over `usable` and `weights` (whole numbers ≥ 1, by position), from scratch. */
export function rotation(usable: readonly boolean[], weights: readonly number[]): Rotation {
  let unusable = 0;
  let heavy = 0;
  for (let i = 0; i < usable.length; i++) {
    if (usable[i] !== true) unusable++;
    if ((weights[i] ?? 1) >= 2) heavy++;
  }
  const { indices, panic } = eligible(usable);
  return { usable: [...usable], weights: Array.from({ length: usable.length }, (_, i) => weights[i] ?? 1), indices, panic, unusable, heavy };
}

/**
 * A change to a rotation, in patchList's terms (src/translate/endpoint-set.ts): the indices of
 * the old list removed (ascending), the items added (each takes a removed place, in order; the
 * rest go at the end), then `set`: indices of the new list whose usability or weight is now this.
 */
export interface RotationChange {
  readonly removed: readonly number[];
  readonly added: readonly { readonly usable: boolean; readonly weight: number }[];
  readonly set: readonly { readonly index: number; readonly usable: boolean; readonly weight: number }[];
}

/**
 * `r` with `c` applied: the lists are copied (native copies) and patched, or with `own` (the
 * caller owns `r` and drops it for the result: the cluster's) patched where they are; the
 * eligible indices are reused, extended or cut when usability did not change inside the list,
 * else found again.
 */
export function patchRotation(r: Rotation, c: RotationChange, own = false): Rotation {
  const n0 = r.usable.length;
  let unusable = r.unusable;
  let heavy = r.heavy;
  // whether an index that stays in place (below the end of the old list) changed usability
  let moved = c.removed.length > c.added.length;
  for (const i of c.removed) {
    if (r.usable[i] !== true) unusable--;
    if (r.weights[i]! >= 2) heavy--;
  }
  for (let k = 0; k < c.added.length; k++) {
    const a = c.added[k]!;
    if (!a.usable) unusable++;
    if (a.weight >= 2) heavy++;
    if (k < c.removed.length && a.usable !== (r.usable[c.removed[k]!] === true)) moved = true;
    if (k >= c.removed.length && !a.usable) moved = true;
  }
  const patch = own ? <T>(l: readonly T[], rm: readonly number[], add: readonly T[]): T[] => patchListInPlace(l as T[], rm, add) : patchList;
  const usable = patch(r.usable, c.removed, c.added.map((a) => a.usable));
  const weights = patch(r.weights, c.removed, c.added.map((a) => a.weight));
  for (const s of c.set) {
    if (usable[s.index] !== s.usable) {
      unusable += s.usable ? -1 : 1;
      moved = true;
    }
    heavy += (s.weight >= 2 ? 1 : 0) - (weights[s.index]! >= 2 ? 1 : 0);
    usable[s.index] = s.usable;
    weights[s.index] = s.weight;
  }
  const n = usable.length;
  let indices: readonly number[];
  let panic = false;
  if (unusable === 0 && r.unusable === 0 && !r.panic) indices = sequence(r.indices, n);
  else if (!moved && !r.panic && unusable < n) indices = r.indices.length === 0 && n > 0 ? eligible(usable).indices : extend(r.indices, n0, n);
  else ({ indices, panic } = eligible(usable));
  return { usable, weights, indices, panic, unusable, heavy };
}

/** 0 … n-1, from `prev` (0 … prev.length-1, itself when long enough): nothing rebuilt for a list of the same length. */
function sequence(prev: readonly number[], n: number): readonly number[] {
  if (prev.length === n) return prev;
  if (prev.length > n) return prev.slice(0, n);
  const out = [...prev];
  for (let i = prev.length; i < n; i++) out.push(i);
  return out;
}

/** The eligible indices of a list that went from n0 to n items with no change of usability among those that stayed in place: those below n, and the (usable) ones appended. */
function extend(prev: readonly number[], n0: number, n: number): readonly number[] {
  if (n === n0) return prev;
  if (n > n0) {
    const out = [...prev];
    for (let i = n0; i < n; i++) out.push(i);
    return out;
  }
  return prev.filter((i) => i < n);
}

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

/** Longest round-robin schedule built; weights are scaled down to fit (ratios kept roughly). */
export const MAX_SCHEDULE = 4096;

/**
 * The round-robin order of `indices` with their `weights` (whole numbers ≥ 1): smooth weighted
 * round robin (nginx's), so an endpoint of weight 3 next to one of weight 1 is picked
 * a a b a, not a a a b. Unweighted: the indices themselves.
 */
export function roundRobinSchedule(indices: readonly number[], weights: readonly number[]): readonly number[] {
  if (indices.length === 0) return [];
  // unweighted (the common case, and one pass over 10,000 endpoints): the indices themselves
  let weighted = false;
  for (let k = 0; k < indices.length && !weighted; k++) weighted = (weights[indices[k]!] ?? 1) >= 2;
  if (!weighted) return indices;
  let w = indices.map((i) => Math.max(1, Math.floor(weights[i] ?? 1)));
  const g = w.reduce(gcd);
  w = w.map((x) => x / g);
  let total = w.reduce((a, b) => a + b, 0);
  if (total > MAX_SCHEDULE) {
    const f = MAX_SCHEDULE / total;
    w = w.map((x) => Math.max(1, Math.floor(x * f)));
    total = w.reduce((a, b) => a + b, 0);
  }
  if (w.every((x) => x === 1)) return indices.slice();
  const current = new Array<number>(w.length).fill(0);
  const out: number[] = [];
  for (let n = 0; n < total; n++) {
    let best = 0;
    for (let k = 0; k < w.length; k++) {
      current[k]! += w[k]!;
      if (current[k]! > current[best]!) best = k;
    }
    current[best]! -= total;
    out.push(indices[best]!);
  }
  return out;
}

/** Cumulative weights for weighted random picks. */
export function cumulativeWeights(indices: readonly number[], weights: readonly number[]): readonly number[] {
  const out = new Array<number>(indices.length);
  let acc = 0;
  for (let k = 0; k < indices.length; k++) out[k] = acc += Math.max(1, weights[indices[k]!] ?? 1);
  return out;
}

/**
 * Weighted random: the index whose cumulative weight range holds `draw` × total. `cumulative`
 * null: every weight is 1 (cumulative would be 1, 2 … n), so the place is ⌊draw × n⌋, the one
 * the search would find, and no list of n sums is made when the endpoints change.
 */
export function pickRandom(indices: readonly number[], cumulative: readonly number[] | null, draw: number): number {
  const n = indices.length;
  if (n === 0) return -1;
  if (cumulative === null) return indices[Math.floor(Math.min(Math.max(draw, 0), 0.999999999) * n)]!;
  const total = cumulative[n - 1]!;
  const x = Math.min(Math.max(draw, 0), 0.999999999) * total;
  let lo = 0;
  let hi = n - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (cumulative[mid]! > x) hi = mid;
    else lo = mid + 1;
  }
  return indices[lo]!;
}

/**
 * Least request, power of two choices: two distinct endpoints drawn at random (by weight), the
 * one with fewer active calls per unit of weight wins; a tie goes to the first draw.
 */
export function pickLeastRequest(
  indices: readonly number[],
  cumulative: readonly number[] | null,
  weights: readonly number[],
  active: (index: number) => number,
  draw1: number,
  draw2: number,
): number {
  const n = indices.length;
  if (n === 0) return -1;
  if (n === 1) return indices[0]!;
  const a = pickRandom(indices, cumulative, draw1);
  let b = pickRandom(indices, cumulative, draw2);
  if (b === a) {
    // the second draw must be another endpoint: step to the next one in the list
    const pos = indices.indexOf(a);
    b = indices[(pos + 1 + Math.floor(draw2 * (n - 1))) % n]!;
    if (b === a) b = indices[(pos + 1) % n]!;
  }
  const la = active(a) / Math.max(1, weights[a] ?? 1);
  const lb = active(b) / Math.max(1, weights[b] ?? 1);
  return lb < la ? b : a;
}
