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
  if (req.method !== "GET" && req.method !== "HEAD") return send(res, 405, "text/plain", "method not allowed\n");
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
      return send(res, 404, "text/plain", "not found: try /metrics /ready /live /config\n");
  }
}
