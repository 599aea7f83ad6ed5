// `workers: 2` as a real process: a primary with the admin listener and two workers serving the
// listener; metrics summed over the workers; SIGTERM drains every worker and the primary exits 0;
// a worker that cannot listen stops the whole process with 1 instead of a restart loop.
import * as grpc from "@grpc/grpc-js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { sample, startGrpcServer, unary, type EchoClient, type GrpcServer } from "../helpers/peers.js";
import {
  answerAfterPayloadMs,
  assertDistBuilt,
  canConnect,
  configYaml,
  freePort,
  httpGet,
  killSpawned,
  occupyPort,
  ownConnectionClient,
  spawnDojang,
  tempDir,
  waitFor,
  waitReady,
} from "../helpers/process.js";

const tmp = tempDir();
let up: GrpcServer;
const clients: EchoClient[] = [];

beforeAll(async () => {
  assertDistBuilt();
  up = await startGrpcServer({ Unary: answerAfterPayloadMs() });
});
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  await killSpawned();
});
afterAll(async () => {
  await up.close();
  tmp.remove();
});

// A distinct channel per client: one connection each, so calls spread over the workers.
const client = (address: string): EchoClient => ownConnectionClient(address, clients);

describe("workers: 2", () => {
  it("serves calls, sums the workers' metrics on the primary's admin, and drains every worker on SIGTERM with exit 0", async () => {
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const file = tmp.write("workers.yaml", configYaml({ listenPort, adminPort, upstream: up.address, logLevel: "warn", extraTop: "workers: 2" }));
    const p = spawnDojang(["--config", file]);
    const admin = `127.0.0.1:${adminPort}`;
    await waitReady(p, admin, 15_000);
    const listen = `127.0.0.1:${listenPort}`;

    const rs = await Promise.all(Array.from({ length: 8 }, () => unary(client(listen), Buffer.from("0"), new grpc.Metadata(), { deadline: Date.now() + 5000 })));
    for (const r of rs) expect(r.err).toBeNull();
    const m = await waitFor("8 calls in the summed metrics", async () => {
      const body = (await httpGet(admin, "/metrics")).body;
      return sample(body, "dojang_calls_total", { grpc_code: "OK", grpc_method: "Unary" }) === 8 ? body : undefined;
    }, 5000);
    expect(sample(m, "dojang_active_calls")).toBe(0);
    // the process metrics under their standard names, merged over the workers (issue 18 item 7)
    expect(sample(m, "process_cpu_seconds_total")).toBeGreaterThan(0);
    expect(sample(m, "process_resident_memory_bytes")).toBeGreaterThan(1_000_000);
    expect(m).toContain("# TYPE nodejs_eventloop_lag_seconds gauge");
    expect(m).not.toContain("dojang_process_");

    const slow = unary(client(listen), Buffer.from("800"), new grpc.Metadata(), { deadline: Date.now() + 10_000 });
    await waitFor("the slow call in flight", async () => {
      const body = (await httpGet(admin, "/metrics")).body;
      return sample(body, "dojang_active_calls") === 1 ? true : undefined;
    }, 5000);
    p.child.kill("SIGTERM");
    await waitFor("/ready 503", async () => ((await httpGet(admin, "/ready", 500)).status === 503 ? true : undefined), 3000, 10);
    const r = await slow;
    expect(r.err).toBeNull();
    expect(r.res?.toString()).toBe("done:800");
    expect(await p.exited(10_000)).toEqual({ code: 0, signal: null });
    expect(await canConnect(listenPort)).toBe(false);
    expect(await canConnect(adminPort)).toBe(false);
  });

  it("exits 1 when the workers cannot listen, instead of restarting them forever", async () => {
    const held = await occupyPort();
    try {
      const adminPort = await freePort();
      const file = tmp.write("workers-inuse.yaml", configYaml({ listenPort: held.port, adminPort, logLevel: "warn", extraTop: "workers: 2" }));
      const p = spawnDojang(["--config", file]);
      expect(await p.exited(15_000)).toEqual({ code: 1, signal: null });
      expect(p.stderr()).toContain(`cannot listen on 127.0.0.1:${held.port}`);
      expect(p.stderr()).toContain("EADDRINUSE");
      expect(await canConnect(adminPort)).toBe(false);
    } finally {
      await held.close();
    }
  });
});
