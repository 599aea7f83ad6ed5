// The opt-in grpc.health.v1 service of a listener (healthService: true): Check and Watch, answered
// from the clusters behind a service name (the current snapshot's routes), NOT_SERVING while
// dojang or the listener drains. The wire format is src/translate/health.ts; this file is the
// streams: one request message read and bounded, the reply, and Watch streams re-evaluated by one
// timer per listener while any is open.
import type { IncomingHttpHeaders, ServerHttp2Stream } from "node:http2";
import { Code, GRPC_CONTENT_TYPE, MESSAGE_PREFIX_BYTES, encodeGrpcMessage, frameMessage, messageLength, prefixFlag } from "../../translate/index.js";
import { ServingStatus, decodeHealthRequest, encodeHealthResponse } from "../../translate/health.js";
import type { Cluster } from "../upstream/cluster.js";
import { ignoreError } from "./guards.js";

/** A session's state for the health service's replies (the clusters behind a service name). */
export type HealthTargets = (service: string) => readonly Cluster[] | null;

/** Request bytes a health call may send (a HealthCheckRequest is a service name). */
const MAX_HEALTH_REQUEST = 16 * 1024;
/** How often open Watch streams are re-evaluated (one timer per listener while any is open). */
const WATCH_INTERVAL_MS = 1000;

interface Watcher {
  readonly stream: ServerHttp2Stream;
  readonly service: string;
  last: number;
}

export class HealthService {
  private readonly watchers = new Set<Watcher>();
  private watchTimer: NodeJS.Timeout | undefined = undefined;

  constructor(
    private readonly targets: { readonly current: HealthTargets },
    /** whether dojang or the listener drains */
    private readonly draining: () => boolean,
  ) {}

  /**
   * The status of `service` on this listener: NOT_SERVING while dojang or this listener drains;
   * else SERVING when every cluster behind it has a healthy endpoint; null for a service no
   * route would take (NOT_FOUND for Check).
   */
  status(service: string): ServingStatus | null {
    const targets = this.targets.current(service);
    if (targets === null) return null;
    if (this.draining()) return ServingStatus.NOT_SERVING;
    for (const c of targets) if (!c.hasHealthyEndpoint()) return ServingStatus.NOT_SERVING;
    return ServingStatus.SERVING;
  }

  /** A Check (watch false) or Watch call. */
  serve(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, watch: boolean): void {
    stream.on("error", ignoreError);
    if (headers[":method"] !== "POST") {
      stream.respond({ ":status": 405, "content-type": GRPC_CONTENT_TYPE, "grpc-status": String(Code.INTERNAL), "grpc-message": "health: method must be POST" }, { endStream: true });
      return;
    }
    const chunks: Buffer[] = [];
    let n = 0;
    stream.on("data", (d: Buffer) => {
      n += d.length;
      if (n <= MAX_HEALTH_REQUEST) chunks.push(d);
    });
    stream.on("end", () => {
      if (stream.closed || stream.destroyed) return;
      const body = Buffer.concat(chunks);
      const len = body.length >= MESSAGE_PREFIX_BYTES ? messageLength(body) : -1;
      if (n > MAX_HEALTH_REQUEST) return trailersOnly(stream, Code.RESOURCE_EXHAUSTED, "health: request too large");
      if (len < 0 || prefixFlag(body) !== 0 || body.length !== MESSAGE_PREFIX_BYTES + len) return trailersOnly(stream, Code.INTERNAL, "health: expected one uncompressed HealthCheckRequest");
      const req = decodeHealthRequest(body.subarray(MESSAGE_PREFIX_BYTES));
      if (!req.ok) return trailersOnly(stream, Code.INTERNAL, `health: ${req.error}`);
      const status = this.status(req.service);
      if (!watch) {
        // grpc-go's health server: an unregistered service is NOT_FOUND "unknown service".
        if (status === null) return trailersOnly(stream, Code.NOT_FOUND, "unknown service");
        stream.respond({ ":status": 200, "content-type": GRPC_CONTENT_TYPE }, { waitForTrailers: true });
        stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0", "grpc-message": "" }));
        stream.end(healthMessage(status));
        return;
      }
      // Watch: the current status now (SERVICE_UNKNOWN for a service no route takes, as
      // grpc-go), then every change, until the client ends the stream or dojang drains.
      const first = status ?? ServingStatus.SERVICE_UNKNOWN;
      stream.respond({ ":status": 200, "content-type": GRPC_CONTENT_TYPE }, { waitForTrailers: true });
      stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0", "grpc-message": "" }));
      stream.write(healthMessage(first));
      const w: Watcher = { stream, service: req.service, last: first };
      this.watchers.add(w);
      stream.once("close", () => this.watchers.delete(w));
      if (this.watchTimer === undefined) this.watchTimer = setInterval(() => this.tickWatchers(), WATCH_INTERVAL_MS).unref();
    });
  }

  private tickWatchers(): void {
    if (this.watchers.size === 0) {
      clearInterval(this.watchTimer);
      this.watchTimer = undefined;
      return;
    }
    for (const w of this.watchers) {
      if (w.stream.closed || w.stream.destroyed) {
        this.watchers.delete(w);
        continue;
      }
      const s = this.status(w.service) ?? ServingStatus.SERVICE_UNKNOWN;
      if (s === w.last) continue;
      w.last = s;
      w.stream.write(healthMessage(s));
    }
  }

  /** The listener drains: Watch streams hear NOT_SERVING now, then end, so a draining connection is not held open. */
  drain(): void {
    for (const w of this.watchers) {
      if (w.stream.closed || w.stream.destroyed) continue;
      if (w.last !== ServingStatus.NOT_SERVING) w.stream.write(healthMessage(ServingStatus.NOT_SERVING));
      w.stream.end();
    }
    this.watchers.clear();
  }

  /** The listener is destroyed: no timer left. */
  close(): void {
    if (this.watchTimer !== undefined) clearInterval(this.watchTimer);
    this.watchTimer = undefined;
  }
}

function healthMessage(status: ServingStatus): Buffer {
  const f = frameMessage(encodeHealthResponse(status));
  return Buffer.from(f.buffer, f.byteOffset, f.length);
}

function trailersOnly(stream: ServerHttp2Stream, code: number, message: string): void {
  if (stream.headersSent || stream.closed) return;
  stream.respond({ ":status": 200, "content-type": GRPC_CONTENT_TYPE, "grpc-status": String(code), "grpc-message": encodeGrpcMessage(message) }, { endStream: true });
}
