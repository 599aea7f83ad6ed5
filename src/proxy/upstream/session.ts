// One HTTP/2 client session to one endpoint: a tagged state machine (connecting → ready →
// draining → closed). A stream's close cannot tell a real RST_STREAM from a lost connection
// (node reports both as a stream close, the latter with a synthetic rstCode 8; spec §10.2 P3),
// so an attempt keeps the session it rode on and reads `lost` and `goawayLastStreamId` here.
// Must not import src/proxy/call (the waiter interface lives here, attempts implement it), nor
// endpoint.ts or cluster.ts, even for types: what it needs from above is SessionOwner.
import http2, { type ClientHttp2Session } from "node:http2";
import type { ClusterConfig } from "../../config/index.js";
import { httpsUrl, isVerificationError, upstreamTlsOptions } from "./tls.js";

/**
 * The one slot on an upstream stream that names what drives it: a proxied call's Attempt
 * (call/attempt.ts) or a side call's UnaryCall (unary.ts, which OTLP/gRPC's exports also ride).
 * One symbol for both, so that every ClientHttp2Stream dojang opens takes the same hidden class:
 * node's stream code runs on every call's streams, and with a second shape of stream (a side
 * call's, an export's) its inline caches went from polymorphic to megamorphic in every process
 * that made one (docs/contributing/benchmarks.md, Performance 4, ninth stop).
 */
export const kStreamOwner = Symbol("dojang.streamOwner");

export type SessionState = "connecting" | "ready" | "draining" | "closed";

/** Resets dojang may send on one upstream connection before it retires it (UpstreamSession.noteReset). */
export const RESET_RETIRE_MIN = 200;

/**
 * The adaptive stream window (issue 33 item 0; docs/concepts/node-http2.md, "Windows"). A stream
 * opens at the cluster's initialWindowSize (64 KiB by default: what a call whose client does not
 * read may cost, the unread budget's figure). node:http2 has no per-stream window (probe W5):
 * only SETTINGS_INITIAL_WINDOW_SIZE, which moves every stream of the session by the same delta
 * (W3). So a session grows its window (it doubles each time a window's worth was read, as
 * Envoy keeps large windows for a stream that is read), only while none of its streams is
 * paused (every client reads), and lowers it again before anything could make that untrue: a stream paused (its
 * client stopped reading; it holds at most the grown window, once), a new stream opened on it
 * (SETTINGS go out before the stream's HEADERS, so the new stream starts small: W4), the last
 * stream gone. What a grown session's streams may hold is bounded per stream, per session and
 * per process (below).
 */
/** the most a stream's window grows to (grpc-go's BDP estimator stops at 16 MiB; 1 MiB ran at 735-909 MiB/s) */
export const GROWN_WINDOW_MAX = 4 * 1024 * 1024;
/** what the grown windows of one session's streams add up to at most (the cluster's default connection window) */
export const GROWN_SESSION_BUDGET = 16 * 1024 * 1024;
/** what the grown windows of every session of the process add up to at most (the zero-window attacks' RSS bound) */
export const GROWN_PROCESS_BUDGET = 32 * 1024 * 1024;
/** how often a session with streams looks at what it read and whether a stream stays paused */
const SAMPLE_MS = 20;
/** rxLeft while no growth is wanted: a count the data path never brings to 0 between two resets (an SMI) */
const RX_FAR = 0x3fffffff;
/** Σ window × streams over the grown sessions of the process (GROWN_PROCESS_BUDGET) */
let grownTotal = 0;
/** @internal for tests: the process's grown windows, summed */
export function grownWindowBytes(): number {
  return grownTotal;
}

/**
 * An attempt waiting for a stream slot: among a connecting session's waiters (for its first
 * SETTINGS), or in its endpoint's queue (every session at its limit). Counted in the cluster's
 * breaker.pendingAttempts (maxPendingCalls) while it waits.
 */
export interface SlotWaiter {
  /** a slot on `s`: open the stream now (s ready), or wait among its waiters (s connecting) */
  onSlot(s: UpstreamSession): void;
  /** the session it waited for failed before it was ready (refused, timeout, closed, GOAWAY) */
  onSessionFailed(s: UpstreamSession): void;
  /** no slot will come (its endpoint left the cluster): `why` names it */
  onSlotFailed(why: string): void;
  /** it gave up (cancelled): not to be queued again */
  readonly abandoned: boolean;
  /** the endpoint queue's links (endpoint.ts owns them) */
  qPrev: SlotWaiter | undefined;
  qNext: SlotWaiter | undefined;
}

/**
 * What a session needs from above (implemented by Endpoint, which hands the cluster's part on):
 * where to connect, the endpoint's queue of attempts waiting for a stream slot, and what the
 * session reports (connect result, opened and closed, the upstream's too_many_pings, a keepalive
 * PING not answered).
 */
export interface SessionOwner {
  /** `host:port` (IPv6 in brackets), for messages */
  readonly label: string;
  readonly host: string;
  /** `http://host:port` (a TLS cluster's session connects to its https: form, tls.ts) */
  readonly url: string;
  /** attempts waiting in the owner's queue for a stream slot */
  readonly queued: number;
  /** the keepalive PING interval now (the cluster's, doubled on each too_many_pings) */
  readonly keepaliveIntervalMs: number;
  /** gives queued attempts what can be had now (a stream slot freed, a session ready or gone) */
  dispatch(): void;
  /** the waiters `ws[from..]` the session had no slot for: first in the owner's queue again */
  requeueFront(ws: readonly SlotWaiter[], from: number): void;
  /** takes `s` out of rotation (it may still carry streams) */
  remove(s: UpstreamSession): void;
  /** attempts that wait among a session's waiters count as pending (maxPendingCalls), as the breaker's waiting/doneWaiting */
  waiting(n: number): void;
  doneWaiting(n: number): void;
  onConnectResult(s: UpstreamSession, result: "ok" | "error" | "timeout"): void;
  onSessionOpened(s: UpstreamSession): void;
  onSessionClosed(s: UpstreamSession): void;
  /** GOAWAY ENHANCE_YOUR_CALM "too_many_pings" */
  onTooManyPings(s: UpstreamSession): void;
  /** a keepalive PING was not answered in time (the session is dropped) */
  onKeepaliveTimeout(s: UpstreamSession): void;
}

export class UpstreamSession {
  state: SessionState = "connecting";
  /** streams currently open on this session (never above `limit`: the endpoint holds the rest) */
  active = 0;
  /** streams opened on this session, and how many of them dojang reset (RST_STREAM CANCEL) */
  opened = 0;
  resetsSent = 0;
  /** attempts waiting for the peer's SETTINGS before they open a stream here (at most `limit`) */
  waiting: SlotWaiter[] = [];
  /** min(maxConcurrentStreamsPerSession, the peer's SETTINGS_MAX_CONCURRENT_STREAMS) */
  limit: number;
  /** the TCP+h2 handshake completed at least once */
  connected = false;
  /** the session went away (error, close or GOAWAY) while streams may still be open */
  lost = false;
  /** last-stream-id of a received GOAWAY; streams above it were not processed */
  goawayLastStreamId = -1;
  /** why it failed, for messages and logs */
  failure: string | undefined = undefined;
  readonly h2: ClientHttp2Session;
  private connectTimer: NodeJS.Timeout | undefined;
  /** keepalive: the next PING (interval), or the wait for its ACK (timeout) */
  private keepaliveTimer: NodeJS.Timeout | undefined;
  private readonly keepalive: ClusterConfig["keepalive"];
  /** the stream window the session advertises now (SETTINGS_INITIAL_WINDOW_SIZE), and the cluster's */
  window: number;
  readonly baseWindow: number;
  /**
   * Streams on this session whose reading dojang paused (their client is behind), counted by
   * when: since this sampler tick (`pausedNow`), or since an earlier one (`pausedOld`: paused
   * for a whole tick or more, a client that stopped reading). A stream that reads fast pauses
   * too, for a moment (node's write queue fills faster than the socket drains it, and the next
   * 'drain' resumes it): those pauses are not a stall.
   */
  pausedNow = 0;
  pausedOld = 0;
  /** the sampler's tick count (a paused stream remembers the tick it paused in) */
  epoch = 0;
  /** what this session's growth counts in grownTotal */
  private grownBytes = 0;
  /** SETTINGS sent and not yet ACKed (node allows 10) */
  private settingsPending = 0;
  /** the sampler: its timer, the socket's bytesRead at its last tick */
  private sampleTimer: NodeJS.Timeout | undefined = undefined;
  private lastRead = 0;
  /** streams handed out here (admit), and that count at the last tick: a session that takes new streams does not grow */
  private opens = 0;
  private opensAtTick = 0;
  /** the session took no new stream during the sampler's last whole tick */
  private quiet = false;
  /**
   * DATA bytes still to come in on this session's streams before the window may grow again: the
   * attempts' data handler counts each chunk off and calls onRx at 0. RX_FAR while no growth is
   * wanted. Per chunk: a subtraction and a compare.
   */
  rxLeft = RX_FAR;

  constructor(
    readonly endpoint: SessionOwner,
    cfg: ClusterConfig,
  ) {
    this.keepalive = cfg.keepalive;
    this.limit = cfg.maxConcurrentStreamsPerSession;
    this.window = this.baseWindow = cfg.initialWindowSize;
    const options: http2.SecureClientSessionOptions = {
      settings: { enablePush: false, initialWindowSize: cfg.initialWindowSize },
      // The upstream is trusted to send large header blocks (metadata) back.
      maxHeaderListPairs: 4000,
      maxSessionMemory: 64,
    };
    // clusters[].tls (src/proxy/upstream/tls.ts): an https: URL (ALPN h2), the CA, SNI and client
    // certificate; verification always on
    const h2 = cfg.tls === null ? http2.connect(endpoint.url, options) : http2.connect(httpsUrl(endpoint.url), { ...options, ...upstreamTlsOptions(cfg.tls, cfg.name) });
    this.h2 = h2;
    const self = this;
    this.connectTimer = setTimeout(() => {
      if (self.state === "connecting") {
        self.failure = `connect timeout after ${cfg.connectTimeoutMs}ms to ${endpoint.label}`;
        self.endpoint.onConnectResult(self, "timeout");
        h2.destroy();
      }
    }, cfg.connectTimeoutMs);
    h2.once("connect", () => {
      // A bigger connection window than the 64 KiB default lets one session carry many
      // streaming calls at full speed; the per-stream window comes from SETTINGS above.
      try {
        h2.setLocalWindowSize(cfg.connectionWindowSize);
      } catch {
        /* session already closing */
      }
    });
    // 'connect' fires once TCP is up; the peer has spoken HTTP/2 only when its SETTINGS
    // arrive. A TCP listener that never answers the preface is a connect timeout, not a hang.
    h2.on("remoteSettings", (s) => {
      const peer = s.maxConcurrentStreams;
      if (typeof peer === "number" && peer > 0) self.limit = Math.min(cfg.maxConcurrentStreamsPerSession, peer);
      if (!self.connected) {
        self.clearConnectTimer();
        self.connected = true;
        if (self.state === "connecting") self.state = "ready";
        self.endpoint.onConnectResult(self, "ok");
        if (cfg.keepalive !== null) self.scheduleKeepalive();
        self.serveWaiters();
      }
      // a first SETTINGS, or a later one that raised the limit: room for attempts queued at the endpoint
      const e = self.endpoint;
      if (e.queued !== 0 && self.state === "ready") e.dispatch();
    });
    h2.on("goaway", (code: number, lastStreamId: number, debug?: Buffer) => {
      self.goawayLastStreamId = lastStreamId;
      // grpc-go and grpc-js servers say our PINGs come too often this way; as grpc-go's client
      // does, the cluster doubles its keepalive interval.
      if (code === http2.constants.NGHTTP2_ENHANCE_YOUR_CALM && debug !== undefined && debug.toString("latin1") === "too_many_pings") {
        self.endpoint.onTooManyPings(self);
      }
      self.retire();
    });
    h2.on("error", (err: NodeJS.ErrnoException) => self.onError(err));
    h2.on("close", () => self.onClose());
    if (cfg.tls !== null) {
      // A TLS error after node's 'connect' (TLS 1.3: an upstream that requires a client
      // certificate refuses it only after the client finished its handshake) destroys the
      // session without its 'error' or 'close' (probed on Node 24): the socket's own error is
      // taken as both, or the session would stay "connecting" and its calls wait for their deadline.
      h2.socket.once("error", (err: NodeJS.ErrnoException) => {
        self.onError(err);
        self.onClose();
      });
    }
    endpoint.onSessionOpened(this);
    // Frames that nghttp2 refused to send (oversize headers) surface here; the stream's own
    // 'close' carries the outcome.
    h2.on("frameError", () => {});
  }

  /**
   * The peer's first SETTINGS: as many waiters as the limit allows open their streams, in order;
   * the others (the peer allows fewer streams than were waiting) go back first in line to the
   * endpoint, which may open another session for them. A session that left rotation before it
   * was ready (GOAWAY, its endpoint retired) takes none: its waiters fail.
   */
  private serveWaiters(): void {
    const w = this.waiting;
    if (w.length === 0) return;
    if (this.state !== "ready") {
      this.failure ??= `upstream session to ${this.endpoint.label} went away before it was ready`;
      return this.failWaiters();
    }
    this.waiting = [];
    this.endpoint.doneWaiting(w.length);
    this.admit();
    let i = 0;
    for (; i < w.length && this.active < this.limit && this.state === "ready"; i++) w[i]!.onSlot(this);
    if (i < w.length) this.endpoint.requeueFront(w, i);
  }

  private onError(err: NodeJS.ErrnoException): void {
    if (this.state === "closed") return;
    if (this.failure === undefined) this.failure = describeConnectError(err, this.endpoint);
    if (!this.connected && this.state === "connecting") this.endpoint.onConnectResult(this, "error");
    this.lost = true;
    this.retire();
    this.failWaiters();
  }

  private onClose(): void {
    if (this.state === "closed") return;
    this.clearConnectTimer();
    this.clearKeepalive();
    this.stopSampling();
    this.releaseGrowth();
    this.lost = true;
    this.state = "closed";
    this.endpoint.onSessionClosed(this);
    this.failWaiters();
  }

  private clearConnectTimer(): void {
    if (this.connectTimer !== undefined) {
      clearTimeout(this.connectTimer);
      this.connectTimer = undefined;
    }
  }

  private clearKeepalive(): void {
    if (this.keepaliveTimer !== undefined) {
      clearTimeout(this.keepaliveTimer);
      this.keepaliveTimer = undefined;
    }
  }

  /**
   * Upstream keepalive: a PING every interval (the cluster's, which too_many_pings may have
   * doubled) while the session is open, whether or not streams are on it; one not ACKed within
   * `timeout` drops the session (destroyed: calls on it see the connection lost).
   */
  private scheduleKeepalive(): void {
    this.clearKeepalive();
    if (this.state === "closed") return;
    const t = setTimeout(sendKeepalivePing, this.endpoint.keepaliveIntervalMs, this);
    t.unref();
    this.keepaliveTimer = t;
  }

  /** @internal the keepalive timer's callback */
  ping(): void {
    this.keepaliveTimer = undefined;
    const h2 = this.h2;
    if (this.state === "closed" || h2.destroyed || h2.closed) return;
    const ka = this.keepalive!;
    const self = this;
    const sent = h2.ping((err) => {
      if (err !== null || self.state === "closed") return;
      self.scheduleKeepalive();
    });
    if (!sent) return;
    const t = setTimeout(keepaliveTimedOut, ka.timeoutMs, this, ka.timeoutMs);
    t.unref();
    this.keepaliveTimer = t;
  }

  /** @internal no PING ACK within keepalive.timeout */
  keepaliveTimeout(ms: number): void {
    this.keepaliveTimer = undefined;
    if (this.state === "closed") return;
    this.failure = `keepalive PING to ${this.endpoint.label} not answered within ${ms}ms`;
    this.lost = true;
    this.endpoint.onKeepaliveTimeout(this);
    this.retire();
    this.h2.destroy();
  }

  /**
   * dojang reset a stream on this connection (a cancel: the client went away, a deadline, a cut).
   * The upstream may count them against the connection as dojang counts its own clients'
   * (Envoy's premature-reset budget: 500 streams, half of them reset; nghttp2-based servers such as
   * grpc-js: a reset rate limit of 1,000 then ~33 per second) and end it, with every other
   * client's calls on it: this connection carries everyone's calls, and clients' resets (a rapid
   * reset attacker before dojang cuts it, many cancels) must not spend it. So once dojang has
   * reset RESET_RETIRE_MIN streams here and they are a quarter or more of the streams it opened,
   * the connection is retired (no new streams; those on it finish) and a fresh one takes the new
   * calls: well inside both budgets, and a client that cancels now and then never gets there.
   */
  noteReset(): void {
    const n = ++this.resetsSent;
    if (n >= RESET_RETIRE_MIN && 4 * n >= this.opened && this.state !== "draining" && this.state !== "closed") this.retire();
  }

  /**
   * Takes the session out of rotation: it takes no new streams, the streams already on it
   * finish; attempts queued at the endpoint may get a new session in its place.
   */
  retire(): void {
    if (this.state === "connecting" || this.state === "ready") {
      this.state = "draining";
      const e = this.endpoint;
      e.remove(this);
      this.h2.close();
      if (e.queued !== 0) e.dispatch();
    }
  }

  /** `w` waits here for the peer's SETTINGS (the endpoint found room for it among the waiters). */
  addWaiter(w: SlotWaiter): void {
    this.waiting.push(w);
    this.endpoint.waiting(1);
  }

  /** A waiter gave up (its attempt was cancelled): it no longer waits, nor counts as pending. */
  unwait(w: SlotWaiter): void {
    const i = this.waiting.indexOf(w);
    if (i < 0) return;
    this.waiting.splice(i, 1);
    const e = this.endpoint;
    e.doneWaiting(1);
    // its place among the waiters can go to an attempt queued at the endpoint
    if (e.queued !== 0 && this.state === "connecting") e.dispatch();
  }

  private failWaiters(): void {
    const w = this.waiting;
    if (w.length === 0) return;
    this.waiting = [];
    this.endpoint.doneWaiting(w.length);
    for (let i = 0; i < w.length; i++) w[i]!.onSessionFailed(this);
  }

  /** A stream on this session closed: its slot goes to the first attempt queued at the endpoint, if any. */
  streamClosed(): void {
    // the last stream gone: a grown window goes back now, so the next stream needs no SETTINGS of its own
    if (--this.active === 0 && this.window !== this.baseWindow) this.shrinkWindow();
    const e = this.endpoint;
    if (e.queued !== 0 && this.state === "ready") e.dispatch();
  }

  // === the adaptive stream window (GROWN_WINDOW_MAX above) ===

  /**
   * The endpoint hands this ready session to a new stream (Endpoint.slot, dispatch): a grown
   * window goes back to the cluster's first (its SETTINGS precede the stream's HEADERS on the
   * wire, probe W4), and the sampler runs while the session has streams. Per call: three compares.
   */
  admit(): void {
    this.opens++;
    if (this.window !== this.baseWindow) this.shrinkWindow();
    // A stream alone on its session grows once its first window's worth came in, not a sampler
    // tick or two later: a long stream grows from its start (issue 33 item 0). A small call never
    // takes in that much, so a unary load sends no SETTINGS for it.
    if (this.active === 0) this.rxLeft = this.baseWindow;
    if (this.sampleTimer === undefined) this.startSampling();
  }

  /**
   * The attempts' data handler counted rxLeft down to 0: a window's worth came in, and the window
   * may grow now. The stream that counted it is reading; so it may when it is the session's only
   * stream, or when the session took no new stream for a whole tick and none of its streams is
   * paused now (the sampler's rule: a stream opened since has had its first DATA, and one whose
   * client does not read has shown it by a pause). Else the sampler's next quiet tick decides.
   */
  onRx(): void {
    this.rxLeft = RX_FAR;
    if (this.active !== 1 && !(this.quiet && this.opens === this.opensAtTick)) return;
    if (this.pausedNow + this.pausedOld === 0) this.grow();
    // a reader's stream pauses for a moment while its client's queue drains: look again after a window
    else this.rxLeft = this.window;
  }

  /** An attempt paused its stream (its client is behind); returns the tick it paused in, for streamResumed. */
  streamPaused(): number {
    this.pausedNow++;
    return this.epoch;
  }

  /** An attempt's stream, paused in tick `at`, reads again, or closed while paused. */
  streamResumed(at: number): void {
    if (at === this.epoch) this.pausedNow--;
    else this.pausedOld--;
  }

  private sendWindow(w: number, then: ((this: void) => void) | undefined): boolean {
    const h2 = this.h2;
    if (h2.destroyed || h2.closed || this.settingsPending >= 8) return false;
    const self = this;
    this.settingsPending++;
    try {
      h2.settings({ initialWindowSize: w }, () => {
        self.settingsPending--;
        if (then !== undefined) then();
      });
    } catch {
      this.settingsPending--;
      return false;
    }
    this.window = w;
    return true;
  }

  private shrinkWindow(): void {
    this.sendWindow(this.baseWindow, undefined);
    this.releaseGrowth();
  }

  private releaseGrowth(): void {
    grownTotal -= this.grownBytes;
    this.grownBytes = 0;
  }

  private startSampling(): void {
    if (this.state !== "ready" || this.baseWindow >= GROWN_WINDOW_MAX) return;
    this.lastRead = this.bytesRead();
    const t = setTimeout(sampleTick, SAMPLE_MS, this);
    t.unref();
    this.sampleTimer = t;
  }

  private stopSampling(): void {
    if (this.sampleTimer !== undefined) {
      clearTimeout(this.sampleTimer);
      this.sampleTimer = undefined;
    }
  }

  private bytesRead(): number {
    return this.h2.socket?.bytesRead ?? 0;
  }

  /** @internal the sampler's timer: growth when a window's worth came in since the last tick. */
  tick(): void {
    this.sampleTimer = undefined;
    // a stream paused since before the last tick and still paused: its client stopped reading;
    // a grown window goes back (what the stream holds is then what it was sent already)
    if (this.pausedOld !== 0 && this.window !== this.baseWindow) this.shrinkWindow();
    this.pausedOld += this.pausedNow;
    this.pausedNow = 0;
    this.epoch++;
    if (this.active === 0 || this.state !== "ready") return;
    const read = this.bytesRead();
    const came = read - this.lastRead;
    this.lastRead = read;
    // Only a session that took no new stream for a whole tick samples: each new stream lowers the
    // window again (admit), so growing one that keeps taking them (unary calls) is only churn,
    // SETTINGS and PINGs for nothing. A long stream's session takes none.
    const quiet = this.opens === this.opensAtTick;
    this.opensAtTick = this.opens;
    this.quiet = quiet;
    if (quiet && came >= this.window) this.grow();
    const t = setTimeout(sampleTick, SAMPLE_MS, this);
    t.unref();
    this.sampleTimer = t;
  }

  /**
   * The window doubles (Envoy's way rather than grpc-go's round-trip estimate): a window's worth
   * read with no stream of the session paused says the client keeps up with what the window lets
   * through, and the stream is let run; whether the window held it back does not matter, since a
   * stream that is read holds nothing, and one that stops being read shows it by a pause, which
   * takes the window back (tick). Within GROWN_WINDOW_MAX and the session's and the process's
   * budgets; one change in flight at a time, and its ACK starts the count of the next window's
   * worth. (A PING's round trip was the signal before: on loopback, with the proxy's CPU the
   * limit, it carried a fraction of the window however much the window held the stream back, so
   * a 64 MiB call could spend its whole life at 512 KiB.)
   */
  private grow(): void {
    const n = this.active;
    if (n === 0 || this.pausedOld !== 0 || this.state !== "ready" || this.settingsPending !== 0) return;
    const w = this.window;
    let want = Math.min(GROWN_WINDOW_MAX, 2 * w, Math.floor(GROWN_SESSION_BUDGET / n));
    const room = GROWN_PROCESS_BUDGET - (grownTotal - this.grownBytes);
    if (want * n > room) want = Math.floor(room / n);
    want &= ~1023;
    if (want <= w) return;
    const self = this;
    // the next window's worth is counted from the ACK, unless the window went back meanwhile (a
    // new stream, a stall): then the sampler's next quiet tick decides
    const next = (): void => {
      if (self.window === want) self.rxLeft = want;
    };
    if (!this.sendWindow(want, next)) return;
    grownTotal += want * n - this.grownBytes;
    this.grownBytes = want * n;
  }
}

function sampleTick(s: UpstreamSession): void {
  s.tick();
}

function sendKeepalivePing(s: UpstreamSession): void {
  s.ping();
}
function keepaliveTimedOut(s: UpstreamSession, ms: number): void {
  s.keepaliveTimeout(ms);
}

/** A connect error as a message that names the endpoint (errno codes as words). */
export function describeConnectError(err: NodeJS.ErrnoException, ep: { readonly label: string; readonly host: string }): string {
  const code = err.code ?? "";
  if (code === "ECONNREFUSED") return `connection refused by ${ep.label}`;
  if (code === "ENOTFOUND" || code === "EAI_AGAIN") return `cannot resolve ${ep.host}`;
  if (isVerificationError(code)) return `TLS certificate verification of ${ep.label} failed: ${err.message} (${code})`;
  if (code.startsWith("ERR_SSL_") || code.startsWith("ERR_TLS_")) return `TLS handshake with ${ep.label} failed: ${err.message}`;
  return `connection error to ${ep.label}: ${code || err.message}`;
}
