// One client connection's state, in one object in one slot of its node session (kConn), and the
// stream's link back to it. Everything the listener and its guards (guards.ts) keep per
// connection is a field here: made once per connection, in one shape, nothing per call.
// Add a per-connection fact as a field of ConnState (initialised in the class body, so every
// connection has the same shape), not as a new symbol slot on the session.
//
// Still on the session and not here: kClientCert and kRequestBytes (src/proxy/call/headers.ts),
// which the call writes and reads itself.
import type { ServerHttp2Session, ServerHttp2Stream } from "node:http2";

export const kConn = Symbol("dojang.conn");
/** when a stream opened (monotonic ms): a reset within PREMATURE_RESET_MS of it is premature */
export const kOpenedAt = Symbol("dojang.openedAt");

/** The socket's handle under node's session proxy (TCP, or TLS over TCP): what nghttp2 reads from. */
export interface ReadHandle {
  readStop(): number;
  readStart(): number;
}

export class ConnState {
  /** streams open now (counted when they arrive, refused ones included, until they close) */
  open = 0;
  /** rapid reset: streams the connection has closed, and how many of them its client reset prematurely */
  closed = 0;
  premature = 0;
  /** monotonic ms when the last open stream closed (or the connection opened); kept only with idleTimeout */
  idleSince: number | undefined = undefined;
  /** requestHeadersTimeout's timer, until the connection's first request (or its close) */
  headersTimer: NodeJS.Timeout | undefined = undefined;
  /** the lifetime's timers (maxConnectionAge, its grace, idleTimeout); all cleared on close */
  ageTimer: NodeJS.Timeout | undefined = undefined;
  graceTimer: NodeJS.Timeout | undefined = undefined;
  idleTimer: NodeJS.Timeout | undefined = undefined;
  /**
   * How many streams a client whose stream window is under one frame may have open at once (the
   * unread budget's calls, guards.ts onClientSettings); Infinity for every other client.
   */
  narrowLimit = Infinity;
  /** the PROTO probe (guards.ts): one at a time per connection */
  probing = false;
  /** the unproductive-bytes meter (guards.ts): the counters at the last sweep; metered = a first sweep ran */
  metered = false;
  meterRead = 0;
  meterWritten = 0;
  meterRequested = 0;
  meterOpened = 0;
  /** bounded work per turn (turns.ts): the loop turn its streams were last counted in, and how many came in it */
  turn = -1;
  turnStreams = 0;
  /** the turn's stream before RESET_FLOOD_STREAMS-th, until that arrives (turns.ts: was it reset already?) */
  lastInTurn: ServerHttp2Stream | undefined = undefined;
  /** its socket is not being read (a flood in this turn, or held; turns.ts) */
  readStopped = false;
  /** held after a flood (turns.ts); justReleased: let go since, not yet looked at by the headers timeout (lifetime.ts) */
  held = false;
  justReleased = false;
  /** the socket's handle, read once (undefined if node gave the session none) */
  readonly handle: ReadHandle | undefined;

  constructor(
    readonly session: ServerHttp2Session,
    /** the maxConcurrentStreams the connection was made under (a reload changes it for later ones); 0 = cut, every new stream refused */
    public limit: number,
  ) {
    this.handle = (session.socket as unknown as { _handle?: ReadHandle } | undefined)?._handle ?? undefined;
  }

  /**
   * Its socket stops being read (libuv's uv_read_stop: what the client sends waits in the kernel,
   * flow-controlled by TCP). The session's socket is node's proxy, which refuses pause(); the
   * handle under it is the stream nghttp2 reads from, and reads resume with readStart().
   */
  stopReading(): void {
    if (this.readStopped || this.handle === undefined || this.session.destroyed) return;
    this.readStopped = true;
    this.handle.readStop();
  }

  startReading(): void {
    if (!this.readStopped) return;
    this.readStopped = false;
    if (this.handle === undefined || this.session.destroyed) return;
    try {
      this.handle.readStart();
    } catch {
      /* the handle closed under the session: nothing left to read */
    }
  }

  /** Clears every timer of the connection (on its close). */
  clearTimers(): void {
    clearTimeout(this.headersTimer);
    clearTimeout(this.ageTimer);
    clearTimeout(this.graceTimer);
    clearTimeout(this.idleTimer);
    this.headersTimer = this.ageTimer = this.graceTimer = this.idleTimer = undefined;
  }
}

export type ConnSession = ServerHttp2Session & { [kConn]?: ConnState };
export type ConnStream = ServerHttp2Stream & { [kConn]?: ConnState; [kOpenedAt]?: number };

/** The state of a client connection the listener took (undefined for a session it never saw). */
export function connOf(s: ServerHttp2Session): ConnState | undefined {
  return (s as ConnSession)[kConn];
}

/** setTimeout's limit (2^31−1 ms). */
export function clampTimer(ms: number): number {
  return ms > 2_147_483_647 ? 2_147_483_647 : ms;
}
