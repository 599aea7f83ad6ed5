// Issue 12, local rate limits per route: `rateLimit: { callsPerSecond, burst, key }`, a token
// bucket per key; a call over it ends 8 RESOURCE_EXHAUSTED with decided_by rate_limited and never
// reaches the upstream. Real grpc-js clients through an in-process dojang to a raw echo upstream.
import * as grpc from "@grpc/grpc-js";
import net from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import http2 from "node:http2";
import { echoClient, frame, rawCall, startProxy, startRawUpstream, statusOf, unary, type EchoClient, type RawResult, type RawUpstream } from "../helpers/peers.js";
import { echoOr } from "../helpers/bystander.js";
import { sleep } from "../helpers/process.js";
import { parseConfigText } from "../../src/config/parse.js";
import type { DojangHandle } from "../../src/index.js";

let upstream: RawUpstream;
const clients: EchoClient[] = [];
const proxies: DojangHandle[] = [];
beforeAll(async () => {
  upstream = await startRawUpstream(echoOr());
});
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const px of proxies.splice(0)) await px.close(0);
});
afterAll(async () => {
  await upstream.close();
});

async function proxy(rateLimit: Record<string, unknown>, clientOpts: grpc.ClientOptions = {}): Promise<{ px: DojangHandle; c: EchoClient }> {
  const px = await startProxy(upstream.address, { route: { rateLimit } });
  proxies.push(px);
  const c = echoClient(px.address, clientOpts);
  clients.push(c);
  return { px, c };
}

function md(pairs: Record<string, string>): grpc.Metadata {
  const m = new grpc.Metadata();
  for (const [k, v] of Object.entries(pairs)) m.set(k, v);
  return m;
}

/** One gRPC-Web unary call over HTTP/1.1 from `localAddress`; the grpc-status of its trailer frame. */
function webUnary(address: string, localAddress: string): Promise<string> {
  const [host, port] = address.split(":") as [string, string];
  return new Promise((resolve, reject) => {
    const sock = net.connect({ host, port: Number(port), localAddress });
    let got = "";
    sock.on("data", (d: Buffer) => (got += d.toString("latin1")));
    sock.on("error", reject);
    sock.on("close", () => resolve(/grpc-status:\s*(\d+)/.exec(got)?.[1] ?? got));
    const body = Buffer.from([0, 0, 0, 0, 1, 0x61]);
    sock.write(`POST /test.Echo/Unary HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/grpc-web+proto\r\nconnection: close\r\ncontent-length: ${body.length}\r\n\r\n`);
    sock.write(body);
  });
}

/** Codes of `n` calls made one after another (0 = OK). */
async function codes(c: EchoClient, n: number, meta: grpc.Metadata = new grpc.Metadata()): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const r = await unary(c, Buffer.from(`call-${i}`), meta);
    out.push(r.err === null ? 0 : r.err.code);
  }
  return out;
}

describe("route rateLimit", () => {
  it("key route: the burst passes, the rest end 8 RESOURCE_EXHAUSTED (decided_by rate_limited) without reaching the upstream; a token comes back after 1/callsPerSecond", { timeout: 30_000 }, async () => {
    const { px, c } = await proxy({ callsPerSecond: 2, burst: 3 });
    const seenBefore = upstream.seen.length;
    expect(await codes(c, 6)).toEqual([0, 0, 0, 8, 8, 8]);
    expect(upstream.seen.length - seenBefore).toBe(3);
    const refused = px.calls.filter((r) => r.decided_by === "rate_limited");
    expect(refused.length).toBe(3);
    const r = await unary(c, Buffer.from("x"));
    expect(r.err?.code).toBe(8);
    expect(r.err?.details).toMatch(/^rate limited: more than 2 calls per second \(burst 3\) by route$/);
    await sleep(600); // 2 per second: one token back after 500 ms
    expect(await codes(c, 2)).toEqual([0, 8]);
  });

  it("key metadata:<name>: one bucket per value, calls without the header share one", { timeout: 30_000 }, async () => {
    const { c } = await proxy({ callsPerSecond: 0.5, burst: 2, key: "metadata:x-tenant" });
    expect(await codes(c, 3, md({ "x-tenant": "a" }))).toEqual([0, 0, 8]);
    expect(await codes(c, 3, md({ "x-tenant": "b" }))).toEqual([0, 0, 8]);
    expect(await codes(c, 3)).toEqual([0, 0, 8]);
  });

  it("key client_address: the calls of one client address share a bucket, across its connections", { timeout: 30_000 }, async () => {
    const px = await startProxy(upstream.address, {
      route: { match: { service: "test.Echo" }, rateLimit: { callsPerSecond: 0.5, burst: 2, key: "client_address" } },
    });
    proxies.push(px);
    const c1 = echoClient(px.address);
    const c2 = echoClient(px.address, { "grpc.use_local_subchannel_pool": 1 });
    clients.push(c1, c2);
    expect(await codes(c1, 2)).toEqual([0, 0]);
    // another connection from the same address: the same bucket
    expect(await codes(c2, 1)).toEqual([8]);
  });

  it("key client_address for gRPC-Web over HTTP/1.1: each client address has its own bucket (the socket's address, not one bucket for every browser)", { timeout: 30_000 }, async () => {
    const px = await startProxy(upstream.address, {
      route: { match: { service: "test.Echo" }, rateLimit: { callsPerSecond: 0.5, burst: 2, key: "client_address" } },
      listener: { grpcWeb: true, http1Address: "127.0.0.1:0" },
    });
    proxies.push(px);
    const h1 = px.instance.http1Address();
    const web = async (from: string, n: number): Promise<string[]> => {
      const out: string[] = [];
      for (let i = 0; i < n; i++) out.push(await webUnary(h1, from));
      return out;
    };
    expect(await web("127.0.0.1", 3)).toEqual(["0", "0", "8"]);
    // another client address: a bucket of its own
    expect(await web("127.0.0.2", 3)).toEqual(["0", "0", "8"]);
  });

  it("config errors name the key path", () => {
    const base = (rl: string): string => `listeners:\n  - name: main\n    address: 127.0.0.1:0\n    routes:\n      - match: { prefix: "/" }\n        cluster: b\n        rateLimit: ${rl}\nclusters:\n  - name: b\n    endpoints: ["127.0.0.1:1"]\n`;
    const issues = (rl: string): string[] => {
      const r = parseConfigText(base(rl), {});
      return r.ok ? [] : r.issues.map((i) => `${i.path}: ${i.message}`);
    };
    expect(issues("{ callsPerSecond: 10, key: client_ip }")).toEqual(['listeners[0].routes[0].rateLimit.key: must be "route", "client_address" or "metadata:<lower-case header name>"']);
    expect(issues("{ callsPerSecond: 0 }")).toEqual(["listeners[0].routes[0].rateLimit.callsPerSecond: must be more than 0"]);
    expect(issues("{ callsPerSecond: 10 }")).toEqual([]);
    const ok = parseConfigText(base("{ callsPerSecond: 2.5 }"), {});
    expect(ok.ok && ok.config.listeners[0]!.routes[0]!.rateLimit).toEqual({ callsPerSecond: 2.5, burst: 3, key: "route", responseHeaders: true, global: null });
    expect(issues("{ callsPerSecond: 10, responseHeaders: maybe }")).toEqual(["listeners[0].routes[0].rateLimit.responseHeaders: expected true or false, got \"maybe\""]);
  });
});

// Issue 18 item 8: a refused client is told when to come back (Envoy's x-ratelimit-* headers,
// draft RFC RateLimit headers version 03, and gRPC's grpc-retry-pushback-ms).
const HINTS = ["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "grpc-retry-pushback-ms"];
const hintsOf = (h: http2.IncomingHttpHeaders | undefined): Record<string, unknown> => Object.fromEntries(HINTS.filter((k) => h?.[k] !== undefined).map((k) => [k, h![k]]));

describe("route rateLimit: the refusal's hint", () => {
  it("a refusal's Trailers-Only status carries x-ratelimit-limit/-remaining/-reset and grpc-retry-pushback-ms (the wait until the key has a token); admitted calls carry none", { timeout: 30_000 }, async () => {
    const px = await startProxy(upstream.address, { route: { rateLimit: { callsPerSecond: 0.1, burst: 2 } } });
    proxies.push(px);
    const t0 = performance.now();
    const admitted: RawResult[] = [];
    for (let i = 0; i < 2; i++) admitted.push(await rawCall(px.address, {}, frame(Buffer.from("a"))));
    const refused = await rawCall(px.address, {}, frame(Buffer.from("a")));
    const elapsed = performance.now() - t0;
    for (const r of admitted) {
      expect(statusOf(r)).toBe("0");
      expect(hintsOf(r.headers)).toEqual({});
      expect(hintsOf(r.trailers)).toEqual({});
    }
    expect(statusOf(refused)).toBe("8");
    expect(refused.headersFlags! & http2.constants.NGHTTP2_FLAG_END_STREAM).toBeTruthy(); // Trailers-Only
    const h = refused.headers!;
    expect(h["x-ratelimit-limit"]).toBe("2");
    expect(h["x-ratelimit-remaining"]).toBe("0");
    // 0.1 per second: a token 10 s after the bucket emptied, less what has passed since
    const pushback = Number(h["grpc-retry-pushback-ms"]);
    expect(Number.isInteger(pushback)).toBe(true);
    expect(pushback).toBeLessThanOrEqual(10_000);
    expect(pushback).toBeGreaterThanOrEqual(10_000 - elapsed - 1);
    expect(h["x-ratelimit-reset"]).toBe(String(Math.ceil(pushback / 1000)));
  });

  it("responseHeaders: false leaves them all out", { timeout: 30_000 }, async () => {
    const px = await startProxy(upstream.address, { route: { rateLimit: { callsPerSecond: 0.1, burst: 1, responseHeaders: false } } });
    proxies.push(px);
    expect(statusOf(await rawCall(px.address, {}, frame(Buffer.from("a"))))).toBe("0");
    const refused = await rawCall(px.address, {}, frame(Buffer.from("a")));
    expect(statusOf(refused)).toBe("8");
    expect(hintsOf(refused.headers)).toEqual({});
  });

  // grpc-js honours grpc-retry-pushback-ms only for a status its retry policy retries (gRFC A6).
  // Its own back-off here is 10 ms, far shorter than the 2 s until a token: without the pushback
  // its retry is refused again.
  const retrying = {
    "grpc.enable_retries": 1,
    "grpc.service_config": JSON.stringify({
      methodConfig: [
        {
          name: [{ service: "test.Echo" }],
          retryPolicy: { maxAttempts: 2, initialBackoff: "0.01s", maxBackoff: "0.01s", backoffMultiplier: 1, retryableStatusCodes: ["RESOURCE_EXHAUSTED"] },
        },
      ],
    }),
  };

  it("a grpc-js client whose retry policy retries RESOURCE_EXHAUSTED waits the pushback and then succeeds", { timeout: 30_000 }, async () => {
    const { px, c } = await proxy({ callsPerSecond: 0.5, burst: 1 }, retrying);
    expect((await unary(c, Buffer.from("first"))).err).toBeNull();
    const r = await unary(c, Buffer.from("second"));
    expect(r.err).toBeNull();
    expect(r.res?.toString()).toBe("second");
    // dojang saw: the first call, the refused attempt, then the client's retry (attempt 2) admitted
    expect(px.calls.map((x) => [x.decided_by, x.grpc_code, x.attempt])).toEqual([
      ["upstream", 0, 1],
      ["rate_limited", 8, 1],
      ["upstream", 0, 2],
    ]);
  });

  it("without the pushback (responseHeaders: false) the same client's retry comes after its own 10 ms back-off and is refused again", { timeout: 30_000 }, async () => {
    const { px, c } = await proxy({ callsPerSecond: 0.5, burst: 1, responseHeaders: false }, retrying);
    expect((await unary(c, Buffer.from("first"))).err).toBeNull();
    const r = await unary(c, Buffer.from("second"));
    expect(r.err?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(px.calls.map((x) => [x.decided_by, x.attempt])).toEqual([
      ["upstream", 1],
      ["rate_limited", 1],
      ["rate_limited", 2],
    ]);
  });

  it("gRPC-Web over HTTP/1.1: the hint in the response head and again in the trailer frame, with CORS exposing it", { timeout: 30_000 }, async () => {
    const px = await startProxy(upstream.address, {
      route: { match: { service: "test.Echo" }, rateLimit: { callsPerSecond: 0.1, burst: 1 } },
      listener: { grpcWeb: true, http1Address: "127.0.0.1:0", cors: { allowOrigins: ["https://app.test"] } },
    });
    proxies.push(px);
    const h1 = px.instance.http1Address();
    expect(await webUnary(h1, "127.0.0.1")).toBe("0");
    const res = await webRaw(h1);
    const split = res.indexOf("\r\n\r\n");
    const head = res.slice(0, split).toLowerCase();
    const body = res.slice(split + 4);
    expect(head).toMatch(/\r\ngrpc-status: 8\r\n/);
    for (const [k, v] of [["x-ratelimit-limit", "1"], ["x-ratelimit-remaining", "0"]]) {
      expect(head).toContain(`\r\n${k}: ${v}\r\n`);
      expect(body).toContain(`${k}: ${v}\r\n`);
    }
    const pb = /\r\ngrpc-retry-pushback-ms: (\d+)\r\n/.exec(head)?.[1];
    expect(Number(pb)).toBeGreaterThan(0);
    expect(body).toContain(`grpc-retry-pushback-ms: ${pb}\r\n`);
    expect(body).toMatch(/x-ratelimit-reset: \d+\r\n/);
    const expose = /\r\naccess-control-expose-headers: ([^\r]*)\r\n/.exec(head)?.[1]?.split(",") ?? [];
    for (const k of HINTS) expect(expose).toContain(k);
  });
});

/** One gRPC-Web unary call over HTTP/1.1 with an Origin; the whole response as text. */
function webRaw(address: string): Promise<string> {
  const [host, port] = address.split(":") as [string, string];
  return new Promise((resolve, reject) => {
    const sock = net.connect({ host, port: Number(port) });
    let got = "";
    sock.on("data", (d: Buffer) => (got += d.toString("latin1")));
    sock.on("error", reject);
    sock.on("close", () => resolve(got));
    const body = Buffer.from([0, 0, 0, 0, 1, 0x61]);
    sock.write(`POST /test.Echo/Unary HTTP/1.1\r\nhost: localhost\r\norigin: https://app.test\r\ncontent-type: application/grpc-web+proto\r\nconnection: close\r\ncontent-length: ${body.length}\r\n\r\n`);
    sock.write(body);
  });
}
