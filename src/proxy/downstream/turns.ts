// Bounded work per loop turn per client connection: how many new streams one connection may bring
// in one turn of the event loop before it is a flood and its socket is read no more in that turn, and which
// connections are not read while a turn that read a flood is followed by turns that accept new
// connections (held), so that no turn reads more than one flood and a new connection's accept and
// SETTINGS do not wait behind it. The state is each connection's ConnState (connection.ts); the
// listener (listener.ts) calls countTurn() for each stream it takes.
import http2 from "node:http2";
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
 *    emitting 'stream' for every HEADERS in it: 460 to 520 streams per read of a rapid-reset
 *    client (HEADERS + RST_STREAM, ~130 bytes each; measured). Ten clients whose floods arrive together make one
 *    turn of ten such reads, seconds long on a loaded 2-CPU machine.
 * 3. A new connection's SETTINGS are written in the turn that accepted it, so its wait is the
 *    turns before its accept.
 *
 * And one fact of the rapid-reset cut (guards.ts): it cannot end a read early. The cut comes at
 * the 100th reset, but node sends the GOAWAY after nghttp2 has taken the whole read, and nghttp2
 * ignores new streams only once it is sent: measured with a plain node:http2 server and the same
 * cut, 519 streams of each 64 KiB read, 419 of them after the cut. So the work of a flood is per
 * read, and the only bound JS has on it is which sockets are read in a turn.
 *
 * What dojang does, per turn:
 * - A connection's streams are counted in the turn. If they are a flood (RESET_FLOOD_STREAMS in
 *   the turn, the one before the last already reset by the client; or FLOOD_STREAMS), its socket
 *   stops being read for the rest of the turn (libuv stops before its next 64 KiB; what the client
 *   sent waits in the kernel, flow-controlled by TCP) and is read again from the next turn. Every
 *   stream is served as it comes, as before: what is bounded is the reads, not the calls, and a
 *   client's burst of calls under those numbers (a zero-window stall's 200, a client's 100 at
 *   once) is read as before.
 * - If the flooding connection is unproven (see unproven()) and the first in its turn, the turn
 *   is heavy: every other unproven connection is held, not read (libuv drops the read events it
 *   already has for them), and so is every connection accepted while they are.
 * - The held connections are read again after the first later turn that accepts no connection:
 *   the turns after a heavy one are short, and each accepts one connection waiting in the listen
 *   queue (fact 1) and writes its SETTINGS; a turn that accepts none says the queue is empty. At
 *   most HOLD_TURNS_MAX turns. Then the first flood among them makes a heavy turn again. So each
 *   flood is read in a turn of its own, and the connections that waited through it are accepted
 *   before the next.
 * - A hold lasts no longer than that, on purpose: while a connection is held, what its client
 *   sends waits in the kernel, where the reset budget (guards.ts) cannot count it, so a longer hold
 *   lets a paced attacker write more of its flood before its GOAWAY can come. The first form of
 *   this held the others for 32 turns and let them go one per turn: the paced attackers of
 *   test/behaviour/attack-rapid-reset.test.ts (bursts of 50) then wrote 400 to 1,000 streams
 *   before their GOAWAY (that test's bound: under 1,000; 150 to 350 without holds, 150 to 450 now).
 * - A connection cut for abuse (guards.ts cutCalm) is never held: it is read, its streams refused,
 *   until it is destroyed, so that its client reads the GOAWAY before the close (a socket closed
 *   with unread bytes sends a TCP reset, and the client loses what it had not read).
 *
 * Measured (test/process/attack-new-connections.test.ts: 10 connections x 1,000 reset streams
 * written at once, a new connection every 50 ms; a 2-CPU machine at load average 11 to 18):
 * before this, the slowest new connection's SETTINGS after 2.4 to 2.5 s (2.5 to 4.9 s in earlier
 * runs); with it 0.23 to 0.51 s.
 *
 * Known limit: a connection that has had one call answered is proven, so its floods hold no other
 * connection and it is never held (a busy client is not made to wait for a stranger's flood);
 * its own reads are still bounded to one per turn and its resets still cut it (guards.ts). Ten
 * attackers that each make one good call first are read in one turn, as before this.
 *
 * Cost on the hot path: per stream, a comparison and an increment (countTurn); per loop turn in
 * which a stream arrived, one setImmediate shared by all connections (the turn's end). A
 * flooding connection also pays a read stop and start (two epoll_ctl calls), and a heavy turn
 * one pair per held connection.
 */
/**
 * streams in one turn that make a flood when the one before the last was reset by the client
 * already (in the same read): a rapid-reset client's read brings ~500
 */
export const RESET_FLOOD_STREAMS = 64;
/**
 * streams in one turn that make a flood even when none is reset by then: a rapid-reset client's
 * read brings ~500; a zero-window stall's or a client's own burst of calls (100 at once)
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
 * A stream arrived on `c` (counted by countStream): counted in this loop turn. A flood (flood())
 * is read no more in it, and may hold the other connections.
 */
export function countTurn(c: ConnState, stream: ConnStream): void {
  if (c.turn !== turn) {
    c.turn = turn;
    c.turnStreams = 0;
    armClock();
  }
  const n = ++c.turnStreams;
  if (n < RESET_FLOOD_STREAMS - 1) return;
  if (n === RESET_FLOOD_STREAMS - 1) c.lastInTurn = stream;
  else if (n === RESET_FLOOD_STREAMS) {
    // the stream before was reset by the client already, in the same read: a rapid-reset flood
    // (not one dojang refused itself: REFUSED_STREAM, INTERNAL_ERROR, ENHANCE_YOUR_CALM)
    const code = c.lastInTurn!.rstCode;
    c.lastInTurn = undefined;
    if (code !== undefined && code !== NGHTTP2_REFUSED_STREAM && code !== NGHTTP2_INTERNAL_ERROR && code !== NGHTTP2_ENHANCE_YOUR_CALM) flood(c);
  } else if (n === FLOOD_STREAMS) flood(c);
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

/**
 * Unproven: none of its streams has ended but by the client's own premature reset (guards.ts
 * counts them): a new connection, or one that has done nothing but reset streams.
 */
function unproven(c: ConnState): boolean {
  return c.closed === c.premature;
}

/** `c` brought a flood in this turn: its socket is read no more in it (again in the next). */
function overBudget(c: ConnState): void {
  if (c.readStopped) return; // held, or stopped already
  c.stopReading();
  if (c.readStopped) stopped.push(c);
}

/**
 * `c` brings a flood: RESET_FLOOD_STREAMS streams in this turn of which the one before the last
 * was reset already (the client's RST_STREAM came in the same read), or FLOOD_STREAMS streams.
 * If it is unproven and the first in this turn, the turn is heavy: every other unproven connection is
 * held (tick() says until when).
 */
function flood(c: ConnState): void {
  // its own socket: one read per turn from now on, whoever it is
  overBudget(c);
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

/**
 * The check phase of a turn the clock runs in: the connections over their budget in it are read
 * again from the next turn, and so are the held ones once a turn has accepted none; the next
 * turn begins.
 */
function tick(): void {
  clockArmed = false;
  const ended = turn;
  turn++;
  // taken off their lists first: a throw below must not leave them to the next turn
  if (stopped.length > 0) {
    const conns = stopped.splice(0);
    // one held meanwhile stays unread with the others
    for (let i = 0; i < conns.length; i++) if (!conns[i]!.held) conns[i]!.startReading();
  }
  // The held connections are read again after the first turn since the heavy one that accepted
  // no connection (the listen queue is empty: every connection that waited in it through the
  // heavy turn has been accepted, one per turn, and has its SETTINGS), or after HOLD_TURNS_MAX.
  // The first flood among them makes that turn heavy and holds the others again.
  if (held.length > 0 && ended > heavyTurn && (acceptTurn !== ended || ended - heavyTurn >= HOLD_TURNS_MAX)) {
    const conns = held.splice(0);
    for (let i = 0; i < conns.length; i++) {
      conns[i]!.held = false;
      conns[i]!.justReleased = true;
      conns[i]!.startReading();
    }
  }
  // while some are held the clock runs: the turns after a heavy one are what accept
  if (held.length > 0) armClock();
}
