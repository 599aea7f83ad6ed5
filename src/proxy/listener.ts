// The downstream side: one node:http2 h2c server per configured listener (core stream API,
// not the compatibility API), its session limits, and GOAWAY on drain.
import http2, { type Http2Server, type ServerHttp2Session } from "node:http2";
import type { AddressInfo } from "node:net";
import type { ListenerConfig } from "../config/index.js";
import { ListenError } from "../errors.js";
import { Code, outcome } from "../translate/index.js";
import { handleStream, type CallContext } from "./call/call.js";

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
    const ctx: CallContext = { ...callContext, streamIdleTimeoutMs: cfg.streamIdleTimeoutMs };
    this.ctx = ctx;
    const server = http2.createServer({
      settings: {
        maxConcurrentStreams: cfg.maxConcurrentStreams,
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
    server.on("stream", (stream, headers, flags, rawHeaders) => handleStream(ctx, stream, headers, flags, rawHeaders as unknown as string[]));
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
