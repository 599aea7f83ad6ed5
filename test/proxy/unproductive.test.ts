// The listener's unproductive-bytes guard (listener.ts overUnproductive): the pure decision.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { UNPRODUCTIVE_BASE, UNPRODUCTIVE_PER_STREAM, overUnproductive } from "../../src/proxy/downstream/guards.js";

describe("overUnproductive (one second of one connection)", () => {
  it("allows 1 MiB of frames that are neither requests nor their bodies, plus 16 KiB per new stream and a quarter of what dojang sent", () => {
    expect(overUnproductive(UNPRODUCTIVE_BASE, 0, 0, 0)).toBe(false);
    expect(overUnproductive(UNPRODUCTIVE_BASE + 1, 0, 0, 0)).toBe(true);
    expect(overUnproductive(UNPRODUCTIVE_BASE + UNPRODUCTIVE_PER_STREAM, 0, 1, 0)).toBe(false);
    expect(overUnproductive(UNPRODUCTIVE_BASE + 100, 0, 0, 400)).toBe(false);
    // a 100 MB upload is its own bodies
    expect(overUnproductive(100_000_000, 99_500_000, 1, 0)).toBe(false);
  });

  it("request bodies, new streams and bytes sent never count against a connection", () => {
    fc.assert(
      fc.property(fc.nat(1e9), fc.nat(1e9), fc.nat(1e5), fc.nat(1e9), fc.nat(1e6), (read, req, streams, written, more) => {
        if (overUnproductive(read, req + more, streams, written)) expect(overUnproductive(read, req, streams, written)).toBe(true);
        if (overUnproductive(read, req, streams + 1, written)) expect(overUnproductive(read, req, streams, written)).toBe(true);
        if (overUnproductive(read, req, streams, written + more)) expect(overUnproductive(read, req, streams, written)).toBe(true);
      }),
    );
  });
});
