// The calls in flight on one listener (CallContext.active): what a drain, a connection's age grace
// and `dojang upgrade` end at their timeout, and what the process's buffered bytes are summed over.
//
// Every call is added at its start and deleted at its end, so this is on every call's path. A
// Set<Call> did it with an OrderedHashSet whose deleted entries are compacted by a new table every
// few calls, and an identity hash for each call: 140 B of the 21.4 KB a unary call allocates at
// one stream (bench/alloc-vs-pipe.mjs). Here each call keeps its index in one array
// (activeSlot), a delete moves the last call into its place, and the array keeps its length:
// nothing is allocated once it has grown to the most calls ever in flight together. A walk gets a
// copy (the forwarded-bytes sum reads it a few times a second).
import type { Outcome } from "../../translate/index.js";
import type { Downstream } from "./downstream.js";

/** A call in flight, as its listener and the process see it (drain, the bytes a connection moved). */
export interface ActiveCall {
  readonly down: Downstream;
  readonly reqScan: { readonly bytes: number };
  readonly respScan: { readonly bytes: number };
  /** dojang's own status for the call (the drain timeout's 14 "shutdown") */
  finish(o: Outcome): void;
  /** its index in its listener's ActiveCalls; -1 when not in it (written by ActiveCalls only) */
  activeSlot: number;
}

/** One listener's calls in flight: add and delete in O(1) without allocating; iterable (a copy: see below). */
export class ActiveCalls implements Iterable<ActiveCall> {
  private readonly calls: (ActiveCall | undefined)[] = [];
  private n = 0;

  get size(): number {
    return this.n;
  }

  /** Adds `c` (not in any ActiveCalls). */
  add(c: ActiveCall): void {
    const i = this.n++;
    c.activeSlot = i;
    if (i === this.calls.length) this.calls.push(c);
    else this.calls[i] = c;
  }

  /** Deletes `c`; a no-op when it is not in. */
  delete(c: ActiveCall): void {
    const i = c.activeSlot;
    if (i < 0 || this.calls[i] !== c) return;
    c.activeSlot = -1;
    const lastAt = --this.n;
    const last = this.calls[lastAt]!;
    this.calls[lastAt] = undefined;
    if (last !== c) {
      this.calls[i] = last;
      last.activeSlot = i;
    }
  }

  /**
   * The calls in flight now, as a new array: a caller that ends calls while it walks them (each
   * end deletes one, and moves another into its place) walks what was in flight when it began.
   */
  [Symbol.iterator](): Iterator<ActiveCall> {
    return (this.calls.slice(0, this.n) as ActiveCall[])[Symbol.iterator]();
  }
}
