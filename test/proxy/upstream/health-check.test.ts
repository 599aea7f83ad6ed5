// Active health checks against real grpc.health.v1 servers (@grpc/grpc-js, the messages coded
// by grpc-node's own health package: test/helpers/health-peer.ts) and against peers that fail in the ways a check must notice.
import * as grpc from "@grpc/grpc-js";
import http2 from "node:http2";
import net, { type AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { HealthChecker, type CheckResult } from "../../../src/proxy/upstream/health-check.js";
import { HEALTH_SERVICE, type HealthRequest, type HealthResponse, type Serving as Status } from "../../helpers/health-peer.js";
import { parseHostPort } from "../../../src/config/index.js";


const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A grpc-js server whose health answer per service can be changed; it records what was asked. */
async function healthServer(status: Map<string, Status>): Promise<{ address: string; asked: string[] }> {
  const asked: string[] = [];
  const server = new grpc.Server();
  server.addService(HEALTH_SERVICE, {
    Check: (call: grpc.ServerUnaryCall<HealthRequest, HealthResponse>, cb: grpc.sendUnaryData<HealthResponse>) => {
      const service = call.request.service;
      asked.push(service);
      const s = status.get(service);
      if (s === undefined) return cb({ code: grpc.status.NOT_FOUND, details: "unknown service" });
      cb(null, { status: s });
    },
  });
  const port = await new Promise<number>((res, rej) => server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))));
  cleanups.push(() => new Promise<void>((r) => server.tryShutdown(() => r())));
  return { address: `127.0.0.1:${port}`, asked };
}

const cfg = (over: Partial<ConstructorParameters<typeof HealthChecker>[1]> = {}) => ({ service: "", intervalMs: 20, timeoutMs: 300, unhealthyThreshold: 2, healthyThreshold: 2, ...over });

function checker(address: string, c = cfg()): { hc: HealthChecker; changes: [boolean, CheckResult][] } {
  const r = parseHostPort(address);
  if (!r.ok) throw new Error(r.error);
  const changes: [boolean, CheckResult][] = [];
  const hc = new HealthChecker(r.hostPort, c, (h, why) => changes.push([h, why]));
  cleanups.push(() => hc.stop());
  return { hc, changes };
}

async function until(cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("HealthChecker.checkOnce()", () => {
  it("passes on SERVING and names the service it asks about", async () => {
    const s = await healthServer(new Map([["pkg.Svc", "SERVING"]]));
    const { hc } = checker(s.address, cfg({ service: "pkg.Svc" }));
    expect(await hc.checkOnce()).toEqual({ passed: true, why: "SERVING" });
    expect(s.asked).toEqual(["pkg.Svc"]);
  });

  it("fails on NOT_SERVING, on a grpc-status error and on UNIMPLEMENTED (no health service)", async () => {
    const s = await healthServer(new Map([["", "NOT_SERVING"]]));
    expect(await checker(s.address).hc.checkOnce()).toEqual({ passed: false, why: "NOT_SERVING" });
    expect(await checker(s.address, cfg({ service: "other" })).hc.checkOnce()).toEqual({ passed: false, why: "grpc-status NOT_FOUND: unknown service" });
    const bare = new grpc.Server();
    const port = await new Promise<number>((res, rej) => bare.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))));
    cleanups.push(() => new Promise<void>((r) => bare.tryShutdown(() => r())));
    const r = await checker(`127.0.0.1:${port}`).hc.checkOnce();
    expect(r.passed).toBe(false);
    expect(r.why).toMatch(/^grpc-status UNIMPLEMENTED/);
  });

  it("fails on a refused connect, naming the cause", async () => {
    const l = net.createServer();
    await new Promise<void>((r) => l.listen(0, "127.0.0.1", r));
    const port = (l.address() as AddressInfo).port;
    await new Promise<void>((r) => l.close(() => r()));
    const r = await checker(`127.0.0.1:${port}`).hc.checkOnce();
    expect(r.passed).toBe(false);
    expect(r.why).toMatch(/ECONNREFUSED/);
  });

  it("fails a server that never answers within the timeout", async () => {
    const h2 = http2.createServer();
    h2.on("stream", () => {
      /* never answers */
    });
    await new Promise<void>((r) => h2.listen(0, "127.0.0.1", r));
    cleanups.push(() => new Promise<void>((r) => h2.close(() => r())));
    const t0 = Date.now();
    const r = await checker(`127.0.0.1:${(h2.address() as AddressInfo).port}`, cfg({ timeoutMs: 150 })).hc.checkOnce();
    expect(r).toEqual({ passed: false, why: "no answer within 150ms" });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(140);
  });
});

describe("HealthChecker thresholds", () => {
  it("turns unhealthy after unhealthyThreshold failed checks and healthy again after healthyThreshold passes", async () => {
    const status = new Map<string, Status>([["", "SERVING"]]);
    const s = await healthServer(status);
    const { hc, changes } = checker(s.address, cfg({ unhealthyThreshold: 3, healthyThreshold: 2 }));
    hc.start();
    await until(() => s.asked.length >= 3);
    expect(hc.healthy).toBe(true);
    expect(changes).toEqual([]);
    status.set("", "NOT_SERVING");
    const before = s.asked.length;
    await until(() => changes.length === 1);
    // the third failure at the earliest (one check may have been in flight at the switch)
    expect(s.asked.length - before).toBeGreaterThanOrEqual(3);
    expect(changes[0]).toEqual([false, { passed: false, why: "NOT_SERVING" }]);
    expect(hc.healthy).toBe(false);
    status.set("", "SERVING");
    await until(() => changes.length === 2);
    expect(changes[1]).toEqual([true, { passed: true, why: "SERVING" }]);
    hc.stop();
    const n = s.asked.length;
    await new Promise((r) => setTimeout(r, 100));
    expect(s.asked.length).toBe(n);
  });
});
