// Issue 20 part 3, one rate limit across replicas: `rateLimit.global` asks an Envoy
// RateLimitService. The service here is the real one, envoyproxy/ratelimit (built from the Go
// module proxy by scripts/engines.mjs, test/engines/ratelimit), on a real redis-server; two dojang
// processes share its limit, in front of a grpc-js upstream, called by grpc-js clients.
//
// Tolerance: envoyproxy/ratelimit counts in redis with one atomic INCRBY per descriptor and
// window, so with every answer in time the instances together admit exactly the limit. The only
// way past it is fail-open (an answer missing its deadline admits the call), and those calls are
// counted in dojang_rate_limit_service_calls_total; the test allows admitted = limit + that count
// (with the generous timeout it uses, expected 0). The limits are per hour (fixed windows aligned
// to the hour in redis) under a descriptor value unique to each test, so each test starts from
// zero; a test that would run across the top of the hour waits for it to pass first.
import * as grpc from "@grpc/grpc-js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { echoClient, sample, scrape, startGrpcServer, startProxy, unary, type EchoClient, type GrpcServer } from "../helpers/peers.js";
import { assertDistBuilt, freePort, httpGet, sleep, spawnDojang, tempDir, waitFor, waitReady } from "../helpers/process.js";
import { startRedis, startRls as startRatelimit, type Rls } from "../helpers/ratelimit.js";
import { jwks, signingKey, token } from "../helpers/auth.js";
import type { DojangHandle } from "../../src/index.js";

const DOMAIN = "dojang-test";
/** envoyproxy/ratelimit's domain config: per-run limits (any value of "run"), per hour. */
const RLS_CONFIG = `domain: ${DOMAIN}
descriptors:
  - key: run
    rate_limit:
      unit: hour
      requests_per_unit: 20
  - key: big
    rate_limit:
      unit: hour
      requests_per_unit: 1000000
  - key: generic_key
    value: nested
    descriptors:
      - key: run
        descriptors:
          - key: remote_address
            value: 127.0.0.1
            descriptors:
              - key: service
                value: test.Echo
                descriptors:
                  - key: method
                    value: Unary
                    rate_limit:
                      unit: hour
                      requests_per_unit: 2
`;
const LIMIT = 20;

let upstream: GrpcServer;
let redisPort: number;
const dirs: { remove(): void }[] = [];
const clients: EchoClient[] = [];
const proxies: DojangHandle[] = [];

/** envoyproxy/ratelimit with this file's domain, against the test's redis (helpers/ratelimit.ts). */
async function startRls(ports?: readonly [number, number, number]): Promise<Rls> {
  const rls = await startRatelimit(RLS_CONFIG, redisPort, ports);
  dirs.push(rls.dir);
  return rls;
}

beforeAll(async () => {
  const redis = await startRedis();
  dirs.push(redis.dir);
  redisPort = redis.port;
  upstream = await startGrpcServer({
    Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, call.request),
    ClientStream: (call: grpc.ServerReadableStream<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      const parts: Buffer[] = [];
      call.on("data", (d: Buffer) => parts.push(d));
      call.on("end", () => cb(null, Buffer.concat(parts)));
    },
  });
}, 90_000);
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const px of proxies.splice(0)) await px.close(0);
});
afterAll(async () => {
  await upstream?.close();
  for (const d of dirs.splice(0)) d.remove();
});

let runs = 0;
/** A descriptor value no other test (or earlier run in this hour) used: its counter starts at 0. */
const runId = (): string => `${process.pid}-${Date.now()}-${++runs}`;

/** Waits out the top of the hour when fewer than `ms` are left before it (the windows are hourly). */
async function awayFromHourEdge(ms: number): Promise<void> {
  const left = 3_600_000 - (Date.now() % 3_600_000);
  if (left < ms) await sleep(left + 1000);
}

async function proxy(rateLimit: Record<string, unknown>): Promise<{ px: DojangHandle; c: EchoClient }> {
  const px = await startProxy(upstream.address, { route: { rateLimit } });
  proxies.push(px);
  const c = echoClient(px.address);
  clients.push(c);
  return { px, c };
}

function md(pairs: Record<string, string>): grpc.Metadata {
  const m = new grpc.Metadata();
  for (const [k, v] of Object.entries(pairs)) m.set(k, v);
  return m;
}

const global = (service: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  service,
  domain: DOMAIN,
  timeout: "5s",
  descriptors: [[{ key: "run", from: "metadata:x-run" }]],
  ...extra,
});

async function metric(px: DojangHandle, result: string): Promise<number> {
  return sample(await scrape(px.adminAddress), "dojang_rate_limit_service_calls_total", { result });
}

describe("rateLimit.global with envoyproxy/ratelimit on redis", () => {
  let rls: Rls;
  beforeAll(async () => {
    rls = await startRls();
  }, 90_000);

  it("two dojang processes share one limit: together they admit exactly the limit (within the fail-open count); the rest end 8 rate_limited_global with x-ratelimit-* headers", { timeout: 180_000 }, async () => {
    await awayFromHourEdge(90_000);
    assertDistBuilt();
    const d = tempDir();
    dirs.push(d);
    // two real dojang processes (dist/cli.js), each its own listener and admin, one service
    const procs = await Promise.all(
      ["a", "b"].map(async (name) => {
        const [listen, admin] = [await freePort(), await freePort()];
        const file = d.write(
          `${name}.yaml`,
          JSON.stringify({
            admin: { address: `127.0.0.1:${admin}` },
            logLevel: "warn",
            journal: 100,
            listeners: [{ name: "main", address: `127.0.0.1:${listen}`, routes: [{ match: { prefix: "/" }, cluster: "backend", rateLimit: { global: global(rls.address) } }] }],
            clusters: [{ name: "backend", endpoints: [upstream.address] }],
          }),
        );
        const p = spawnDojang(["--config", file]);
        await waitReady(p, `127.0.0.1:${admin}`, 60_000);
        const c = echoClient(`127.0.0.1:${listen}`);
        clients.push(c);
        return { admin: `127.0.0.1:${admin}`, c };
      }),
    );
    const run = md({ "x-run": runId() });
    const N = 60;
    // alternate between the two, one call at a time: each process takes its turn at the shared
    // count (concurrent workers let whichever process connects first take the whole limit on a
    // loaded machine, which proves nothing about sharing)
    const results: Awaited<ReturnType<typeof unary>>[][] = [[], []];
    for (let i = 0; i < N; i++) results[i % 2]!.push(await unary(procs[i % 2]!.c, Buffer.from(`call-${i}`), run));
    const all = results.flat();
    const admitted = all.filter((r) => r.err === null).length;
    const refused = all.filter((r) => r.err !== null);
    const m = await Promise.all(procs.map((p) => scrape(p.admin)));
    const count = (result: string): number => m.reduce((n, text) => n + sample(text, "dojang_rate_limit_service_calls_total", { result }), 0);
    const failOpen = count("timeout") + count("unavailable") + count("error");
    expect(admitted).toBe(LIMIT + failOpen);
    expect(failOpen).toBeLessThanOrEqual(N / 10);
    // each process admitted some: the limit really is shared, not each one's own
    expect(results.every((rs) => rs.some((r) => r.err === null))).toBe(true);
    for (const r of refused) {
      expect(r.err!.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
      expect(r.err!.details).toBe(`rate limited by the global rate limit service (domain ${DOMAIN})`);
      // Trailers-Only: grpc-js hands its header fields over as the status's metadata
      const h = r.err!.metadata;
      expect(h.get("x-ratelimit-limit")).toEqual([`${LIMIT}, ${LIMIT};w=3600`]);
      expect(h.get("x-ratelimit-remaining")).toEqual(["0"]);
      const reset = Number(h.get("x-ratelimit-reset")[0]);
      expect(reset).toBeGreaterThan(0);
      expect(reset).toBeLessThanOrEqual(3600);
      expect(h.get("grpc-retry-pushback-ms")).toEqual([String(reset * 1000)]);
    }
    const journals = await Promise.all(procs.map(async (p) => JSON.parse((await httpGet(p.admin, "/calls", 5000)).body) as { decided_by: string; grpc_code: number }[]));
    const refusedRecords = journals.flat().filter((rec) => rec.decided_by === "rate_limited_global");
    expect(refusedRecords.length).toBe(refused.length);
    expect(refusedRecords.every((rec) => rec.grpc_code === 8)).toBe(true);
    expect(count("over_limit")).toBe(refused.length);
    // the service counted every call that reached it: what was admitted is what it allowed
    expect(count("ok")).toBe(admitted - failOpen);
  });

  it("the local limit runs first: a call it refuses (rate_limited) never asks the service", { timeout: 60_000 }, async () => {
    const { px, c } = await proxy({ callsPerSecond: 0.01, burst: 2, global: global(rls.address) });
    const run = md({ "x-run": runId() });
    const codes: number[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await unary(c, Buffer.from("x"), run);
      codes.push(r.err === null ? 0 : r.err.code);
    }
    expect(codes).toEqual([0, 0, 8, 8, 8]);
    expect(px.calls.filter((r) => r.decided_by === "rate_limited").length).toBe(3);
    expect(await metric(px, "ok")).toBe(2);
    expect(await metric(px, "over_limit")).toBe(0);
  });

  it("a client stream whose messages arrive while the call waits for the answer reaches the upstream whole", { timeout: 60_000 }, async () => {
    const { px, c } = await proxy({ global: global(rls.address, { descriptors: [[{ key: "big", value: "stream" }]] }) });
    const got = await new Promise<{ err: grpc.ServiceError | null; res: Buffer | undefined }>((resolve) => {
      const w = c.ClientStream(new grpc.Metadata(), {}, (err, res) => resolve({ err, res }));
      // written at once: they reach dojang while its request head is held for the service
      for (const part of ["one,", "two,", "three"]) w.write(Buffer.from(part));
      w.end();
    });
    expect(got.err).toBeNull();
    expect(got.res?.toString()).toBe("one,two,three");
    expect(await metric(px, "ok")).toBe(1);
  });

  it("descriptors: a call that lacks the header its only descriptor needs asks nothing and is admitted", { timeout: 60_000 }, async () => {
    const { px, c } = await proxy({ global: global(rls.address) });
    for (let i = 0; i < LIMIT + 5; i++) expect((await unary(c, Buffer.from("x"))).err).toBeNull();
    expect(await metric(px, "ok")).toBe(0);
  });

  it("a descriptor from a header jwt writes counts the verified value: a client rotating its own copy of the header still meets the limit", { timeout: 60_000 }, async () => {
    // issue "0.5.1: what outside judges found", item 2: each stage sees the request as the
    // stages before it left it. The descriptor reads x-jwt-claims after jwt replaced the
    // client's copy with the verified claims (the same for every call with this token).
    await awayFromHourEdge(30_000);
    const key = await signingKey("ES256", "k1");
    const d = tempDir();
    dirs.push(d);
    const file = d.write("jwks.json", JSON.stringify(jwks(key)));
    const px = await startProxy(upstream.address, {
      route: {
        jwt: { issuer: "https://issuer.test", jwks: { file }, claimsHeader: "x-jwt-claims" },
        rateLimit: { global: global(rls.address, { descriptors: [[{ key: "run", from: "metadata:x-jwt-claims" }]] }) },
      },
    });
    proxies.push(px);
    const c = echoClient(px.address);
    clients.push(c);
    // a token of this run's own (its claims name the run): its bucket starts at 0
    const good = `Bearer ${await token(key, { iss: "https://issuer.test", sub: runId() })}`;
    const codes: number[] = [];
    for (let i = 0; i < LIMIT + 5; i++) {
      const forged = Buffer.from(JSON.stringify({ sub: `mallory-${runId()}` })).toString("base64url");
      codes.push((await unary(c, Buffer.from("x"), md({ authorization: good, "x-jwt-claims": forged }))).err?.code ?? 0);
    }
    expect(codes.filter((x) => x === 0).length).toBe(LIMIT);
    expect(codes.slice(LIMIT)).toEqual([8, 8, 8, 8, 8]);
    expect(await metric(px, "over_limit")).toBe(5);
  });

  it("descriptors from a literal, a header, the client address, the gRPC service and method reach the service whole", { timeout: 60_000 }, async () => {
    // the service limits generic_key=nested → run (any) → remote_address=127.0.0.1 →
    // service=test.Echo → method=Unary to 2 an hour: only a descriptor whose every entry
    // arrived with the right value meets that limit (any other gets no limit and OK)
    const { px, c } = await proxy({
      global: global(rls.address, {
        descriptors: [
          [
            { key: "generic_key", value: "nested" },
            { key: "run", from: "metadata:x-run" },
            { key: "remote_address", from: "client_address" },
            { key: "service", from: "service" },
            { key: "method", from: "method" },
          ],
        ],
      }),
    });
    await awayFromHourEdge(30_000);
    const run = md({ "x-run": runId() });
    const codes: number[] = [];
    for (let i = 0; i < 4; i++) codes.push((await unary(c, Buffer.from("x"), run)).err?.code ?? 0);
    expect(codes).toEqual([0, 0, 8, 8]);
    expect(await metric(px, "over_limit")).toBe(2);
  });
});

describe("rateLimit.global when the service fails", () => {
  it("an outage under load: no call fails (fail-open), the failures are counted, and the service is asked again once it is back", { timeout: 120_000 }, async () => {
    const rls = await startRls();
    const { px, c } = await proxy({ global: global(rls.address, { timeout: "2s", descriptors: [[{ key: "big", value: "load" }]] }) });
    let stop = false;
    const errors: string[] = [];
    let ok = 0;
    const loops = Array.from({ length: 8 }, async () => {
      while (!stop) {
        const r = await unary(c, Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 20_000 });
        if (r.err === null) ok++;
        else errors.push(`${r.err.code} ${r.err.details}`);
      }
    });
    await waitFor("calls admitted by the service", async () => ((await metric(px, "ok")) >= 20 ? true : undefined), 30_000, 50);
    process.kill(-rls.child.pid!, "SIGKILL");
    const okBefore = ok;
    await waitFor("failures counted", async () => ((await metric(px, "unavailable")) + (await metric(px, "error")) + (await metric(px, "timeout")) >= 20 ? true : undefined), 30_000, 50);
    const okAnswersInOutage = await metric(px, "ok");
    // the service comes back on the same port: the channel reconnects (backoff capped at 5 s) and calls ask it again
    await startRls(rls.ports);
    await waitFor("answers again after the outage", async () => ((await metric(px, "ok")) > okAnswersInOutage + 10 ? true : undefined), 60_000, 100);
    stop = true;
    await Promise.all(loops);
    expect(errors).toEqual([]);
    expect(ok).toBeGreaterThan(okBefore);
    expect(px.calls.every((r) => r.grpc_code === 0)).toBe(true);
  });

  it("failureModeDeny: a service that cannot be reached refuses the call with 14, decided_by rate_limit_service_failed", { timeout: 60_000 }, async () => {
    const deadPort = await freePort();
    const { px, c } = await proxy({ global: global(`127.0.0.1:${deadPort}`, { failureModeDeny: true, descriptors: [[{ key: "big", value: "x" }]] }) });
    const r = await unary(c, Buffer.from("x"));
    expect(r.err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(r.err?.details).toMatch(new RegExp(`^rate limit service 127\\.0\\.0\\.1:${deadPort} failed: (unavailable|no answer in time)$`));
    expect(px.calls.at(-1)?.decided_by).toBe("rate_limit_service_failed");
    expect((await metric(px, "unavailable")) + (await metric(px, "timeout"))).toBe(1);
  });

  it("a service that stops answering holds a call no longer than the timeout; the call is admitted and the timeout counted", { timeout: 90_000 }, async () => {
    const rls = await startRls();
    const timeoutMs = 400;
    const { px, c } = await proxy({ global: global(rls.address, { timeout: `${timeoutMs}ms`, descriptors: [[{ key: "big", value: "stop" }]] }) });
    // a first call opens the channel while the service answers (an answer may miss 400 ms on a loaded machine: either way it is admitted)
    expect((await unary(c, Buffer.from("x"))).err).toBeNull();
    const pid = rls.child.pid!;
    process.kill(-pid, "SIGSTOP");
    try {
      const before = await metric(px, "timeout");
      for (let i = 0; i < 3; i++) {
        const t0 = performance.now();
        const r = await unary(c, Buffer.from("x"));
        const ms = performance.now() - t0;
        expect(r.err).toBeNull();
        expect(ms).toBeGreaterThanOrEqual(timeoutMs - 50);
        // the timeout, plus the round trip to the upstream and a loaded machine's delays
        expect(ms).toBeLessThan(timeoutMs + 1500);
      }
      expect((await metric(px, "timeout")) - before).toBe(3);
    } finally {
      process.kill(-pid, "SIGCONT");
    }
  });
});
