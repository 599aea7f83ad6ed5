// Bounded work per loop turn per client connection: how many new streams one connection may have
// served in one turn of the event loop, where the others wait (parked), and which connections are
// not read in the rest of a turn that has read a flood (held), so that no turn reads more than one
// flood and the listening socket and new connections' handshakes get turns of their own. The state
// is each connection's ConnState (connection.ts); the listener (listener.ts) asks withinTurn() for
// each stream it takes and parks what is over.
import type { IncomingHttpHeaders } from "node:http2";
import http2 from "node:http2";
import { ignoreError } from "./guards.js";
import type { ConnState, ConnStream } from "./connection.js";

/*
 * Why (issue 32 item 4: a new connection timed out before dojang's SETTINGS while ten others sent
 * rapid resets). Three facts of node, measured on Node 24:
 *
 * 1. libuv accepts ONE connection per loop turn (since libuv 1.45, "unix: don't accept()
 *    connections in a loop", libuv PR 3696): while turns are long, connections wait in the
 *    listen queue one turn each.
 * 2. A turn reads every ready socket: 64 KiB per read and up to 32 reads per socket while it has
 *    more (uv__read), and nghttp2 takes each read in one call, node making a stream object and
 *    emitting 'stream' for every HEADERS in it: ~650 streams per read of a rapid-reset client
 *    (HEADERS + RST_STREAM, ~100 bytes each). Ten clients whose floods arrive together make one
 *    turn of ten such reads, seconds long on a loaded 2-CPU machine.
 * 3. A new connection's SETTINGS are written in the turn that accepted it, so its wait is the
 *    turns before its accept.
 *
 * Measured (test/process/attack-new-connections.test.ts: 10 connections x 1,000 reset streams
 * written at once, a new connection every 50 ms; a 2-CPU machine at load average 14 to 30):
 * before this, new connections' SETTINGS after 2.5 to 4.9 s. With the read stop and parking but
 * no holds, no better (3.0 to 3.6 s: the cost is node's own, per stream of each read). With the
 * read stop and holds but every stream served inline, at most 0.36 to 0.78 s (a reset stream
 * served in the read that brought it still makes an upstream call). With all three, at most
 * 0.74 to 0.89 s at load 27 to 33 (an earlier form that served parked streams 16 per turn: 0.22
 * to 0.33 s at load 14, but it delayed a many-stream client's calls by turns).
 *
 * And one fact of the rapid-reset cut (guards.ts): it cannot end a read early. The cut comes at
 * the 100th reset, but node sends the GOAWAY after nghttp2 has taken the whole read, and nghttp2
 * ignores new streams only once it is sent: measured with a plain node:http2 server and the same
 * cut, 519 streams of each 64 KiB read, 419 of them after the cut. So the work of a flood is per
 * read, and the only bound JS has is which sockets are read in a turn.
 *
 * What dojang does, per turn:
 * - A connection gets at most TURN_STREAMS new streams served inline. Past that its socket stops
 *   being read for the rest of the turn (libuv stops before its next 64 KiB; what the client
 *   sent waits in the kernel, flow-controlled by TCP) and its further streams of that read are
 *   parked, in arrival order, until the end of the turn (its check phase). By then nghttp2 has
 *   taken the whole read: a parked stream the client has already reset (a rapid-reset client's
 *   all are: its RST_STREAM came in the same read) is dropped, no call, no upstream stream; the
 *   others are served, in order, nothing refused.
 * - It is read again in the next turn. If its streams are a flood (RESET_FLOOD_STREAMS in the
 *   turn, the one before the last already reset by the client; or FLOOD_STREAMS), it is unproven
 *   (see unproven()) and the first in its turn, the turn is heavy: every other unproven connection
 *   is held, not read in the rest of this turn (libuv drops the read events it already has for
 *   them). At the turn's end they are all read again; the first flood among them makes the next
 *   turn heavy and holds the others again. So each turn reads one flood at most, accepts, and
 *   writes the SETTINGS of the connections it accepted; proven connections are read as always.
 * - A hold lasts the rest of one turn, and no longer, on purpose: while a connection is held, what
 *   its client sends waits in the kernel, where the reset budget (guards.ts) cannot count it, so
 *   a longer hold lets a paced attacker write more of its flood before its GOAWAY can come. An
 *   earlier form held the others for 32 turns and let them go one per turn: paced attackers
 *   (test/behaviour/attack-rapid-reset.test.ts, 50 streams a burst) then wrote 400 to 1,000 streams
 *   before their GOAWAY (the test's bound: under 1,000), against 150 to 350 without holds. Now a
 *   held connection waits one turn per flood read before it, and each of those is cut in its read.
 * - A connection cut for abuse (guards.ts cutCalm) is never held: it is read, its streams refused,
 *   until it is destroyed, so that its client reads the GOAWAY before the close (a socket closed
 *   with unread bytes sends a TCP reset, and the client loses what it had not read).
 *
 * Known limit: a connection that has had one call answered is proven, so its floods hold no other
 * connection and it is never held (a busy client is not made to wait for a stranger's flood);
 * its own reads are still bounded to one per turn and its resets still cut it (guards.ts). Ten
 * attackers that each make one good call first are read in one turn, as before this.
 *
 * Cost on the hot path: per stream, a comparison and an increment (withinTurn); per loop turn in
 * which a stream arrived, one setImmediate shared by all connections (the turn's end). A
 * connection that brings more than TURN_STREAMS streams in one turn also pays a read stop and
 * start (two epoll_ctl calls) and a parked entry per stream past the budget.
 */
export const TURN_STREAMS = 16;
/**
 * streams in one turn that make a flood when the one before the last was reset by the client
 * already (in the same read): a rapid-reset client's read brings up to ~650
 */
export const RESET_FLOOD_STREAMS = 64;
/**
 * streams in one turn that make a flood even when none is reset by then: a rapid-reset client's
 * read brings up to ~650; a zero-window stall's or a client's own burst of calls (100 at once)
 * fewer, and holds no one
 */
export const FLOOD_STREAMS = 256;
/** turns after a heavy one that may accept connections before the held ones are read again */
export const HOLD_TURNS_MAX = 64;

const { NGHTTP2_REFUSED_STREAM, NGHTTP2_INTERNAL_ERROR, NGHTTP2_ENHANCE_YOUR_CALM } = http2.constants;

/** the loop turn: advanced at the end (check phase) of each turn the clock runs in (tick) */
let turn = 0;
let clockArmed = false;

/** Runs the clock this turn: tick() in its check phase (one setImmediate per turn, shared). */
function armClock(): void {
  if (clockArmed) return;
  clockArmed = true;
  setImmediate(tick);
}

/**
 * A stream arrived on `c` (counted by countStream). True: serve it now. False: the connection is
 * over its budget for this turn: the caller parks the stream (or refuses it).
 */
export function withinTurn(c: ConnState, stream: ConnStream): boolean {
  if (c.turn !== turn) {
    c.turn = turn;
    c.turnStreams = 0;
    armClock();
  }
  const n = ++c.turnStreams;
  if (n <= TURN_STREAMS) return true;
  if (n === TURN_STREAMS + 1) overBudget(c);
  else if (n === RESET_FLOOD_STREAMS - 1) c.lastInTurn = stream;
  else if (n === RESET_FLOOD_STREAMS) {
    // the stream before was reset by the client already, in the same read: a rapid-reset flood
    // (not one dojang refused itself: REFUSED_STREAM, INTERNAL_ERROR, ENHANCE_YOUR_CALM)
    const code = c.lastInTurn!.rstCode;
    if (code !== undefined && code !== NGHTTP2_REFUSED_STREAM && code !== NGHTTP2_INTERNAL_ERROR && code !== NGHTTP2_ENHANCE_YOUR_CALM) flood(c);
    c.lastInTurn = undefined;
  } else if (n === FLOOD_STREAMS) flood(c);
  return false;
}

/** Every client connection open now (what a heavy turn may hold). */
const live = new Set<ConnState>();
export function track(c: ConnState): void {
  live.add(c);
  acceptTurn = turn;
  // accepted while the others are held: its SETTINGS go out now, its first read waits with theirs
  // (it may be one more flood)
  if (held.length > 0) hold(c);
}
export function untrack(c: ConnState): void {
  live.delete(c);
}

/** the last heavy turn */
let heavyTurn = -1;
/** the last turn that accepted a connection */
let acceptTurn = -1;
/** connections held in this turn: read again from the next */
const held: ConnState[] = [];
/** connections that went over their budget in this turn: read again at its end unless held */
const stopped: ConnState[] = [];
/** connections with parked streams in this turn */
const parkedConns: ConnState[] = [];

/**
 * Unproven: none of its streams has ended but by the client's own premature reset (guards.ts
 * counts them): a new connection, or one that has done nothing but reset streams.
 */
function unproven(c: ConnState): boolean {
  return c.closed === c.premature;
}

/** `c` brought more than TURN_STREAMS streams in this turn: its socket is read no more in it (again in the next). */
function overBudget(c: ConnState): void {
  if (c.readStopped) return; // held, or stopped already
  c.stopReading();
  if (c.readStopped) stopped.push(c);
}

/**
 * `c` brings a flood: RESET_FLOOD_STREAMS streams in this turn of which the one before the last
 * was reset already (the client's RST_STREAM came in the same read), or FLOOD_STREAMS streams.
 * If it is unproven and the first in this turn, the turn is heavy: every other unproven connection is
 * held for the rest of the turn.
 */
function flood(c: ConnState): void {
  if (heavyTurn === turn || !unproven(c) || c.limit === 0) return;
  heavyTurn = turn;
  for (const o of live) if (o !== c && unproven(o)) hold(o);
}

function hold(c: ConnState): void {
  // held already, or cut (read until it is destroyed: guards.ts cutCalm)
  if (c.held || c.limit === 0) return;
  c.stopReading();
  if (!c.readStopped) return; // no handle, or gone
  c.held = true;
  held.push(c);
  armClock();
}

/** Parks a stream over its connection's budget: served at the end of this turn, in arrival order. */
export function park(c: ConnState, stream: ConnStream, headers: IncomingHttpHeaders, flags: number, raw: string[]): void {
  // node reports a reset it sends as the stream's 'error'; one may come while the stream waits
  stream.on("error", ignoreError);
  const q = c.parked;
  if (q === null) {
    c.parked = [stream, headers, flags, raw];
    parkedConns.push(c);
  } else q.push(stream, headers, flags, raw);
}

/**
 * The check phase of a turn the clock runs in: its parked streams are served, the connections
 * over their budget in it and those it held are read again from the next turn, which begins.
 */
function tick(): void {
  clockArmed = false;
  const ended = turn;
  turn++;
  // taken off their lists first: a throw below must not leave them to the next turn
  if (parkedConns.length > 0) {
    const conns = parkedConns.splice(0);
    for (let i = 0; i < conns.length; i++) serveParked(conns[i]!);
  }
  if (stopped.length > 0) {
    const conns = stopped.splice(0);
    for (let i = 0; i < conns.length; i++) conns[i]!.startReading();
  }
  // The held connections are read again after the first turn since the heavy one that accepted
  // no connection (the listen queue is empty: every connection that waited in it through the
  // heavy turn has been accepted, one per turn, and has its SETTINGS), or after HOLD_TURNS_MAX.
  // The first flood among them makes that turn heavy and holds the others again.
  if (held.length > 0 && ended > heavyTurn && (acceptTurn !== ended || ended - heavyTurn >= HOLD_TURNS_MAX)) {
    const conns = held.splice(0);
    for (let i = 0; i < conns.length; i++) {
      conns[i]!.held = false;
      conns[i]!.startReading();
    }
  }
  // while some are held the clock runs: the turns after a heavy one are what accept
  if (held.length > 0) armClock();
}

/** A connection's parked streams served, but those reset (or cut) while they waited. */
function serveParked(c: ConnState): void {
  const q = c.parked;
  if (q === null) return;
  c.parked = null;
  for (let i = 0; i < q.length; i += 4) {
    const stream = q[i] as ConnStream;
    // reset (or its connection gone) while it waited: nothing to serve, no call made
    if (stream.destroyed || stream.closed) continue;
    try {
      // the connection was cut (or is closing) while the stream waited: refused, never processed
      // (safe to retry)
      if (c.limit === 0 || c.session.destroyed || c.session.closed) stream.close(NGHTTP2_REFUSED_STREAM);
      else c.server.serveStream(stream, q[i + 1] as IncomingHttpHeaders, q[i + 2] as number, q[i + 3] as string[]);
    } catch {
      // whatever a stream's serving throws ends that stream, not the turn's other work
      stream.destroy();
    }
  }
}
