// The listener's ways in besides native gRPC: one table, a row per protocol a client may speak
// (JSON transcoding, gRPC-Web, Connect), and the two loops the listener runs over it, one for an
// HTTP/2 stream and one for an HTTP/1.1 request. A row says when the protocol is on, whether it
// has an HTTP/1.1 form (a TLS listener with it offers ALPN http/1.1; http1Address serves it),
// which CORS preflights it answers, and where its bridge is (bridge.ts Bridge, in the protocol's
// own file: how it recognises a request, serves it, words an overload refusal). A fourth protocol
// is one row here and one file.
//
// Order is the table's, on both transports: a request a JSON rule matches is transcoded (a Connect
// call is also an application/json or application/proto POST), then gRPC-Web and Connect by their
// content types and methods; an OPTIONS request no JSON rule names is a CORS preflight when a row
// answers those; what no row takes gets a row's own fallback (JSON's unknownPaths: notFound), else
// the native path (HTTP/2: health service, then a call) or a plain answer (HTTP/1.1).
import type { IncomingHttpHeaders, ServerHttp2Stream } from "node:http2";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { ListenerConfig } from "../../config/index.js";
import type { CallContext } from "../call/context.js";
import { heapPressure, responseBuffers } from "../observe/overload.js";
import type { Bridge, ListenerSide } from "./bridge.js";
import { CONNECT_BRIDGE } from "./connect.js";
import { CONNECT_PREFLIGHT, WEB_PREFLIGHT, joinPreflight, preflightCors, type PreflightAllow } from "./cors.js";
import { GRPC_WEB_BRIDGE } from "./grpc-web.js";
import { ignoreError } from "./guards.js";

export interface Protocol {
  /** its config key */
  readonly name: string;
  /** how an HTTP/1.1 answer names it ("this port takes gRPC-Web and Connect requests") */
  readonly label: string;
  enabled(cfg: ListenerConfig): boolean;
  /** it has an HTTP/1.1 form: a TLS listener with it offers ALPN http/1.1, and http1Address serves it */
  readonly http1: boolean;
  /** the CORS preflights it answers (listener `cors`); null: none */
  readonly preflight: PreflightAllow | null;
  /** HTTP/1.1's 405 to a request of its content type with another method: what follows "requests are POST" */
  readonly methodsNote: string;
  /** its bridge for this config (a module loaded and a config compiled on first use: may be a promise; throws on a bad config) */
  bridge(cfg: ListenerConfig): Bridge | Promise<Bridge>;
  /** what of the config the bridge is made from: a reload that changes it makes a new one */
  configKey(cfg: ListenerConfig): string;
}

/**
 * JSON transcoding (downstream/transcode.ts, with @bufbuild/protobuf) is loaded by the first
 * listener that has jsonTranscoding, never at start: a process without it does not evaluate it.
 */
type TranscodeModule = typeof import("./transcode.js");
let transcodeModule: TranscodeModule | undefined;

export const PROTOCOLS: readonly Protocol[] = [
  {
    name: "jsonTranscoding",
    label: "JSON",
    enabled: (cfg) => cfg.jsonTranscoding !== null,
    http1: true,
    preflight: null,
    methodsNote: "",
    bridge: (cfg) =>
      transcodeModule !== undefined
        ? transcodeModule.jsonBridge(cfg.jsonTranscoding!)
        : import("./transcode.js").then((m) => (transcodeModule = m).jsonBridge(cfg.jsonTranscoding!)),
    configKey: (cfg) => JSON.stringify(cfg.jsonTranscoding),
  },
  { name: "grpcWeb", label: "gRPC-Web", enabled: (cfg) => cfg.grpcWeb, http1: true, preflight: WEB_PREFLIGHT, methodsNote: "", bridge: () => GRPC_WEB_BRIDGE, configKey: () => "" },
  {
    name: "connect",
    label: "Connect",
    enabled: (cfg) => cfg.connect,
    http1: true,
    preflight: CONNECT_PREFLIGHT,
    methodsNote: " (a Connect unary call may be GET)",
    bridge: () => CONNECT_BRIDGE,
    configKey: () => "",
  },
];

/** The listener serves HTTP/1.1 (on http1Address, and on a TLS port by ALPN): some row with an HTTP/1.1 form is on. */
export function servesHttp1(cfg: ListenerConfig): boolean {
  return PROTOCOLS.some((p) => p.http1 && p.enabled(cfg));
}

/**
 * ALPN on a TLS listener: h2 only, or h2 and http/1.1. With any protocol that has an HTTP/1.1
 * form, http/1.1 is offered too and its requests arrive at the secure server's 'request' event
 * (served as on http1Address); without one a client that cannot speak h2 is refused in the
 * handshake.
 */
export function tlsAllowsHttp1(cfg: ListenerConfig): boolean {
  return cfg.tls !== null && servesHttp1(cfg);
}

/** One row that is on, with its bridge. */
export interface Way {
  readonly p: Protocol;
  readonly bridge: Bridge;
}

/** A listener's rows that are on, in table order, with their bridges (made, and remade when a reload changes their config). */
export class ListenerWays {
  ways: readonly Way[] = [];
  /** what a preflight allows: the rows that answer preflights, together; null when none is on */
  preflight: PreflightAllow | null = null;
  /** bridges still loading (listen() waits for them and throws their error); null when none */
  loading: Promise<void> | null = null;
  private readonly made: (Bridge | undefined)[] = PROTOCOLS.map(() => undefined);
  private readonly keys: string[] = PROTOCOLS.map(() => "");

  /** `notReloaded`: a reload's bridge that could not be made (the one in use is kept). */
  constructor(private readonly notReloaded: (name: string, err: Error) => void) {}

  /**
   * The rows of `cfg`. `strict` (a new listener): a bridge that cannot be made throws (or fails
   * listen(), when it loads); on a reload it is reported and the one in use kept.
   */
  use(cfg: ListenerConfig, strict: boolean): void {
    const pending: Promise<void>[] = [];
    for (let i = 0; i < PROTOCOLS.length; i++) {
      const p = PROTOCOLS[i]!;
      if (!p.enabled(cfg)) {
        this.made[i] = undefined;
        continue;
      }
      const key = p.configKey(cfg);
      if (this.made[i] !== undefined && this.keys[i] === key) continue;
      const failed = (err: unknown): void => {
        if (strict) throw err;
        this.notReloaded(p.name, err as Error);
      };
      const take = (b: Bridge): void => {
        this.made[i] = b;
        this.keys[i] = key;
      };
      let b: Bridge | Promise<Bridge>;
      try {
        b = p.bridge(cfg);
      } catch (err) {
        failed(err);
        continue;
      }
      if (b instanceof Promise) pending.push(b.then((x) => (take(x), this.refresh()), failed));
      else take(b);
    }
    this.refresh();
    if (pending.length > 0) {
      const all = Promise.all(pending).then(() => {});
      all.catch(() => {}); // (listen() reports it)
      this.loading = all;
    }
  }

  private refresh(): void {
    const ways: Way[] = [];
    for (let i = 0; i < PROTOCOLS.length; i++) if (this.made[i] !== undefined) ways.push({ p: PROTOCOLS[i]!, bridge: this.made[i]! });
    this.ways = ways;
    const pre = ways.filter((w) => w.p.preflight !== null).map((w) => w.p.preflight!);
    this.preflight = pre.length === 0 ? null : joinPreflight(pre);
  }
}

/** An HTTP/2 stream (counted, not refused): true when a row or its fallback took it; false: the native path's. */
export function dispatchH2(l: ListenerSide, lw: ListenerWays, stream: ServerHttp2Stream, h: IncomingHttpHeaders, raw: readonly string[]): boolean {
  const ways = lw.ways;
  const options = h[":method"] === "OPTIONS";
  for (let i = 0; i < ways.length; i++) {
    const w = ways[i]!;
    if (options && w.p.preflight !== null) {
      stream.on("error", ignoreError);
      const head = preflight(l, lw, one(h["origin"]), one(h["access-control-request-method"]), one(h["access-control-request-headers"]));
      stream.respond({ ":status": head === null ? 403 : 204, ...head }, { endStream: true });
      return true;
    }
    const c = w.bridge.classifyH2(l, h);
    if (c !== null) {
      w.bridge.serveH2(l, c, stream, h, raw);
      return true;
    }
  }
  for (let i = 0; i < ways.length; i++) if (ways[i]!.bridge.unclaimedH2?.(l, stream, h) === true) return true;
  return false;
}

/** What an HTTP/1.1 request refused under overload is told (refusesHttp1Call), in each protocol's form. */
export const OVERLOADED_MESSAGE = "dojang is overloaded (response-buffer budget or heap): call not started, retry later";

/** An HTTP/1.1 request (http1Address, or ALPN http/1.1 on a TLS port): a row's, a preflight, or a plain refusal. */
export function dispatchH1(l: ListenerSide, lw: ListenerWays, req: IncomingMessage, res: ServerResponse): void {
  const ways = lw.ways;
  const options = req.method === "OPTIONS";
  for (let i = 0; i < ways.length; i++) {
    const w = ways[i]!;
    if (options && w.p.preflight !== null) return preflightH1(l, lw, req, res);
    const c = w.bridge.classifyH1(l, req);
    if (c === null) continue;
    if (refusesHttp1Call(l.ctx)) return w.bridge.refuseH1(l, c, req, res, OVERLOADED_MESSAGE);
    return w.bridge.serveH1(l, c, req, res);
  }
  for (let i = 0; i < ways.length; i++) if (ways[i]!.bridge.unclaimedH1?.(l, req, res) === true) return;
  // (a preflight on a listener without a CORS protocol: refused as one, 403)
  if (options) return preflightH1(l, lw, req, res);
  // This socket serves nothing else (a plain HTTP answer, no call made); a request of a row's
  // content type with another method is 405.
  const ct = req.headers["content-type"];
  const owners = ways.filter((w) => w.bridge.ownsType?.(ct) === true);
  res.writeHead(owners.length > 0 ? 405 : 415, { "content-type": "text/plain; charset=utf-8" });
  const ownTypes = ways.filter((w) => w.bridge.ownsType !== undefined);
  res.end(
    owners.length > 0
      ? `dojang: ${names(ownTypes)} requests are POST${ownTypes.map((w) => w.p.methodsNote).join("")}\n`
      : `dojang: this port takes ${names(ways)} requests (see its content types in the docs)\n`,
  );
}

function preflightH1(l: ListenerSide, lw: ListenerWays, req: IncomingMessage, res: ServerResponse): void {
  const acrh = req.headers["access-control-request-headers"];
  const h = preflight(l, lw, req.headers.origin, req.headers["access-control-request-method"], typeof acrh === "string" ? acrh : undefined);
  res.writeHead(h === null ? 403 : 204, h ?? {});
  res.end();
}

function preflight(l: ListenerSide, lw: ListenerWays, origin: string | undefined, method: string | undefined, headers: string | undefined): Record<string, string> | null {
  return lw.preflight === null ? null : preflightCors(l.cors, origin, method, headers, lw.preflight);
}

/**
 * An HTTP/1.1 request that would start a call arrives: past the process's response-buffer budget
 * or under heap pressure no call is taken (the native port's REFUSED_STREAM; there is no stream
 * to refuse here, so the row answers "unavailable, retry" in its protocol's form, and nothing
 * goes upstream). True: refused, and counted.
 */
function refusesHttp1Call(ctx: CallContext): boolean {
  heapPressure.onStream();
  if (!responseBuffers.overloaded && !heapPressure.pressed) return false;
  responseBuffers.refused++;
  ctx.metrics.refusedStreams.inc();
  return true;
}

/** "A", "A and B", "A, B and C" */
function names(ways: readonly Way[]): string {
  const n = ways.map((w) => w.p.label);
  return n.length <= 1 ? (n[0] ?? "") : `${n.slice(0, -1).join(", ")} and ${n.at(-1)}`;
}

function one(v: string | string[] | undefined): string | undefined {
  return typeof v === "string" ? v : undefined;
}
