// The downstream side: one node:http2 h2c server per configured listener (core stream API,
// not the compatibility API), its session limits, and GOAWAY on drain.
import http2, { type Http2Server, type ServerHttp2Session, type ServerHttp2Stream } from "node:http2";
import type { AddressInfo } from "node:net";
import type { ListenerConfig } from "../config/index.js";
import { ListenError } from "../errors.js";
import { Code, outcome } from "../translate/index.js";
import { handleStream, type CallContext } from "./call/call.js";

/**
 * node reports an nghttp2 *stream* error to JS as a session error, and then destroys the whole
 * session (GOAWAY INTERNAL_ERROR, every call on the connection lost; issue 10 item 11): its
 * invalid-frame callback passes NGHTTP2_ERR_PROTO up as if nghttp2 had already ended the
 * connection, but nghttp2 also reports stream errors with that code, e.g. DATA beyond a
 * request's content-length, for which it resets only that stream (PROTOCOL_ERROR) and carries
 * on. Probed on Node 24 with a plain node:http2 server: the same GOAWAY, from
 * onSessionInternalError -> session.destroy(NghttpError -505). The error reaches JS before the
 * stream's own 'stream' handler could refuse it when HEADERS and DATA arrive together, so the
 * fix sits at the session: a destroy() with that one error first asks the session whether it
 * still serves (a PING); if the peer answers, nghttp2 is still running it and only the stream
 * was reset; if not (nghttp2 really ended it: GOAWAY sent), the destroy goes ahead after
 * PROTO_PROBE_MS. One probe at a time per session; nothing on the call path.
 */
const NGHTTP2_ERR_PROTO = -505;
const PROTO_PROBE_MS = 2000;
const kProbing = Symbol("dojang.protoProbe");
type GuardedSession = ServerHttp2Session & { [kProbing]?: boolean };
type Destroy = (this: ServerHttp2Session, err?: Error, code?: number) => ServerHttp2Session;
/** node's own Http2Session destroy (its class is not exported), taken from the first session. */
let sessionDestroy: Destroy | undefined;

function isStreamLevelProtoError(err: unknown): boolean {
  return err instanceof Error && (err as NodeJS.ErrnoException).code === "ERR_HTTP2_ERROR" && (err as NodeJS.ErrnoException).errno === NGHTTP2_ERR_PROTO;
}

/** Installed as the session's own destroy(); module-level, no closure per session. */
function guardedDestroy(this: GuardedSession, err?: Error, code?: number): ServerHttp2Session {
  const destroy = sessionDestroy!;
  if (err === undefined || !isStreamLevelProtoError(err) || this.destroyed) return destroy.call(this, err, code);
  if (this[kProbing] === true) return this;
  this[kProbing] = true;
  const timer = setTimeout(probeFailed, PROTO_PROBE_MS, this, err);
  timer.unref(); // a probe never holds the process open
  try {
    this.ping((pingErr) => {
      clearTimeout(timer);
      this[kProbing] = false;
      if (pingErr !== null) destroy.call(this, err, code);
    });
  } catch {
    clearTimeout(timer);
    return destroy.call(this, err, code);
  }
  return this;
}

function probeFailed(s: GuardedSession, err: Error): void {
  s[kProbing] = false;
  if (!s.destroyed) sessionDestroy!.call(s, err);
}

/**
 * Streams over the limit (issue 10 item 10). nghttp2 treats a stream over an *acknowledged*
 * SETTINGS_MAX_CONCURRENT_STREAMS as a connection error (GOAWAY PROTOCOL_ERROR, every call on
 * the connection lost; nghttp2 issue 687), and node advertises exactly what nghttp2 enforces.
 * So nghttp2 is given more room than the configured limit (advertisedStreams), and dojang
 * itself refuses each stream above `maxConcurrentStreams` with RST_STREAM(REFUSED_STREAM): the
 * client loses only its extra streams, as with nginx and HAProxy, and a REFUSED_STREAM is safe
 * for any gRPC client to retry (the call was never processed). Only a client that ignores
 * even the advertised number loses its own connection. One counter per session, a module-level
 * close listener: no closure per stream.
 */
export function advertisedStreams(limit: number): number {
  return Math.min(0xffffffff, limit + Math.max(limit, 100));
}
const kOpen = Symbol("dojang.openStreams");
const kCounted = Symbol("dojang.countedSession");
type CountedSession = ServerHttp2Session & { [kOpen]?: number };
type CountedStream = ServerHttp2Stream & { [kCounted]?: CountedSession };

function ignoreError(): void {}

function onCountedStreamClose(this: CountedStream): void {
  const s = this[kCounted];
  if (s !== undefined) s[kOpen]!--;
}

export class Listener {
  readonly server: Http2Server;
  readonly sessions = new Set<ServerHttp2Session>();
  readonly ctx: CallContext;
  private bound: AddressInfo | undefined;

  constructor(
    readonly cfg: ListenerConfig,
    callContext: CallContext,
  ) {
    // The listener's own settings the calls read (the same `active` set and counters).
    const ctx: CallContext = { ...callContext, streamIdleTimeoutMs: cfg.streamIdleTimeoutMs, attemptsHeader: cfg.attemptsHeader };
    this.ctx = ctx;
    const server = http2.createServer({
      settings: {
        maxConcurrentStreams: advertisedStreams(cfg.maxConcurrentStreams),
        initialWindowSize: cfg.initialWindowSize,
        maxHeaderListSize: cfg.maxHeaderListSize,
        enablePush: false,
      },
      // node's default of 128 header pairs resets ordinary calls that carry much metadata with
      // ENHANCE_YOUR_CALM, which a client reads as RESOURCE_EXHAUSTED (spec §1.1, probe Y).
      maxHeaderListPairs: cfg.maxHeaderListPairs,
      maxSessionMemory: cfg.maxSessionMemoryMiB,
      // nghttp2 would drop a field with leading or trailing whitespace (RFC 9113 §8.2.1) and
      // pass the call on without it; let it through so dojang refuses the call instead
      // (copyRequestHeaders, issue 10 item 9). Node 24.2+.
      strictFieldWhitespaceValidation: false,
    });
    this.server = server;
    const live = ctx.metrics.live;
    const connWindow = cfg.connectionWindowSize;
    server.on("session", (s: ServerHttp2Session) => {
      sessionDestroy ??= (Object.getPrototypeOf(s) as { destroy: Destroy }).destroy;
      s.destroy = guardedDestroy;
      this.sessions.add(s);
      live.downstreamSessions++;
      s.on("close", () => {
        if (this.sessions.delete(s)) live.downstreamSessions--;
      });
      s.on("error", (err) => ctx.log.debug({ err: err.message, listener: cfg.name }, "client session error"));
      s.once("localSettings", () => {
        try {
          s.setLocalWindowSize(connWindow);
        } catch {
          /* closing */
        }
      });
    });
    const limit = cfg.maxConcurrentStreams;
    server.on("stream", (stream: CountedStream, headers, flags, rawHeaders) => {
      const sess = stream.session as CountedSession | undefined;
      if (sess !== undefined) {
        const open = (sess[kOpen] ?? 0) + 1;
        sess[kOpen] = open;
        stream[kCounted] = sess;
        stream.on("close", onCountedStreamClose);
        if (open > limit) {
          ctx.metrics.refusedStreams.inc();
          // node reports the reset it sends as the stream's 'error': without a listener it would
          // be thrown, and end the process
          stream.on("error", ignoreError);
          stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
          return;
        }
      }
      handleStream(ctx, stream, headers, flags, rawHeaders as unknown as string[]);
    });
    server.on("sessionError", (err) => ctx.log.debug({ err: err.message, listener: cfg.name }, "client session error"));
  }

  listen(): Promise<AddressInfo> {
    const { host, port } = this.cfg.address;
    return new Promise((resolve, reject) => {
      const onError = (err: Error): void => reject(new ListenError(`${host}:${port} (listener ${this.cfg.name})`, { cause: err }));
      this.server.once("error", onError);
      this.server.listen(port, host, () => {
        this.server.off("error", onError);
        this.bound = this.server.address() as AddressInfo;
        resolve(this.bound);
      });
    });
  }

  get address(): AddressInfo | undefined {
    return this.bound;
  }

  /** Stops accepting connections and sends GOAWAY to every client; in-flight streams go on. */
  drain(): void {
    this.server.close();
    for (const s of this.sessions) {
      if (!s.closed && !s.destroyed) s.close();
    }
  }

  /**
   * Ends what is left after the drain timeout: each call still in flight gets a stamp
   * (14 UNAVAILABLE, decided_by shutdown: safe for the client to retry elsewhere), then the
   * sessions are closed once those last frames are flushed.
   */
  async destroy(): Promise<void> {
    for (const c of [...this.ctx.active]) c.finish(outcome(Code.UNAVAILABLE, "proxy is shutting down", "shutdown"));
    if (this.sessions.size > 0) await new Promise((r) => setTimeout(r, 50));
    for (const s of this.sessions) s.destroy();
  }
}
