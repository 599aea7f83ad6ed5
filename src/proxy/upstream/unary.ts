// One unary gRPC call on a cluster: the transport of dojang's side calls (the global rate-limit
// service's ShouldRateLimit, the external authorization service's Check), in place of a gRPC
// client library. As Envoy's `grpc_service.envoy_grpc` does, a side call rides the proxy's own
// upstream: the cluster picks an endpoint, the endpoint finds a stream slot on one of its sessions
// within the cluster's circuit breakers (endpoint.ts, session.ts, breaker.ts: the same limits,
// queue, health, outlier detection and TLS as a proxied call's attempt), the request's HEADERS
// and its one framed message leave in one write, and the response's head, message and trailers
// are read back. What the end means is src/translate/unary-end.ts; the endpoint hears the result
// once (outlier detection). It runs inside a side call (side-call.ts), which owns the timer: a
// call ends within its timeout whatever the service, the session or the queue does.
//
// Hot path (style.md §3.7): stream listeners are module-level functions that find the call in one
// symbol slot on the stream; the request head is a list built once per target. Per call: this
// object, the stream node makes, and the response's bytes (one chunk is kept as it came).
// Must not import src/proxy/call.
import http2, { type ClientHttp2Stream, type IncomingHttpHeaders } from "node:http2";
import { Code, decideUnaryEnd, unaryMessage, type UnaryStatus } from "../../translate/index.js";
import type { Cluster } from "./cluster.js";
import type { AttemptResult, Endpoint } from "./endpoint.js";
import { kStreamOwner, type SlotWaiter, type UpstreamSession } from "./session.js";
import { failureOfGrpcCode, type Settle, type SideFailure } from "./side-call.js";

const { NGHTTP2_CANCEL, NGHTTP2_REFUSED_STREAM } = http2.constants;
/** END_STREAM in a HEADERS frame's flags (RFC 9113 §6.2), as node hands them to 'response' */
const END_STREAM = 0x1;

/** gRPC's default limit on a received message (grpc-go, grpc-java: 4 MiB); a longer answer is an error. */
export const MAX_UNARY_RESPONSE_BYTES = 4 * 1024 * 1024 + 5;

/** Where a side call goes and the request head it sends, made once per service (not per call). */
export interface UnaryTarget {
  readonly cluster: Cluster;
  /** the request head as a flat name/value list: :method, :scheme, :path, :authority, content-type, te, grpc-timeout */
  readonly headers: readonly string[];
}

/**
 * The request head of a unary call to `path` on `cluster`: :authority is `authority` (the
 * service's address, or the cluster's name as Envoy's envoy_grpc sends it), grpc-timeout the side
 * call's timeout (its budget starts before any queueing, so the service's deadline is never later
 * than dojang's).
 */
export function unaryTarget(cluster: Cluster, path: string, authority: string, timeoutMs: number): UnaryTarget {
  return {
    cluster,
    headers: Object.freeze([
      ":method", "POST",
      ":scheme", cluster.cfg.tls === null ? "http" : "https",
      ":path", path,
      ":authority", authority,
      "content-type", "application/grpc",
      "te", "trailers",
      "grpc-timeout", `${Math.max(1, Math.min(Math.ceil(timeoutMs), 99_999_999))}m`,
    ]),
  };
}

type UnaryStream = ClientHttp2Stream & { [kStreamOwner]?: UnaryCall<unknown> };

/** request() options: the request's END_STREAM rides on its one DATA frame (end(message)). */
const REQUEST_OPTIONS = { endStream: false } as const;

/**
 * Starts one unary call of `target` with `message` (framed: prefix and message); its end goes to
 * `settle` once, the answer decoded by `decode` (null: not the message expected, an error).
 * Returns the call: its stop() (side-call.ts's SideStop) resets the stream with CANCEL, or leaves
 * the queue, when the side call's timer or its caller ends it first.
 */
export function startUnary<T>(target: UnaryTarget, message: Uint8Array, decode: (m: Uint8Array) => T | null, settle: Settle<T>): UnaryCall<T> {
  const u = new UnaryCall(target, message, decode, settle);
  u.start();
  return u;
}

export class UnaryCall<T> implements SlotWaiter {
  qPrev: SlotWaiter | undefined = undefined;
  qNext: SlotWaiter | undefined = undefined;
  private endpoint: Endpoint | undefined = undefined;
  private session: UpstreamSession | undefined = undefined;
  private stream: ClientHttp2Stream | undefined = undefined;
  /** the request, until the stream has it */
  private message: Uint8Array | undefined;
  /** the caller ended it (stop): nothing more is settled */
  private stopped = false;
  /** the call's end is known (settled or stopped) and its breaker count released */
  private finished = false;
  private reported = false;
  // the response
  private head: IncomingHttpHeaders | undefined = undefined;
  private headEnded = false;
  private trailers: IncomingHttpHeaders | undefined = undefined;
  private body: Buffer | Buffer[] | undefined = undefined;
  private bytes = 0;
  /** node's error on the stream (a connection-level HTTP/2 error names its code here) */
  private error: (Error & { code?: string }) | undefined = undefined;

  constructor(
    private readonly target: UnaryTarget,
    message: Uint8Array,
    private readonly decode: (m: Uint8Array) => T | null,
    private readonly settle: Settle<T>,
  ) {
    this.message = message;
  }

  /**
   * Admitted by the cluster's maxCalls, an endpoint picked, a stream slot taken: at once, or it
   * waits (for a session's SETTINGS, in the endpoint's queue) while the side call's timer runs.
   */
  start(): void {
    const c = this.target.cluster;
    const over = c.breaker.admitCall();
    if (over !== undefined) {
      this.finished = true;
      return this.settle({ result: "unavailable", detail: over });
    }
    const e = c.pick();
    if (e === undefined) return this.fail("unavailable", `cluster ${c.name} has no endpoint`);
    this.endpoint = e;
    e.attemptStarted();
    const s = e.slot(this);
    if (s === undefined) return; // queued: onSlot, or stop()
    if (typeof s === "string") {
      this.report("local");
      return this.fail("unavailable", s);
    }
    this.use(s);
  }

  /** Opens the stream on `s` (or waits for its SETTINGS) and sends the request in one write. */
  private use(s: UpstreamSession): void {
    this.session = s;
    if (!s.connected) {
      s.addWaiter(this);
      return;
    }
    let st: ClientHttp2Stream;
    try {
      st = s.h2.request(this.target.headers as string[], REQUEST_OPTIONS);
    } catch (err) {
      if (s.h2.destroyed || s.h2.closed) {
        this.report("unreachable");
        return this.fail("unavailable", s.failure ?? `session to ${s.endpoint.label} is closed`);
      }
      this.report("local");
      return this.fail("error", (err as Error).message);
    }
    s.active++;
    s.opened++;
    this.stream = st;
    (st as UnaryStream)[kStreamOwner] = this as UnaryCall<unknown>;
    st.on("response", onResponse);
    st.on("data", onData);
    st.on("trailers", onTrailers);
    st.on("error", onError);
    st.on("close", onClose);
    const m = this.message!;
    this.message = undefined;
    st.end(m);
  }

  // === SlotWaiter ===

  onSlot(s: UpstreamSession): void {
    if (this.stopped) return;
    this.use(s);
  }

  onSessionFailed(s: UpstreamSession): void {
    if (this.stopped) return;
    this.report("unreachable");
    this.fail("unavailable", s.failure ?? `upstream ${s.endpoint.label} unreachable`);
  }

  onSlotFailed(why: string): void {
    if (this.stopped) return;
    this.report("local");
    this.fail("unavailable", why);
  }

  get abandoned(): boolean {
    return this.stopped;
  }

  // === SideStop ===

  /** The side call's timer or its caller ended it: RST_STREAM(CANCEL) on an open stream, or out of the queue. */
  stop(): void {
    if (this.stopped || this.finished) return;
    this.stopped = true;
    const st = this.stream;
    if (st === undefined) {
      // waiting for a session or a slot: nothing on the wire
      this.session?.unwait(this);
      this.endpoint?.unqueue(this);
      this.report("local");
      this.release();
      return;
    }
    if (st.closed) return;
    st.close(NGHTTP2_CANCEL);
    // (the shared connection's reset budget: session.ts noteReset)
    this.session?.noteReset();
  }

  // === the response (module-level listeners below call these) ===

  onResponse(headers: IncomingHttpHeaders, flags: number): void {
    if (this.head !== undefined) return;
    this.head = headers;
    this.headEnded = (flags & END_STREAM) !== 0;
  }

  onData(chunk: Buffer): void {
    const n = (this.bytes += chunk.length);
    if (n > MAX_UNARY_RESPONSE_BYTES) {
      if (this.body !== undefined) this.body = undefined;
      // (the stream is reset; its close settles the call as an error, see onClose)
      this.stream!.close(NGHTTP2_CANCEL);
      return;
    }
    const b = this.body;
    if (b === undefined) this.body = chunk;
    else if (Array.isArray(b)) b.push(chunk);
    else this.body = [b, chunk];
  }

  onTrailers(headers: IncomingHttpHeaders): void {
    this.trailers = headers;
  }

  onError(err: Error): void {
    this.error = err;
  }

  /** The stream's close: the slot goes back, the status is decided, the endpoint hears it, the side call settles. */
  onClose(): void {
    const s = this.session!;
    const st = this.stream!;
    s.streamClosed();
    if (this.stopped) {
      this.report("local");
      this.release();
      return;
    }
    if (this.bytes > MAX_UNARY_RESPONSE_BYTES) {
      this.report("status", Code.RESOURCE_EXHAUSTED);
      return this.fail("error", `response larger than ${MAX_UNARY_RESPONSE_BYTES - 5} bytes`);
    }
    const status = this.status(s, st);
    if (status.code !== Code.OK) {
      // an answer (whatever it says) is the service's status; without one the stream was refused or reset
      this.report(this.head !== undefined ? "status" : this.refused(s, st) ? "refused" : "reset", status.code);
      return this.fail(failureOfGrpcCode(status.code) as Exclude<SideFailure, "cancelled">, `code ${status.code}${status.message === "" ? "" : `: ${status.message}`}`);
    }
    const b = this.body;
    const body = b === undefined ? EMPTY : Array.isArray(b) ? Buffer.concat(b) : b;
    this.body = undefined;
    const m = unaryMessage(body);
    const value = typeof m === "string" ? null : this.decode(m);
    if (value === null) {
      // status 0 with an answer that is not one: the service is broken (13, a failure for outlier detection)
      this.report("status", Code.INTERNAL);
      return this.fail("error", `code 13: ${typeof m === "string" ? m : "the response message did not decode"}`);
    }
    this.report("ok", 0);
    this.release();
    this.settle({ result: "ok", value });
  }

  private status(s: UpstreamSession, st: ClientHttp2Stream): UnaryStatus {
    const h = this.head;
    const t = this.trailers;
    const code = this.error?.code;
    return decideUnaryEnd({
      head: h === undefined ? undefined : { status: h[":status"] as number | undefined, contentType: h["content-type"], grpcStatus: headerString(h["grpc-status"]), endStream: this.headEnded },
      headMessage: h === undefined ? undefined : headerString(h["grpc-message"]),
      trailers: t !== undefined,
      trailerStatus: t === undefined ? undefined : headerString(t["grpc-status"]),
      trailerMessage: t === undefined ? undefined : headerString(t["grpc-message"]),
      rstCode: st.rstCode,
      sessionLost: s.lost || s.h2.destroyed,
      // node's own HTTP/2 errors: a protocol error it found (ERR_HTTP2_ERROR) or a GOAWAY with an
      // error code (ERR_HTTP2_SESSION_ERROR); either way the stream's rstCode is that code
      connectionError: code === "ERR_HTTP2_ERROR" || code === "ERR_HTTP2_SESSION_ERROR" ? st.rstCode : undefined,
      refused: this.refused(s, st),
    });
  }

  private refused(s: UpstreamSession, st: ClientHttp2Stream): boolean {
    return st.rstCode === NGHTTP2_REFUSED_STREAM || (s.goawayLastStreamId >= 0 && (st.id ?? 0) > s.goawayLastStreamId);
  }

  /** A failure before or at the end: the side call settles with it (unless stopped), the breaker count is released. */
  private fail(result: Exclude<SideFailure, "cancelled">, detail: string): void {
    this.release();
    if (!this.stopped) this.settle({ result, detail });
  }

  private release(): void {
    if (this.finished) return;
    this.finished = true;
    this.target.cluster.breaker.releaseCall();
  }

  /** Tells the endpoint how the call ended; once (after attemptStarted). */
  private report(result: AttemptResult, status = -1): void {
    if (this.reported || this.endpoint === undefined) return;
    this.reported = true;
    this.endpoint.attemptEnded(result, status);
  }
}

const EMPTY = Buffer.alloc(0);

function headerString(v: string | string[] | number | undefined): string | undefined {
  return v === undefined ? undefined : typeof v === "string" ? v : Array.isArray(v) ? v[0] : String(v);
}

function unaryOf(s: unknown): UnaryCall<unknown> {
  return (s as UnaryStream)[kStreamOwner]!;
}
function onResponse(this: ClientHttp2Stream, headers: IncomingHttpHeaders, flags: number): void {
  unaryOf(this).onResponse(headers, flags);
}
function onData(this: ClientHttp2Stream, chunk: Buffer): void {
  unaryOf(this).onData(chunk);
}
function onTrailers(this: ClientHttp2Stream, headers: IncomingHttpHeaders): void {
  unaryOf(this).onTrailers(headers);
}
function onError(this: ClientHttp2Stream, err: Error): void {
  unaryOf(this).onError(err);
}
function onClose(this: ClientHttp2Stream): void {
  unaryOf(this).onClose();
}
