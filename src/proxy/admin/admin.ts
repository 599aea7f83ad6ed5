// The admin listener (HTTP/1.1, node:http): /metrics, /ready, /live, /config.
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { HostPort } from "../../config/index.js";
import { ListenError } from "../../errors.js";
export interface AdminState {
  /** Prometheus text and its content type (one process's registry, or all workers' summed) */
  metrics(): Promise<{ readonly contentType: string; readonly body: string }>;
  /** true while listening and not draining */
  ready(): boolean;
  /** the effective config, as served by /config */
  config(): unknown;
  /** the fault REST API (/faults…); null for other paths. Absent where faults are not served here. */
  faults?: (method: string, path: string, body: string) => { status: number; body: unknown } | null;
  /** the call journal, newest last */
  calls?: (last: number | undefined) => unknown[];
}

const MAX_BODY = 1 << 20;

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
  const headers: Record<string, string> = {};
  const allow = (body as { allow?: unknown } | null)?.allow;
  if (status === 405 && typeof allow === "string") headers["allow"] = allow;
  const text = JSON.stringify(body, null, 2) + "\n";
  res.writeHead(status, { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

export class AdminServer {
  readonly server: http.Server;
  private bound: AddressInfo | undefined;

  constructor(
    readonly address: HostPort,
    state: AdminState,
  ) {
    this.server = http.createServer((req, res) => {
      void route(state, req, res);
    });
    this.server.keepAliveTimeout = 5000;
  }

  listen(): Promise<AddressInfo> {
    const { host, port } = this.address;
    return new Promise((resolve, reject) => {
      const onError = (err: Error): void => reject(new ListenError(`${host}:${port} (admin)`, { cause: err }));
      this.server.once("error", onError);
      this.server.listen(port, host, () => {
        this.server.off("error", onError);
        this.bound = this.server.address() as AddressInfo;
        resolve(this.bound);
      });
    });
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

function send(res: ServerResponse, status: number, type: string, body: string): void {
  res.writeHead(status, { "content-type": type, "content-length": Buffer.byteLength(body) });
  res.end(body);
}

async function route(state: AdminState, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = req.url ?? "/";
  const q = url.indexOf("?");
  const path = q >= 0 ? url.slice(0, q) : url;
  const method = req.method ?? "GET";
  if (state.faults !== undefined && (path === "/faults" || path.startsWith("/faults/"))) {
    const body = method === "GET" || method === "HEAD" || method === "DELETE" ? "" : await readBody(req);
    if (body === null) return sendJson(res, 413, { error: `request body over ${MAX_BODY} bytes` });
    const r = state.faults(method, path, body);
    if (r !== null) return sendJson(res, r.status, r.body);
  }
  if (method !== "GET" && method !== "HEAD") return send(res, 405, "text/plain", "method not allowed\n");
  if (path === "/calls" && state.calls !== undefined) {
    const last = new URLSearchParams(q >= 0 ? url.slice(q + 1) : "").get("last");
    const n = last === null ? undefined : Number.parseInt(last, 10);
    if (n !== undefined && (!Number.isSafeInteger(n) || n < 0)) return sendJson(res, 400, { error: `last must be a whole number, got "${last}"` });
    return sendJson(res, 200, state.calls(n));
  }
  switch (path) {
    case "/metrics": {
      try {
        const m = await state.metrics();
        return send(res, 200, m.contentType, m.body);
      } catch (err) {
        return send(res, 500, "text/plain", `metrics error: ${(err as Error).message}\n`);
      }
    }
    case "/ready":
      return state.ready() ? send(res, 200, "text/plain", "ready\n") : send(res, 503, "text/plain", "draining\n");
    case "/live":
      return send(res, 200, "text/plain", "live\n");
    case "/config":
      return send(res, 200, "application/json", JSON.stringify(state.config(), null, 2) + "\n");
    default:
      return send(res, 404, "text/plain", "not found: try /metrics /ready /live /config /faults /calls\n");
  }
}
