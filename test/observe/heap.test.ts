// The idle decision of shrinkHeapWhenIdle (pure: a clock and an activity sample in, "shrink
// now?" out) and exposeGc, which hands over node's gc() without the --expose-gc flag.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { exposeGc, idleTick, newIdleState, type Activity } from "../../src/proxy/observe/heap.js";

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
