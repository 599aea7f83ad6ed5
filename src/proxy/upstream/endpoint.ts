// One upstream address: its small pool of sessions (a stream slot is found here, within the
// session limits and the cluster's circuit breakers; an attempt that finds none waits in this
// endpoint's queue, in dojang), and what the attempts that rode on it reported (attemptEnded),
// which feeds outlier detection. Health (a HealthChecker's verdict) and ejection are flags the
// cluster reads when it rebuilds its picker. Must not import src/proxy/call, nor cluster.ts (even
// for types): what it needs from its cluster is EndpointHost. It is its sessions' SessionOwner.
import type { Logger } from "pino";
import type { ClusterConfig } from "../../config/index.js";
import { UpstreamSession, type SessionOwner, type SlotWaiter } from "./session.js";
import type { HealthChecker } from "./health-check.js";
import type { Breaker } from "./breaker.js";
import { newOutlierState, type OutlierState } from "../../translate/outlier.js";
import type { StatsRow } from "../observe/windows.js";
import { addressLabel } from "../../translate/endpoint-set.js";

/**
 * How one attempt on this endpoint ended, as the attempt saw it:
 * ok          the upstream's own grpc-status 0
 * status      the upstream's own non-zero grpc-status (it answered)
 * reset       the stream was reset or the connection lost after it was opened
 * refused     the upstream refused the stream or never saw it (RST_STREAM REFUSED_STREAM, or a
 *             stream above a GOAWAY's last-stream-id): it cannot have processed the request
 * unreachable no stream reached it (connect failed, session closed before it was ready)
 * local       dojang ended it (client cancel, deadline, a filter, a limit): says nothing of the endpoint
 */
export type AttemptResult = "ok" | "status" | "reset" | "refused" | "unreachable" | "local";

/**
 * The upstream's own statuses that count as failures of the endpoint for outlier detection: the
 * ones a server (or what stands in front of it) says when it is unwell — UNKNOWN (2), INTERNAL
 * (13), UNAVAILABLE (14), DATA_LOSS (15). Other codes are answers about the call (NOT_FOUND,
 * INVALID_ARGUMENT, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED …): the endpoint worked.
 */
export const FAILING_STATUS_MASK = (1 << 2) | (1 << 13) | (1 << 14) | (1 << 15);

export function isFailingStatus(code: number): boolean {
  return code >= 0 && code < 32 && (FAILING_STATUS_MASK & (1 << code)) !== 0;
}

/**
 * What an endpoint needs from its cluster (implemented by Cluster): the config, the circuit
 * breakers (pending attempts, new connections, the overflow message), where
 * attempt results (outlier detection), connect results and session counts go, and keepalive.
 */
export interface EndpointHost {
  readonly name: string;
  readonly cfg: ClusterConfig;
  /** the cluster's circuit breakers (upstream/breaker.ts): the four limits and their counts */
  readonly breaker: Breaker;
  readonly connectCounters: Readonly<Record<"ok" | "error" | "timeout", { inc(): void }>>;
  readonly log: Pick<Logger, "warn">;
  /** the keepalive PING interval now */
  readonly keepaliveIntervalMs: number;
  /** an attempt's verdict on `e` (outlier detection) */
  onAttemptResult(e: Endpoint, ok: boolean): void;
  sessionOpened(s: UpstreamSession): void;
  sessionClosed(s: UpstreamSession): void;
  onTooManyPings(s: UpstreamSession): void;
  onKeepaliveTimeout(s: UpstreamSession): void;
}

export class Endpoint implements SessionOwner {
  readonly url: string;
  readonly label: string;
  readonly sessions: UpstreamSession[] = [];
  /** attempts whose stream is open, or that wait for a session or a stream slot here */
  active = 0;
  /** attempts waiting in the queue for a stream slot (see slot()) */
  queued = 0;
  private qHead: SlotWaiter | undefined = undefined;
  private qTail: SlotWaiter | undefined = undefined;
  /** attempts ended, by result */
  readonly results: Record<AttemptResult, number> = { ok: 0, status: 0, reset: 0, refused: 0, unreachable: 0, local: 0 };
  /**
   * Failures in a row: resets, unreachables and failing statuses (isFailingStatus); any other
   * answer ends a run; refused and local leave it as it is. Outlier detection ejects on it.
   */
  consecutiveFailures = 0;
  /** the active health check's verdict (true without health checks) */
  healthy = true;
  /** out of rotation by outlier detection until its ejection time is up */
  ejected = false;
  /** ejection arithmetic (src/translate/outlier.ts) */
  readonly outlier: OutlierState = newOutlierState();
  /** the weight the picker gives it (1 unless configured) */
  weight: number;
  /** its health checker, when the cluster has healthCheck */
  checker: HealthChecker | undefined = undefined;
  /** the cluster no longer lists it (DNS or reload removed it): its sessions drain */
  retired = false;
  /** this endpoint's row of the windowed stats (observe/windows.ts), once a call has ended on it */
  statsRow: StatsRow | undefined = undefined;

  constructor(
    readonly cluster: EndpointHost,
    readonly host: string,
    readonly port: number,
    weight = 1,
  ) {
    this.label = addressLabel(host, port);
    this.url = `http://${this.label}`;
    this.weight = weight;
  }

  /**
   * A stream slot for a new attempt, within the session limits and the cluster's circuit
   * breakers. The effective limit of a session is min(maxConcurrentStreamsPerSession, the peer's
   * SETTINGS_MAX_CONCURRENT_STREAMS), and dojang holds it itself: nghttp2 holds a stream only
   * above the peer's own limit, so with a peer that announces none (or a larger one) a stream
   * given to a session at dojang's limit would go out at once. Returns:
   * - a ready session with room: open the stream now (the common case: nothing else is looked
   *   at, nothing allocated);
   * - a connecting session with room (maybe one opened now, within maxSessionsPerEndpoint and
   *   maxConnections): wait for its SETTINGS (pending);
   * - undefined: every session is at its limit and no other may be opened, so `w` waits in this
   *   endpoint's queue (pending) and is given a slot in order (w.onSlot) when a stream here ends
   *   or a session frees up;
   * - a string: a limit said no (maxPendingCalls: the attempt would wait and that many already
   *   do; maxConnections: the endpoint has no session and the cluster may open none); the
   *   attempt ends 14 decided_by overflow.
   * While attempts wait in the queue, a new one queues behind them (first come, first served).
   */
  slot(w: SlotWaiter): UpstreamSession | string | undefined {
    const list = this.sessions;
    if (this.qHead === undefined) {
      for (let i = 0; i < list.length; i++) {
        const s = list[i]!;
        if (s.state === "ready" && s.active < s.limit) {
          // (a grown stream window goes back before the new stream opens: session.ts)
          s.admit();
          return s;
        }
      }
    }
    const b = this.cluster.breaker;
    if (!b.mayWait()) return b.overflow("maxPendingCalls");
    if (this.qHead === undefined) {
      const s = this.connectingWithRoom() ?? this.openIfAllowed();
      if (s !== undefined) return s;
      // No new session (maxConnections): wait for a stream on one of its own, if it has any.
      if (list.length === 0) return b.overflow("maxConnections");
    }
    this.enqueue(w);
    return undefined;
  }

  /**
   * Opens a session now if the endpoint has none (a side call's service: its first call should not
   * also pay for the connection). Within maxSessionsPerEndpoint and maxConnections.
   */
  preconnect(): void {
    if (this.sessions.length === 0 && !this.retired) this.openIfAllowed();
  }

  private readyWithRoom(): UpstreamSession | undefined {
    const list = this.sessions;
    for (let i = 0; i < list.length; i++) {
      const s = list[i]!;
      if (s.state === "ready" && s.active < s.limit) {
        s.admit();
        return s;
      }
    }
    return undefined;
  }

  private connectingWithRoom(): UpstreamSession | undefined {
    const list = this.sessions;
    for (let i = 0; i < list.length; i++) {
      const s = list[i]!;
      if (s.state === "connecting" && s.waiting.length < s.limit) return s;
    }
    return undefined;
  }

  /** A new session, if maxSessionsPerEndpoint and the cluster's maxConnections allow one. */
  private openIfAllowed(): UpstreamSession | undefined {
    const c = this.cluster;
    if (this.sessions.length >= c.cfg.maxSessionsPerEndpoint || !c.breaker.mayConnect()) return undefined;
    const s = new UpstreamSession(this, c.cfg);
    this.sessions.push(s);
    return s;
  }

  // === the queue: attempts waiting for a stream slot, first come first served ===
  // A list linked through the waiters themselves (qPrev/qNext): queueing allocates nothing, and
  // a waiter that gives up leaves at once. Each queued waiter counts in the cluster's
  // breaker.pendingAttempts (maxPendingCalls). Kept true: while the queue is not empty, no session of the
  // endpoint has room and no session may be opened; whatever changes that (a stream ends, a
  // session gets its SETTINGS or leaves rotation, a connection of the cluster closes, a SETTINGS
  // waiter gives up) calls dispatch().

  private enqueue(w: SlotWaiter): void {
    w.qNext = undefined;
    w.qPrev = this.qTail;
    if (this.qTail === undefined) this.qHead = w;
    else this.qTail.qNext = w;
    this.qTail = w;
    this.queued++;
    this.cluster.breaker.waiting(1);
  }

  /** Takes `w` out of the queue if it is in it (it gave up: cancelled, deadline, per-try timeout). */
  unqueue(w: SlotWaiter): void {
    if (w.qPrev === undefined && this.qHead !== w) return;
    const p = w.qPrev;
    const n = w.qNext;
    if (p === undefined) this.qHead = n;
    else p.qNext = n;
    if (n === undefined) this.qTail = p;
    else n.qPrev = p;
    w.qPrev = undefined;
    w.qNext = undefined;
    this.queued--;
    this.cluster.breaker.doneWaiting(1);
  }

  /**
   * The waiters a session got its SETTINGS for but had no slot for (`ws[from..]`, in their
   * order; the peer allows fewer streams than were waiting): first in line again, then served.
   */
  requeueFront(ws: readonly SlotWaiter[], from: number): void {
    for (let i = ws.length - 1; i >= from; i--) {
      const w = ws[i]!;
      if (w.abandoned) continue;
      w.qPrev = undefined;
      w.qNext = this.qHead;
      if (this.qHead === undefined) this.qTail = w;
      else this.qHead.qPrev = w;
      this.qHead = w;
      this.queued++;
      this.cluster.breaker.waiting(1);
    }
    this.dispatch();
  }

  /**
   * Gives the queued attempts, in order, what can be had: a slot on a ready session, a place
   * among a connecting session's waiters, or a new session; stops at the first it cannot serve.
   */
  dispatch(): void {
    let w: SlotWaiter | undefined;
    while ((w = this.qHead) !== undefined) {
      const s = this.readyWithRoom() ?? this.connectingWithRoom() ?? this.openIfAllowed();
      if (s === undefined) return;
      this.unqueue(w);
      w.onSlot(s);
    }
  }

  /** Every queued attempt ends (the endpoint left the cluster, the cluster closed). */
  failQueue(why: string): void {
    let w: SlotWaiter | undefined;
    while ((w = this.qHead) !== undefined) {
      this.unqueue(w);
      w.onSlotFailed(why);
    }
  }

  /** Takes a session out of rotation (it may still carry streams). */
  remove(s: UpstreamSession): void {
    const i = this.sessions.indexOf(s);
    if (i >= 0) this.sessions.splice(i, 1);
  }

  /** An attempt begins here (before its session is ready). */
  attemptStarted(): void {
    this.active++;
  }

  /**
   * An attempt that began here ended; called exactly once per attemptStarted(). `status` is the
   * upstream's grpc-status when result is "status" (or "ok"): it decides whether the answer is a
   * failure of the endpoint (isFailingStatus).
   */
  attemptEnded(result: AttemptResult, status = -1): void {
    this.active--;
    this.results[result]++;
    let failed: boolean;
    if (result === "reset" || result === "unreachable") failed = true;
    else if (result === "ok") failed = false;
    else if (result === "status") failed = isFailingStatus(status);
    else return; // refused, local: nothing said about the endpoint
    if (failed) this.consecutiveFailures++;
    else this.consecutiveFailures = 0;
    if (!this.retired) this.cluster.onAttemptResult(this, !failed);
  }

  onConnectResult(s: UpstreamSession, result: "ok" | "error" | "timeout"): void {
    const c = this.cluster;
    c.connectCounters[result].inc();
    if (result !== "ok") c.log.warn({ cluster: c.name, endpoint: this.label, reason: s.failure }, "upstream connect failed");
  }

  /** SessionOwner: the cluster's interval (doubled on each too_many_pings) */
  get keepaliveIntervalMs(): number {
    return this.cluster.keepaliveIntervalMs;
  }

  /** SessionOwner: a session's waiters for its SETTINGS count in the cluster's pending attempts. */
  waiting(n: number): void {
    this.cluster.breaker.waiting(n);
  }

  doneWaiting(n: number): void {
    this.cluster.breaker.doneWaiting(n);
  }

  onTooManyPings(s: UpstreamSession): void {
    this.cluster.onTooManyPings(s);
  }

  onKeepaliveTimeout(s: UpstreamSession): void {
    this.cluster.onKeepaliveTimeout(s);
  }

  onSessionOpened(s: UpstreamSession): void {
    this.cluster.sessionOpened(s);
  }

  onSessionClosed(s: UpstreamSession): void {
    this.remove(s);
    this.cluster.sessionClosed(s);
  }

  /**
   * Out of the cluster: no new sessions are wanted; the ones open finish their streams, and the
   * attempts queued here end 14 upstream_unreachable (a retry may pick another endpoint).
   */
  retire(): void {
    this.retired = true;
    this.checker?.stop();
    this.checker = undefined;
    // (first: the sessions' retirement would open new ones for the queue)
    this.failQueue(`upstream ${this.label} left cluster ${this.cluster.name} while the call waited for a stream`);
    for (const s of [...this.sessions]) s.retire();
  }
}
