// The overload manager's heap trigger (observe/overload.ts): the pure decision, property-tested.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import v8 from "node:v8";
import { HEAP_FORCE_ABOVE, HEAP_PRESSED_ABOVE, HEAP_RELIEVED_BELOW, HeapPressureGuard, nextHeapPressure } from "../../src/proxy/observe/overload.js";

const MiB = 1_048_576;

describe("nextHeapPressure", () => {
  it("presses past 50 % of the heap limit and relieves only under 40 % (hysteresis)", () => {
    const limit = 48 * MiB;
    expect(nextHeapPressure(false, 0.49 * limit, limit)).toBe(false);
    expect(nextHeapPressure(false, 0.51 * limit, limit)).toBe(true);
    expect(nextHeapPressure(true, 0.45 * limit, limit)).toBe(true);
    expect(nextHeapPressure(true, 0.39 * limit, limit)).toBe(false);
    expect(nextHeapPressure(true, 10, 0)).toBe(false);
  });

  it("is monotone in the heap in use, and never presses below the relief threshold or relieves above the press one", () => {
    fc.assert(
      fc.property(fc.boolean(), fc.double({ min: 0, max: 2, noNaN: true }), fc.double({ min: 0, max: 2, noNaN: true }), fc.integer({ min: 1, max: 2 ** 40 }), (pressed, a, b, limit) => {
        const [lo, hi] = a <= b ? [a, b] : [b, a];
        // more heap in use never relieves what less heap in use presses
        if (nextHeapPressure(pressed, lo * limit, limit)) expect(nextHeapPressure(pressed, hi * limit, limit)).toBe(true);
        if (lo <= HEAP_RELIEVED_BELOW) expect(nextHeapPressure(pressed, lo * limit, limit)).toBe(false);
        if (hi > HEAP_PRESSED_ABOVE) expect(nextHeapPressure(pressed, hi * limit, limit)).toBe(true);
      }),
    );
  });
});

describe("HeapPressureGuard.onStream (a burst of new streams between GC reports)", () => {
  it("forces no GC while the heap is under the force threshold, however many streams arrive", () => {
    const h = v8.getHeapStatistics();
    // this test process is far from its heap limit: the look must find nothing to do
    expect(h.used_heap_size).toBeLessThan(h.heap_size_limit * HEAP_FORCE_ABOVE);
    const g = new HeapPressureGuard();
    let gcs = 0;
    g.start(() => void gcs++);
    try {
      for (let i = 0; i < 64 * 50; i++) g.onStream();
      expect(gcs).toBe(0);
      expect(g.pressed).toBe(false);
    } finally {
      g.stop();
    }
  });
});

describe("HeapPressureGuard.watch (the GC observer only near the limit)", () => {
  const heap = (used: number, limit: number) => ({ ...v8.getHeapStatistics(), used_heap_size: used, heap_size_limit: limit });
  it("watches no GC while the heap in use is under 30 % of the limit, watches past it, and stops once it is back under", () => {
    const h = v8.getHeapStatistics();
    // this test process is far from its heap limit: started, the guard watches nothing
    expect(h.used_heap_size).toBeLessThan(h.heap_size_limit * 0.3);
    const g = new HeapPressureGuard();
    g.start(undefined);
    try {
      expect(g.watching).toBe(false);
      g.watch(heap(310, 1000));
      expect(g.watching).toBe(true);
      g.watch(heap(290, 1000));
      expect(g.watching).toBe(false);
      // a measure past 50 % presses; pressed, it keeps watching whatever the look finds
      g.watch(heap(600, 1000));
      g.pressed = true;
      g.watch(heap(100, 1000));
      expect(g.watching).toBe(true);
      g.pressed = false;
      g.watch(heap(100, 1000));
      expect(g.watching).toBe(false);
    } finally {
      g.stop();
    }
    expect(g.watching).toBe(false);
  });
});
