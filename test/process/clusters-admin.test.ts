// Contract (issue 11, step 2): "Observability: /clusters on admin (endpoints, health, ejections,
// active calls, breaker state); metrics per cluster and endpoint with bounded labels" — over HTTP
// from real dojang processes, alone and with `workers: 2` (the primary asks every worker), and the
// DNS resolver override DOJANG_DNS_SERVERS read at start-up.
import * as grpc from "@grpc/grpc-js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { sample, unary, type EchoClient } from "../helpers/peers.js";
import { startBackend, type Backend } from "../helpers/backends.js";
import { startDnsServer, type DnsServer } from "../helpers/dns-server.js";
import {
  assertDistBuilt,
  childEnv,
  configYaml,
  freePort,
  httpGet,
  killSpawned,
  ownConnectionClient,
  spawnDojang,
  tempDir,
  waitFor,
  waitReady,
} from "../helpers/process.js";

const tmp = tempDir();
let good: Backend;
let sick: Backend;
const clients: EchoClient[] = [];

beforeAll(async () => {
  assertDistBuilt();
  good = await startBackend("good");
  sick = await startBackend("sick");
  sick.serving = false;
});
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  await killSpawned();
});
afterAll(async () => {
  await good.close();
  await sick.close();
  tmp.remove();
});

const client = (address: string): EchoClient => ownConnectionClient(address, clients);

interface EndpointView {
  address: string;
  healthy: boolean;
  ejected: boolean;
  inRotation: boolean;
  activeAttempts: number;
  sessions: { open: number; draining: number; streams: number };
  consecutiveFailures: number;
}
interface ClusterView {
  name: string;
  lb: string;
  panic: boolean;
  dns: { target: string; lastResolution: { endpoints: number; error?: string } | null } | null;
  endpoints: EndpointView[];
  breaker: Record<string, { current: number; limit: number }>;
}

async function clusters(admin: string): Promise<unknown> {
  const r = await httpGet(admin, "/clusters", 5000);
  expect(r.status).toBe(200);
  expect(r.type).toMatch(/^application\/json/);
  return JSON.parse(r.body);
}

async function start(clusterLines: string, extraTop = "", env = childEnv()): Promise<{ admin: string; listen: string }> {
  const [listenPort, adminPort] = [await freePort(), await freePort()];
  const yaml = configYaml({ listenPort, adminPort, upstream: good.address, extraTop }).replace(`    endpoints: ["${good.address}"]\n`, clusterLines);
  const file = tmp.write(`c-${listenPort}.yaml`, yaml);
  const p = spawnDojang(["--config", file], env);
  const admin = `127.0.0.1:${adminPort}`;
  await waitReady(p, admin, 15_000);
  return { admin, listen: `127.0.0.1:${listenPort}` };
}

const TWO = (extra = "") =>
  [`    endpoints: ["${good.address}", "${sick.address}"]`, "    healthCheck: { interval: 50ms, timeout: 1s, unhealthyThreshold: 1, healthyThreshold: 1 }", "    circuitBreaker: { maxPendingCalls: 77 }", extra, ""].filter((l) => l !== "").join("\n") + "\n";

function checkView(c: ClusterView): void {
  expect(c.name).toBe("backend");
  expect(c.lb).toBe("round_robin");
  expect(c.panic).toBe(false);
  const byAddr = Object.fromEntries(c.endpoints.map((e) => [e.address, e]));
  expect(byAddr[good.address]).toMatchObject({ healthy: true, ejected: false, inRotation: true });
  expect(byAddr[sick.address]).toMatchObject({ healthy: false, ejected: false, inRotation: false });
  expect(c.breaker["maxPendingCalls"]).toEqual({ current: 0, limit: 77 });
}

describe("GET /clusters", () => {
  it("one process: endpoints with health, rotation, sessions and breakers; calls go only to the healthy endpoint; metrics agree", async () => {
    const { admin, listen } = await start(TWO());
    const view = await waitFor("the sick endpoint to be unhealthy", async () => {
      const v = (await clusters(admin)) as ClusterView[];
      return v[0]!.endpoints.some((e) => !e.healthy) ? v : undefined;
    });
    checkView(view[0]!);
    const c = client(listen);
    for (let i = 0; i < 4; i++) expect((await unary(c, Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 5000 })).res?.toString()).toBe("good");
    const after = ((await clusters(admin)) as ClusterView[])[0]!;
    const g = after.endpoints.find((e) => e.address === good.address)!;
    expect(g.sessions.open).toBe(1);
    expect(g.consecutiveFailures).toBe(0);
    const m = (await httpGet(admin, "/metrics", 5000)).body;
    expect(sample(m, "dojang_upstream_endpoint_healthy", { cluster: "backend", endpoint: sick.address })).toBe(0);
    expect(sample(m, "dojang_upstream_endpoint_healthy", { cluster: "backend", endpoint: good.address })).toBe(1);
    expect(sample(m, "dojang_upstream_endpoints", { cluster: "backend", state: "healthy" })).toBe(1);
  });

  it("workers: 2: the primary lists the cluster once, with each worker's view", async () => {
    const { admin } = await start(TWO(), "workers: 2");
    const view = await waitFor("both workers to see the sick endpoint", async () => {
      const v = (await clusters(admin)) as { name: string; lb: string; workers: (Omit<ClusterView, "name" | "lb"> & { worker: number })[] }[];
      const ws = v[0]?.workers ?? [];
      return ws.length === 2 && ws.every((w) => w.endpoints.some((e) => !e.healthy)) ? v : undefined;
    }, 15_000);
    expect(view).toHaveLength(1);
    expect(view[0]!.name).toBe("backend");
    expect(new Set(view[0]!.workers.map((w) => w.worker)).size).toBe(2);
    for (const w of view[0]!.workers) checkView({ ...w, name: view[0]!.name, lb: view[0]!.lb });
  });

  it("DOJANG_DNS_SERVERS points a dns: cluster at a local resolver; /clusters shows the target and the last resolution", async () => {
    const dns: DnsServer = await startDnsServer({ "backend.test": ["127.0.0.1"] });
    try {
      const port = good.address.split(":")[1]!;
      const { admin, listen } = await start(`    dns: "backend.test:${port}"\n    refreshInterval: 200ms\n`, "", childEnv({ DOJANG_DNS_SERVERS: dns.address }));
      const v = await waitFor("the first resolution", async () => {
        const x = (await clusters(admin)) as ClusterView[];
        return x[0]!.dns?.lastResolution !== null ? x : undefined;
      });
      expect(v[0]!.dns).toMatchObject({ target: `backend.test:${port}`, lastResolution: { endpoints: 1 } });
      expect(v[0]!.endpoints.map((e) => e.address)).toEqual([good.address]);
      expect((await unary(client(listen), Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 5000 })).res?.toString()).toBe("good");
    } finally {
      await dns.close();
    }
  });
});
