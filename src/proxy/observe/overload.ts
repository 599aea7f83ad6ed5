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

import { PerformanceObserver, constants as perfConstants, type PerformanceObserverEntryList } from "node:perf_hooks";
import v8 from "node:v8";
import { DEFAULT_BUFFERS } from "../../config/memory.js";
import type { GcFn } from "./heap.js";

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
/**
 * Issue 22: a call is *unread* when its client advertised a stream window smaller than one DATA
 * frame (SETTINGS_INITIAL_WINDOW_SIZE; the zero-window attack sets 0) and its first write has
 * not drained: nothing can reach that client until it sends a WINDOW_UPDATE for the stream. Such
 * a call is counted as what it may hold, UNREAD_CALL_BYTES (one queued frame and the 64 KiB
 * upstream window, node:http2's stream state on both legs aside), and is cut at once, without
 * the idle rule's 200 ms, past the unread budgets: the idle rule lets every stream fill its
 * window before the first sweep, which is what 1,000 such calls cost (+50 to +79 MiB).
 */
export const UNREAD_WINDOW_BELOW = 16 * 1024;
export const UNREAD_CALL_BYTES = 80 * 1024;
/**
 * Unread bytes one client connection may hold (12 calls), and all of them in the process (51
 * calls); past the process's, the connection with the most unread calls loses one.
 */
export const DEFAULT_UNREAD_BUDGETS: BufferBudgets = { perConnectionBytes: 1024 * 1024, processBytes: 4 * 1024 * 1024 };

/** The status message of an unread call cut past its connection's budget (at a head or a first stall). */
function unreadConnectionMessage(perConnectionBytes: number): string {
  return `the client connection's responses wait unread beyond its buffer budget (${perConnectionBytes} bytes at a window under one frame)`;
}

/** The status message of an unread call cut past the process's budget. */
function unreadProcessMessage(processBytes: number): string {
  return `dojang is overloaded: responses wait unread beyond the process's buffer budget (${processBytes} bytes at a window under one frame)`;
}

interface Measured {
  readonly call: StalledCall;
  readonly bytes: number;
  /** stalled for IDLE_MS or more: may be cut */
  readonly idle: boolean;
}

/**
 * After a call is cut for its buffers, one major GC gives the buffers of every call cut meanwhile
 * back (RELEASE_DELAY_MS later, so that a burst of cuts and the streams' closing are over), at most
 * one every RELEASE_GAP_MS. V8 paces the socket reads' external memory by its global limit
 * (src/cli.ts), which lets dead reads wait for a GC that a long stream needs less often: measured
 * on the zero-window attack with the window closed after the streams opened, +24.5 to +32.4 MiB
 * of RSS with the flag and no release, against +18.2 to +20.0 without the flag.
 */
const RELEASE_DELAY_MS = 20;
const RELEASE_GAP_MS = 1000;

export class ResponseBufferGuard {
  budgets: BufferBudgets = DEFAULT_BUFFER_BUDGETS;
  /** the unread calls' budgets (UNREAD_WINDOW_BELOW) */
  unreadBudgets: BufferBudgets = DEFAULT_UNREAD_BUDGETS;
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
  /** unread calls (see UNREAD_WINDOW_BELOW) by client connection, and their number */
  private readonly unread = new Map<object, Set<StalledCall>>();
  private unreadCount = 0;
  /** unread calls cut at once (also in `cuts`) */
  unreadCuts = 0;
  /** major GCs run after cuts (releaseWith) */
  releases = 0;
  private gc: GcFn | undefined = undefined;
  private releaseTimer: NodeJS.Timeout | undefined = undefined;
  private lastReleaseMs = -Infinity;

  /** The CLI and cluster workers hand node's gc() over (a library host owns its heap: none). */
  releaseWith(gc: GcFn | undefined): void {
    this.gc = gc;
  }

  /**
   * The call's client stream refused a write (its upstream is paused now). `mayBeUnread`: its
   * first stall at one queued frame, where a client whose window is under one frame (narrow,
   * from its SETTINGS) tells an unread call.
   */
  stall(c: StalledCall, mayBeUnread = false): void {
    if (this.stalled.has(c)) return;
    this.stalled.set(c, performance.now());
    if (mayBeUnread && this.isNarrow(c)) this.addUnread(c);
    if (this.timer === undefined) {
      this.timer = setInterval(sweepGuard, SWEEP_MS, this);
      this.timer.unref();
    }
  }

  /** The client stream drained, or the call ended. */
  unstall(c: StalledCall): void {
    if (this.stalled.delete(c) && this.unreadCount > 0) this.dropUnread(c);
  }

  get unreadCalls(): number {
    return this.unreadCount;
  }

  /**
   * How many unread calls one client connection's budget covers (at least 1): the streams a
   * connection whose window is under one frame may have open (downstream/guards.ts).
   */
  get unreadCallsPerConnection(): number {
    return Math.max(1, Math.floor(this.unreadBudgets.perConnectionBytes / UNREAD_CALL_BYTES));
  }

  /**
   * Client sessions whose latest SETTINGS advertised a stream window under one frame
   * (UNREAD_WINDOW_BELOW; downstream/guards.ts onClientSettings): each of their calls is unread
   * from its first response frame, its head.
   */
  private readonly narrow = new Set<object>();

  /**
   * Some client's window is under one frame: the gate of unreadAtHead on the call's path (a field,
   * not a getter: one load and one test per response head otherwise).
   */
  narrowClients = false;

  /**
   * A client session's SETTINGS (downstream/guards.ts): its advertised initial stream window.
   * Whether it is narrow (its window under one frame) is decided here only; the connection's
   * stream limit follows the answer.
   */
  noteClientWindow(session: object, initialWindowSize: number | undefined): boolean {
    const narrow = initialWindowSize !== undefined && initialWindowSize < UNREAD_WINDOW_BELOW;
    if (narrow) this.narrow.add(session);
    else this.narrow.delete(session);
    this.narrowClients = this.narrow.size !== 0;
    return narrow;
  }

  private isNarrow(c: StalledCall): boolean {
    const s = c.down.session;
    return s !== undefined && this.narrow.has(s);
  }

  /** A client session closed. */
  forgetSession(session: object): void {
    if (this.narrow.delete(session)) this.narrowClients = this.narrow.size !== 0;
  }

  /**
   * At a response head: a call whose client's window is under one frame is unread from here on,
   * so it is counted now (stall), not at its first write, and cut at once past the unread budgets
   * (returns true: cut, its head not to be sent). Counting at the head, not the first stall, keeps
   * a client that closed its window after opening its streams from making dojang take every
   * call's DATA before the first stall is seen: the attack's calls past the connection's 12 are
   * cut at their heads instead (issue 33 item 0: +18 to +28 MiB before, see the process test).
   * Its caller unstalls the call at its end.
   */
  unreadAtHead(c: StalledCall): boolean {
    if (!this.isNarrow(c)) return false;
    this.stall(c, true);
    return c.done;
  }

  private addUnread(c: StalledCall): void {
    const s = c.down.session;
    if (s === undefined) return;
    let set = this.unread.get(s);
    if (set === undefined) this.unread.set(s, (set = new Set()));
    set.add(c);
    this.unreadCount++;
    const { perConnectionBytes, processBytes } = this.unreadBudgets;
    if (set.size * UNREAD_CALL_BYTES > perConnectionBytes) {
      return this.cut(c, unreadConnectionMessage(perConnectionBytes), true);
    }
    if (this.unreadCount * UNREAD_CALL_BYTES <= processBytes) return;
    // Past the process's share: cut a call of the connection with the most unread calls (this
    // one's own when it ties), never one whose connection holds fewer.
    let most = set;
    for (const other of this.unread.values()) if (other.size > most.size) most = other;
    let victim = c;
    if (most !== set) for (const v of most) victim = v;
    this.cut(victim, unreadProcessMessage(processBytes), true);
  }

  private dropUnread(c: StalledCall): void {
    const s = c.down.session;
    if (s === undefined) return;
    const set = this.unread.get(s);
    if (set === undefined || !set.delete(c)) return;
    this.unreadCount--;
    if (set.size === 0) this.unread.delete(s);
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

  private cut(c: StalledCall, message: string, unread = false): void {
    this.unstall(c);
    if (c.done) return;
    this.cuts++;
    if (unread) this.unreadCuts++;
    c.cutForOverload(message);
    if (this.gc !== undefined && this.releaseTimer === undefined) {
      const t = setTimeout(releaseCut, Math.max(RELEASE_DELAY_MS, this.lastReleaseMs + RELEASE_GAP_MS - performance.now()), this);
      t.unref();
      this.releaseTimer = t;
    }
  }

  /** The major GC after cuts (@internal: the timer's). */
  release(): void {
    this.releaseTimer = undefined;
    this.lastReleaseMs = performance.now();
    this.releases++;
    try {
      this.gc?.({ type: "major", execution: "sync" });
    } catch {
      /* no gc after all: V8's own pacing */
    }
  }
}

function releaseCut(g: ResponseBufferGuard): void {
  g.release();
}

function largestFirst(a: Measured, b: Measured): number {
  return b.bytes - a.bytes;
}

function sweepGuard(g: ResponseBufferGuard): void {
  g.sweep();
}

/** The process's one guard (every listener's calls count against the same process budget). */
export const responseBuffers = new ResponseBufferGuard();

// === heap pressure: refuse new streams before V8 runs out of heap ===
//
// Under a memory budget (memory.limit, or the container's cgroup limit) V8's old space is capped,
// and calls held open cost heap (~5 KiB each, node:http2's stream state and the call): 10,000 of
// them in a 128 MiB plan (42 MiB old space) ended with V8 aborting the process, every call lost.
// The overload manager's second trigger is therefore the heap itself: after each major GC (when
// the heap holds little garbage) dojang compares what is in use with V8's heap limit; past
// HEAP_PRESSED_ABOVE of it, every listener refuses new streams (REFUSED_STREAM, as for the
// response-buffer budget) until a later measure is back under HEAP_RELIEVED_BELOW. While pressed,
// a major GC is asked for every HEAP_RECHECK_MS, so that pressure ends once the calls do even if
// nothing else runs. Nothing runs per call; node reports GCs to the observer in batches.
// The observer is connected only while the heap in use (garbage included) is past
// HEAP_WATCH_ABOVE of the limit, or the process is pressed: under it no measure could press
// (what is live is at most what is in use), and node makes an entry for every GC, scavenges
// included, each with deprecated accessors built by deprecate() (~0.9 KB a JSON call, ~1 % of its
// CPU). A look every HEAP_WATCH_MS (one getHeapStatistics) and the streams' look below connect it.

/** In-use heap over V8's heap limit past which new streams are refused. */
export const HEAP_PRESSED_ABOVE = 0.5;
/** ... and under which they are taken again. */
export const HEAP_RELIEVED_BELOW = 0.4;
const HEAP_RECHECK_MS = 1000;
/**
 * In-use heap (garbage included) over V8's heap limit past which a new stream makes dojang collect
 * and measure at once, instead of waiting for the GC observer's next batch: a burst of new
 * streams can outrun it (the held-calls test beside a CPU hog and the full suite ran V8 out of
 * heap at 40 of ~45 MiB before any measure came). Looked at every HEAP_LOOK_EVERY streams; one
 * forced GC per HEAP_FORCE_GAP_MS at most.
 */
export const HEAP_FORCE_ABOVE = 0.75;
const HEAP_LOOK_EVERY = 64;
const HEAP_FORCE_GAP_MS = 100;
/** In-use heap over the limit under which no major GC is watched (below HEAP_PRESSED_ABOVE: room for the heap to grow between two looks). */
export const HEAP_WATCH_ABOVE = 0.3;
const HEAP_WATCH_MS = 250;

/** Pure: the pressure after a measure of the heap in use (hysteresis between the two thresholds). */
export function nextHeapPressure(pressed: boolean, usedBytes: number, limitBytes: number): boolean {
  if (!(limitBytes > 0)) return false;
  const f = usedBytes / limitBytes;
  return pressed ? f > HEAP_RELIEVED_BELOW : f > HEAP_PRESSED_ABOVE;
}

export class HeapPressureGuard {
  /** new streams are refused */
  pressed = false;
  /** times it went from relieved to pressed */
  episodes = 0;
  /** the heap in use at the last measure, bytes */
  lastUsedBytes = 0;
  private observer: PerformanceObserver | undefined;
  /** the look every HEAP_WATCH_MS; set while the guard is started */
  private watchTimer: NodeJS.Timeout | undefined;
  private timer: NodeJS.Timeout | undefined;
  private gc: GcFn | undefined;
  private streams = 0;
  private lastForcedMs = -Infinity;

  /** Watches major GCs (the CLI and cluster workers; a library host owns its own heap). */
  start(gc: GcFn | undefined): void {
    if (this.watchTimer !== undefined) return;
    this.gc = gc;
    this.watch(v8.getHeapStatistics());
    const t = setInterval(watchHeap, HEAP_WATCH_MS, this);
    t.unref();
    this.watchTimer = t;
  }

  /** Whether a GC observer is connected now (@internal for tests). */
  get watching(): boolean {
    return this.observer !== undefined;
  }

  /** Connects the GC observer while the heap in use is near enough the limit to matter, or the process is pressed; disconnects it otherwise. */
  watch(h: v8.HeapInfo): void {
    const near = this.pressed || h.used_heap_size > h.heap_size_limit * HEAP_WATCH_ABOVE;
    if (near && this.observer === undefined) {
      const obs = new PerformanceObserver(onGcEntries);
      obs.observe({ entryTypes: ["gc"] });
      this.observer = obs;
    } else if (!near && this.observer !== undefined) {
      this.observer.disconnect();
      this.observer = undefined;
    }
  }

  stop(): void {
    clearInterval(this.watchTimer);
    this.watchTimer = undefined;
    this.observer?.disconnect();
    this.observer = undefined;
    clearInterval(this.timer);
    this.timer = undefined;
    this.pressed = false;
  }

  measure(): void {
    const h = v8.getHeapStatistics();
    this.lastUsedBytes = h.used_heap_size;
    const was = this.pressed;
    this.pressed = nextHeapPressure(was, h.used_heap_size, h.heap_size_limit);
    if (this.pressed && !was) {
      this.episodes++;
      if (this.timer === undefined) {
        this.timer = setInterval(recheckHeap, HEAP_RECHECK_MS, this);
        this.timer.unref();
      }
    } else if (!this.pressed && this.timer !== undefined) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  /**
   * A new stream (or HTTP/1.1 gRPC-Web request) arrives: every HEAP_LOOK_EVERY-th, a look at the
   * heap (one getHeapStatistics); past HEAP_FORCE_ABOVE (75 %) of the limit, a major GC and a measure
   * now. Nothing while pressed (new streams are refused then) or when not started (a library host
   * owns its heap).
   */
  onStream(): void {
    if (this.pressed || this.watchTimer === undefined || ++this.streams % HEAP_LOOK_EVERY !== 0) return;
    const h = v8.getHeapStatistics();
    if (this.observer === undefined) this.watch(h);
    if (!(h.used_heap_size > h.heap_size_limit * HEAP_FORCE_ABOVE)) return;
    const now = performance.now();
    if (now - this.lastForcedMs < HEAP_FORCE_GAP_MS) return;
    this.lastForcedMs = now;
    this.recheck();
  }

  recheck(): void {
    try {
      this.gc?.({ type: "major", execution: "sync" });
    } catch {
      /* no gc: the next GC's measure decides */
    }
    this.measure();
  }
}

function recheckHeap(g: HeapPressureGuard): void {
  g.recheck();
}

function watchHeap(g: HeapPressureGuard): void {
  g.watch(v8.getHeapStatistics());
}

function onGcEntries(list: PerformanceObserverEntryList): void {
  for (const e of list.getEntries()) {
    if (((e as { detail?: { kind?: number } }).detail)?.kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR) {
      heapPressure.measure();
      return;
    }
  }
}

/** The process's heap-pressure guard (listeners read `pressed`). */
export const heapPressure = new HeapPressureGuard();
