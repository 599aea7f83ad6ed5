// Endpoint pickers: round robin (smooth weighted), least request (power of two choices) and weighted random, over the endpoints a call may use.
//
// Pure: a picker is built once from an immutable list of endpoints (an "immutable picker", as
// grpc's balancers hand out), and each pick reads only what it is given: the draws in [0, 1),
// the active-call counts, a cursor. The cluster rebuilds the picker when endpoints, weights,
// health or ejections change, never per call.

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

/** Weighted random: the index whose cumulative weight range holds `draw` × total. */
export function pickRandom(indices: readonly number[], cumulative: readonly number[], draw: number): number {
  const n = indices.length;
  if (n === 0) return -1;
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
  cumulative: readonly number[],
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
