// The idle decision of shrinkHeapWhenIdle (pure: a clock and an activity sample in, "shrink
// now?" out) and exposeGc, which hands over node's gc() without the --expose-gc flag.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import v8 from "node:v8";
import pino from "pino";
import {
  MARKING_OFF_ABOVE_BYTES_PER_SEC,
  MARKING_ON_BELOW_BYTES_PER_SEC,
  MarkingTuner,
  exposeGc,
  idleTick,
  newIdleState,
  parseCpuMax,
  usableCpus,
  wantConcurrentMarking,
  type Activity,
} from "../../src/proxy/observe/heap.js";

const act = (startedCalls: number, activeCalls = 0): Activity => ({ startedCalls, activeCalls });

describe("idleTick", () => {
  it("shrinks once, idleMs after the last call, and not again until calls run", () => {
    const st = newIdleState(0, act(0));
    expect(idleTick(st, 5_000, act(0), 1000)).toBe(false); // never busy: nothing to give back
    expect(idleTick(st, 6_000, act(3), 1000), "calls started").toBe(false);
    expect(idleTick(st, 6_900, act(3), 1000)).toBe(false); // idle 900 ms
    expect(idleTick(st, 7_000, act(3), 1000)).toBe(true); // idle 1000 ms
    expect(idleTick(st, 9_000, act(3), 1000)).toBe(false); // already shrunk
    expect(idleTick(st, 9_100, act(4), 1000)).toBe(false);
    expect(idleTick(st, 10_100, act(4), 1000)).toBe(true);
  });

  it("counts a call in flight as busy (held streams), even when no new call starts", () => {
    const st = newIdleState(0, act(0));
    expect(idleTick(st, 100, act(10, 10), 1000)).toBe(false);
    expect(idleTick(st, 5_000, act(10, 10), 1000)).toBe(false);
    // They ended between the samples at 5,000 and 5,500: idle counts from the last busy sample.
    expect(idleTick(st, 5_500, act(10, 0), 1000)).toBe(false);
    expect(idleTick(st, 5_900, act(10, 0), 1000)).toBe(false);
    expect(idleTick(st, 6_000, act(10, 0), 1000)).toBe(true);
  });

  it("property: never shrinks while busy, and at most once per idle period", () => {
    const step = fc.record({ dt: fc.integer({ min: 0, max: 3000 }), newCalls: fc.nat(3), active: fc.nat(2) });
    fc.assert(
      fc.property(fc.array(step, { maxLength: 60 }), fc.integer({ min: 1, max: 5000 }), (steps, idleMs) => {
        const st = newIdleState(0, act(0));
        let t = 0;
        let started = 0;
        let lastBusy = 0;
        let shrunkSinceBusy = false;
        for (const s of steps) {
          t += s.dt;
          started += s.newCalls;
          const busy = s.newCalls > 0 || s.active > 0;
          const due = idleTick(st, t, act(started, s.active), idleMs);
          if (busy) {
            expect(due).toBe(false);
            lastBusy = t;
            shrunkSinceBusy = false;
          } else if (due) {
            expect(t - lastBusy).toBeGreaterThanOrEqual(idleMs);
            expect(shrunkSinceBusy).toBe(false);
            shrunkSinceBusy = true;
          }
        }
      }),
    );
  });
});

describe("exposeGc", () => {
  it("returns node's gc(), which runs a memory-reducing major GC", () => {
    const gc = exposeGc();
    expect(typeof gc).toBe("function");
    gc!({ type: "major", execution: "sync", flavor: "last-resort" });
  });
});

describe("wantConcurrentMarking", () => {
  const MiB = 1_048_576;
  it("turns marking off above 32 MiB/s and on again only below 8 MiB/s", () => {
    expect(wantConcurrentMarking(true, 0)).toBe(true);
    expect(wantConcurrentMarking(true, 32 * MiB)).toBe(true);
    expect(wantConcurrentMarking(true, 32 * MiB + 1)).toBe(false);
    expect(wantConcurrentMarking(false, 20 * MiB), "between the two: stays off").toBe(false);
    expect(wantConcurrentMarking(false, 8 * MiB)).toBe(false);
    expect(wantConcurrentMarking(false, 8 * MiB - 1)).toBe(true);
  });

  it("property: never flips inside the hysteresis band, always outside it", () => {
    fc.assert(
      fc.property(fc.boolean(), fc.double({ min: 0, max: 1e10, noNaN: true }), (cur, rate) => {
        const next = wantConcurrentMarking(cur, rate);
        if (rate > MARKING_OFF_ABOVE_BYTES_PER_SEC) expect(next).toBe(false);
        else if (rate < MARKING_ON_BELOW_BYTES_PER_SEC) expect(next).toBe(true);
        else expect(next).toBe(cur);
      }),
    );
  });
});

describe("usableCpus / parseCpuMax", () => {
  it("reads a cgroup v2 cpu.max quota, rounded up to whole CPUs", () => {
    expect(parseCpuMax("100000 100000\n")).toBe(1);
    expect(parseCpuMax("50000 100000")).toBe(1);
    expect(parseCpuMax("150000 100000")).toBe(2);
    expect(parseCpuMax("max 100000")).toBeUndefined();
    expect(parseCpuMax("garbage")).toBeUndefined();
    expect(parseCpuMax(undefined)).toBeUndefined();
  });

  it("takes the lower of the affinity mask and the quota", () => {
    expect(usableCpus("100000 100000")).toBe(1);
    expect(usableCpus("max 100000")).toBeGreaterThanOrEqual(1);
    expect(usableCpus("6400000 100000")).toBeLessThanOrEqual(64);
  });
});

describe("MarkingTuner", () => {
  const log = pino({ level: "silent" });
  const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it("auto on one CPU follows the byte rate: off under a stream of bytes, on again when it stops", async () => {
    let bytes = 0;
    const seen: boolean[] = [];
    const t = new MarkingTuner("auto", () => bytes, log, (on) => seen.push(on), 1);
    expect(t.adaptive).toBe(true);
    t.start(20);
    try {
      // 64 MiB every 20 ms (over 32 MiB/s even if a busy machine delays the ticks a second)
      for (let i = 0; i < 100 && t.on; i++) {
        bytes += 64 * 1_048_576;
        await wait(20);
      }
      expect(t.on).toBe(false);
      for (let i = 0; i < 100 && !t.on; i++) await wait(20); // no bytes: the rate falls to 0
      expect(t.on).toBe(true);
      expect(seen).toEqual([false, true]);
      expect(t.switches).toBe(2);
    } finally {
      t.stop();
    }
  });

  it("auto with more than one CPU leaves V8 alone; off sets it once; on never touches it", () => {
    const seen: boolean[] = [];
    const many = new MarkingTuner("auto", () => 0, log, (on) => seen.push(on), 4);
    many.start();
    expect(many.adaptive).toBe(false);
    const off = new MarkingTuner("off", () => 0, log, (on) => seen.push(on), 4);
    off.start();
    expect(off.on).toBe(false);
    const on = new MarkingTuner("on", () => 0, log, (v) => seen.push(v), 1);
    on.start();
    expect(on.adaptive).toBe(false);
    expect(seen).toEqual([false]);
    v8.setFlagsFromString("--concurrent-marking"); // V8's default again for the other tests
  });
});
