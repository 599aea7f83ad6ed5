// The response-buffer budgets (issue 12, "memory follows the slowest reader, not the fastest
// writer") and the overload manager behind them, in the spirit of Envoy's.
//
// A call whose client stops reading ends up with its response bytes in two JS buffers: the
// client stream's writable buffer (what down.write() queued) and the upstream stream's readable
// buffer (node hands every DATA frame to JS, paused or not; it only holds back the WINDOW_UPDATE,
// so the upstream's per-stream window is what a stalled call can hold, and unconsumed bytes also
// hold the shared upstream connection's window). dojang pauses the upstream at the first
// write() that returns false (call.ts); from then on the call is *stalled* and registered here
// until the client stream drains or the call ends. Nothing here runs per chunk: a call enters
// this set only on the slow path (a write() that returned false), and a sweep (one timer, only
// while some call is stalled) measures what each stalled call holds and decides. Only *idle*
// buffers are cut: calls whose client stream has not drained for IDLE_MS (a client that reads,
// however slowly, drains its queue again and again and is never cut; it is flow-controlled).
//
// - per connection: when the stalled calls of one client connection hold more than
//   `perConnectionBytes`, the largest idle ones are cut (8 RESOURCE_EXHAUSTED, decided_by overload, and
//   RST_STREAM ENHANCE_YOUR_CALM, which drops the queued bytes) until it is under budget;
// - per process: when all stalled calls hold more than `processBytes`, dojang is *overloaded*:
//   the listeners refuse new streams with REFUSED_STREAM (safe for any client to retry) and the
//   largest idle stalled buffers, wherever they are, are cut until the total is within the budget;
//   the overload (refusing) ends once the total is under RECOVER_FRACTION of the budget.
//
// Cutting a stalled call also resets its upstream stream, which gives its window back to the
// shared upstream connection (other calls on it were starved while it was held).

import { DEFAULT_BUFFERS } from "../../config/memory.js";

/** What the guard needs of a call (call.ts's Call); structural, so this layer imports no call code. */
export interface StalledCall {
  readonly done: boolean;
  readonly down: { readonly writableLength: number; readonly session?: object | undefined; readonly destroyed: boolean };
  readonly attempt: { readonly up: { readonly readableLength: number } | undefined } | null;
  /** ends the call with 8 RESOURCE_EXHAUSTED (decided_by overload) and resets the client stream */
  cutForOverload(message: string): void;
}

export interface BufferBudgets {
  /** bytes the stalled calls of one client connection may hold */
  readonly perConnectionBytes: number;
  /** bytes all stalled calls of the process may hold */
  readonly processBytes: number;
}

/**
 * The defaults without a memory limit (README "Protections"): 8 MiB per connection, 256 MiB per
 * process. With `memory.limit` (or a cgroup limit) the CLI sets `budgets` from the memory plan
 * (src/config/memory.ts: a quarter of what the process's share leaves after node itself).
 */
export const DEFAULT_BUFFER_BUDGETS: BufferBudgets = DEFAULT_BUFFERS;
/** How often stalled calls are measured while any is stalled. */
export const SWEEP_MS = 100;
/** A stalled call whose client stream has not drained for this long holds an idle buffer (may be cut). */
export const IDLE_MS = 200;
/** An overload ends once the stalled total is back under this fraction of the process budget. */
const RECOVER_FRACTION = 0.75;

interface Measured {
  readonly call: StalledCall;
  readonly bytes: number;
  /** stalled for IDLE_MS or more: may be cut */
  readonly idle: boolean;
}

export class ResponseBufferGuard {
  budgets: BufferBudgets = DEFAULT_BUFFER_BUDGETS;
  /** past the process budget: listeners refuse new streams */
  overloaded = false;
  /** calls cut so far (both budgets), for tests and metrics */
  cuts = 0;
  /** streams refused while overloaded (the listener counts them here too) */
  refused = 0;
  /** the stalled total at the last sweep */
  lastTotal = 0;
  /** stalled call → when it stalled (monotonic ms) */
  private readonly stalled = new Map<StalledCall, number>();
  private timer: NodeJS.Timeout | undefined = undefined;

  /** The call's client stream refused a write (its upstream is paused now). */
  stall(c: StalledCall): void {
    if (this.stalled.has(c)) return;
    this.stalled.set(c, performance.now());
    if (this.timer === undefined) {
      this.timer = setInterval(sweepGuard, SWEEP_MS, this);
      this.timer.unref();
    }
  }

  /** The client stream drained, or the call ended. */
  unstall(c: StalledCall): void {
    this.stalled.delete(c);
  }

  get stalledCalls(): number {
    return this.stalled.size;
  }

  sweep(): void {
    if (this.stalled.size === 0) {
      clearInterval(this.timer);
      this.timer = undefined;
      this.lastTotal = 0;
      this.overloaded = false;
      return;
    }
    const bySession = new Map<object, Measured[]>();
    const all: Measured[] = [];
    let total = 0;
    const idleBefore = performance.now() - IDLE_MS;
    for (const [c, since] of this.stalled) {
      if (c.done || c.down.destroyed) {
        this.unstall(c);
        continue;
      }
      const up = c.attempt?.up;
      const bytes = c.down.writableLength + (up === undefined ? 0 : up.readableLength);
      const m: Measured = { call: c, bytes, idle: since <= idleBefore };
      all.push(m);
      total += bytes;
      const s = c.down.session;
      if (s === undefined) continue;
      let list = bySession.get(s);
      if (list === undefined) bySession.set(s, (list = []));
      list.push(m);
    }
    const { perConnectionBytes, processBytes } = this.budgets;
    // What the stalled calls will hold once each connection is back within its own budget: a
    // connection over it is cut down as soon as its buffers are idle (IDLE_MS), so its excess
    // is one connection's problem, not the process's. Only when the connections *within* their
    // budgets add up to more than the process budget (many connections each holding a little)
    // is dojang overloaded, and everyone's new streams are refused: one client that stops
    // reading never gets the other clients' calls refused.
    let projected = total;
    for (const list of bySession.values()) {
      let held = 0;
      for (const m of list) held += m.bytes;
      if (held <= perConnectionBytes) continue;
      projected -= held - perConnectionBytes;
      list.sort(largestFirst);
      for (const m of list) {
        if (held <= perConnectionBytes) break;
        if (!m.idle) continue;
        held -= m.bytes;
        total -= m.bytes;
        this.cut(m.call, `the client connection's responses wait unread beyond its buffer budget (${perConnectionBytes} bytes)`);
      }
    }
    if (projected > processBytes || (this.overloaded && projected > processBytes * RECOVER_FRACTION)) {
      this.overloaded = true;
      all.sort(largestFirst);
      for (const m of all) {
        if (total <= processBytes) break;
        if (m.call.done || !m.idle) continue;
        total -= m.bytes;
        this.cut(m.call, `dojang is overloaded: responses wait unread beyond the process's buffer budget (${processBytes} bytes)`);
      }
    }
    if (total <= processBytes * RECOVER_FRACTION || projected <= processBytes * RECOVER_FRACTION) this.overloaded = false;
    this.lastTotal = total;
  }

  private cut(c: StalledCall, message: string): void {
    this.unstall(c);
    if (c.done) return;
    this.cuts++;
    c.cutForOverload(message);
  }
}

function largestFirst(a: Measured, b: Measured): number {
  return b.bytes - a.bytes;
}

function sweepGuard(g: ResponseBufferGuard): void {
  g.sweep();
}

/** The process's one guard (every listener's calls count against the same process budget). */
export const responseBuffers = new ResponseBufferGuard();
