// The side calls' transport (src/proxy/upstream/unary.ts): one unary gRPC call on a cluster's
// endpoint, against grpc-js servers (a third party's idea of gRPC: it refuses a request that is not
// one) on h2c and TLS. Concurrent calls on one session each get their own answer; a status, a
// reset, a large answer and a TLS failure end as the side call's failures; the cluster's breakers,
// queue, outlier detection and the endpoint's results see the call as they see an attempt.
import * as grpc from "@grpc/grpc-js";
import { afterEach, describe, expect, it } from "vitest";
import { createLogger } from "../../../src/proxy/observe/log.js";
import { Metrics } from "../../../src/proxy/observe/metrics.js";
import { Cluster } from "../../../src/proxy/upstream/cluster.js";
import type { SideOutcome } from "../../../src/proxy/upstream/side-call.js";
import { startUnary, unaryTarget, type UnaryTarget } from "../../../src/proxy/upstream/unary.js";
import { frameMessage } from "../../../src/translate/framing.js";
import { CertDir } from "../../helpers/certs.js";
import { waitFor } from "../../helpers/fixtures.js";
import { ECHO_SERVICE, sample } from "../../helpers/peers.js";
import { clusterCfg } from "./peer.js";

const PATH = "/test.Echo/Unary";
const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

/** A grpc-js server with `unary` as /test.Echo/Unary, h2c or TLS. */
async function grpcServer(unary: grpc.handleUnaryCall<Buffer, Buffer>, creds = grpc.ServerCredentials.createInsecure()): Promise<string> {
  const server = new grpc.Server({ "grpc.max_send_message_length": -1 });
  server.addService(ECHO_SERVICE, { Unary: unary });
  const port = await new Promise<number>((resolve, reject) => server.bindAsync("127.0.0.1:0", creds, (err, p) => (err ? reject(err) : resolve(p))));
  cleanup.push(() => server.forceShutdown());
  return `127.0.0.1:${port}`;
}

function cluster(extra: string): { c: Cluster; metrics: Metrics } {
  const metrics = new Metrics();
  const c = new Cluster(clusterCfg(extra), metrics, createLogger({ level: "silent" }), { rand: () => 0 });
  cleanup.push(() => c.close(true));
  return { c, metrics };
}

const bytes = (m: Uint8Array): Buffer => Buffer.from(m);

/** One call: its outcome (settle may run inside start(): the promise takes it either way). */
function call(t: UnaryTarget, payload: Buffer, stop?: (u: { stop(): void }) => void): Promise<SideOutcome<Buffer>> {
  return new Promise((resolve) => {
    const u = startUnary(t, frameMessage(payload), bytes, resolve);
    stop?.(u);
  });
}

const echo: grpc.handleUnaryCall<Buffer, Buffer> = (c, cb) => cb(null, c.request);

describe("a unary call on a cluster (the side calls' transport)", () => {
  it.each(["h2c", "TLS"] as const)("%s: 50 calls at once on one session each get their own answer; the endpoint hears 50 ok, the slots and the breaker count come back", async (kind) => {
    let address: string;
    let tls = "";
    if (kind === "TLS") {
      const certs = new CertDir();
      cleanup.push(() => certs.remove());
      const ca = certs.ca("unary-ca");
      const leaf = certs.leaf(ca, "svc", { cn: "svc.test", dns: ["svc.test"] });
      address = await grpcServer(echo, grpc.ServerCredentials.createSsl(null, [{ private_key: leaf.key, cert_chain: leaf.cert }], false));
      tls = `\ntls: { caFile: ${JSON.stringify(ca.certFile)}, serverName: svc.test }`;
    } else address = await grpcServer(echo);
    const { c } = cluster(`endpoints: ["${address}"]\nmaxSessionsPerEndpoint: 1${tls}`);
    const t = unaryTarget(c, PATH, "svc", 5000);
    const payloads = Array.from({ length: 50 }, (_, i) => Buffer.from(`question ${i} `.repeat(i + 1)));
    const outs = await Promise.all(payloads.map((p) => call(t, p)));
    expect(outs.map((o) => (o.result === "ok" ? o.value.toString() : `${o.result}: ${o.detail}`))).toEqual(payloads.map((p) => p.toString()));
    const e = c.endpoints[0]!;
    expect(e.results.ok).toBe(50);
    expect(e.active).toBe(0);
    expect(c.breaker.activeCalls).toBe(0);
    expect(c.open.size).toBe(1);
    expect([...c.open][0]!.active).toBe(0);
  });

  it("the service gets the timeout as grpc-timeout (grpc-js makes it the call's deadline)", async () => {
    const seen: { deadlineInMs: number }[] = [];
    const address = await grpcServer((c2, cb) => {
      seen.push({ deadlineInMs: Number(c2.getDeadline()) - Date.now() });
      cb(null, Buffer.alloc(0));
    });
    const { c } = cluster(`endpoints: ["${address}"]`);
    // an empty answer is an empty message: a decode that takes it
    expect(await call(unaryTarget(c, PATH, "svc.example", 1500), Buffer.from("x"))).toEqual({ result: "ok", value: Buffer.alloc(0) });
    expect(seen[0]!.deadlineInMs).toBeGreaterThan(500);
    expect(seen[0]!.deadlineInMs).toBeLessThanOrEqual(1500);
  });

  it("a status from the service is its failure: 14 unavailable, 4 timeout, any other an error; 14 is a failure of the endpoint, 5 is not", async () => {
    const codes = [grpc.status.UNAVAILABLE, grpc.status.DEADLINE_EXCEEDED, grpc.status.NOT_FOUND, grpc.status.INTERNAL];
    let i = 0;
    const address = await grpcServer((_c, cb) => cb({ code: codes[i++]!, details: `no ${i}` }));
    const { c } = cluster(`endpoints: ["${address}"]`);
    const t = unaryTarget(c, PATH, "svc", 5000);
    const got: string[] = [];
    const fails: number[] = [];
    for (let k = 0; k < codes.length; k++) {
      const o = await call(t, Buffer.from("q"));
      got.push(o.result === "ok" ? "ok" : `${o.result}: ${o.detail}`);
      fails.push(c.endpoints[0]!.consecutiveFailures);
    }
    expect(got).toEqual(["unavailable: code 14: no 1", "timeout: code 4: no 2", "error: code 5: no 3", "error: code 13: no 4"]);
    // 14 counts as a failure of the endpoint; 4 and 5 are answers about the call (they end the run); 13 again a failure
    expect(fails).toEqual([1, 0, 0, 1]);
    expect(c.endpoints[0]!.results.status).toBe(4);
  });

  it("maxCalls: a call beyond it is refused at once (unavailable, counted as overflow), the one in flight goes on", async () => {
    let hold: (() => void) | undefined;
    const address = await grpcServer((call2, cb) => {
      hold = () => cb(null, call2.request);
    });
    const { c, metrics } = cluster(`endpoints: ["${address}"]\ncircuitBreaker: { maxCalls: 1 }`);
    const t = unaryTarget(c, PATH, "svc", 5000);
    const first = call(t, Buffer.from("first"));
    await waitFor("the first call to reach the service", () => hold !== undefined);
    const second = await call(t, Buffer.from("second"));
    expect(second).toEqual({ result: "unavailable", detail: "cluster backend: maxCalls 1 reached" });
    expect(sample(await metrics.registry.metrics(), "dojang_upstream_overflow_total", { cluster: "backend", limit: "maxCalls" })).toBe(1);
    hold!();
    expect(await first).toEqual({ result: "ok", value: Buffer.from("first") });
    expect(c.breaker.activeCalls).toBe(0);
  });

  it("stopped while it waits in the endpoint's queue: out of the queue at once, nothing sent, the endpoint hears local", async () => {
    let hold: (() => void) | undefined;
    let reached = 0;
    const address = await grpcServer((call2, cb) => {
      reached++;
      hold = () => cb(null, call2.request);
    });
    const { c } = cluster(`endpoints: ["${address}"]\nmaxConcurrentStreamsPerSession: 1\nmaxSessionsPerEndpoint: 1`);
    const t = unaryTarget(c, PATH, "svc", 5000);
    const first = call(t, Buffer.from("first"));
    await waitFor("the first call to reach the service", () => hold !== undefined);
    let u: { stop(): void } | undefined;
    const second = call(t, Buffer.from("second"), (x) => (u = x));
    expect(c.endpoints[0]!.queued).toBe(1);
    expect(c.breaker.pendingAttempts).toBe(1);
    u!.stop();
    expect(c.endpoints[0]!.queued).toBe(0);
    expect(c.breaker.pendingAttempts).toBe(0);
    expect(c.breaker.activeCalls).toBe(1);
    expect(c.endpoints[0]!.results.local).toBe(1);
    hold!();
    expect((await first).result).toBe("ok");
    // the stopped call settles nothing (its side call did), and never reached the service
    const late = await Promise.race([second.then(() => "settled"), new Promise((r) => setTimeout(r, 200, "nothing"))]);
    expect(late).toBe("nothing");
    expect(reached).toBe(1);
  });

  it("stopped with its stream open: RST_STREAM(CANCEL) reaches the service (grpc-js calls it cancelled), the endpoint hears local", async () => {
    let cancelled = false;
    const address = await grpcServer((call2) => call2.on("cancelled", () => (cancelled = true)));
    const { c } = cluster(`endpoints: ["${address}"]`);
    const t = unaryTarget(c, PATH, "svc", 5000);
    let u: { stop(): void } | undefined;
    void call(t, Buffer.from("q"), (x) => (u = x));
    await waitFor("the stream to be open on the session", () => [...c.open].some((s) => s.active === 1));
    await new Promise((r) => setTimeout(r, 50));
    u!.stop();
    await waitFor("the service to see the cancel", () => cancelled);
    await waitFor("the endpoint to hear the result", () => c.endpoints[0]!.results.local === 1);
    expect(c.breaker.activeCalls).toBe(0);
    expect([...c.open][0]!.resetsSent).toBe(1);
  });

  it("outlier detection: an endpoint that keeps answering 14 is ejected, and the calls after it go to the other", async () => {
    const bad = await grpcServer((_c, cb) => cb({ code: grpc.status.UNAVAILABLE, details: "down" }));
    const good = await grpcServer(echo);
    const { c } = cluster(`endpoints: ["${bad}", "${good}"]\noutlierDetection: { consecutiveFailures: 2, baseEjection: 30s }`);
    const t = unaryTarget(c, PATH, "svc", 5000);
    const results: string[] = [];
    for (let i = 0; i < 12; i++) results.push((await call(t, Buffer.from("q"))).result);
    const b = c.endpoints.find((e) => e.label === bad)!;
    expect(b.ejected).toBe(true);
    expect(b.results.status).toBe(2);
    // round robin: bad, good, bad (ejected now), then good only
    expect(results).toEqual(["unavailable", "ok", "unavailable", ...Array(9).fill("ok")]);
  });

  it("no endpoint, an answer over 4 MiB, a TLS certificate the CA did not sign: each a failure with its reason", async () => {
    const { c: empty } = cluster("");
    empty.setEndpoints([], []);
    expect(await call(unaryTarget(empty, PATH, "svc", 5000), Buffer.from("q"))).toEqual({ result: "unavailable", detail: "cluster backend has no endpoint" });

    const big = await grpcServer((_c, cb) => cb(null, Buffer.alloc(5 * 1024 * 1024, 1)));
    const { c } = cluster(`endpoints: ["${big}"]`);
    expect(await call(unaryTarget(c, PATH, "svc", 5000), Buffer.from("q"))).toEqual({ result: "error", detail: "response larger than 4194304 bytes" });

    const certs = new CertDir();
    cleanup.push(() => certs.remove());
    const ca = certs.ca("real-ca");
    const other = certs.ca("other-ca");
    const leaf = certs.leaf(ca, "svc", { cn: "svc.test", dns: ["svc.test"] });
    const tlsAddr = await grpcServer(echo, grpc.ServerCredentials.createSsl(null, [{ private_key: leaf.key, cert_chain: leaf.cert }], false));
    const { c: wrong } = cluster(`endpoints: ["${tlsAddr}"]\ntls: { caFile: ${JSON.stringify(other.certFile)}, serverName: svc.test }`);
    const o = await call(unaryTarget(wrong, PATH, "svc", 5000), Buffer.from("q"));
    expect(o.result).toBe("unavailable");
    expect(o.result !== "ok" && o.detail).toMatch(/^TLS certificate verification of 127\.0\.0\.1:\d+ failed/);
  });
});
