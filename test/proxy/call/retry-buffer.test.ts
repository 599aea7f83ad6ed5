// Contract (issue 11, step 1): "A retry buffer keeps views of the request chunks up to a byte cap
// and replays them into the next attempt". Pure bookkeeping over Buffers, so examples plus
// fast-check properties (style.md §3.2).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { RetryBuffer, type ReplaySink } from "../../../src/proxy/call/retry-buffer.js";

/** A sink that records what a replay wrote; its `waitAt`-th write (1-based) returns false. */
function recorder(waitAt = 0) {
  const got: Buffer[] = [];
  let ended = 0;
  const sink: ReplaySink = {
    write(chunk) {
      got.push(chunk);
      return got.length !== waitAt;
    },
    endRequest() {
      ended++;
    },
  };
  return { sink, got, ended: () => ended };
}

const chunksArb = fc.array(fc.uint8Array({ minLength: 0, maxLength: 64 }).map((u) => Buffer.from(u)), { maxLength: 40 });

describe("RetryBuffer", () => {
  it("replays the chunks it kept, in order, as the same Buffer objects (views, not copies)", () => {
    const b = new RetryBuffer(100);
    const a = Buffer.from("hello");
    const c = Buffer.from(" world");
    expect(b.push(a)).toBe(true);
    expect(b.push(c)).toBe(true);
    expect([b.size, b.count, b.state]).toEqual([11, 2, "buffering"]);
    const r = recorder();
    expect(b.replayTo(r.sink)).toBe(true);
    expect(r.got[0]).toBe(a);
    expect(r.got[1]).toBe(c);
    expect(r.ended()).toBe(0);
  });

  it("ends the replayed request when the client's request has ended", () => {
    const b = new RetryBuffer(10);
    b.push(Buffer.from("ab"));
    b.end();
    const r = recorder();
    b.replayTo(r.sink);
    expect(r.ended()).toBe(1);
    expect(b.requestEnded).toBe(true);
  });

  it("keeps a request of exactly the cap, and overflows on the first byte over it, letting go of every view", () => {
    const b = new RetryBuffer(8);
    expect(b.push(Buffer.alloc(5))).toBe(true);
    expect(b.push(Buffer.alloc(3))).toBe(true);
    expect(b.size).toBe(8);
    expect(b.push(Buffer.alloc(1))).toBe(false);
    expect([b.state, b.size, b.count]).toEqual(["overflowed", 0, 0]);
    expect(b.push(Buffer.alloc(0))).toBe(false);
    expect(() => b.replayTo(recorder().sink)).toThrow(/overflowed/);
  });

  it("lets go of its views on commit and refuses a replay after it", () => {
    const b = new RetryBuffer(8);
    b.push(Buffer.from("x"));
    b.commit();
    expect([b.state, b.size, b.count]).toEqual(["committed", 0, 0]);
    expect(b.push(Buffer.from("y"))).toBe(false);
    expect(() => b.replayTo(recorder().sink)).toThrow(/committed/);
  });

  it("reports a sink that asked to wait on its last write", () => {
    const b = new RetryBuffer(8);
    b.push(Buffer.from("a"));
    b.push(Buffer.from("b"));
    expect(b.replayTo(recorder(2).sink)).toBe(false);
    expect(b.replayTo(recorder(1).sink)).toBe(true); // only the last write's answer counts
  });

  it("refuses a cap that is not a byte count", () => {
    expect(() => new RetryBuffer(-1)).toThrow(RangeError);
    expect(() => new RetryBuffer(1.5)).toThrow(RangeError);
  });

  it("property: under the cap, every replay gives back exactly the pushed chunks, as the same objects, as often as asked", () => {
    fc.assert(
      fc.property(chunksArb, fc.nat(4096), fc.boolean(), (chunks, extra, ended) => {
        const total = chunks.reduce((n, c) => n + c.length, 0);
        const b = new RetryBuffer(total + extra);
        for (const c of chunks) expect(b.push(c)).toBe(true);
        if (ended) b.end();
        expect(b.size).toBe(total);
        for (let round = 0; round < 2; round++) {
          const r = recorder();
          b.replayTo(r.sink);
          expect(r.got.length).toBe(chunks.length);
          r.got.forEach((g, i) => expect(g).toBe(chunks[i]));
          expect(r.ended()).toBe(ended ? 1 : 0);
        }
      }),
    );
  });

  it("property: it overflows exactly at the first chunk that takes the total over the cap, and never holds more than the cap", () => {
    fc.assert(
      fc.property(chunksArb, fc.nat(1024), (chunks, cap) => {
        const b = new RetryBuffer(cap);
        let sum = 0;
        let overflowAt = -1;
        chunks.forEach((c, i) => {
          if (overflowAt < 0 && sum + c.length > cap) overflowAt = i;
          if (overflowAt < 0) sum += c.length;
        });
        chunks.forEach((c, i) => {
          const kept = b.push(c);
          expect(kept).toBe(overflowAt < 0 || i < overflowAt);
          expect(b.size).toBeLessThanOrEqual(cap);
        });
        expect(b.state).toBe(overflowAt < 0 ? "buffering" : "overflowed");
        expect(b.size).toBe(overflowAt < 0 ? sum : 0);
      }),
    );
  });

  it("property: the bytes replayed equal the bytes pushed, however the request was split", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 512 }), fc.array(fc.nat(512), { maxLength: 20 }), (bytes, cuts) => {
        const whole = Buffer.from(bytes);
        const at = [...new Set(cuts.map((c) => c % (whole.length + 1)))].sort((x, y) => x - y);
        const pieces: Buffer[] = [];
        let from = 0;
        for (const c of [...at, whole.length]) {
          pieces.push(whole.subarray(from, c));
          from = c;
        }
        const b = new RetryBuffer(whole.length);
        for (const p of pieces) b.push(p);
        const r = recorder();
        b.replayTo(r.sink);
        expect(Buffer.concat(r.got).equals(whole)).toBe(true);
        // views: each replayed piece shares the original's memory
        for (const g of r.got) if (g.length > 0) expect(g.buffer).toBe(whole.buffer);
      }),
    );
  });
});
