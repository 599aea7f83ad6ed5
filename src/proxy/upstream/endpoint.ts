// One upstream address: its small pool of sessions (a stream slot is found here, within the
// cluster's circuit breakers), and what the attempts that rode on it reported (attemptEnded),
// which feeds outlier detection. Health (a HealthChecker's verdict) and ejection are flags the
// cluster reads when it rebuilds its picker. Must not import src/proxy/call.
import type { Cluster } from "./cluster.js";
import { UpstreamSession } from "./session.js";
import type { HealthChecker } from "./health-check.js";
import { newOutlierState, type OutlierState } from "../../translate/outlier.js";

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

export class Endpoint {
  readonly url: string;
  readonly label: string;
  readonly sessions: UpstreamSession[] = [];
  /** attempts whose stream is open or waiting for a session here */
  active = 0;
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

  constructor(
    readonly cluster: Cluster,
    readonly host: string,
    readonly port: number,
    weight = 1,
  ) {
    const h = host.includes(":") ? `[${host}]` : host;
    this.label = `${h}:${port}`;
    this.url = `http://${h}:${port}`;
    this.weight = weight;
  }

  /** A session with room for one more stream; opens one if all are full and the cap allows. */
  acquire(): UpstreamSession {
    const list = this.sessions;
    for (let i = 0; i < list.length; i++) {
      const s = list[i]!;
      if (s.hasCapacity()) return s;
    }
    const cfg = this.cluster.cfg;
    if (list.length < cfg.maxSessionsPerEndpoint || list.length === 0) return this.open();
    return this.leastLoaded();
  }

  /**
   * A stream slot for a new attempt, within the cluster's circuit breakers: a session, or why
   * none may be had (the message names the limit; the attempt ends 14 decided_by overflow).
   * maxConnections caps the sessions of the cluster; maxPendingCalls the attempts that would
   * wait (for a session's SETTINGS, or for a slot on a session at its stream limit).
   * The common case (a ready session with room) checks nothing else.
   */
  slot(): UpstreamSession | string {
    const list = this.sessions;
    let waitOn: UpstreamSession | undefined;
    for (let i = 0; i < list.length; i++) {
      const s = list[i]!;
      if (s.hasCapacity()) {
        if (s.connected) return s;
        waitOn ??= s;
      }
    }
    const c = this.cluster;
    const cb = c.cfg.circuitBreaker;
    if (c.pendingAttempts() >= cb.maxPendingCalls) return c.overflow("maxPendingCalls", cb.maxPendingCalls);
    if (waitOn !== undefined) return waitOn;
    if (list.length < c.cfg.maxSessionsPerEndpoint || list.length === 0) {
      if (c.open.size >= cb.maxConnections) {
        // No new session: queue on one of this endpoint's, if it has any.
        if (list.length === 0) return c.overflow("maxConnections", cb.maxConnections);
        return this.leastLoaded();
      }
      return this.open();
    }
    return this.leastLoaded();
  }

  private open(): UpstreamSession {
    const s = new UpstreamSession(this, this.cluster.cfg);
    this.sessions.push(s);
    return s;
  }

  /** Every session is at its limit: the least loaded one queues the stream (nghttp2 holds it until the peer frees a slot). */
  private leastLoaded(): UpstreamSession {
    const list = this.sessions;
    let best = list[0]!;
    for (let i = 1; i < list.length; i++) if (list[i]!.active < best.active) best = list[i]!;
    return best;
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

  onSessionOpened(s: UpstreamSession): void {
    this.cluster.sessionOpened(s);
  }

  onSessionClosed(s: UpstreamSession): void {
    this.remove(s);
    this.cluster.sessionClosed(s);
  }

  /** Out of the cluster: no new sessions are wanted; the ones open finish their streams. */
  retire(): void {
    this.retired = true;
    this.checker?.stop();
    this.checker = undefined;
    for (const s of [...this.sessions]) s.retire();
  }
}
