import { afterEach, describe, expect, it, vi } from "vitest";
import fc from "fast-check";
import {
  atMessageBoundary,
  completedMessages,
  nextBoundary,
  forwardedBytes,
  forwardedMessages,
  frameMessage,
  messageLength,
  newScanner,
  prefixAcross,
  prefixFlag,
  writePrefix,
  refusedBytes,
  scanChunk,
  type FrameScanner,
} from "../../src/translate/framing.js";

function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) { out.set(p, o); o += p.length; }
  return out;
}

/** A scanner's fields that do not depend on where the refused chunk began. */
function splitFree(s: FrameScanner): FrameScanner {
  return { ...s, overLimitAt: 0, refusedBytes: 0, refusedAt: 0, refusedChunkMessages: 0 };
}

/** Splits buf at the given (sorted, deduplicated) cut points. */
function split(buf: Uint8Array, cuts: readonly number[]): Uint8Array[] {
  const points = [...new Set(cuts.map((c) => c % (buf.length + 1)))].sort((a, b) => a - b);
  const out: Uint8Array[] = [];
  let prev = 0;
  for (const p of points) { out.push(buf.slice(prev, p)); prev = p; }
  out.push(buf.slice(prev));
  return out;
}

function scanAll(chunks: readonly Uint8Array[], limit: number): { s: FrameScanner; ok: boolean } {
  const s = newScanner();
  let ok = true;
  for (const c of chunks) {
    if (!scanChunk(s, c, limit)) { ok = false; break; }
  }
  return { s, ok };
}

const message = fc.record({ len: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 40 }), fc.integer({ min: 200, max: 600 })), flag: fc.integer({ min: 0, max: 1 }) });

describe("newScanner()", () => {
  it("starts at a message boundary with nothing counted", () => {
    expect(newScanner()).toEqual({ headerLeft: 5, length: 0, flag: 0, bodyLeft: 0, messages: 0, bytes: 0, overLimit: -1, overLimitAt: 0, refusedBytes: 0, refusedAt: 0, refusedChunkMessages: 0 });
    expect(atMessageBoundary(newScanner())).toBe(true);
  });
});

describe("scanChunk()", () => {
  it("counts one message in one chunk and ends at a boundary", () => {
    const s = newScanner();
    expect(scanChunk(s, frameMessage(Uint8Array.of(1, 2, 3)), 10)).toBe(true);
    expect(s).toMatchObject({ messages: 1, length: 3, bytes: 8, bodyLeft: 0, headerLeft: 5, overLimit: -1 });
    expect(atMessageBoundary(s)).toBe(true);
  });

  it("accepts a zero-length message as a complete message", () => {
    const s = newScanner();
    expect(scanChunk(s, Uint8Array.of(0, 0, 0, 0, 0), 0)).toBe(true);
    expect(s.messages).toBe(1);
    expect(atMessageBoundary(s)).toBe(true);
  });

  it("counts many messages in one chunk", () => {
    const chunk = concat(Array.from({ length: 50 }, (_, i) => frameMessage(new Uint8Array(i % 7))));
    const s = newScanner();
    expect(scanChunk(s, chunk, Infinity)).toBe(true);
    expect(s.messages).toBe(50);
    expect(s.bytes).toBe(chunk.length);
  });

  it.each([[1, 4], [2, 3], [3, 2], [4, 1], [1, 1, 3], [1, 1, 1, 2], [1, 1, 1, 1, 1], [2, 1, 2]])(
    "reports the length as soon as a prefix split as %j completes",
    (...sizes: number[]) => {
      const framed = frameMessage(new Uint8Array(300), 1); // length 300 = 00 00 01 2c
      const s = newScanner();
      let at = 0;
      for (const [k, size] of sizes.entries()) {
        expect(scanChunk(s, framed.slice(at, at + size), Infinity)).toBe(true);
        at += size;
        if (k < sizes.length - 1) {
          expect(s.messages).toBe(0);
          expect(s.headerLeft).toBe(5 - at);
        }
      }
      expect(s).toMatchObject({ messages: 1, length: 300, flag: 1, bodyLeft: 300, headerLeft: 0 });
      expect(atMessageBoundary(s)).toBe(false);
      scanChunk(s, framed.slice(5), Infinity);
      expect(atMessageBoundary(s)).toBe(true);
    },
  );

  it("reads a declared length of 0xFFFFFFFF as 4294967295, never as a negative number", () => {
    const prefix = Uint8Array.of(0, 0xff, 0xff, 0xff, 0xff);
    for (let cut = 0; cut <= 5; cut++) {
      const s = newScanner();
      scanChunk(s, prefix.slice(0, cut), Infinity);
      scanChunk(s, prefix.slice(cut), Infinity);
      expect(s.length).toBe(4294967295);
      expect(s.bodyLeft).toBe(4294967295);
      scanChunk(s, new Uint8Array(1000), Infinity);
      expect(s.bodyLeft).toBe(4294967295 - 1000);
    }
  });

  it("flags a 4 GiB declared length against the 4 MiB default limit", () => {
    const s = newScanner();
    expect(scanChunk(s, Uint8Array.of(0, 0xff, 0xff, 0xff, 0xff, 1, 2), 4194304)).toBe(false);
    expect(s.overLimit).toBe(4294967295);
  });

  it("passes a message of exactly the limit and refuses one byte more, as grpc-go does", () => {
    const at = newScanner();
    expect(scanChunk(at, Uint8Array.of(0, 0, 0x40, 0, 0), 4194304)).toBe(true);
    const over = newScanner();
    expect(scanChunk(over, Uint8Array.of(0, 0, 0x40, 0, 1), 4194304)).toBe(false);
    expect(over.overLimit).toBe(4194305);
  });

  it("stops at the first over-limit prefix and stays refused", () => {
    const chunk = concat([frameMessage(new Uint8Array(3)), frameMessage(new Uint8Array(20)), frameMessage(new Uint8Array(30))]);
    const s = newScanner();
    expect(scanChunk(s, chunk, 10)).toBe(false);
    expect(s).toMatchObject({ messages: 2, overLimit: 20, bytes: 8 + 5, overLimitAt: 8 });
    expect(scanChunk(s, frameMessage(new Uint8Array(1)), 10)).toBe(false);
    expect(s).toMatchObject({ messages: 2, overLimit: 20, bytes: 13 });
  });

  it("counts what a caller forwarded around a refusal: whole messages before the refused prefix, or nothing of the refused chunk", () => {
    // Earlier chunk: one 3-byte message (8 bytes). Refused chunk: a 2-byte message (7 bytes),
    // then the over-limit prefix and 4 body bytes (9 bytes).
    const s = newScanner();
    expect(scanChunk(s, frameMessage(new Uint8Array(3)), 10)).toBe(true);
    const refused = concat([frameMessage(new Uint8Array(2)), Uint8Array.of(0, 0, 0, 0, 20, 1, 2, 3, 4)]);
    expect(scanChunk(s, refused, 10)).toBe(false);
    // The response side forwards the whole message before the refused prefix: 8 + 7 bytes.
    expect([forwardedMessages(s, true), forwardedBytes(s, true), refusedBytes(s, true)]).toEqual([2, 15, 9]);
    // The request side drops the refused chunk whole: only the earlier chunk went on.
    expect([forwardedMessages(s, false), forwardedBytes(s, false), refusedBytes(s, false)]).toEqual([1, 8, 16]);
  });

  it("counts a refused prefix split across chunks: its first bytes went on with the earlier chunk", () => {
    const s = newScanner();
    expect(scanChunk(s, Uint8Array.of(0, 0, 0), 10)).toBe(true); // 3 bytes of a prefix declaring 300
    expect(scanChunk(s, Uint8Array.of(1, 44, 9, 9), 10)).toBe(false);
    for (const partial of [true, false]) {
      expect([forwardedMessages(s, partial), forwardedBytes(s, partial), refusedBytes(s, partial)]).toEqual([0, 3, 4]);
    }
  });

  it("counts every byte and message as forwarded when nothing was refused", () => {
    fc.assert(
      fc.property(fc.array(message, { maxLength: 8 }), fc.array(fc.nat(), { maxLength: 10 }), fc.boolean(), (msgs, cuts, partial) => {
        const buf = concat(msgs.map((m) => frameMessage(new Uint8Array(m.len), m.flag)));
        const { s } = scanAll(split(buf, cuts), Infinity);
        expect([forwardedMessages(s, partial), forwardedBytes(s, partial), refusedBytes(s, partial)]).toEqual([msgs.length, buf.length, 0]);
      }),
    );
  });

  it("never counts more forwarded plus refused bytes than the chunks held", () => {
    fc.assert(
      fc.property(fc.array(message, { maxLength: 8 }), fc.array(fc.nat(), { maxLength: 10 }), fc.integer({ min: 0, max: 64 }), fc.boolean(), (msgs, cuts, limit, partial) => {
        const buf = concat(msgs.map((m) => frameMessage(new Uint8Array(m.len), m.flag)));
        const chunks = split(buf, cuts);
        const s = newScanner();
        let read = 0;
        for (const c of chunks) {
          read += c.length;
          if (!scanChunk(s, c, limit)) break;
        }
        expect(forwardedBytes(s, partial) + refusedBytes(s, partial)).toBe(read);
        expect(forwardedMessages(s, partial)).toBeLessThanOrEqual(msgs.filter((m) => m.len <= limit).length);
      }),
    );
  });

  it("treats an empty chunk as a no-op", () => {
    const s = newScanner();
    scanChunk(s, Uint8Array.of(0, 0), Infinity);
    const before = { ...s };
    expect(scanChunk(s, new Uint8Array(0), Infinity)).toBe(true);
    expect(s).toEqual(before);
  });

  it("skips payload without copying or re-slicing it", () => {
    const slice = vi.spyOn(Uint8Array.prototype, "slice");
    const subarray = vi.spyOn(Uint8Array.prototype, "subarray");
    const chunk = concat([frameMessage(new Uint8Array(100)), frameMessage(new Uint8Array(5))]);
    slice.mockClear();
    subarray.mockClear();
    const s = newScanner();
    scanChunk(s, chunk, Infinity);
    expect(slice).not.toHaveBeenCalled();
    expect(subarray).not.toHaveBeenCalled();
    chunk.subarray(0, 1); // the spies are live
    expect(subarray).toHaveBeenCalledTimes(1);
  });

  afterEach(() => { vi.restoreAllMocks(); });

  it("keeps one object shape: no fields are added or removed by scanning", () => {
    const s = newScanner();
    const keys = Object.keys(s);
    scanChunk(s, concat([frameMessage(new Uint8Array(9)), Uint8Array.of(0, 0, 0)]), 5);
    expect(Object.keys(s)).toEqual(keys);
  });

  it("gives the same result however the stream is split into chunks", () => {
    fc.assert(
      fc.property(
        fc.array(message, { maxLength: 12 }),
        fc.array(fc.nat(), { maxLength: 30 }),
        fc.oneof(fc.constant(Infinity), fc.integer({ min: 0, max: 600 })),
        (msgs, cuts, limit) => {
          const buf = concat(msgs.map((m) => frameMessage(new Uint8Array(m.len).fill(0xa5), m.flag)));
          const whole = scanAll([buf], limit);
          const parts = scanAll(split(buf, cuts), limit);
          expect(parts.ok).toBe(whole.ok);
          // overLimitAt and the refused-chunk counts are relative to the refused chunk, so they
          // alone depend on the split.
          expect(splitFree(parts.s)).toEqual(splitFree(whole.s));
          // Against the model: the first message longer than the limit, and the count up to it.
          const first = msgs.findIndex((m) => m.len > limit);
          expect(whole.s.overLimit).toBe(first < 0 ? -1 : (msgs[first] as { len: number }).len);
          expect(whole.s.messages).toBe(first < 0 ? msgs.length : first + 1);
          // In one chunk, the refused prefix starts right after the whole messages before it.
          if (first >= 0) expect(whole.s.overLimitAt).toBe(msgs.slice(0, first).reduce((a, m) => a + 5 + m.len, 0));
          if (first < 0) {
            expect(whole.s.bytes).toBe(buf.length);
            expect(atMessageBoundary(whole.s)).toBe(true);
          }
        },
      ),
    );
  });

  it("gives the same result when fed one byte at a time", () => {
    fc.assert(
      fc.property(fc.array(message, { maxLength: 8 }), fc.integer({ min: 0, max: 64 }), (msgs, limit) => {
        const buf = concat(msgs.map((m) => frameMessage(new Uint8Array(m.len), m.flag)));
        const bytes = Array.from(buf, (b) => Uint8Array.of(b));
        expect(splitFree(scanAll(bytes, limit).s)).toEqual(splitFree(scanAll([buf], limit).s));
      }),
    );
  });

  it("is at a boundary only where a message ends", () => {
    fc.assert(
      fc.property(fc.array(message, { minLength: 1, maxLength: 6 }), fc.nat(), (msgs, cut) => {
        const frames = msgs.map((m) => frameMessage(new Uint8Array(m.len), m.flag));
        const buf = concat(frames);
        const ends = new Set<number>([0]);
        let o = 0;
        for (const f of frames) { o += f.length; ends.add(o); }
        const at = cut % (buf.length + 1);
        const s = newScanner();
        scanChunk(s, buf.slice(0, at), Infinity);
        expect(atMessageBoundary(s)).toBe(ends.has(at));
      }),
    );
  });

  it("never mutates its input", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), fc.array(fc.nat(), { maxLength: 6 }), (buf, cuts) => {
        const copy = Uint8Array.from(buf);
        const chunks = split(buf, cuts);
        const copies = chunks.map((c) => Uint8Array.from(c));
        const s = newScanner();
        for (const c of chunks) scanChunk(s, c, Infinity);
        chunks.forEach((c, i) => { expect(c).toEqual(copies[i]); });
        expect(buf).toEqual(copy);
      }),
    );
  });

  it("tracks arbitrary bytes (random prefixes) identically across splits", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.array(fc.nat(), { maxLength: 20 }), fc.integer({ min: 0, max: 2 ** 32 }), (buf, cuts, limit) => {
        expect(splitFree(scanAll(split(buf, cuts), limit).s)).toEqual(splitFree(scanAll([buf], limit).s));
      }),
    );
  });
});

describe("frameMessage()", () => {
  it("writes the flag and a big-endian length before the payload", () => {
    expect(Array.from(frameMessage(Uint8Array.of(8, 1), 1))).toEqual([1, 0, 0, 0, 2, 8, 1]);
    expect(Array.from(frameMessage(new Uint8Array(0)))).toEqual([0, 0, 0, 0, 0]);
    const big = frameMessage(new Uint8Array(0x01020304 & 0xffff));
    expect(Array.from(big.slice(0, 5))).toEqual([0, 0, 0, 0x03, 0x04]);
  });
});

describe("nextBoundary(): cutting chunks at message boundaries for the fault path", () => {
  it("returns the end of each message in turn, however the stream is split, and counts like scanChunk", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 40 }), { maxLength: 8 }), fc.array(fc.nat(), { maxLength: 10 }), (lens, cuts) => {
        const frames = lens.map((l) => frameMessage(new Uint8Array(l)));
        const buf = concat(frames);
        const ends: number[] = [];
        let o = 0;
        for (const f of frames) ends.push((o += f.length));
        const s = newScanner();
        const seen: number[] = [];
        let base = 0;
        for (const part of split(buf, cuts)) {
          let at = 0;
          while (at < part.length) {
            const next = nextBoundary(s, part, at);
            if (atMessageBoundary(s)) seen.push(base + next);
            at = next;
          }
          base += part.length;
        }
        expect(seen).toEqual(ends);
        expect(s.messages).toBe(lens.length);
        expect(completedMessages(s)).toBe(lens.length);
        expect(s.bytes).toBe(buf.length);
      }),
    );
  });

  it("does not count a message whose body has not fully arrived as completed", () => {
    const s = newScanner();
    const m = frameMessage(new Uint8Array(10));
    nextBoundary(s, m.subarray(0, 7), 0);
    expect(s.messages).toBe(1);
    expect(completedMessages(s)).toBe(0);
  });
});

describe("the prefix, read and written in one place (writePrefix, prefixFlag, messageLength, prefixAcross)", () => {
  // SPEC Length-Prefixed-Message: flag byte, then the length as uint32 big-endian
  it.each([
    [0, 0, [0, 0, 0, 0, 0]],
    [1, 5, [1, 0, 0, 0, 5]],
    [0x80, 0x0102_0304, [0x80, 1, 2, 3, 4]],
    [0, 0xffff_ffff, [0, 255, 255, 255, 255]],
    [2, 0x8000_0000, [2, 128, 0, 0, 0]],
  ])("flag %i, length %i is the bytes %j, and reads back (no sign flip at 2^31)", (flag, length, bytes) => {
    const b = new Uint8Array(7).fill(9);
    writePrefix(b, 1, flag, length);
    expect([...b]).toEqual([9, ...bytes, 9]);
    expect(prefixFlag(b, 1)).toBe(flag);
    expect(messageLength(b, 1)).toBe(length);
  });

  it("prefixAcross reads a prefix split over chunks anywhere, and nothing from fewer than 5 bytes", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 255 }), fc.integer({ min: 0, max: 0xffff_ffff }), fc.array(fc.nat(8), { maxLength: 6 }), (flag, length, cuts) => {
        const b = new Uint8Array(8);
        writePrefix(b, 0, flag, length);
        const out = { flag: -1, length: -1 };
        expect(prefixAcross(split(b, cuts), out)).toBe(true);
        expect(out).toEqual({ flag, length });
        const short = { flag: -1, length: -1 };
        expect(prefixAcross(split(b.subarray(0, 4), cuts), short)).toBe(false);
        expect(short).toEqual({ flag: -1, length: -1 });
      }),
    );
  });

  it("frameMessage writes the same prefix", () => {
    expect([...frameMessage(new Uint8Array([7, 8]), 1)]).toEqual([1, 0, 0, 0, 2, 7, 8]);
  });
});
