// streamIdleTimeout without a timer per call (issue 10 item 12; issue 13: a setTimeout and its
// clearTimeout per call were a Timeout object, a timer-list insert and often a new timer list per
// call at one stream, for a timeout of minutes that almost never fires).
//
// The calls watched with the same period share one timer, which ticks once per period while
// any call is watched. Each tick compares what a call has moved (bytes scanned both ways, and
// whether the response started: counters the hot path keeps anyway) with what the last tick
// saw: unchanged for a whole period, the call is cut; a call's first tick only takes note. So a
// call is cut after between one and two periods without a frame, as with a timer per call that
// re-arms itself.

/** What the idle watch reads and tells (implemented by Call). */
export interface IdleWatched {
  /** what the call has moved so far (only compared, never interpreted) */
  idleMoved(): number;
  /** nothing moved for a whole period: the call ends (it calls unwatchIdle itself) */
  onIdle(): void;
  /** the group's index of this call; -1 when not watched */
  idleSlot: number;
  /** what it had moved at the last tick (-1: not ticked yet) */
  idleSeen: number;
}

/** The calls watched with one period (opaque to them). */
export type IdleGroup = Group;

interface Group {
  readonly ms: number;
  readonly calls: IdleWatched[];
  /** the group's timer is armed (it re-arms itself while calls are watched) */
  armed: boolean;
}

const groups = new Map<number, Group>();

/** Watches `c` with period `ms` (ms > 0, at most setTimeout's limit). */
export function watchIdle(c: IdleWatched, ms: number): Group {
  let g = groups.get(ms);
  if (g === undefined) {
    g = { ms, calls: [], armed: false };
    groups.set(ms, g);
  }
  c.idleSeen = -1;
  c.idleSlot = g.calls.length;
  g.calls.push(c);
  if (!g.armed) arm(g);
  return g;
}

/** Stops watching `c` (no-op when not watched). The group's timer lapses by itself at its next tick. */
export function unwatchIdle(c: IdleWatched, g: Group): void {
  const i = c.idleSlot;
  if (i < 0) return;
  c.idleSlot = -1;
  const calls = g.calls;
  const last = calls.pop()!;
  if (last !== c) {
    calls[i] = last;
    last.idleSlot = i;
  }
}

function arm(g: Group): void {
  g.armed = true;
  // unref: a lapsing tick never holds the process (the calls it watches hold their sockets)
  setTimeout(tick, g.ms, g).unref();
}

function tick(g: Group): void {
  g.armed = false;
  const calls = g.calls;
  let idle: IdleWatched[] | undefined;
  for (let i = 0; i < calls.length; i++) {
    const c = calls[i]!;
    const moved = c.idleMoved();
    if (moved === c.idleSeen) (idle ??= []).push(c);
    else c.idleSeen = moved;
  }
  // (ended after the walk: ending a call takes it out of `calls`)
  if (idle !== undefined) for (const c of idle) c.onIdle();
  if (calls.length > 0) arm(g);
  else if (groups.get(g.ms) === g) groups.delete(g.ms);
}
