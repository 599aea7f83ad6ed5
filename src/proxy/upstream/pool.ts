// Upstream clusters: static endpoints picked round-robin, and per endpoint a small pool of
// HTTP/2 client sessions that every call shares. A session is a tagged state machine
// (connecting → ready → draining → closed); a call keeps a reference to the session it rode
// on so that, when its stream closes, it can tell a real RST_STREAM from a lost connection
// (node reports both as a stream close, the latter with a synthetic rstCode 8; spec §10.2 P3).
import http2, { type ClientHttp2Session } from "node:http2";
import type { ClusterConfig, HostPort } from "../../config/index.js";
import type { Metrics } from "../observe/metrics.js";
import type { Logger } from "pino";

export type SessionState = "connecting" | "ready" | "draining" | "closed";

/** A call waiting for a session's first SETTINGS. */
export interface SessionWaiter {
  onSessionReady(s: UpstreamSession): void;
  onSessionFailed(s: UpstreamSession): void;
}

export class UpstreamSession {
  state: SessionState = "connecting";
  /** streams currently open on this session */
  active = 0;
  /** calls waiting for the peer's SETTINGS before they open a stream here */
  waiting: SessionWaiter[] = [];
  /** min(cluster cap, peer's SETTINGS_MAX_CONCURRENT_STREAMS) */
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

  constructor(
    readonly endpoint: Endpoint,
    cfg: ClusterConfig,
  ) {
    this.limit = cfg.maxConcurrentStreamsPerSession;
    const h2 = http2.connect(endpoint.url, {
      settings: { enablePush: false, initialWindowSize: cfg.initialWindowSize },
      // The upstream is trusted to send large header blocks (metadata) back.
      maxHeaderListPairs: 4000,
      maxSessionMemory: 64,
    });
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
        const w = self.waiting;
        self.waiting = [];
        for (let i = 0; i < w.length; i++) w[i]!.onSessionReady(self);
      }
    });
    h2.on("goaway", (_code: number, lastStreamId: number) => {
      self.goawayLastStreamId = lastStreamId;
      self.retire();
    });
    h2.on("error", (err: NodeJS.ErrnoException) => {
      if (self.failure === undefined) self.failure = describeConnectError(err, endpoint);
      if (!self.connected && self.state === "connecting") self.endpoint.onConnectResult(self, "error");
      self.lost = true;
      self.retire();
      self.failWaiters();
    });
    h2.on("close", () => {
      self.clearConnectTimer();
      self.lost = true;
      self.state = "closed";
      self.endpoint.remove(self);
      self.failWaiters();
      const cluster = self.endpoint.cluster;
      if (cluster.open.delete(self)) cluster.metrics.live.upstreamSessions--;
    });
    endpoint.cluster.open.add(this);
    endpoint.cluster.metrics.live.upstreamSessions++;
    // Frames that nghttp2 refused to send (oversize headers) surface here; the stream's own
    // 'close' carries the outcome.
    h2.on("frameError", () => {});
  }

  private clearConnectTimer(): void {
    if (this.connectTimer !== undefined) {
      clearTimeout(this.connectTimer);
      this.connectTimer = undefined;
    }
  }

  /** Takes the session out of rotation; streams already on it finish. */
  retire(): void {
    if (this.state === "connecting" || this.state === "ready") {
      this.state = "draining";
      this.endpoint.remove(this);
      this.h2.close();
    }
  }

  private failWaiters(): void {
    const w = this.waiting;
    this.waiting = [];
    for (let i = 0; i < w.length; i++) w[i]!.onSessionFailed(this);
  }

  hasCapacity(): boolean {
    return (this.state === "ready" || this.state === "connecting") && this.active + this.waiting.length < this.limit;
  }
}

export function describeConnectError(err: NodeJS.ErrnoException, ep: Endpoint): string {
  const code = err.code ?? "";
  if (code === "ECONNREFUSED") return `connection refused by ${ep.label}`;
  if (code === "ENOTFOUND" || code === "EAI_AGAIN") return `cannot resolve ${ep.host}`;
  return `connection error to ${ep.label}: ${code || err.message}`;
}

export class Endpoint {
  readonly url: string;
  readonly label: string;
  readonly sessions: UpstreamSession[] = [];
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

  onConnectResult(s: UpstreamSession, result: "ok" | "error" | "timeout"): void {
    this.cluster.connectCounters[result].inc();
    if (result !== "ok") this.cluster.log.warn({ cluster: this.cluster.name, endpoint: this.label, reason: s.failure }, "upstream connect failed");
  }
}

export class Cluster {
  readonly name: string;
  readonly endpoints: Endpoint[];
  readonly connectCounters: Record<"ok" | "error" | "timeout", { inc(): void }>;
  /** every session not yet closed, in rotation or draining */
  readonly open = new Set<UpstreamSession>();
  private next = 0;
  constructor(
    readonly cfg: ClusterConfig,
    readonly metrics: Metrics,
    readonly log: Logger,
  ) {
    this.name = cfg.name;
    this.endpoints = cfg.endpoints.map((e: HostPort) => new Endpoint(this, e.host, e.port));
    this.connectCounters = {
      ok: metrics.upstreamConnects.labels(cfg.name, "ok"),
      error: metrics.upstreamConnects.labels(cfg.name, "error"),
      timeout: metrics.upstreamConnects.labels(cfg.name, "timeout"),
    };
  }

  /** Round-robin over endpoints. */
  pick(): Endpoint {
    const eps = this.endpoints;
    const e = eps[this.next]!;
    this.next = this.next + 1 === eps.length ? 0 : this.next + 1;
    return e;
  }

  /** Closes every session: gracefully (GOAWAY, let streams finish) or at once. */
  close(force: boolean): void {
    for (const s of [...this.open]) {
      if (force) s.h2.destroy();
      else s.retire();
    }
  }
}
