// The primary's wait for its workers at shutdown (src/proxy/workers.ts allWorkersDead): node's
// cluster lists a worker until it has both exited and disconnected, and its 'exit' may come
// before its 'disconnect', so "every listed worker is dead" is the test, not "none is listed".
import { describe, expect, it } from "vitest";
import { allWorkersDead } from "../../src/proxy/workers.js";

const worker = (dead: boolean) => ({ isDead: () => dead });

describe("allWorkersDead", () => {
  it("is true at the last worker's 'exit' while node still lists it (its 'disconnect' not yet in)", () => {
    expect(allWorkersDead([worker(true)])).toBe(true);
    expect(allWorkersDead([worker(true), worker(true)])).toBe(true);
  });

  it("is false while any listed worker still runs, whichever place it has", () => {
    expect(allWorkersDead([worker(false)])).toBe(false);
    expect(allWorkersDead([worker(true), worker(false)])).toBe(false);
    expect(allWorkersDead([worker(false), worker(true)])).toBe(false);
  });

  it("is true with no worker listed, and skips the holes node's object may have", () => {
    expect(allWorkersDead([])).toBe(true);
    expect(allWorkersDead([undefined, worker(true)])).toBe(true);
    expect(allWorkersDead([undefined, worker(false)])).toBe(false);
  });
});
