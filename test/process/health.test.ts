// `dojang health`: a real dojang process asked by a second real process (`node dist/cli.js
// health`), as Docker's HEALTHCHECK does. It reads the server's config (--config, DOJANG_CONFIG,
// ${VAR} expansion), asks the admin's /ready, and never starts a proxy of its own.
import * as grpc from "@grpc/grpc-js";
import net from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { echoClient, startGrpcServer, unary, type EchoClient, type GrpcServer } from "../helpers/peers.js";
import {
  answerAfterPayloadMs,
  assertDistBuilt,
  canConnect,
  childEnv,
  configYaml,
  freePort,
  httpGet,
  killSpawned,
  occupyPort,
  runCli,
  spawnDojang,
  tempDir,
  waitFor,
  waitReady,
} from "../helpers/process.js";
import { healthTarget, timeoutOption } from "../../src/health.js";
import { configFromText } from "../../src/config/index.js";

const tmp = tempDir();
let up: GrpcServer;
const clients: EchoClient[] = [];

beforeAll(async () => {
  assertDistBuilt();
  // Unary answers after n ms, n being the request payload.
  up = await startGrpcServer({ Unary: answerAfterPayloadMs((_ms, request) => request) });
});
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  await killSpawned();
});
afterAll(async () => {
  await up.close();
  tmp.remove();
});

describe("dojang health", () => {
  it("exits 0 with one line when the running dojang is ready (--config, and DOJANG_CONFIG with ${VAR} expansion)", async () => {
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const file = tmp.write(`ready-${adminPort}.yaml`, configYaml({ listenPort, adminPort: "${HEALTH_ADMIN_PORT}", upstream: up.address }));
    const env = childEnv({ HEALTH_ADMIN_PORT: String(adminPort) });
    const p = spawnDojang(["--config", file], env);
    await waitReady(p, `127.0.0.1:${adminPort}`);

    const byFlag = await runCli(["health", "--config", file], env);
    expect(byFlag.code).toBe(0);
    expect(byFlag.stdout).toBe(`dojang health: ready (http://127.0.0.1:${adminPort}/ready 200)\n`);

    const byEnv = await runCli(["health"], childEnv({ HEALTH_ADMIN_PORT: String(adminPort), DOJANG_CONFIG: file }));
    expect(byEnv.code).toBe(0);
  });

  it("exits 1 while dojang drains (SIGTERM with a call in flight): /ready answers 503", async () => {
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const file = tmp.write(`drain-${adminPort}.yaml`, configYaml({ listenPort, adminPort, upstream: up.address, drainTimeout: "10s" }));
    const p = spawnDojang(["--config", file]);
    const admin = `127.0.0.1:${adminPort}`;
    await waitReady(p, admin);
    const c = echoClient(`127.0.0.1:${listenPort}`);
    clients.push(c);
    const call = unary(c, Buffer.from("3000"), new grpc.Metadata(), { deadline: Date.now() + 20_000 });
    await waitFor("the call to be in flight", async () => ((await httpGet(admin, "/metrics")).body.includes("dojang_active_calls 1") ? true : undefined), 5000);
    p.child.kill("SIGTERM");
    await waitFor("/ready 503", async () => ((await httpGet(admin, "/ready", 500)).status === 503 ? true : undefined), 3000, 10);

    const r = await runCli(["health", "--config", file]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`dojang health: not ready: http://${admin}/ready answered 503 "draining"\n`);
    expect((await call).err).toBeNull();
  });

  it("exits 1 when nothing runs there, and starts nothing itself (its listener port stays closed)", async () => {
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const file = tmp.write(`down-${adminPort}.yaml`, configYaml({ listenPort, adminPort, upstream: up.address }));
    const r = await runCli(["health", "--config", file]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`dojang health: not ready: http://127.0.0.1:${adminPort}/ready: connection refused (is dojang running?)\n`);
    expect(await canConnect(listenPort, 300)).toBe(false);
    expect(await canConnect(adminPort, 300)).toBe(false);
  });

  it("exits 1 with the reason when the admin port accepts but does not answer within --timeout", async () => {
    const held: net.Socket[] = [];
    const silent = net.createServer((s) => held.push(s));
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", () => r()));
    const adminPort = (silent.address() as net.AddressInfo).port;
    try {
      const file = tmp.write(`silent-${adminPort}.yaml`, configYaml({ listenPort: await freePort(), adminPort }));
      const t0 = Date.now();
      const r = await runCli(["health", "--config", file, "--timeout", "300ms"]);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(`dojang health: not ready: http://127.0.0.1:${adminPort}/ready did not answer within 300ms\n`);
      expect(Date.now() - t0).toBeLessThan(8000);
    } finally {
      for (const s of held) s.destroy();
      await new Promise<void>((r) => silent.close(() => r()));
    }
  });

  it("exits 2 when the config has no admin, an ephemeral admin port, or is invalid", async () => {
    const noAdmin = tmp.write("no-admin.yaml", configYaml({ listenPort: await freePort() }));
    const r1 = await runCli(["health", "--config", noAdmin]);
    expect(r1.code).toBe(2);
    expect(r1.stderr).toMatch(/^dojang health: the config has no admin listener \(admin\.address\)/);

    const ephemeral = tmp.write("ephemeral.yaml", configYaml({ listenPort: 0, adminPort: 0 }));
    const r2 = await runCli(["health", "--config", ephemeral]);
    expect(r2.code).toBe(2);
    expect(r2.stderr).toContain("has port 0 (ephemeral)");

    const invalid = tmp.write("invalid.yaml", configYaml({ listenPort: await freePort(), adminPort: await freePort(), routeCluster: "nope" }));
    const r3 = await runCli(["health", "--config", invalid]);
    expect(r3.code).toBe(2);
    expect(r3.stderr).toContain("listeners[0].routes[0].cluster");

    const unset = tmp.write("unset.yaml", configYaml({ listenPort: await freePort(), adminPort: "${HEALTH_UNSET_PORT}" }));
    const r4 = await runCli(["health", "--config", unset], childEnv({ HEALTH_UNSET_PORT: undefined }));
    expect(r4.code).toBe(2);
    expect(r4.stderr).toContain("HEALTH_UNSET_PORT");

    const r5 = await runCli(["health", "--bogus"]);
    expect(r5.code).toBe(2);
  });

  it("does not mind the proxy's own ports being taken (it binds nothing)", async () => {
    const taken = await occupyPort();
    try {
      const file = tmp.write(`taken-${taken.port}.yaml`, configYaml({ listenPort: taken.port, adminPort: await freePort() }));
      const r = await runCli(["health", "--config", file]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain("connection refused");
    } finally {
      await taken.close();
    }
  });
});

describe("--timeout (health and reload)", () => {
  it("takes a duration with a unit, and refuses one without (5 s or 5 ms?) naming the units, as the config does", () => {
    expect(timeoutOption(undefined, 2000)).toBe(2000);
    expect(timeoutOption("300ms", 2000)).toBe(300);
    expect(timeoutOption("5s", 2000)).toBe(5000);
    expect(timeoutOption("5", 2000)).toBe('--timeout: "5" has no unit: write 5ms, 5s, 5m or 5h');
  });

  it("dojang health --timeout 5 exits 2 with that line", async () => {
    const r = await runCli(["health", "--config", "config/dojang.yaml", "--timeout", "5"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('dojang health: --timeout: "5" has no unit: write 5ms, 5s, 5m or 5h\n');
  });
});

describe("healthTarget", () => {
  const withAdmin = (address: string) =>
    configFromText(`admin: { address: "${address}" }\nlisteners: [{ name: m, address: "127.0.0.1:0", routes: [{ match: { prefix: "/" }, cluster: c }] }]\nclusters: [{ name: c, endpoints: ["127.0.0.1:1"] }]\n`, "<test>", {});

  it("asks a wildcard bind on the loopback address of its family", () => {
    expect(healthTarget(withAdmin("0.0.0.0:9901"))).toEqual({ host: "127.0.0.1", port: 9901 });
    expect(healthTarget(withAdmin("[::]:9901"))).toEqual({ host: "::1", port: 9901 });
    expect(healthTarget(withAdmin("[::1]:9902"))).toEqual({ host: "::1", port: 9902 });
    expect(healthTarget(withAdmin("127.0.0.1:9903"))).toEqual({ host: "127.0.0.1", port: 9903 });
  });
});
