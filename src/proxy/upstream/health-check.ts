// Active health checks of one upstream endpoint with grpc.health.v1 Check: a call every
// `interval` on a connection of its own (as Envoy's health checkers use), pass/fail by the
// thresholds in src/translate/outlier.ts, and a callback when the endpoint's health changes.
//
// A check passes when the upstream answers HTTP 200, grpc-status 0 and status SERVING within
// `timeout`. Anything else fails it, with a reason for the log: NOT_SERVING, SERVICE_UNKNOWN,
// UNIMPLEMENTED (no health service), a refused connect, a reset, the timeout.
import http2, { type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders } from "node:http2";
import { decodeHealthResponse, encodeHealthRequest, HEALTH_CHECK_PATH, ServingStatus } from "../../translate/health.js";
import { MESSAGE_PREFIX_BYTES, frameMessage, messageLength } from "../../translate/framing.js";
import { healthStep, newHealthState, type HealthState } from "../../translate/outlier.js";
import { codeName, parseGrpcStatus } from "../../translate/codes.js";
import { decodeGrpcMessage } from "../../translate/grpc-message.js";
import type { HostPort } from "../../config/schema.js";
import { formatHostPort } from "../../config/units.js";

/** `healthCheck` on a cluster, normalized. */
export interface HealthCheckConfig {
  /** the service name asked about; "" = the server as a whole */
  readonly service: string;
  readonly intervalMs: number;
  readonly timeoutMs: number;
  readonly unhealthyThreshold: number;
  readonly healthyThreshold: number;
}

export interface CheckResult {
  readonly passed: boolean;
  /** "SERVING", or why the check failed */
  readonly why: string;
}

const STATUS_NAMES = ["UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"];

export class HealthChecker {
  private session: ClientHttp2Session | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = true;
  private readonly state: HealthState = newHealthState();
  private readonly body: Uint8Array;
  private sessionError: string | undefined;
  /** the last check's result (undefined before the first) */
  last: CheckResult | undefined;

  constructor(
    readonly endpoint: HostPort,
    readonly cfg: HealthCheckConfig,
    private readonly onChange: (healthy: boolean, result: CheckResult) => void,
  ) {
    this.body = frameMessage(encodeHealthRequest(cfg.service));
  }

  get healthy(): boolean {
    return this.state.healthy;
  }

  /** Checks now, then every interval, until stop(). */
  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    void this.tick();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.session?.destroy();
    this.session = undefined;
  }

  private async tick(): Promise<void> {
    const r = await this.checkOnce();
    if (this.stopped) return;
    this.last = r;
    if (healthStep(this.state, this.cfg, r.passed)) this.onChange(this.state.healthy, r);
    this.timer = setTimeout(() => void this.tick(), this.cfg.intervalMs);
    this.timer.unref();
  }

  private connect(): ClientHttp2Session {
    const s = this.session;
    if (s !== undefined && !s.closed && !s.destroyed) return s;
    const { host, port } = this.endpoint;
    const authority = formatHostPort(this.endpoint);
    const h2 = http2.connect(`http://${authority}`, { host, port, settings: { enablePush: false } });
    h2.on("error", (err: Error) => {
      // the stream's close reports the failure, with this as its reason
      this.sessionError = err.message;
    });
    h2.on("close", () => {
      if (this.session === h2) this.session = undefined;
    });
    // A health connection must not keep the process alive.
    h2.unref();
    this.session = h2;
    return h2;
  }

  /** One Check call; never rejects. */
  checkOnce(): Promise<CheckResult> {
    return new Promise((resolve) => {
      let settled = false;
      let stream: ClientHttp2Stream | undefined;
      const done = (passed: boolean, why: string): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timeout);
        if (stream !== undefined && !stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
        resolve({ passed, why });
      };
      const timeout = setTimeout(() => {
        done(false, `no answer within ${this.cfg.timeoutMs}ms`);
        // a session that does not answer in time is not trusted for the next check
        this.session?.destroy();
      }, this.cfg.timeoutMs);
      let session: ClientHttp2Session;
      try {
        this.sessionError = undefined;
        session = this.connect();
        stream = session.request({
          ":method": "POST",
          ":path": HEALTH_CHECK_PATH,
          "content-type": "application/grpc",
          te: "trailers",
          "grpc-timeout": `${Math.max(1, Math.ceil(this.cfg.timeoutMs))}m`,
          "user-agent": "dojang-health-check",
        });
      } catch (err) {
        return done(false, `cannot start a check: ${(err as Error).message}`);
      }
      const chunks: Buffer[] = [];
      let httpStatus = 0;
      const decide = (grpcStatus: string | string[] | undefined, grpcMessage: unknown): void => {
        if (httpStatus !== 200) return done(false, `HTTP status ${httpStatus}`);
        const code = parseGrpcStatus(typeof grpcStatus === "string" ? grpcStatus : undefined);
        if (code === undefined) return done(false, "no grpc-status in the answer");
        if (code !== 0) return done(false, `grpc-status ${codeName(code)}${typeof grpcMessage === "string" && grpcMessage !== "" ? `: ${decodeGrpcMessage(grpcMessage)}` : ""}`);
        const all = Buffer.concat(chunks);
        if (all.length < MESSAGE_PREFIX_BYTES) return done(false, "no HealthCheckResponse message");
        const r = decodeHealthResponse(all.subarray(MESSAGE_PREFIX_BYTES, MESSAGE_PREFIX_BYTES + messageLength(all)));
        if (!r.ok) return done(false, r.error);
        if (r.status !== ServingStatus.SERVING) return done(false, STATUS_NAMES[r.status] ?? `status ${r.status}`);
        done(true, "SERVING");
      };
      stream.on("response", (h) => {
        httpStatus = Number(h[":status"] ?? 0);
        // Trailers-Only: the status is in the headers
        if (h["grpc-status"] !== undefined) decide(h["grpc-status"], h["grpc-message"]);
      });
      stream.on("data", (c: Buffer) => {
        if (chunks.length < 16) chunks.push(c);
      });
      // Decided at 'end', once every DATA chunk is in: node emits 'trailers' as soon as their
      // frame is read, and on a TLS session its events can come out of order (DATA before
      // 'response', docs/concepts/node-http2.md).
      let trailers: IncomingHttpHeaders | undefined;
      stream.on("trailers", (t) => (trailers = t));
      stream.on("end", () => {
        if (trailers !== undefined) decide(trailers["grpc-status"], trailers["grpc-message"]);
      });
      let streamError: (Error & { cause?: unknown }) | undefined;
      // A failed connect reaches the stream before the session: its cause names it (ECONNREFUSED).
      stream.on("error", (err: Error) => (streamError = err));
      stream.on("close", () => {
        const c = streamError?.cause;
        const why = this.sessionError ?? (c instanceof Error ? c.message : streamError?.message);
        const cause = session.destroyed || why !== undefined ? `connection failed: ${why ?? "closed"}` : `stream closed (RST_STREAM ${stream?.rstCode ?? 0})`;
        done(false, cause);
      });
      stream.end(this.body);
    });
  }
}
