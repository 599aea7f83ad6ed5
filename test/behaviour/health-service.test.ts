// Contract (issue 11): "dojang as a health server: opt-in grpc.health.v1 on a listener, answering
// from its clusters' health, so any gRPC health client (and Kubernetes' native gRPC probe) can
// check the sidecar." Real peers: a grpc-js health client on grpc-node's own health codec
// (grpc-health-check's official health.proto, test/helpers/health-peer.ts), a raw
// node:http2 client shaped like the kubelet's probe, upstreams whose own health answer flips
// (dojang's active health checks read it).
import * as grpc from "@grpc/grpc-js";
import http2 from "node:http2";
import { describe, expect, it } from "vitest";
import { startDojang, type DojangHandle } from "../../src/index.js";
import { HEALTH_SERVICE, healthRequestBytes, healthResponseStatus, type HealthResponse, type Serving } from "../helpers/health-peer.js";
import { startBackend, type Backend } from "../helpers/backends.js";
import { useFixtures, waitFor } from "../helpers/fixtures.js";
import { frame } from "../helpers/peers.js";

const fx = useFixtures();
const HEALTH_CHECK_PATH = "/grpc.health.v1.Health/Check";
const HEALTH_WATCH_PATH = "/grpc.health.v1.Health/Watch";
const HealthClient = grpc.makeGenericClientConstructor(HEALTH_SERVICE, "Health");
type HealthClient = grpc.Client & {
  Check: (req: { service: string }, md: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: HealthResponse) => void) => void;
  Watch: (req: { service: string }, md: grpc.Metadata, opts: grpc.CallOptions) => grpc.ClientReadableStream<HealthResponse>;
};

function healthClient(address: string): HealthClient {
  return fx.track(new HealthClient(address, grpc.credentials.createInsecure()) as unknown as HealthClient, (c) => c.close());
}

/** One Check: the serving status, or the error code. */
function check(c: HealthClient, service: string): Promise<{ status?: Serving; code?: number }> {
  return new Promise((resolve) => {
    c.Check({ service }, new grpc.Metadata(), { deadline: Date.now() + 3000 }, (err, res) => {
      if (err !== null) return resolve({ code: err.code });
      resolve({ status: res!.status });
    });
  });
}

async function backend(name: string): Promise<Backend> {
  return fx.track(await startBackend(name), (b) => b.close());
}

const FAST_CHECKS = { interval: "50ms", timeout: "500ms", unhealthyThreshold: 1, healthyThreshold: 1 };

/** dojang with one listener (healthService on) routing test.Echo to `a` and everything else to `b`. */
async function proxy(a: Backend, b: Backend, listener: Record<string, unknown> = {}): Promise<DojangHandle> {
  const px = await startDojang({
    logLevel: "silent",
    config: {
      admin: { address: "127.0.0.1:0" },
      listeners: [
        {
          name: "main",
          address: "127.0.0.1:0",
          healthService: true,
          routes: [
            { match: { service: "test.Echo" }, cluster: "a" },
            { match: { prefix: "/other." }, cluster: "b" },
          ],
          ...listener,
        },
      ],
      clusters: [
        { name: "a", endpoints: [a.address], healthCheck: FAST_CHECKS },
        { name: "b", endpoints: [b.address], healthCheck: FAST_CHECKS },
      ],
    },
  });
  return fx.track(px, (p) => p.close(0));
}

describe('"opt-in grpc.health.v1 on a listener, answering from its clusters\' health"', () => {
  it('answers Check "" with SERVING while every cluster of the listener has a healthy endpoint, NOT_SERVING when one has none, and SERVING again', async () => {
    const a = await backend("a");
    const b = await backend("b");
    const px = await proxy(a, b);
    const c = healthClient(px.address);
    expect(await check(c, "")).toEqual({ status: "SERVING" });
    b.serving = false;
    await waitForStatus(c, "", "NOT_SERVING");
    // A service routed only to the healthy cluster is still SERVING.
    expect(await check(c, "test.Echo")).toEqual({ status: "SERVING" });
    expect(await check(c, "other.Svc")).toEqual({ status: "NOT_SERVING" });
    b.serving = true;
    await waitForStatus(c, "", "SERVING");
  });

  it("answers NOT_FOUND for a service no route would take, as grpc-go's health server does", async () => {
    const a = await backend("a");
    const b = await backend("b");
    const px = await proxy(a, b);
    const c = healthClient(px.address);
    expect(await check(c, "nobody.Knows")).toEqual({ code: grpc.status.NOT_FOUND });
    // and proxied calls on the same listener are untouched
    expect(await check(c, "test.Echo")).toEqual({ status: "SERVING" });
    expect(a.checks).toBeGreaterThan(0);
  });

  it("Watch sends the current status at once, then each change, on one open stream", async () => {
    const a = await backend("a");
    const b = await backend("b");
    const px = await proxy(a, b);
    const c = healthClient(px.address);
    const seen: Serving[] = [];
    const w = c.Watch({ service: "test.Echo" }, new grpc.Metadata(), {});
    w.on("data", (m: HealthResponse) => seen.push(m.status));
    w.on("error", () => {});
    await waitFor("the first status", () => seen.length === 1);
    expect(seen).toEqual(["SERVING"]);
    a.serving = false;
    await waitFor("the change", () => seen.length === 2, 5000);
    expect(seen).toEqual(["SERVING", "NOT_SERVING"]);
    w.cancel();
  });

  it("answers a kubelet-shaped probe (raw HTTP/2, no deadline, service \"\") with 200, grpc-status 0 and SERVING, and a Watch hears NOT_SERVING when dojang drains", async () => {
    const a = await backend("a");
    const b = await backend("b");
    const px = await proxy(a, b);
    const probe = await rawHealth(px.address, HEALTH_CHECK_PATH, "");
    expect(probe).toMatchObject({ status: 200, grpcStatus: "0", messages: ["SERVING"] });

    const session = http2.connect(`http://${px.address}`);
    session.on("error", () => {});
    const messages: Serving[] = [];
    const watch = session.request({ ":method": "POST", ":path": HEALTH_WATCH_PATH, "content-type": "application/grpc", te: "trailers" });
    watch.on("data", (d: Buffer) => messages.push(...decodeMessages(d)));
    watch.on("error", () => {});
    watch.end(frame(healthRequestBytes("")));
    await waitFor("the first Watch message", () => messages.length === 1);
    const closed = new Promise<void>((r) => watch.on("close", () => r()));
    void px.instance.close(2000);
    await closed;
    expect(messages).toEqual(["SERVING", "NOT_SERVING"]);
    session.destroy();
  });

  it("is off by default: the health path is routed upstream like any call", async () => {
    const a = await backend("a");
    const b = await backend("b");
    const px = await proxy(a, b, { healthService: false, routes: [{ match: { prefix: "/" }, cluster: "b" }] });
    const checksBefore = b.checks;
    const c = healthClient(px.address);
    expect(await check(c, "")).toEqual({ status: "SERVING" });
    // b's own health service answered (one more Check than dojang's health checker alone made)
    expect(b.checks).toBeGreaterThan(checksBefore);
    expect(px.calls.some((r) => r.path === HEALTH_CHECK_PATH)).toBe(true);
  });
});

async function waitForStatus(c: HealthClient, service: string, want: Serving): Promise<void> {
  const end = Date.now() + 5000;
  let last: { status?: Serving; code?: number } = {};
  while (Date.now() < end) {
    last = await check(c, service);
    if (last.status === want) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  expect(last).toEqual({ status: want });
}

function decodeMessages(d: Buffer): Serving[] {
  const out: Serving[] = [];
  for (let i = 0; i + 5 <= d.length; ) {
    const len = d.readUInt32BE(i + 1);
    out.push(healthResponseStatus(d.subarray(i + 5, i + 5 + len)));
    i += 5 + len;
  }
  return out;
}

/** A health call as the kubelet's gRPC probe makes it: new connection, service name, no deadline. */
function rawHealth(address: string, path: string, service: string): Promise<{ status: number | undefined; grpcStatus: string | undefined; messages: Serving[] }> {
  return new Promise((resolve) => {
    const s = http2.connect(`http://${address}`);
    s.on("error", () => {});
    const req = s.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", "user-agent": "kube-probe/1.31" });
    let status: number | undefined;
    let grpcStatus: string | undefined;
    const chunks: Buffer[] = [];
    req.on("response", (h) => {
      status = Number(h[":status"]);
      if (typeof h["grpc-status"] === "string") grpcStatus = h["grpc-status"];
    });
    req.on("trailers", (t) => {
      if (typeof t["grpc-status"] === "string") grpcStatus = t["grpc-status"];
    });
    req.on("data", (d: Buffer) => chunks.push(d));
    req.on("error", () => {});
    req.on("close", () => {
      s.close();
      resolve({ status, grpcStatus, messages: decodeMessages(Buffer.concat(chunks)) });
    });
    req.end(frame(healthRequestBytes(service)));
  });
}
