// envoyproxy/ratelimit (the ratelimit engine, built from the Go module proxy by
// scripts/engines.mjs) on a real redis-server, on free loopback ports: the global rate limit's
// reference service. Both run in process groups of their own (spawnGroup), killed when the test
// or the file ends.
import type { ChildProcess } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { engineBinary, systemBinary } from "./engines.js";
import { canConnect, freePort, httpGet, spawnGroup, tempDir, waitFor } from "./process.js";

export interface Redis {
  readonly port: number;
  readonly child: ChildProcess;
  readonly dir: { remove(): void };
}

/** redis-server on a free port, nothing persisted; ready when it accepts connections. */
export async function startRedis(): Promise<Redis> {
  const dir = tempDir();
  const port = await freePort();
  const child = spawnGroup(systemBinary("redis-server"), ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir.dir], { stdio: "ignore" });
  await waitFor("redis-server", async () => ((await canConnect(port)) ? true : undefined), 30_000, 50);
  return { port, child, dir };
}

export interface Rls {
  readonly address: string;
  readonly child: ChildProcess;
  /** grpc, http, debug */
  readonly ports: readonly [number, number, number];
  readonly dir: { remove(): void };
}

/**
 * envoyproxy/ratelimit with `config` as its one domain file, against redis on `redisPort`; ready
 * when its health check answers and its gRPC port accepts. `ports` restarts it where it was; `env`
 * adds its settings (GRPC_SERVER_USE_TLS and the certificate files, say).
 */
export async function startRls(config: string, redisPort: number, ports?: readonly [number, number, number], env: Readonly<Record<string, string>> = {}): Promise<Rls> {
  const d = tempDir();
  mkdirSync(join(d.dir, "rl", "config"), { recursive: true });
  writeFileSync(join(d.dir, "rl", "config", "test.yaml"), config);
  const [grpcPort, port, debugPort] = ports ?? [await freePort(), await freePort(), await freePort()];
  const child = spawnGroup(engineBinary("ratelimit"), [], {
    env: {
      PATH: process.env["PATH"] ?? "",
      HOST: "127.0.0.1",
      GRPC_HOST: "127.0.0.1",
      DEBUG_HOST: "127.0.0.1",
      GRPC_PORT: String(grpcPort),
      PORT: String(port),
      DEBUG_PORT: String(debugPort),
      RUNTIME_ROOT: d.dir,
      RUNTIME_SUBDIRECTORY: "rl",
      RUNTIME_WATCH_ROOT: "false",
      RUNTIME_IGNOREDOTFILES: "true",
      REDIS_SOCKET_TYPE: "tcp",
      REDIS_URL: `127.0.0.1:${redisPort}`,
      USE_STATSD: "false",
      LOG_LEVEL: "warn",
      ...env,
    },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let err = "";
  child.stderr!.setEncoding("utf8").on("data", (s: string) => (err = (err + s).slice(-4000)));
  await waitFor(
    "ratelimit /healthcheck",
    async () => {
      if (child.exitCode !== null) throw new Error(`ratelimit exited ${child.exitCode}: ${err}`);
      const r = await httpGet(`127.0.0.1:${port}`, "/healthcheck", 1000).catch(() => undefined);
      return r?.status === 200 && (await canConnect(grpcPort)) ? true : undefined;
    },
    60_000,
    100,
  );
  return { address: `127.0.0.1:${grpcPort}`, child, ports: [grpcPort, port, debugPort], dir: d };
}
