// The shared idle watch (src/proxy/call/idle.ts): one timer per period for all watched calls.
import { describe, expect, it } from "vitest";
import { unwatchIdle, watchIdle, type IdleGroup, type IdleWatched } from "../../../src/proxy/call/idle.js";

const PERIOD = 60;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

class Fake implements IdleWatched {
  idleSlot = -1;
  idleSeen = -1;
  moved = 0;
  cutAt: number | undefined = undefined;
  cuts = 0;
  group: IdleGroup | undefined = undefined;
  constructor(readonly t0: number) {}
  idleMoved(): number {
    return this.moved;
  }
  onIdle(): void {
    // as a Call does: it ends, and leaves the watch
    this.cuts++;
    this.cutAt = performance.now() - this.t0;
    unwatchIdle(this, this.group!);
  }
}

describe("the idle watch", () => {
  it("cuts a call that moves nothing after between one and two periods, never one that keeps moving, and forgets one unwatched", async () => {
    const t0 = performance.now();
    const silent = new Fake(t0);
    const busy = new Fake(t0);
    const gone = new Fake(t0);
    const g = (silent.group = watchIdle(silent, PERIOD));
    expect((busy.group = watchIdle(busy, PERIOD))).toBe(g);
    watchIdle(gone, PERIOD);
    unwatchIdle(gone, g);
    expect(gone.idleSlot).toBe(-1);
    const mover = setInterval(() => busy.moved++, PERIOD / 4);
    let late: Fake;
    try {
      // watched just before the group's next tick: that tick only takes note of it
      await sleep(0.8 * PERIOD);
      late = new Fake(performance.now());
      late.group = watchIdle(late, PERIOD);
      await sleep(5 * PERIOD);
    } finally {
      clearInterval(mover);
    }
    expect(late.cuts).toBe(1);
    expect(late.cutAt!).toBeGreaterThanOrEqual(PERIOD - 5);
    expect(late.cutAt!).toBeLessThan(2 * PERIOD + 150);
    expect(silent.cuts).toBe(1);
    expect(silent.cutAt!).toBeGreaterThanOrEqual(PERIOD - 5);
    // two periods, plus a busy machine's slack
    expect(silent.cutAt!).toBeLessThan(2 * PERIOD + 150);
    expect(busy.cutAt).toBeUndefined();
    expect(gone.cutAt).toBeUndefined();
    unwatchIdle(busy, g);
  });
});
