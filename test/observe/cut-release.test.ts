// The response-buffer guard's release (observe/overload.ts): after calls are cut for their
// buffers, one major GC gives those buffers back, once per burst of cuts, at most one a second,
// and never without a gc() handed over (a library host owns its heap). Fake timers, fake calls:
// the real attack is test/process/zero-window-rss.test.ts (RSS bounds) and
// test/behaviour/attack-slow-reader.test.ts (the cuts themselves).
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ResponseBufferGuard } from "../../src/proxy/observe/overload.js";
import { narrowSession, stalledCall as call } from "../helpers/stalled-call.js";

describe("ResponseBufferGuard: a major GC after cuts", () => {
  beforeEach(() => {
    // performance.now() too: the guard measures the gap with it
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval", "performance"] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  /** A guard whose connection budget takes 2 unread calls (80 KiB each), and its gc() calls. */
  function guard(withGc = true): { g: ResponseBufferGuard; gcs: unknown[] } {
    const g = new ResponseBufferGuard();
    g.unreadBudgets = { perConnectionBytes: 2 * 80 * 1024, processBytes: 1024 * 1024 * 1024 };
    const gcs: unknown[] = [];
    if (withGc) g.releaseWith((opts) => void gcs.push(opts));
    return { g, gcs };
  }

  it("runs one major GC 20 ms after a burst of cuts, not one per cut", () => {
    const { g, gcs } = guard();
    const s = narrowSession(g);
    const calls = Array.from({ length: 12 }, () => call(s));
    for (const c of calls) g.stall(c, true);
    // the first two fit the connection's budget; the ten after them were cut at once
    expect(calls.filter((c) => c.cut !== undefined)).toHaveLength(10);
    expect(g.unreadCuts).toBe(10);
    vi.advanceTimersByTime(19);
    expect(gcs).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(gcs).toEqual([{ type: "major", execution: "sync" }]);
    expect(g.releases).toBe(1);
    vi.advanceTimersByTime(5000);
    expect(gcs).toHaveLength(1);
  });

  it("runs at most one a second: cuts 100 ms after a release wait until a second after it", () => {
    // t = 0: one cut; t = 20: the release; t = 120: two cuts, released at t = 1,020
    const { g, gcs } = guard();
    const s = narrowSession(g);
    for (let i = 0; i < 3; i++) g.stall(call(s), true);
    vi.advanceTimersByTime(20);
    expect(gcs).toHaveLength(1);
    vi.advanceTimersByTime(100);
    g.stall(call(s), true);
    g.stall(call(s), true);
    vi.advanceTimersByTime(899);
    expect(gcs).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(gcs).toHaveLength(2);
    expect(g.releases).toBe(2);
  });

  it("runs none without a gc() (the library: its host owns the heap), and none without a cut", () => {
    const { g, gcs } = guard(false);
    const s = narrowSession(g);
    for (let i = 0; i < 5; i++) g.stall(call(s), true);
    expect(g.unreadCuts).toBe(3);
    vi.advanceTimersByTime(5000);
    expect(g.releases).toBe(0);
    const other = guard();
    other.g.stall(call(narrowSession(other.g)), true);
    other.g.stall(call(narrowSession(other.g)), true);
    vi.advanceTimersByTime(5000);
    expect(other.gcs).toEqual([]);
    expect(gcs).toEqual([]);
  });
});
