// Contract (issue 11, step 2): "Active health checks with grpc.health.v1 Check: unhealthy
// endpoints get no calls (unless all are unhealthy: then all get calls, as Envoy's panic
// threshold does). Outlier ejection on consecutive failures, counting trailer statuses, resets
// and connect failures; ejection time = base × times ejected; maxEjectionPercent so a cluster is
// never emptied." Real grpc-js upstreams whose health answer and Echo answer the tests flip.
import * as grpc from "@grpc/grpc-js";
import http2 from "node:http2";
import { describe, expect, it } from "vitest";
import type { DojangHandle } from "../../src/index.js";
import { sample, scrape, unary, type EchoClient } from "../helpers/peers.js";
import { useFixtures, waitFor } from "../helpers/fixtures.js";
import { freePort } from "../helpers/process.js";
import { runCalls, startBackend, type Backend } from "../helpers/backends.js";
import { resetAfterMessage } from "../helpers/scripted-upstream.js";

const fx = useFixtures();

async function three(): Promise<Backend[]> {
  const bs: Backend[] = [];
  for (const n of ["a", "b", "c"]) bs.push(fx.track(await startBackend(n), (b) => b.close()));
  return bs;
}

const cluster = (px: DojangHandle) => px.instance.clusters.get("backend")!;
const endpoint = (px: DojangHandle, b: { address: string }) => cluster(px).endpoints.find((e) => e.label === b.address)!;

/** `n` sequential calls; the names of the upstreams that answered (errors as their code). */
async function calls(c: EchoClient, n: number): Promise<string[]> {
  return runCalls(n, 1, async () => {
    const r = await unary(c, Buffer.from("x"));
    return r.err === null ? r.res!.toString() : `code ${r.err.code}`;
  });
}

const HC = { interval: "40ms", timeout: "500ms", unhealthyThreshold: 2, healthyThreshold: 2 };

describe('"unhealthy endpoints get no calls (unless all are unhealthy: then all get calls)"', () => {
  it("an upstream whose health flips to NOT_SERVING gets no calls after the threshold, and calls again once healthy", async () => {
    const bs = await three();
    const px = await fx.proxyFor(bs[0]!.address, { cluster: { endpoints: bs.map((b) => b.address), healthCheck: HC } });
    const c = fx.client(px.address);
    await waitFor("the first checks", () => bs.every((b) => b.checks >= 2));
    expect(new Set(await calls(c, 9))).toEqual(new Set(["a", "b", "c"]));

    bs[1]!.serving = false;
    await waitFor("b to be unhealthy", () => !endpoint(px, bs[1]!).healthy);
    const before = bs[1]!.calls;
    const got = await calls(c, 30);
    expect(got.filter((x) => x === "b")).toEqual([]);
    expect(bs[1]!.calls).toBe(before);
    expect(got.filter((x) => x === "a").length).toBe(15);
    expect(sample(await scrape(px.adminAddress), "dojang_upstream_endpoint_healthy", { cluster: "backend", endpoint: bs[1]!.address })).toBe(0);
    expect(sample(await scrape(px.adminAddress), "dojang_upstream_endpoints", { cluster: "backend", state: "unhealthy" })).toBe(1);

    bs[1]!.serving = true;
    await waitFor("b to be healthy again", () => endpoint(px, bs[1]!).healthy);
    expect((await calls(c, 9)).filter((x) => x === "b").length).toBe(3);
    expect(sample(await scrape(px.adminAddress), "dojang_upstream_endpoint_healthy", { cluster: "backend", endpoint: bs[1]!.address })).toBe(1);
  });

  it("all unhealthy: panic, every endpoint gets calls, and none fails for it", async () => {
    const bs = await three();
    const px = await fx.proxyFor(bs[0]!.address, { cluster: { endpoints: bs.map((b) => b.address), healthCheck: HC } });
    const c = fx.client(px.address);
    for (const b of bs) b.serving = false;
    await waitFor("all to be unhealthy", () => cluster(px).endpoints.every((e) => !e.healthy));
    expect(cluster(px).picker.panic).toBe(true);
    expect(cluster(px).hasHealthyEndpoint()).toBe(false);
    const got = await calls(c, 30);
    expect({ a: got.filter((x) => x === "a").length, b: got.filter((x) => x === "b").length, c: got.filter((x) => x === "c").length }).toEqual({ a: 10, b: 10, c: 10 });
    // one back: it alone gets the calls
    bs[2]!.serving = true;
    await waitFor("c to be healthy", () => endpoint(px, bs[2]!).healthy);
    expect(cluster(px).hasHealthyEndpoint()).toBe(true);
    expect(new Set(await calls(c, 10))).toEqual(new Set(["c"]));
  });
});

describe('"Outlier ejection on consecutive failures … ejection time = base × times ejected; maxEjectionPercent"', () => {
  it("an upstream answering UNAVAILABLE is ejected after 3 in a row, returns after baseEjection, and is ejected for twice as long the second time", async () => {
    const bs = await three();
    bs[2]!.failWith = grpc.status.UNAVAILABLE;
    const px = await fx.proxyFor(bs[0]!.address, {
      cluster: { endpoints: bs.map((b) => b.address), outlierDetection: { consecutiveFailures: 3, baseEjection: "2s", maxEjectionPercent: 50 } },
    });
    const c = fx.client(px.address);
    const first = await calls(c, 9);
    expect(first.filter((x) => x === "code 14").length).toBe(3);
    const ep = endpoint(px, bs[2]!);
    expect(ep.ejected).toBe(true);
    const ejectedAt = performance.now();
    // 2 s, not 600 ms: the 20 calls below must all start within the ejection, and on a loaded
    // machine 20 calls took longer than 600 ms (c came back and failed some of them)
    const n = bs[2]!.calls;
    const during = await calls(c, 20);
    expect(during.filter((x) => x === "code 14")).toEqual([]);
    expect(bs[2]!.calls).toBe(n);
    expect(sample(await scrape(px.adminAddress), "dojang_upstream_ejections_total", { cluster: "backend", endpoint: bs[2]!.address })).toBe(1);
    expect(sample(await scrape(px.adminAddress), "dojang_upstream_endpoint_ejected", { cluster: "backend", endpoint: bs[2]!.address })).toBe(1);

    await waitFor("c to come back", () => !ep.ejected, 6000);
    expect(performance.now() - ejectedAt).toBeGreaterThan(1800);
    // back in rotation: it gets calls (and fails them) until it is ejected again, for 2 × base
    await waitFor("c to be ejected again", () => {
      void unary(c, Buffer.from("x"));
      return ep.ejected;
    }, 3000);
    const again = performance.now();
    expect(ep.outlier.timesEjected).toBe(2);
    await waitFor("c to come back a second time", () => !ep.ejected, 8000);
    expect(performance.now() - again).toBeGreaterThan(3700);
  });

  it("a connect that fails counts: an endpoint nobody listens on is ejected after 2 failures", async () => {
    const bs = await three();
    const dead = `127.0.0.1:${await freePort()}`;
    const px = await fx.proxyFor(bs[0]!.address, {
      cluster: { endpoints: [bs[0]!.address, bs[1]!.address, dead], outlierDetection: { consecutiveFailures: 2, baseEjection: "30s" } },
    });
    const c = fx.client(px.address);
    // each call that picked it was retried transparently (the connect failed before any stream):
    // the client sees no failure, the endpoint two unreachables in a row
    const got = await calls(c, 9);
    expect(got.filter((x) => x.startsWith("code"))).toEqual([]);
    expect(endpoint(px, { address: dead }).results.unreachable).toBe(2);
    expect(endpoint(px, { address: dead }).ejected).toBe(true);
    expect((await calls(c, 20)).filter((x) => x === "code 14")).toEqual([]);
  });

  it("an upstream that resets its streams mid-response is ejected after 2 resets; the client then sees no more of them", async () => {
    const bs = await three();
    const bad = await fx.rawUpstream((st) => resetAfterMessage(st, http2.constants.NGHTTP2_INTERNAL_ERROR, Buffer.from("r")));
    const px = await fx.proxyFor(bs[0]!.address, {
      cluster: { endpoints: [bs[0]!.address, bs[1]!.address, bad.address], outlierDetection: { consecutiveFailures: 2, baseEjection: "30s" } },
    });
    const c = fx.client(px.address);
    const got = await calls(c, 6);
    expect(got.filter((x) => x.startsWith("code")).length).toBe(2);
    expect(endpoint(px, bad).ejected).toBe(true);
    expect(endpoint(px, bad).results.reset).toBe(2);
    expect((await calls(c, 20)).filter((x) => x.startsWith("code"))).toEqual([]);
    expect(bad.seen.length).toBe(2);
  });

  it("maxEjectionPercent: with two of three failing and 50%, only one is ejected at a time; the other keeps its calls", async () => {
    const bs = await three();
    bs[1]!.failWith = grpc.status.INTERNAL;
    bs[2]!.failWith = grpc.status.UNAVAILABLE;
    const px = await fx.proxyFor(bs[0]!.address, {
      cluster: { endpoints: bs.map((b) => b.address), outlierDetection: { consecutiveFailures: 2, baseEjection: "30s", maxEjectionPercent: 50 } },
    });
    const c = fx.client(px.address);
    await calls(c, 30);
    const ejected = cluster(px).endpoints.filter((e) => e.ejected);
    expect(ejected.length).toBe(1);
    const other = bs.slice(1).find((b) => b.address !== ejected[0]!.label)!;
    const n = other.calls;
    await calls(c, 10);
    expect(other.calls).toBe(n + 5);
    expect(sample(await scrape(px.adminAddress), "dojang_upstream_endpoints", { cluster: "backend", state: "ejected" })).toBe(1);
  });

  // the case above sets the default (50), so it cannot tell the key from its absence; this one can
  it("maxEjectionPercent 67: with two of three failing, both are ejected and the healthy one takes every call (the default 50 would keep one in)", async () => {
    const bs = await three();
    bs[1]!.failWith = grpc.status.INTERNAL;
    bs[2]!.failWith = grpc.status.UNAVAILABLE;
    const px = await fx.proxyFor(bs[0]!.address, {
      cluster: { endpoints: bs.map((b) => b.address), outlierDetection: { consecutiveFailures: 2, baseEjection: "30s", maxEjectionPercent: 67 } },
    });
    const c = fx.client(px.address);
    await calls(c, 30);
    const [n1, n2] = [bs[1]!.calls, bs[2]!.calls];
    expect(await calls(c, 10)).toEqual(new Array(10).fill("a"));
    expect([bs[1]!.calls, bs[2]!.calls]).toEqual([n1, n2]);
    expect(sample(await scrape(px.adminAddress), "dojang_upstream_endpoints", { cluster: "backend", state: "ejected" })).toBe(2);
  });

  it("statuses about the call, not the endpoint (NOT_FOUND), never eject", async () => {
    const bs = await three();
    bs[2]!.failWith = grpc.status.NOT_FOUND;
    const px = await fx.proxyFor(bs[0]!.address, {
      cluster: { endpoints: bs.map((b) => b.address), outlierDetection: { consecutiveFailures: 2, baseEjection: "30s" } },
    });
    const c = fx.client(px.address);
    expect((await calls(c, 30)).filter((x) => x === "code 5").length).toBe(10);
    expect(endpoint(px, bs[2]!).ejected).toBe(false);
  });
});
