// The admin listener (HTTP/1.1, node:http). Its surface is one table, ROUTES, in three kinds:
// - reads (/metrics, /ready, /live, /config, GET /faults, GET /clusters, the /ui page's files) are
//   open to whoever reaches the address;
// - record reads (GET /calls, GET /stats, GET /tap: what calls did, who made them) need
//   `Authorization: Bearer <admin.token>` when a token is set, and are refused (403) on an
//   address other machines reach when none is set;
// - mutations (every non-GET/HEAD on /faults, POST /reload, POST /drain) are refused with 403
//   unless the config says `admin.mutations: true`, and with `admin.token` set they also need the
//   token (401 otherwise).
// Nothing here runs per proxied call; GET /stats computes only when asked.
import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, Server as HttpServer, ServerResponse } from "node:http";
import { http } from "../downstream/node-http.js";
import type { AddressInfo } from "node:net";
import type { AdminConfig, HostPort } from "../../config/index.js";
import { isLoopbackHost } from "../../config/loopback.js";
import { redactSecrets } from "../../config/redact.js";
import { parseDuration } from "../../config/units.js";
import { ListenError } from "../../errors.js";
import type { AccessRecord } from "../observe/log.js";
import { STATS_WINDOWS } from "../observe/stats.js";
import { parseTapFilter, type TapFilter, type TapSink } from "../observe/tap.js";
import { UI_FILES } from "./ui.gen.js";
import type { ListenOn } from "../upgrade-sockets.js";

export interface AdminReply {
  readonly status: number;
  /** JSON-serializable; null for 204 */
  readonly body: unknown;
}

export interface AdminState {
  /** Prometheus text and its content type (one process's registry, or all workers' summed) */
  metrics(): Promise<{ readonly contentType: string; readonly body: string }>;
  /** true while listening and not draining */
  ready(): boolean;
  /** why /ready answers 503 ("draining", "cluster X has no healthy endpoint"); null when ready. Absent: ready() decides, "draining". */
  notReady?: () => string | null | Promise<string | null>;
  /** POST /reload: re-read the config file and swap it in; 200 with what applied, 400 with the issues */
  reload?: () => Promise<AdminReply>;
  /** POST /drain: SIGTERM's twin (drain, then exit); answers 202 at once */
  drain?: () => AdminReply | Promise<AdminReply>;
  /** the effective config, as served by /config (secrets are redacted here, not by the caller) */
  config(): unknown;
  /** the fault REST API (/faults…); null for other paths. Absent where faults are not served here. */
  faults?: (method: string, path: string, body: string) => AdminReply | null | Promise<AdminReply | null>;
  /** the call journal (or with `failed` the failed-calls ring), oldest first */
  calls?: (q: CallsQuery) => unknown[] | Promise<unknown[]>;
  /** GET /stats: the windowed stats over a window of STATS_WINDOWS ("10s", "1m", "10m") */
  stats?: (window: string, withState: boolean) => unknown;
  /** GET /tap: `sink` gets the records of the calls that end and pass `query`'s filter until the unsubscribe is called */
  tap?: (query: string, filter: TapFilter, sink: HttpTapSink) => (() => void) | Promise<() => void>;
  /** GET /clusters: each cluster's endpoints, health, ejections, sessions and breakers */
  clusters?: () => unknown[] | Promise<unknown[]>;
}

/** Who may change traffic through the admin listener: the `admin` config block. */
export type AdminAccess = Pick<AdminConfig, "mutations" | "token">;

/** GET /calls's query: `last`, `failed` (the failed-calls ring instead of the journal), `since` (ended within). */
export interface CallsQuery {
  readonly last: number | undefined;
  readonly failed: boolean;
  /** only calls that ended within this many ms before now */
  readonly sinceMs: number | undefined;
}

/**
 * What one GET /tap response may hold unsent (its socket's buffer): past it records are dropped
 * and counted, and the count goes out as `{"tap_dropped":N}` before the next record that fits. A
 * reader slower than the calls loses records, never dojang's memory.
 */
export const TAP_BUFFER_BYTES = 256 * 1024;

const MAX_BODY = 1 << 20;
const READ_METHODS = "GET, HEAD";

interface Request {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly method: string;
  readonly path: string;
  readonly query: string;
}

interface AdminRoute {
  /** the path, and with `prefix` every path under it ("/faults/…") */
  readonly path: string;
  readonly prefix?: boolean;
  /** methods answered (others get 405); undefined: the handler decides */
  readonly methods?: string;
  /** whether this method on this route changes traffic (so needs mutations on, and the token) */
  readonly mutation: (method: string) => boolean;
  /** a record read: the token when one is set, and one set off loopback */
  readonly records?: boolean;
  /** whether this server has it (a worker-less library instance, a cluster primary …) */
  readonly served?: (s: AdminState) => boolean;
  readonly handle: (s: AdminState, r: Request) => Promise<void> | void;
}

const never = (): boolean => false;
const always = (): boolean => true;
const unlessRead = (m: string): boolean => m !== "GET" && m !== "HEAD";

/** The admin surface. A new endpoint is one entry; `mutation` puts it behind the switch and the token. */
const ROUTES: readonly AdminRoute[] = [
  { path: "/metrics", methods: READ_METHODS, mutation: never, handle: metrics },
  {
    path: "/ready",
    methods: READ_METHODS,
    mutation: never,
    handle: async (s, r) => {
      const why = s.notReady !== undefined ? await s.notReady() : s.ready() ? null : "draining";
      return why === null ? send(r.res, 200, "text/plain", "ready\n") : send(r.res, 503, "text/plain", why + "\n");
    },
  },
  { path: "/live", methods: READ_METHODS, mutation: never, handle: (_s, r) => send(r.res, 200, "text/plain", "live\n") },
  {
    path: "/config",
    methods: READ_METHODS,
    mutation: never,
    handle: (s, r) => send(r.res, 200, "application/json", JSON.stringify(redactSecrets(s.config()), null, 2) + "\n"),
  },
  { path: "/faults", prefix: true, mutation: unlessRead, served: (s) => s.faults !== undefined, handle: faults },
  { path: "/reload", methods: "POST", mutation: always, served: (s) => s.reload !== undefined, handle: async (s, r) => reply(r, await s.reload!()) },
  { path: "/drain", methods: "POST", mutation: always, served: (s) => s.drain !== undefined, handle: async (s, r) => reply(r, await s.drain!()) },
  { path: "/calls", methods: READ_METHODS, mutation: never, records: true, served: (s) => s.calls !== undefined, handle: calls },
  { path: "/stats", methods: READ_METHODS, mutation: never, records: true, served: (s) => s.stats !== undefined, handle: stats },
  { path: "/tap", methods: "GET", mutation: never, records: true, served: (s) => s.tap !== undefined, handle: tap },
  // the dashboard page: static files (no data; the page reads /stats with the token it is given)
  { path: "/ui", prefix: true, methods: READ_METHODS, mutation: never, served: (s) => s.stats !== undefined, handle: ui },
  { path: "/clusters", methods: READ_METHODS, mutation: never, served: (s) => s.clusters !== undefined, handle: async (s, r) => sendJson(r.res, 200, await s.clusters!()) },
];

function findRoute(path: string): AdminRoute | undefined {
  for (const r of ROUTES) if (path === r.path || (r.prefix === true && path.startsWith(r.path + "/"))) return r;
  return undefined;
}

function sha256(s: string): Buffer {
  return createHash("sha256").update(s, "utf8").digest();
}

export class AdminServer {
  readonly server: HttpServer;
  readonly address: HostPort;
  private bound: AddressInfo | undefined;

  constructor(cfg: { readonly address: HostPort } & Partial<AdminAccess>, state: AdminState) {
    this.address = cfg.address;
    const access: Access = {
      mutations: cfg.mutations ?? false,
      loopback: isLoopbackHost(cfg.address.host),
      // Only the digest is kept: comparing digests of equal length makes the check constant-time
      // whatever the presented token's length, and the token itself is never in reach of a log.
      tokenDigest: cfg.token === null || cfg.token === undefined ? null : sha256(cfg.token),
    };
    this.server = http.createServer((req, res) => {
      void route(state, access, req, res).catch((err: unknown) => {
        if (!res.headersSent) send(res, 500, "text/plain", `admin error: ${(err as Error).message}\n`);
        else res.destroy();
      });
    });
    this.server.keepAliveTimeout = 5000;
  }

  /** Binds the admin address, or listens on the socket the previous process handed over (`dojang upgrade`). */
  listen(on?: ListenOn): Promise<AddressInfo> {
    const { host, port } = this.address;
    return new Promise((resolve, reject) => {
      const onError = (err: Error): void => reject(new ListenError(`${host}:${port} (admin)`, { cause: err }));
      this.server.once("error", onError);
      const done = (): void => {
        this.server.off("error", onError);
        this.bound = this.server.address() as AddressInfo;
        resolve(this.bound);
      };
      if (on === undefined) this.server.listen(port, host, done);
      else this.server.listen(on, done);
    });
  }

  /**
   * No new connections (its socket was handed to the next process, which answers from now on);
   * requests on connections already open are still answered, until close().
   */
  stopAccepting(): void {
    if (this.server.listening) this.server.close();
  }

  get boundAddress(): AddressInfo | undefined {
    return this.bound;
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}

interface Access {
  readonly mutations: boolean;
  /** the admin listens on loopback only */
  readonly loopback: boolean;
  readonly tokenDigest: Buffer | null;
}

async function route(state: AdminState, access: Access, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = req.url ?? "/";
  const q = url.indexOf("?");
  const r: Request = { req, res, method: req.method ?? "GET", path: q >= 0 ? url.slice(0, q) : url, query: q >= 0 ? url.slice(q + 1) : "" };
  const rt = findRoute(r.path);
  if (rt === undefined || (rt.served !== undefined && !rt.served(state))) {
    const known = ROUTES.filter((x) => x.served === undefined || x.served(state)).map((x) => x.path);
    return send(res, 404, "text/plain", `not found: try ${known.join(" ")}\n`);
  }
  if (rt.methods !== undefined && !rt.methods.split(", ").includes(r.method)) {
    res.setHeader("allow", rt.methods);
    return send(res, 405, "text/plain", "method not allowed\n");
  }
  if (rt.mutation(r.method)) {
    const refusal = refuse(access, req, r.method, r.path);
    if (refusal !== null) return refusal(res);
  } else if (rt.records === true) {
    const refusal = refuseRecords(access, req, r.path);
    if (refusal !== null) return refusal(res);
  }
  return rt.handle(state, r);
}

/**
 * A Host header a page on this machine's browser sends to a loopback admin: an address literal
 * ("127.0.0.1:9901", "[::1]:9901") or localhost. Any other name reached the loopback listener
 * through DNS rebinding (a web page whose name now resolves to 127.0.0.1): without a token the
 * record reads would be open to that page's script, so they are refused.
 */
export function isLocalHostHeader(host: string | undefined): boolean {
  if (host === undefined) return true; // (HTTP/1.0 without Host: not a browser's)
  const h = host.toLowerCase();
  const name = h.startsWith("[") ? h.slice(0, h.indexOf("]") + 1) : h.replace(/:\d*$/, "");
  return name === "localhost" || name.startsWith("[") || /^\d{1,3}(\.\d{1,3}){3}$/.test(name);
}

/** null when the record read may go ahead; else what to answer. */
function refuseRecords(access: Access, req: IncomingMessage, path: string): ((res: ServerResponse) => void) | null {
  if (access.tokenDigest === null) {
    if (access.loopback) {
      if (isLocalHostHeader(req.headers.host)) return null;
      return (res) => sendJson(res, 403, { error: `${path}: the Host header names neither an address nor localhost (a page reaching a loopback admin by another name): ask by address, or set admin.token`, enable: "admin.token" });
    }
    return (res) =>
      sendJson(res, 403, {
        error: `${path} shows what calls did and who made them, and the admin listens where other machines reach it: set admin.token (for example \${DOJANG_ADMIN_TOKEN}) and send it as Authorization: Bearer <token>`,
        enable: "admin.token",
      });
  }
  return bearerRefusal(access.tokenDigest, req, `${path} needs the header Authorization: Bearer <admin.token>`);
}

/** null when the request carries the token; else the 401 with its challenge. */
function bearerRefusal(digest: Buffer, req: IncomingMessage, missing: string): ((res: ServerResponse) => void) | null {
  const m = /^Bearer[ \t]+(\S(?:.*\S)?)[ \t]*$/i.exec(req.headers.authorization ?? "");
  if (m !== null && timingSafeEqual(sha256(m[1]!), digest)) return null;
  const challenge = m === null ? 'Bearer realm="dojang admin"' : 'Bearer realm="dojang admin", error="invalid_token"';
  return (res) => {
    res.setHeader("www-authenticate", challenge);
    sendJson(res, 401, { error: m === null ? missing : "the bearer token does not match admin.token" });
  };
}

/** null when the mutation may go ahead; else what to answer (before any body is read). */
function refuse(access: Access, req: IncomingMessage, method: string, path: string): ((res: ServerResponse) => void) | null {
  if (!access.mutations) {
    return (res) =>
      sendJson(res, 403, {
        error: `${method} ${path} changes traffic and admin mutations are off; set admin.mutations: true in the config to allow it`,
        enable: "admin.mutations: true",
      });
  }
  if (access.tokenDigest === null) return null;
  return bearerRefusal(access.tokenDigest, req, "admin mutations need the header Authorization: Bearer <admin.token>");
}

async function metrics(s: AdminState, r: Request): Promise<void> {
  try {
    const m = await s.metrics();
    send(r.res, 200, m.contentType, m.body);
  } catch (err) {
    send(r.res, 500, "text/plain", `metrics error: ${(err as Error).message}\n`);
  }
}

async function faults(s: AdminState, r: Request): Promise<void> {
  const m = r.method;
  const body = m === "GET" || m === "HEAD" || m === "DELETE" ? "" : await readBody(r.req);
  if (body === null) return sendJson(r.res, 413, { error: `request body over ${MAX_BODY} bytes` });
  const out = await s.faults!(m, r.path, body);
  if (out === null) return send(r.res, 404, "text/plain", "not found\n");
  sendJson(r.res, out.status, out.body);
}

function reply(r: Request, out: AdminReply): void {
  // The request body is not read (there is none to read); drained so the connection stays usable.
  r.req.resume();
  sendJson(r.res, out.status, out.body);
}

async function calls(s: AdminState, r: Request): Promise<void> {
  const q = new URLSearchParams(r.query);
  const last = q.get("last");
  const n = last === null ? undefined : /^\d+$/.test(last) ? Number(last) : NaN;
  if (n !== undefined && !Number.isSafeInteger(n)) return sendJson(r.res, 400, { error: `last must be a whole number, got "${last}"` });
  const failed = q.get("failed");
  if (failed !== null && failed !== "" && failed !== "true" && failed !== "1") return sendJson(r.res, 400, { error: `failed takes no value (or true), got "${failed}"` });
  const since = q.get("since");
  let sinceMs: number | undefined;
  if (since !== null) {
    const d = parseDuration(since);
    if (!d.ok || /^\s*\d+(\.\d+)?\s*$/.test(since)) return sendJson(r.res, 400, { error: `since must be a duration with a unit ("60s", "5m"), got "${since}"` });
    sinceMs = d.ms;
  }
  sendJson(r.res, 200, await s.calls!({ last: n, failed: failed !== null, sinceMs }));
}

async function stats(s: AdminState, r: Request): Promise<void> {
  const q = new URLSearchParams(r.query);
  const w = q.get("window") ?? "1m";
  if (!Object.hasOwn(STATS_WINDOWS, w)) return sendJson(r.res, 400, { error: `window must be one of ${Object.keys(STATS_WINDOWS).join(", ")}, got "${w}"` });
  const st = q.get("state");
  const body = await s.stats!(w, st !== null && st !== "0" && st !== "false");
  // (polled by the page and by `dojang top`: never cached)
  r.res.setHeader("cache-control", "no-store");
  sendJson(r.res, 200, body);
}

/**
 * GET /tap: NDJSON, one access record per line as calls end (chunked, until the client goes).
 * The sink never holds more than TAP_BUFFER_BYTES unsent: past it, drop and count.
 */
async function tap(s: AdminState, r: Request): Promise<void> {
  const f = parseTapFilter(new URLSearchParams(r.query));
  if (typeof f === "string") return sendJson(r.res, 400, { error: f });
  const res = r.res;
  res.writeHead(200, { "content-type": "application/x-ndjson", "cache-control": "no-store", "x-content-type-options": "nosniff" });
  // (the status line goes out now: a client sees the stream open before the first record)
  res.flushHeaders();
  const sink = new HttpTapSink(res);
  let unsubscribe: (() => void) | undefined;
  let gone = false;
  res.on("close", () => {
    gone = true;
    unsubscribe?.();
  });
  r.req.resume();
  const u = await s.tap!(r.query, f, sink);
  if (gone) u();
  else unsubscribe = u;
}

/** One GET /tap response as a TapSink: bounded by its socket's unsent bytes. */
export class HttpTapSink implements TapSink {
  /** records dropped since the last `tap_dropped` line */
  private dropped = 0;
  private drainHooked = false;
  constructor(private readonly res: ServerResponse) {}

  push(rec: AccessRecord): void {
    this.line(JSON.stringify(rec));
  }

  /** Several records at once (a worker's batch), and what the worker dropped itself. */
  pushAll(lines: readonly string[], droppedBefore: number): void {
    this.dropped += droppedBefore;
    for (const l of lines) this.line(l);
  }

  private line(text: string): void {
    const res = this.res;
    if (res.destroyed || res.writableEnded) return;
    if (res.writableLength > TAP_BUFFER_BYTES) {
      this.dropped++;
      if (!this.drainHooked) {
        this.drainHooked = true;
        res.once("drain", () => {
          this.drainHooked = false;
          this.flushDropped();
        });
      }
      return;
    }
    this.flushDropped();
    res.write(text + "\n");
  }

  private flushDropped(): void {
    if (this.dropped === 0) return;
    const n = this.dropped;
    this.dropped = 0;
    this.res.write(`{"tap_dropped":${n}}\n`);
  }
}

/** The dashboard's files (built into ui.ts from src/proxy/admin/ui/ by scripts/ui.mjs). */
function ui(_s: AdminState, r: Request): void {
  const name = r.path === "/ui" || r.path === "/ui/" ? "index.html" : r.path.slice("/ui/".length);
  const f = UI_FILES[name];
  if (f === undefined) return send(r.res, 404, "text/plain", "not found\n");
  r.res.writeHead(200, {
    "content-type": f.type,
    "content-length": Buffer.byteLength(f.body),
    "cache-control": "no-cache",
    "x-content-type-options": "nosniff",
    // the page's own files only: no CDN, no inline script, no other origin to talk to
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; frame-ancestors 'none'; form-action 'none'",
    "referrer-policy": "no-referrer",
  });
  r.res.end(r.method === "HEAD" ? undefined : f.body);
}

function readBody(req: IncomingMessage): Promise<string | null> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let n = 0;
    req.on("data", (c: Buffer) => {
      n += c.length;
      if (n > MAX_BODY) {
        resolve(null);
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", () => resolve(null));
  });
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  if (status === 204 || body === null) {
    res.writeHead(status);
    res.end();
    return;
  }
  const allow = (body as { allow?: unknown } | null)?.allow;
  if (status === 405 && typeof allow === "string") res.setHeader("allow", allow);
  const text = JSON.stringify(body, null, 2) + "\n";
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

function send(res: ServerResponse, status: number, type: string, body: string): void {
  res.writeHead(status, { "content-type": type, "content-length": Buffer.byteLength(body) });
  res.end(body);
}
