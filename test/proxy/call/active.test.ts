// A listener's calls in flight (src/proxy/call/active.ts): add and delete keep the same members as
// a Set would, each call's slot names where it is, and a walk sees the calls in flight when it began.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ActiveCalls, type ActiveCall } from "../../../src/proxy/call/active.js";
import type { Outcome } from "../../../src/translate/index.js";

class Fake implements ActiveCall {
  activeSlot = -1;
  readonly reqScan = { bytes: 0 };
  readonly respScan = { bytes: 0 };
  readonly down = {} as ActiveCall["down"];
  ended: Outcome | undefined = undefined;
  constructor(
    readonly id: number,
    private readonly list: ActiveCalls,
  ) {}
  finish(o: Outcome): void {
    // as a Call does: its end takes it out of its listener's calls
    this.ended = o;
    this.list.delete(this);
  }
}

const ids = (xs: Iterable<ActiveCall>): number[] => [...xs].map((c) => (c as Fake).id).sort((a, b) => a - b);

describe("a listener's calls in flight", () => {
  it("holds what a Set holds after any sequence of adds and deletes, each slot naming its place", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 0, max: 11 })), { maxLength: 200 }), (ops) => {
        const list = new ActiveCalls();
        const calls = Array.from({ length: 12 }, (_, i) => new Fake(i, list));
        const model = new Set<number>();
        for (const [add, k] of ops) {
          const c = calls[k]!;
          if (add) {
            if (model.has(k)) continue; // a call is added once, at its start
            list.add(c);
            model.add(k);
          } else {
            list.delete(c); // a second delete, or one of a call never added, is a no-op
            model.delete(k);
          }
          expect(list.size).toBe(model.size);
        }
        expect(ids(list)).toEqual([...model].sort((a, b) => a - b));
        const walked = [...list];
        walked.forEach((c, i) => expect(c.activeSlot).toBe(i));
        for (const c of calls) if (!model.has(c.id)) expect(c.activeSlot).toBe(-1);
      }),
      { numRuns: 300 },
    );
  });

  it("a walk that ends every call it meets ends them all, each once", () => {
    const list = new ActiveCalls();
    const calls = Array.from({ length: 7 }, (_, i) => new Fake(i, list));
    for (const c of calls) list.add(c);
    const shutdown = { code: 14 } as Outcome;
    let met = 0;
    for (const c of list) {
      met++;
      c.finish(shutdown);
    }
    expect(met).toBe(7);
    expect(list.size).toBe(0);
    expect([...list]).toEqual([]);
    for (const c of calls) expect(c.ended).toBe(shutdown);
    // and the list takes new calls after it emptied
    list.add(calls[3]!);
    expect(ids(list)).toEqual([3]);
    expect(calls[3]!.activeSlot).toBe(0);
  });

  it("does not hold a deleted call: its place is cleared, not left to the array", () => {
    const list = new ActiveCalls();
    const a = new Fake(1, list);
    const b = new Fake(2, list);
    list.add(a);
    list.add(b);
    list.delete(b);
    list.delete(a);
    const slots = (list as unknown as { calls: unknown[] }).calls;
    expect(slots.every((x) => x === undefined)).toBe(true);
  });
});
