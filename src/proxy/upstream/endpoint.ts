// One upstream address: its small pool of sessions (a stream slot is found here), and what the
// attempts that rode on it reported (attemptEnded). Health and outlier ejection will read these
// counters; nothing else here decides anything. Must not import src/proxy/call.
import type { Cluster } from "./cluster.js";
import { UpstreamSession } from "./session.js";

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

export class Endpoint {
  readonly url: string;
  readonly label: string;
  readonly sessions: UpstreamSession[] = [];
  /** attempts whose stream is open or waiting for a session here */
  active = 0;
  /** attempts ended, by result (counters only, for now: health and ejection will read them) */
  readonly results: Record<AttemptResult, number> = { ok: 0, status: 0, reset: 0, refused: 0, unreachable: 0, local: 0 };
  /** resets and unreachables in a row (an answer, whatever its status, ends a run; refused and local leave it) */
  consecutiveFailures = 0;
  /** the active health check's verdict (true without health checks) */
  healthy = true;
  /** out of rotation by outlier detection until its ejection time is up */
  ejected = false;

  constructor(
    readonly cluster: Cluster,
    readonly host: string,
    readonly port: number,
  ) {
    const h = host.includes(":") ? `[${host}]` : host;
    this.label = `${h}:${port}`;
    this.url = `http://${h}:${port}`;
  }

  /** A session with room for one more stream; opens one if all are full and the cap allows. */
  acquire(): UpstreamSession {
    const list = this.sessions;
    for (let i = 0; i < list.length; i++) {
      const s = list[i]!;
      if (s.hasCapacity()) return s;
    }
    const cfg = this.cluster.cfg;
    if (list.length < cfg.maxSessionsPerEndpoint || list.length === 0) {
      const s = new UpstreamSession(this, cfg);
      list.push(s);
      return s;
    }
    // Every session is at its limit: the least loaded one queues the stream (nghttp2 holds
    // it until the peer frees a slot).
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

  /** An attempt that began here ended; called exactly once per attemptStarted(). */
  attemptEnded(result: AttemptResult): void {
    this.active--;
    this.results[result]++;
    if (result === "reset" || result === "unreachable") this.consecutiveFailures++;
    else if (result === "ok" || result === "status") this.consecutiveFailures = 0;
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
}
