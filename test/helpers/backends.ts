// Upstreams for the cluster tests: a grpc-js server with the Echo service (Unary answers with
// its own name, after an optional delay, or with a chosen error status) and grpc.health.v1 Check
// (grpc-node's own codec, health-peer.ts; its answer can be flipped, or held unanswered), counting the calls it served and logging the
// checks. Reuses peers.ts's Echo definition.
import * as grpc from "@grpc/grpc-js";
import { ECHO_SERVICE } from "./peers.js";
import { HEALTH_SERVICE, type HealthRequest, type HealthResponse } from "./health-peer.js";

export interface Backend {
  readonly name: string;
  readonly address: string;
  readonly port: number;
  /** Echo calls served (any outcome) */
  calls: number;
  /** health checks answered */
  checks: number;
  /** the health answer */
  serving: boolean;
  /** take health checks and never answer them */
  hangChecks: boolean;
  /** every health check: when it came (performance.now()), what it was answered (none while
   * hangChecks), and when the caller cancelled it (a held check given up) */
  readonly checkLog: { at: number; serving?: boolean; cancelledAt?: number }[];
  /** Unary waits this long before answering */
  delayMs: number;
  /** Unary answers with this status instead of its name (undefined: OK) */
  failWith: grpc.status | undefined;
  close(): Promise<void>;
}

export async function startBackend(name: string, port = 0, host = "127.0.0.1"): Promise<Backend> {
  const server = new grpc.Server();
  const b: Backend = {
    name,
    address: "",
    port: 0,
    calls: 0,
    checks: 0,
    serving: true,
    hangChecks: false,
    checkLog: [],
    delayMs: 0,
    failWith: undefined,
    close: () => new Promise<void>((r) => server.tryShutdown(() => r())).then(() => server.forceShutdown()),
  };
  const unary = (_call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>): void => {
    b.calls++;
    const answer = (): void => (b.failWith === undefined ? cb(null, Buffer.from(name)) : cb({ code: b.failWith, details: `${name} fails` }));
    if (b.delayMs > 0) setTimeout(answer, b.delayMs);
    else answer();
  };
  server.addService(ECHO_SERVICE, { Unary: unary });
  server.addService(HEALTH_SERVICE, {
    Check: (call: grpc.ServerUnaryCall<HealthRequest, HealthResponse>, cb: grpc.sendUnaryData<HealthResponse>) => {
      const entry: { at: number; serving?: boolean; cancelledAt?: number } = { at: performance.now() };
      b.checkLog.push(entry);
      if (b.hangChecks) {
        call.on("cancelled", () => (entry.cancelledAt = performance.now()));
        return;
      }
      b.checks++;
      entry.serving = b.serving;
      cb(null, { status: b.serving ? "SERVING" : "NOT_SERVING" });
    },
  });
  const bound = await new Promise<number>((res, rej) =>
    server.bindAsync(`${host.includes(":") ? `[${host}]` : host}:${port}`, grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))),
  );
  return Object.assign(b, { address: `${host.includes(":") ? `[${host}]` : host}:${bound}`, port: bound });
}

/** Runs `n` calls of `call` with `concurrency` in flight; resolves with each result. */
export async function runCalls<T>(n: number, concurrency: number, call: (i: number) => Promise<T>): Promise<T[]> {
  const out = new Array<T>(n);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, n) }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await call(i);
      }
    }),
  );
  return out;
}
