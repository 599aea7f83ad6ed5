// The arithmetic behind GET /stats, `dojang stat`/`top` and the /ui page: the latency bins the
// windows count into, quantiles from them, and the two steps a window's counts go through on the
// way out: merged (one worker's rows with another's, summed) and finished (rates, success rate,
// p50/p95/p99). Pure: no clock, no node:* import; windows.ts owns the rings and the time.
import { CODE_NAMES, codeName } from "../../translate/index.js";

// === latency bins ===
//
// Log-linear, as HdrHistogram and Prometheus's native histograms (schema 2: four buckets per
// power of two) cut them: under 64 µs four linear bins of 16 µs; above, each octave [2^e, 2^e+1)
// in four equal bins, so a bin is at most 25 % wider than its lower bound and a quantile read
// from it (interpolated inside the bin) is within that of the exact one. The last bin holds
// everything from 2^28 µs (268 s) up.

/** Bins per row and bucket. */
export const LATENCY_BINS = 92;
const TOP_US = 2 ** 28;

/** The bin of a duration in microseconds (>= 0; fractions are dropped). */
export function latencyBin(us: number): number {
  if (!(us < TOP_US)) return LATENCY_BINS - 1; // (NaN too)
  const v = us | 0;
  if (v < 64) return v < 0 ? 0 : v >>> 4;
  const e = 31 - Math.clz32(v);
  return 4 + (e - 6) * 4 + ((v >>> (e - 2)) & 3);
}

/** The bin's range in microseconds, [low, high). */
export function binRange(bin: number): readonly [number, number] {
  if (bin < 4) return [bin * 16, bin * 16 + 16];
  const e = ((bin - 4) >> 2) + 6;
  const step = 2 ** (e - 2);
  const low = 2 ** e + ((bin - 4) & 3) * step;
  return [low, low + step];
}

/**
 * The q-quantile (0 < q <= 1) of the durations counted in `bins` (sparse [bin, count] pairs, any
 * order), in microseconds; NaN when there are none. The value of rank ceil(q·n) is placed inside
 * its bin by linear interpolation, as Prometheus's histogram_quantile does between bucket bounds.
 */
export function quantileUs(bins: readonly (readonly [number, number])[], q: number): number {
  return quantilesUs(bins, [q])[0]!;
}

/** Several quantiles (ascending) of the same bins in one pass. */
export function quantilesUs(bins: readonly (readonly [number, number])[], qs: readonly number[]): number[] {
  let n = 0;
  for (const [, c] of bins) n += c;
  if (n === 0) return qs.map(() => NaN);
  const sorted = [...bins].sort((a, b) => a[0] - b[0]);
  const out: number[] = [];
  let seen = 0;
  let i = 0;
  for (const q of qs) {
    const rank = Math.max(1, Math.ceil(q * n));
    for (; i < sorted.length; i++) {
      const [b, c] = sorted[i]!;
      if (c > 0 && seen + c >= rank) {
        const [lo, hi] = binRange(b);
        out.push(lo + ((hi - lo) * (rank - seen)) / c);
        break;
      }
      seen += c;
    }
    if (i === sorted.length) out.push(binRange(sorted[sorted.length - 1]![0])[1]);
  }
  return out;
}

// === rows ===

/** The kinds of row /stats has. */
export const STATS_KINDS = ["method", "route", "endpoint"] as const;
export type StatsKind = (typeof STATS_KINDS)[number];

/** The windows a row is read over, by their name in /stats?window= and `--window`. */
export const STATS_WINDOWS: Readonly<Record<string, number>> = Object.freeze({ "10s": 10, "1m": 60, "10m": 600 });

/** One row's counts over one window, as one worker has them (and as workers' rows are merged). */
export interface RawRow {
  readonly key: string;
  /** calls per second over the window (each worker's own; merged by summing) */
  rps: number;
  /** [grpc code, decided_by, calls]; a code outside 0–16 is 17 ("OTHER"); "other" pairs past the row's columns */
  readonly outcomes: [number, string, number][];
  /** [latency bin, calls], bins with calls only */
  readonly bins: [number, number][];
}

export interface RawStats {
  readonly window: string;
  readonly windowSeconds: number;
  readonly rows: Record<StatsKind, RawRow[]>;
  /** keys that found their kind full (maxRows) and were counted in its "other" row */
  readonly folded: Record<StatsKind, number>;
}

/** The rows of every worker summed, row by row (by kind and key). */
export function mergeRawStats(parts: readonly RawStats[]): RawStats | undefined {
  const first = parts[0];
  if (first === undefined) return undefined;
  const rows = { method: new Map(), route: new Map(), endpoint: new Map() } as Record<StatsKind, Map<string, RawRow>>;
  const folded = { method: 0, route: 0, endpoint: 0 } as Record<StatsKind, number>;
  for (const p of parts) {
    for (const kind of STATS_KINDS) {
      folded[kind] += p.folded[kind];
      const into = rows[kind];
      for (const r of p.rows[kind]) {
        const m = into.get(r.key);
        if (m === undefined) into.set(r.key, { key: r.key, rps: r.rps, outcomes: r.outcomes.map((o) => [...o]), bins: r.bins.map((b) => [...b]) });
        else addRow(m, r);
      }
    }
  }
  return {
    window: first.window,
    windowSeconds: first.windowSeconds,
    rows: { method: [...rows.method.values()], route: [...rows.route.values()], endpoint: [...rows.endpoint.values()] },
    folded,
  };
}

function addRow(into: RawRow, r: RawRow): void {
  into.rps += r.rps;
  for (const [code, by, n] of r.outcomes) {
    const o = into.outcomes.find((x) => x[0] === code && x[1] === by);
    if (o === undefined) into.outcomes.push([code, by, n]);
    else o[2] += n;
  }
  for (const [b, n] of r.bins) {
    const x = into.bins.find((y) => y[0] === b);
    if (x === undefined) into.bins.push([b, n]);
    else x[1] += n;
  }
}

/** One row of /stats as operators read it. */
export interface StatsRow {
  /** "pkg.Svc/Method", "<listener> <route label>", "<cluster>/<host:port>"; "other": the folded rest */
  readonly name: string;
  readonly calls: number;
  readonly rps: number;
  /** calls that ended 0 OK over all calls (null without calls) */
  readonly success: number | null;
  readonly failed: number;
  /** latency quantiles in milliseconds (null without calls) */
  readonly p50_ms: number | null;
  readonly p95_ms: number | null;
  readonly p99_ms: number | null;
  /** calls by final status and who decided it, most first */
  readonly outcomes: readonly { readonly grpc_code: number; readonly grpc_status: string; readonly decided_by: string; readonly calls: number }[];
  /** failed calls by who decided them (the "who decided", at a glance) */
  readonly failed_by: Readonly<Record<string, number>>;
}

export interface StatsView {
  readonly window: string;
  readonly window_s: number;
  readonly methods: readonly StatsRow[];
  readonly routes: readonly StatsRow[];
  readonly endpoints: readonly StatsRow[];
  /** every call of the window (the method rows summed: each call has one) */
  readonly total: StatsRow;
  /** keys counted in "other" because their kind had maxRows rows already */
  readonly folded: Readonly<Record<StatsKind, number>>;
}

const QUANTILES = [0.5, 0.95, 0.99];
const ms = (us: number): number | null => (Number.isNaN(us) ? null : Math.round(us) / 1000);

/** A raw row's figures. */
export function finishRow(r: RawRow): StatsRow {
  let calls = 0;
  let ok = 0;
  const failedBy: Record<string, number> = {};
  for (const [code, by, n] of r.outcomes) {
    calls += n;
    if (code === 0) ok += n;
    else failedBy[by] = (failedBy[by] ?? 0) + n;
  }
  const q = quantilesUs(r.bins, QUANTILES);
  return {
    name: r.key,
    calls,
    rps: Math.round(r.rps * 1000) / 1000,
    success: calls === 0 ? null : ok / calls,
    failed: calls - ok,
    p50_ms: ms(q[0]!),
    p95_ms: ms(q[1]!),
    p99_ms: ms(q[2]!),
    outcomes: r.outcomes
      .filter((o) => o[2] > 0)
      .sort((a, b) => b[2] - a[2] || a[0] - b[0])
      .map(([code, by, n]) => ({ grpc_code: code, grpc_status: code < CODE_NAMES.length ? codeName(code) : "OTHER", decided_by: by, calls: n })),
    failed_by: failedBy,
  };
}

/** The finished view of merged rows: each kind sorted by calls (most first), and the total. */
export function finishStats(raw: RawStats): StatsView {
  const total: RawRow = { key: "total", rps: 0, outcomes: [], bins: [] };
  for (const r of raw.rows.method) addRow(total, r);
  const sorted = (rows: readonly RawRow[]): StatsRow[] => rows.map(finishRow).sort((a, b) => b.calls - a.calls || (a.name < b.name ? -1 : 1));
  return {
    window: raw.window,
    window_s: raw.windowSeconds,
    methods: sorted(raw.rows.method),
    routes: sorted(raw.rows.route),
    endpoints: sorted(raw.rows.endpoint),
    total: finishRow(total),
    folded: raw.folded,
  };
}
