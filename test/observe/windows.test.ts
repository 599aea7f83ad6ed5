// The windows behind GET /stats (src/proxy/observe/windows.ts), on a clock the test moves: what
// each window holds as time passes, the status columns (16, then shared), the rows' bound and
// "other", and that counting a call allocates nothing.
import { PerformanceObserver } from "node:perf_hooks";
import { describe, expect, it } from "vitest";
import { finishRow } from "../../src/proxy/observe/stats.js";
import { Stats, pairIndex, type StatsRow } from "../../src/proxy/observe/windows.js";

function clock(startMs = 1_000_000): { now: () => number; set(ms: number): void } {
  let t = startMs;
  return { now: () => t, set: (ms) => (t = ms) };
}

const OK = pairIndex(0, "upstream");
const RESET = pairIndex(14, "upstream_reset");

function calls(st: Stats, key: string, window: string): number {
  const r = st.read(window).rows.method.find((x) => x.key === key);
  return r === undefined ? 0 : finishRow(r).calls;
}

describe("windows on a moving clock", () => {
  it("10s holds the last ten seconds, 1m the last minute, 10m the last ten minutes", () => {
    const c = clock(0);
    const st = new Stats(100, c.now);
    const row = st.row("method", "pkg.Svc/M");
    // one call at each second 0 .. 700
    for (let s = 0; s <= 700; s++) row.add(s, OK, 20);
    c.set(700_500);
    expect(calls(st, "pkg.Svc/M", "10s")).toBe(10);
    expect(calls(st, "pkg.Svc/M", "1m")).toBe(60);
    // ten-second buckets: the current one (700) and the 59 before it, 591 seconds of calls
    expect(calls(st, "pkg.Svc/M", "10m")).toBe(591);
  });

  it("a window with no calls left in it has no row; a row without calls for a while keeps its old ones only while they are in the window", () => {
    const c = clock(0);
    const st = new Stats(100, c.now);
    const row = st.row("method", "a/b");
    row.add(5, OK, 10);
    row.add(5, RESET, 10);
    c.set(12_000);
    expect(calls(st, "a/b", "10s")).toBe(2);
    c.set(15_000);
    // second 5 is not in (15-10, 15]
    expect(calls(st, "a/b", "10s")).toBe(0);
    expect(st.read("10s").rows.method).toEqual([]);
    expect(calls(st, "a/b", "1m")).toBe(2);
    c.set(65_000);
    expect(calls(st, "a/b", "1m")).toBe(0);
    // the 10 min window counts the second not yet folded into its ten-second bucket
    expect(calls(st, "a/b", "10m")).toBe(2);
    c.set(606_000);
    expect(calls(st, "a/b", "10m")).toBe(0);
  });

  it("rates are over the window, or over the process's age while it is younger", () => {
    const c = clock(0);
    const st = new Stats(100, c.now);
    const row = st.row("method", "a/b");
    for (let s = 0; s < 5; s++) for (let i = 0; i < 10; i++) row.add(s, OK, 10);
    c.set(4_500);
    // 50 calls in the first 5 seconds of the process: 10/s, not 50/60
    expect(st.read("1m").rows.method[0]!.rps).toBe(10);
    for (let s = 5; s < 70; s++) for (let i = 0; i < 10; i++) row.add(s, OK, 10);
    c.set(69_500);
    expect(st.read("1m").rows.method[0]!.rps).toBe(10);
    expect(st.read("10s").rows.method[0]!.rps).toBe(10);
  });

  it("keeps status pairs apart, with the latencies of every call", () => {
    const c = clock(0);
    const st = new Stats(100, c.now);
    const row = st.row("method", "a/b");
    for (let i = 0; i < 90; i++) row.add(1, OK, 19);
    for (let i = 0; i < 10; i++) row.add(1, RESET, 59);
    c.set(1_500);
    const f = finishRow(st.read("10s").rows.method[0]!);
    expect(f).toMatchObject({ calls: 100, failed: 10, success: 0.9, failed_by: { upstream_reset: 10 } });
    expect(f.p50_ms).toBeGreaterThanOrEqual(0.896);
    expect(f.p50_ms).toBeLessThanOrEqual(1.024);
    expect(f.p99_ms).toBeGreaterThanOrEqual(917.5);
    expect(f.p99_ms).toBeLessThanOrEqual(1048.6);
  });
});

describe("status columns", () => {
  it("16 pairs get a column each; a 17th within ten minutes shares the overflow column (OTHER/other)", () => {
    const c = clock(0);
    const st = new Stats(100, c.now);
    const row = st.row("method", "a/b");
    for (let code = 0; code <= 16; code++) row.add(1, pairIndex(code, "upstream"), 10);
    c.set(1_500);
    const f = finishRow(st.read("10s").rows.method[0]!);
    expect(f.calls).toBe(17);
    expect(f.outcomes.filter((o) => o.decided_by === "upstream")).toHaveLength(16);
    expect(f.outcomes.find((o) => o.grpc_status === "OTHER")).toEqual({ grpc_code: 17, grpc_status: "OTHER", decided_by: "other", calls: 1 });
  });

  it("a column unused for ten minutes is given to a new pair, which then counts in its own name", () => {
    const c = clock(0);
    const st = new Stats(100, c.now);
    const row = st.row("method", "a/b");
    for (let code = 0; code < 16; code++) row.add(1, pairIndex(code, "upstream"), 10);
    // eleven minutes later: the old pairs are out of every window
    row.add(661, pairIndex(14, "deadline"), 10);
    row.add(661, pairIndex(4, "deadline"), 10);
    c.set(661_500);
    const f = finishRow(st.read("10m").rows.method[0]!);
    expect(f.outcomes).toEqual([
      { grpc_code: 4, grpc_status: "DEADLINE_EXCEEDED", decided_by: "deadline", calls: 1 },
      { grpc_code: 14, grpc_status: "UNAVAILABLE", decided_by: "deadline", calls: 1 },
    ]);
  });
});

describe("the rows' bound (stats.maxRows)", () => {
  it("past maxRows, new keys count in the kind's other row, and each folded key is counted once", () => {
    const c = clock(0);
    const st = new Stats(2, c.now);
    const rows: StatsRow[] = ["a/1", "a/2", "a/3", "a/4", "a/3"].map((k) => st.row("method", k));
    expect(rows[2]).toBe(rows[3]);
    expect(rows[2]!.key).toBe("other");
    for (const r of rows) r.add(1, OK, 10);
    c.set(1_500);
    const raw = st.read("1m");
    expect(raw.rows.method.map((r) => [r.key, finishRow(r).calls])).toEqual([
      ["a/1", 1],
      ["a/2", 1],
      ["other", 3],
    ]);
    expect(raw.folded).toEqual({ method: 2, route: 0, endpoint: 0 });
    // each kind has its own bound
    expect(st.row("route", "main prefix:/").key).toBe("main prefix:/");
  });
});

describe("cost", () => {
  it("counting a call allocates nothing once the row has its rings (1,000,000 calls: no young-generation GC, the heap as before)", async () => {
    const c = clock(0);
    const st = new Stats(10, c.now);
    const row = st.row("method", "a/b");
    const run = (from: number, n: number): void => {
      for (let i = from; i < from + n; i++) row.add(Math.floor(i / 10_000), i % 7 === 0 ? RESET : OK, i % 92);
    };
    // warm: the rings, both columns and the optimized code exist before the measure (compiled
    // code lives in the heap too)
    run(0, 200_000);
    const gcs: number[] = [];
    const obs = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) gcs.push(e.startTime);
    });
    obs.observe({ entryTypes: ["gc"] });
    await new Promise((r) => setTimeout(r, 50));
    const t0 = performance.now();
    const before = process.memoryUsage().heapUsed;
    // (synchronous: nothing else in this process runs, or allocates, meanwhile)
    run(200_000, 1_000_000);
    const grew = process.memoryUsage().heapUsed - before;
    const t1 = performance.now();
    await new Promise((r) => setTimeout(r, 50));
    obs.disconnect();
    // 16 bytes a call would be 16 MB: more than the young generation holds, so at least one
    // scavenge inside the loop, and the heap grown meanwhile; neither happens
    expect(gcs.filter((t) => t >= t0 && t <= t1)).toEqual([]);
    expect(grew).toBeLessThan(1_000_000);
  });
});

describe("against a plain list of every call (property)", () => {
  it("each window counts exactly the calls a list of (second, status) pairs has in it, whatever the columns", async () => {
    const fc = (await import("fast-check")).default;
    fc.assert(
      fc.property(
        // calls in increasing seconds (a row sees its calls in the order they end), gaps up to 20 minutes
        // twenty statuses: more than a row's 16 columns, so columns are reused and the overflow is used
        fc.array(
          fc.tuple(
            fc.integer({ min: 0, max: 1200 }),
            fc.integer({ min: 1, max: 5 }),
            fc.integer({ min: 0, max: 19 }).map((i) => pairIndex(i % 17, i < 17 ? "upstream" : "deadline")),
          ),
          { minLength: 1, maxLength: 60 },
        ),
        fc.integer({ min: 0, max: 700 }),
        (steps, after) => {
          const c = clock(0);
          const st = new Stats(10, c.now);
          const row = st.row("method", "a/b");
          const all: number[] = [];
          let sec = 0;
          for (const [gap, n, pair] of steps) {
            sec += gap;
            for (let i = 0; i < n; i++) {
              row.add(sec, pair, 10);
              all.push(sec);
            }
          }
          const now = sec + after;
          c.set(now * 1000 + 500);
          const inFine = (w: number) => all.filter((s) => s > now - w && s <= now).length;
          // the 10 min window is read in ten-second steps: the 60 ten-second periods up to now's
          const inCoarse = all.filter((s) => Math.floor(s / 10) > Math.floor(now / 10) - 60).length;
          expect(calls(st, "a/b", "10s")).toBe(inFine(10));
          expect(calls(st, "a/b", "1m")).toBe(inFine(60));
          expect(calls(st, "a/b", "10m")).toBe(inCoarse);
        },
      ),
      { numRuns: 2000 },
    );
  });
});
