// Windowed call stats in the process (GET /stats, `dojang stat`/`top`, the /ui page): per method,
// per route and per upstream endpoint, the calls of the last 10 s, 1 min and 10 min by final
// status × decided_by, and their latencies (stats.ts's bins).
//
// Fixed memory. A row is two rings of buckets, each bucket a stretch of one Uint32Array: 60
// one-second buckets (the 10 s and 1 min windows) and 60 ten-second buckets (10 min). A call adds
// to its second's bucket only: two increments (its status column and its latency bin) after one
// comparison of the second; when the second changes, the bucket just ended is added into its
// ten-second bucket (once per second per row, not per call). Nothing is allocated per call; a
// row's rings are allocated at its first call (about 53 KiB). Rows per kind are bounded
// (stats.maxRows): past it, a new key counts in the kind's "other" row and in `folded`.
//
// Status columns: a row has 16 columns for the (code, decided_by) pairs it sees, given out on
// first sight (one array read per call finds the column); the 17th pair to appear within ten
// minutes shares the overflow column (shown as code 17 "OTHER", decided_by "other"). A column
// no bucket of the last ten minutes uses is given to the next new pair.
//
// Reading (only when /stats is asked; nothing runs otherwise, no timer): the buckets whose second
// (or ten seconds) lies in the window are summed. The 10 min window is read from the ten-second
// buckets (it covers 591–600 s).
import { CODE_NAMES, DECIDED_BY, type DecidedBy } from "../../translate/index.js";
import { LATENCY_BINS, STATS_WINDOWS, type RawRow, type RawStats, type StatsKind } from "./stats.js";

const REASONS = Object.keys(DECIDED_BY) as DecidedBy[];
const N_REASONS = REASONS.length;
/** the pair index of a (code, reason): codes 0–16, 17 for any other */
const N_PAIRS = (CODE_NAMES.length + 1) * N_REASONS;
const REASON_INDEX: Readonly<Record<string, number>> = Object.fromEntries(REASONS.map((r, i) => [r, i]));

const SLOTS = 60;
const COLUMNS = 16;
/** bucket layout: [0] stamp (period + 1; 0 = empty), [1 .. 1+COLUMNS] status columns (the last: overflow), then the latency bins */
const COL0 = 1;
const OVERFLOW = COL0 + COLUMNS;
const BIN0 = OVERFLOW + 1;
const STRIDE = BIN0 + LATENCY_BINS;

/** The pair index of a call's status (what StatsRow.add takes); computed once per call for all its rows. */
export function pairIndex(code: number, decidedBy: DecidedBy): number {
  const c = code >= 0 && code < CODE_NAMES.length ? code : CODE_NAMES.length;
  return c * N_REASONS + (REASON_INDEX[decidedBy] ?? 0);
}

/** One row's rings. */
export class StatsRow {
  /** the second (monotonic, since the clock's origin) the current fine bucket holds; -1 before the first call */
  private sec = -1;
  private base = 0;
  private fine: Uint32Array | null = null;
  private coarse: Uint32Array | null = null;
  /** pair index → column (-1: none yet) */
  private readonly cols = new Int8Array(N_PAIRS).fill(-1);
  /** column → pair index (-1: free) */
  private readonly pairs = new Int16Array(COLUMNS).fill(-1);
  /** some pair counts in the overflow column */
  private overflowed = false;

  constructor(readonly key: string) {}

  /** Counts one call that ended in second `sec` with status pair `pair` and latency bin `bin`. */
  add(sec: number, pair: number, bin: number): void {
    if (sec !== this.sec) this.turn(sec);
    let col = this.cols[pair]!;
    if (col < 0) col = this.column(pair);
    const f = this.fine!;
    const b = this.base;
    f[b + col]!++;
    f[b + BIN0 + bin]!++;
  }

  /** The fine bucket of `sec` becomes current; the one it replaces is added into its ten-second bucket. */
  private turn(sec: number): void {
    let f = this.fine;
    let k = this.coarse;
    if (f === null || k === null) {
      f = this.fine = new Uint32Array(SLOTS * STRIDE);
      k = this.coarse = new Uint32Array(SLOTS * STRIDE);
    } else if (this.sec >= 0) {
      const period = Math.floor(this.sec / 10);
      fold(f, this.base, k, period);
      if (this.overflowed && period !== Math.floor(sec / 10)) this.retryOverflowed();
    }
    this.sec = sec;
    const b = (this.base = (sec % SLOTS) * STRIDE);
    f.fill(0, b, b + STRIDE);
    f[b] = sec + 1;
  }

  /** A column for a pair seen for the first time (or again after ten minutes without it). */
  private column(pair: number): number {
    for (let c = 0; c < COLUMNS; c++) {
      if (this.pairs[c] === -1) return this.give(c, pair);
    }
    // every column is taken: one that no bucket of the last ten minutes uses is given away
    for (let c = 0; c < COLUMNS; c++) {
      if (!this.used(COL0 + c)) {
        this.cols[this.pairs[c]!] = -1;
        return this.give(c, pair);
      }
    }
    // (kept until the next ten-second turn, which lets it ask again: no search per call meanwhile)
    this.cols[pair] = OVERFLOW;
    this.overflowed = true;
    return OVERFLOW;
  }

  /** Pairs in the overflow column may take a column again (one freed since). */
  private retryOverflowed(): void {
    const cols = this.cols;
    for (let i = 0; i < cols.length; i++) if (cols[i] === OVERFLOW) cols[i] = -1;
    this.overflowed = false;
  }

  private give(c: number, pair: number): number {
    this.pairs[c] = pair;
    this.cols[pair] = COL0 + c;
    // (a column given away again starts from zero everywhere)
    for (const a of [this.fine!, this.coarse!]) for (let i = 0; i < SLOTS; i++) a[i * STRIDE + COL0 + c] = 0;
    return COL0 + c;
  }

  /** Whether column `at` has counts in the current fine bucket or in a ten-second bucket of the last ten minutes. */
  private used(at: number): boolean {
    const f = this.fine!;
    if (f[this.base + at]! > 0) return true;
    const k = this.coarse!;
    const cur = Math.floor(this.sec / 10);
    for (let i = 0; i < SLOTS; i++) {
      const stamp = k[i * STRIDE]!;
      if (stamp !== 0 && stamp - 1 > cur - SLOTS && k[i * STRIDE + at]! > 0) return true;
    }
    return false;
  }

  /**
   * This row over the last `seconds` (10, 60 or 600) at second `now`, or null when it has no call
   * there; `span`: the seconds the rate is taken over (the window, or less while the process is younger).
   */
  read(now: number, seconds: number, span: number): RawRow | null {
    const f = this.fine;
    const k = this.coarse;
    if (f === null || k === null) return null;
    const sum = new Float64Array(STRIDE);
    let any = false;
    if (seconds <= SLOTS) {
      for (let i = 0; i < SLOTS; i++) {
        const s = f[i * STRIDE]! - 1;
        if (s >= 0 && s > now - seconds && s <= now) any = addBucket(sum, f, i * STRIDE) || any;
      }
    } else {
      const cur = Math.floor(now / 10);
      const periods = Math.ceil(seconds / 10);
      for (let i = 0; i < SLOTS; i++) {
        const p = k[i * STRIDE]! - 1;
        if (p >= 0 && p > cur - periods && p <= cur) any = addBucket(sum, k, i * STRIDE) || any;
      }
      // the current second is not in its ten-second bucket yet (taken if its period is in the window)
      const p = Math.floor(this.sec / 10);
      if (p > cur - periods && p <= cur) any = addBucket(sum, f, this.base) || any;
    }
    if (!any) return null;
    const outcomes: [number, string, number][] = [];
    let calls = 0;
    for (let c = 0; c < COLUMNS; c++) {
      const n = sum[COL0 + c]!;
      const pair = this.pairs[c]!;
      if (n === 0 || pair < 0) continue;
      outcomes.push([Math.floor(pair / N_REASONS), REASONS[pair % N_REASONS]!, n]);
      calls += n;
    }
    if (sum[OVERFLOW]! > 0) {
      outcomes.push([CODE_NAMES.length, "other", sum[OVERFLOW]!]);
      calls += sum[OVERFLOW]!;
    }
    const bins: [number, number][] = [];
    for (let i = 0; i < LATENCY_BINS; i++) if (sum[BIN0 + i]! > 0) bins.push([i, sum[BIN0 + i]!]);
    return { key: this.key, rps: calls / span, outcomes, bins };
  }
}

/** Adds the bucket at `at` of `from` into `sum` (columns and bins); whether it had a call. */
function addBucket(sum: Float64Array, from: Uint32Array, at: number): boolean {
  let any = false;
  for (let i = 1; i < STRIDE; i++) {
    const v = from[at + i]!;
    if (v !== 0) {
      sum[i]! += v;
      any = true;
    }
  }
  return any;
}

/** Adds the fine bucket at `at` into the ten-second bucket of `period` (started afresh if it held an older one). */
function fold(f: Uint32Array, at: number, k: Uint32Array, period: number): void {
  const kb = (period % SLOTS) * STRIDE;
  if (k[kb] !== period + 1) {
    k.fill(0, kb, kb + STRIDE);
    k[kb] = period + 1;
  }
  for (let i = 1; i < STRIDE; i++) k[kb + i]! += f[at + i]!;
}

/** What rows hang on (a method series, a compiled route, an endpoint): the row cached after its first lookup. */
export interface StatsSlot {
  statsRow: StatsRow | undefined;
}

/** Keys of folded rows remembered (to count each once); past it, each lookup counts. */
const MAX_FOLDED_KEYS = 10_000;

/** Every row of one process, by kind; at most `maxRows` per kind, then "other". */
export class Stats {
  private readonly rows: Record<StatsKind, Map<string, StatsRow>> = { method: new Map(), route: new Map(), endpoint: new Map() };
  private readonly other: Record<StatsKind, StatsRow> = { method: new StatsRow("other"), route: new StatsRow("other"), endpoint: new StatsRow("other") };
  private readonly foldedKeys: Record<StatsKind, Set<string>> = { method: new Set(), route: new Set(), endpoint: new Set() };
  private readonly folded: Record<StatsKind, number> = { method: 0, route: 0, endpoint: 0 };
  /** the second these stats started (rates of a younger process are taken over its age) */
  private readonly startSec: number;

  constructor(
    private maxRows: number,
    /** monotonic milliseconds (the calls' own clock) */
    private readonly now: () => number,
  ) {
    this.startSec = Math.floor(now() / 1000);
  }

  /** The row for `key` of `kind` (a new one, or "other" when the kind is full). Not per call: slots cache it. */
  row(kind: StatsKind, key: string): StatsRow {
    const m = this.rows[kind];
    let r = m.get(key);
    if (r !== undefined) return r;
    if (m.size >= this.maxRows) {
      const seen = this.foldedKeys[kind];
      if (!seen.has(key)) {
        this.folded[kind]++;
        if (seen.size < MAX_FOLDED_KEYS) seen.add(key);
      }
      return this.other[kind];
    }
    r = new StatsRow(key);
    m.set(key, r);
    return r;
  }

  /** A method series' row, looked up once and kept on it ("pkg.Svc/Method"). */
  methodRow(s: StatsSlot & { readonly service: string; readonly method: string }): StatsRow {
    return (s.statsRow = this.row("method", `${s.service}/${s.method}`));
  }

  /** A compiled route's row ("<listener> <label>"), looked up once and kept on it (a reload's new route finds the same row). */
  routeRow(r: StatsSlot & { readonly label: string }, listener: string): StatsRow {
    return (r.statsRow = this.row("route", `${listener} ${r.label}`));
  }

  /** An endpoint's row ("<cluster>/<host:port>"), looked up once and kept on it. */
  endpointRow(e: StatsSlot & { readonly label: string; readonly cluster: { readonly name: string } }): StatsRow {
    return (e.statsRow = this.row("endpoint", `${e.cluster.name}/${e.label}`));
  }

  /** Every row over window `name` ("10s", "1m", "10m"), as raw counts (a worker's part of /stats). */
  read(name: string): RawStats {
    const seconds = STATS_WINDOWS[name] ?? 60;
    const now = Math.floor(this.now() / 1000);
    // a process younger than the window: its rate is over its age (at least a second)
    const span = Math.max(1, Math.min(seconds, now - this.startSec + 1));
    const rows = { method: [], route: [], endpoint: [] } as Record<StatsKind, RawRow[]>;
    for (const kind of Object.keys(rows) as StatsKind[]) {
      for (const r of [...this.rows[kind].values(), this.other[kind]]) {
        const v = r.read(now, seconds, span);
        if (v !== null) rows[kind].push(v);
      }
    }
    return { window: name in STATS_WINDOWS ? name : "1m", windowSeconds: seconds, rows, folded: { ...this.folded } };
  }
}
