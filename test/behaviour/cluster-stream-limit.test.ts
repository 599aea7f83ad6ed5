// Contract (issue 23): dojang's own per-session stream limit holds. The effective limit of an
// upstream session is min(maxConcurrentStreamsPerSession, the peer's SETTINGS_MAX_CONCURRENT_STREAMS);
// an attempt that finds every session at it opens another session (up to maxSessionsPerEndpoint),
// else waits in dojang, in order, counted in maxPendingCalls, its deadline running; past
// maxPendingCalls it overflows (14, decided_by overflow, attempts 0). The upstream here is a raw
// node:http2 server that announces no stream limit of its own and counts what it sees: nghttp2
// would send it every stream, so whatever holds them is dojang's.
import * as grpc from "@grpc/grpc-js";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import type { DojangHandle } from "../../src/index.js";
import { configFromText } from "../../src/config/index.js";
import { frame, rawCall, statusOf, unary, type EchoClient, type UnaryResult } from "../helpers/peers.js";
import { useFixtures, waitFor } from "../helpers/fixtures.js";
import { runCalls } from "../helpers/backends.js";
import { GRPC_RESPONSE_HEADERS, afterRequest, replyGrpc } from "../helpers/scripted-upstream.js";

const fx = useFixtures();

interface CountingUpstream {
  readonly address: string;
  /** connections (HTTP/2 sessions) accepted */
  sessions: number;
  /** streams open now, and the most seen at once, over all sessions */
  open: number;
  maxOpen: number;
  /** the most streams seen at once on any one session */
  maxPerSession: number;
  /** the x-i header of each stream, in arrival order */
  readonly arrived: string[];
  /** true: streams are held unanswered until release() */
  hold: boolean;
  /** answers every held stream and stops holding */
  release(): void;
  /** GOAWAY (graceful: streams already open finish) on every session */
  goaway(): void;
}

/**
 * `messageFirst`: a held stream gets its response head and message at once, only its trailers
 * wait for release() (a call that has its first message is committed: no per-try timeout).
 */
async function countingUpstream(messageFirst = false, settings: http2.Settings = {}): Promise<CountingUpstream> {
  // No settings given: node announces no SETTINGS_MAX_CONCURRENT_STREAMS, nghttp2's peer has no limit.
  const server = http2.createServer({ settings });
  const live = new Set<http2.Http2Session>();
  const held: (() => void)[] = [];
  const perSession = new Map<http2.Http2Session, number>();
  const up: CountingUpstream = {
    address: "",
    sessions: 0,
    open: 0,
    maxOpen: 0,
    maxPerSession: 0,
    arrived: [],
    hold: true,
    release() {
      up.hold = false;
      for (const r of held.splice(0)) r();
    },
    goaway() {
      for (const s of live) s.goaway(http2.constants.NGHTTP2_NO_ERROR);
    },
  };
  server.on("session", (s) => {
    up.sessions++;
    live.add(s);
    perSession.set(s, 0);
    s.on("close", () => live.delete(s));
    s.on("error", () => {});
  });
  server.on("stream", (stream, headers) => {
    const s = stream.session!;
    const i = String(headers["x-i"]);
    up.arrived.push(i);
    up.open++;
    up.maxOpen = Math.max(up.maxOpen, up.open);
    const n = perSession.get(s)! + 1;
    perSession.set(s, n);
    up.maxPerSession = Math.max(up.maxPerSession, n);
    stream.on("error", () => {});
    stream.resume(); // (read the request, so that its end is seen)
    stream.on("close", () => {
      up.open--;
      perSession.set(s, perSession.get(s)! - 1);
    });
    if (messageFirst && up.hold) {
      afterRequest(stream, () => {
        stream.respond(GRPC_RESPONSE_HEADERS, { waitForTrailers: true });
        stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
        stream.write(frame(Buffer.from(`ok ${i}`)));
        held.push(() => stream.end());
      });
      return;
    }
    const answer = (): void => afterRequest(stream, () => replyGrpc(stream, [Buffer.from(`ok ${i}`)]));
    if (up.hold) held.push(answer);
    else answer();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  fx.track(server, (srv) => {
    for (const s of live) s.destroy();
    return new Promise<void>((r) => srv.close(() => r()));
  });
  return Object.assign(up, { address: `127.0.0.1:${(server.address() as AddressInfo).port}` });
}

const LIMITS = { maxConcurrentStreamsPerSession: 5, maxSessionsPerEndpoint: 1, circuitBreaker: { maxPendingCalls: 5 } };

function call(c: EchoClient, i: number, opts: grpc.CallOptions = {}): Promise<UnaryResult> {
  const md = new grpc.Metadata();
  md.set("x-i", String(i));
  return unary(c, Buffer.from(`call ${i}`), md, { deadline: Date.now() + 20_000, ...opts });
}

interface ClusterJson {
  sessions: number;
  endpoints: { activeAttempts: number; sessions: { open: number; draining: number; streams: number } }[];
  breaker: { maxConnections: { current: number; limit: number }; maxPendingCalls: { current: number; limit: number } };
}

async function clustersView(px: DojangHandle): Promise<ClusterJson> {
  return ((await (await fetch(`http://${px.adminAddress}/clusters`)).json()) as ClusterJson[])[0]!;
}

/**
 * Starts calls `from`..`to`-1 one at a time, each once dojang has the one before it (the upstream
 * has its stream, or it is pending), so they reach dojang in that order.
 */
async function startInOrder(px: DojangHandle, up: CountingUpstream, c: EchoClient, from: number, to: number, opts: grpc.CallOptions = {}): Promise<Promise<UnaryResult>[]> {
  const cluster = px.instance.clusters.get("backend")!;
  const out: Promise<UnaryResult>[] = [];
  const base = up.arrived.length + cluster.pendingAttempts();
  for (let i = from; i < to; i++) {
    out.push(call(c, i, opts));
    const want = base + i - from + 1;
    await waitFor(`call ${i} to reach dojang's upstream side`, () => up.arrived.length + cluster.pendingAttempts() >= want);
  }
  return out;
}

describe("issue 23: maxConcurrentStreamsPerSession holds in dojang when the upstream announces no limit", () => {
  it("10 calls, limit 5, one session, 5 pending: the upstream never has more than 5, the other 5 wait in dojang and go in order", async () => {
    const up = await countingUpstream();
    const px = await fx.proxyFor(up.address, { cluster: LIMITS });
    const c = fx.client(px.address);
    const cluster = px.instance.clusters.get("backend")!;
    const calls = await startInOrder(px, up, c, 0, 10);
    await waitFor("5 streams upstream and 5 pending", () => up.open === 5 && cluster.pendingAttempts() === 5);
    // held a moment: nothing more reaches the upstream
    await new Promise((r) => setTimeout(r, 100));
    expect(up.open).toBe(5);
    expect(up.arrived).toEqual(["0", "1", "2", "3", "4"]);
    // /clusters tells the truth while they are held
    const v = await clustersView(px);
    expect(v.sessions).toBe(1);
    expect(v.endpoints[0]!.sessions).toEqual({ open: 1, draining: 0, streams: 5 });
    expect(v.endpoints[0]!.activeAttempts).toBe(10);
    expect(v.breaker.maxPendingCalls).toEqual({ current: 5, limit: 5 });
    up.release();
    const rs = await Promise.all(calls);
    for (const [i, r] of rs.entries()) {
      expect(r.err).toBeNull();
      expect(r.res!.toString()).toBe(`ok ${i}`);
    }
    expect(up.maxOpen).toBe(5);
    expect(up.sessions).toBe(1);
    // released in the order they came
    expect(up.arrived).toEqual(["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"]);
    expect(cluster.pendingAttempts()).toBe(0);
    expect((await clustersView(px)).breaker.maxPendingCalls.current).toBe(0);
  });

  it("the 11th call beyond 5 open and 5 pending overflows at once: 14, decided_by overflow, access record attempts 0 and no upstream", async () => {
    const up = await countingUpstream();
    const px = await fx.proxyFor(up.address, { cluster: LIMITS });
    const c = fx.client(px.address);
    const calls = await startInOrder(px, up, c, 0, 10);
    const t0 = performance.now();
    const r = await call(c, 10);
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(r.err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(r.err?.details).toBe("cluster backend: maxPendingCalls 5 reached");
    expect(up.arrived).not.toContain("10");
    await waitFor("the overflow's record", () => px.calls.some((x) => x.decided_by === "overflow"));
    const rec = px.calls.find((x) => x.decided_by === "overflow")!;
    expect(rec.grpc_code).toBe(14);
    expect(rec.attempts).toBe(0);
    expect(rec.upstream).toBeUndefined();
    up.release();
    for (const x of await Promise.all(calls)) expect(x.err).toBeNull();
    expect(up.maxOpen).toBe(5);
    await waitFor("10 records", () => px.calls.length === 11);
    for (const x of px.calls) if (x.decided_by !== "overflow") expect(x.attempts).toBe(1);
  });

  it("maxSessionsPerEndpoint 2: a second session opens, each carries at most 5, and the 11th and 12th wait", async () => {
    const up = await countingUpstream();
    const px = await fx.proxyFor(up.address, { cluster: { ...LIMITS, maxSessionsPerEndpoint: 2 } });
    const c = fx.client(px.address);
    const cluster = px.instance.clusters.get("backend")!;
    const calls = await startInOrder(px, up, c, 0, 12);
    await waitFor("10 streams upstream and 2 pending", () => up.open === 10 && cluster.pendingAttempts() === 2);
    await new Promise((r) => setTimeout(r, 100));
    expect(up.open).toBe(10);
    expect(up.sessions).toBe(2);
    expect(up.maxPerSession).toBe(5);
    const v = await clustersView(px);
    expect(v.endpoints[0]!.sessions).toEqual({ open: 2, draining: 0, streams: 10 });
    expect(v.breaker.maxPendingCalls.current).toBe(2);
    expect(v.breaker.maxConnections.current).toBe(2);
    up.release();
    for (const r of await Promise.all(calls)) expect(r.err).toBeNull();
    expect(up.sessions).toBe(2);
    expect(up.maxPerSession).toBe(5);
    expect(up.arrived.slice(10)).toEqual(["10", "11"]);
  });

  it("a waiting call whose deadline passes ends 4 decided by dojang, leaves the pending count, and never reaches the upstream", async () => {
    const up = await countingUpstream();
    const px = await fx.proxyFor(up.address, { cluster: LIMITS });
    const c = fx.client(px.address);
    const cluster = px.instance.clusters.get("backend")!;
    const held = await startInOrder(px, up, c, 0, 5);
    await waitFor("5 streams upstream", () => up.open === 5);
    // a raw client that sends grpc-timeout 300m and never cancels by itself: a grpc-js client's own
    // timer fires at the same moment as dojang's and, on a loaded machine, could cancel first
    // (the record then says client_cancel), so only dojang can end this one
    const r = await rawCall(px.address, { "grpc-timeout": "300m", "x-i": "5" }, frame(Buffer.from("call 5")));
    expect(statusOf(r)).toBe(String(grpc.status.DEADLINE_EXCEEDED));
    await waitFor("its record", () => px.calls.length === 1);
    expect(px.calls[0]!.decided_by).toBe("deadline");
    expect(px.calls[0]!.attempts).toBe(1);
    expect(cluster.pendingAttempts()).toBe(0);
    expect((await clustersView(px)).breaker.maxPendingCalls.current).toBe(0);
    // the next one waits in its place and is the first to get a freed slot
    const next = await startInOrder(px, up, c, 6, 7);
    expect(cluster.pendingAttempts()).toBe(1);
    up.release();
    for (const x of await Promise.all([...held, ...next])) expect(x.err).toBeNull();
    expect(up.arrived).toEqual(["0", "1", "2", "3", "4", "6"]);
    expect(up.maxOpen).toBe(5);
  });

  it("a per-try timeout fires on a waiting attempt: it leaves the queue at once", async () => {
    // the 5 held calls get their response head and message at once (only their trailers wait), so
    // dojang commits to them and stops their per-try timers; the client sees the head only then
    const up = await countingUpstream(true);
    const px = await fx.proxyFor(up.address, {
      cluster: LIMITS,
      route: { retry: { retryOn: ["UNAVAILABLE"], maxAttempts: 2, perTryTimeout: "1s", backoff: { base: "10ms", max: "20ms" } } },
    });
    const c = fx.client(px.address);
    const cluster = px.instance.clusters.get("backend")!;
    const heads: Promise<void>[] = [];
    const held = Array.from({ length: 5 }, (_, i) => {
      const md = new grpc.Metadata();
      md.set("x-i", String(i));
      return new Promise<grpc.ServiceError | null>((resolve) => {
        const cc = c.Unary(Buffer.from("x"), md, { deadline: Date.now() + 20_000 }, (err: grpc.ServiceError | null) => resolve(err));
        heads.push(new Promise<void>((h) => cc.on("metadata", () => h())));
      });
    });
    await Promise.all(heads);
    expect(up.open).toBe(5);
    // two attempts, each waits 1 s in dojang, then the call ends 4
    const r = await call(c, 5);
    expect(r.err?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(r.err?.details).toBe("per-try timeout of 1000 ms passed on attempt 2");
    expect(cluster.pendingAttempts()).toBe(0);
    await waitFor("its record", () => px.calls.length === 1);
    expect(px.calls[0]!.decided_by).toBe("deadline");
    expect(px.calls[0]!.attempts).toBe(2);
    up.release();
    for (const err of await Promise.all(held)) expect(err).toBeNull();
    expect(up.arrived.length).toBe(5);
    expect(up.arrived).not.toContain("5");
  });

  it("a cancelled waiting call leaves the queue; the one behind it takes the first freed slot", async () => {
    const up = await countingUpstream();
    const px = await fx.proxyFor(up.address, { cluster: LIMITS });
    const c = fx.client(px.address);
    const cluster = px.instance.clusters.get("backend")!;
    const held = await startInOrder(px, up, c, 0, 5);
    const md = new grpc.Metadata();
    md.set("x-i", "5");
    const cancelled = new Promise<grpc.ServiceError | null>((resolve) => {
      const cc = c.Unary(Buffer.from("call 5"), md, { deadline: Date.now() + 20_000 }, (err) => resolve(err));
      void waitFor("call 5 pending", () => cluster.pendingAttempts() === 1).then(() => cc.cancel());
    });
    expect((await cancelled)?.code).toBe(grpc.status.CANCELLED);
    await waitFor("the pending count back to 0", () => cluster.pendingAttempts() === 0);
    const after = await startInOrder(px, up, c, 6, 8);
    expect(cluster.pendingAttempts()).toBe(2);
    up.release();
    for (const x of await Promise.all([...held, ...after])) expect(x.err).toBeNull();
    expect(up.arrived).toEqual(["0", "1", "2", "3", "4", "6", "7"]);
    await waitFor("its record", () => px.calls.some((x) => x.decided_by === "client_cancel"));
    expect(up.maxOpen).toBe(5);
  });

  it("the session goes away (GOAWAY): its streams finish there, the waiting calls go on a new session", async () => {
    const up = await countingUpstream();
    const px = await fx.proxyFor(up.address, { cluster: LIMITS });
    const c = fx.client(px.address);
    const cluster = px.instance.clusters.get("backend")!;
    const calls = await startInOrder(px, up, c, 0, 8);
    await waitFor("5 streams upstream and 3 pending", () => up.open === 5 && cluster.pendingAttempts() === 3);
    up.goaway();
    // the draining session takes no new stream; a new one carries the 3
    await waitFor("8 streams upstream", () => up.arrived.length === 8);
    expect(up.sessions).toBe(2);
    expect(up.maxPerSession).toBe(5);
    expect(cluster.pendingAttempts()).toBe(0);
    const v = await clustersView(px);
    expect(v.endpoints[0]!.sessions).toEqual({ open: 1, draining: 1, streams: 8 });
    up.release();
    for (const r of await Promise.all(calls)) expect(r.err).toBeNull();
    expect(up.arrived).toEqual(["0", "1", "2", "3", "4", "5", "6", "7"]);
  });

  it("with the default breakers, 20 calls on one session of limit 5: 5 at the upstream, 15 pending", async () => {
    const up = await countingUpstream();
    const px = await fx.proxyFor(up.address, { cluster: { maxConcurrentStreamsPerSession: 5, maxSessionsPerEndpoint: 1 } });
    const c = fx.client(px.address);
    const cluster = px.instance.clusters.get("backend")!;
    const calls = await startInOrder(px, up, c, 0, 20);
    await waitFor("5 streams upstream and 15 pending", () => up.open === 5 && cluster.pendingAttempts() === 15);
    const v = await clustersView(px);
    expect(v.endpoints[0]!.sessions).toEqual({ open: 1, draining: 0, streams: 5 });
    up.release();
    for (const r of await Promise.all(calls)) expect(r.err).toBeNull();
    expect(up.maxOpen).toBe(5);
    expect(up.arrived).toEqual(Array.from({ length: 20 }, (_, i) => String(i)));
  });

  it("an upstream that announces 2: the waiters beyond 2 on a new session go on another (maxSessionsPerEndpoint 2), then wait in dojang", async () => {
    const up = await countingUpstream(false, { maxConcurrentStreams: 2 });
    const px = await fx.proxyFor(up.address, { cluster: { ...LIMITS, maxSessionsPerEndpoint: 2, circuitBreaker: { maxPendingCalls: 10 } } });
    const c = fx.client(px.address);
    const cluster = px.instance.clusters.get("backend")!;
    // all 8 before the first session has the peer's SETTINGS: 5 wait for it (dojang's 5), the rest for a second
    const calls = Array.from({ length: 8 }, (_, i) => call(c, i));
    await waitFor("4 streams upstream and 4 pending", () => up.open === 4 && cluster.pendingAttempts() === 4);
    await new Promise((r) => setTimeout(r, 100));
    expect(up.open).toBe(4);
    expect(up.sessions).toBe(2);
    expect(up.maxPerSession).toBe(2);
    const v = await clustersView(px);
    expect(v.endpoints[0]!.sessions).toEqual({ open: 2, draining: 0, streams: 4 });
    expect(v.breaker.maxPendingCalls.current).toBe(4);
    up.release();
    for (const r of await Promise.all(calls)) expect(r.err).toBeNull();
    expect(up.maxPerSession).toBe(2);
    expect(up.sessions).toBe(2);
    expect(up.arrived.length).toBe(8);
    expect(cluster.pendingAttempts()).toBe(0);
  });

  it("the endpoint leaves the cluster (a reload drops it): its waiting calls end there and go to the new endpoint", async () => {
    const a = await countingUpstream();
    const b = await countingUpstream();
    b.hold = false;
    const px = await fx.proxyFor(a.address, { cluster: LIMITS });
    const c = fx.client(px.address);
    const cluster = px.instance.clusters.get("backend")!;
    const calls = await startInOrder(px, a, c, 0, 8);
    await waitFor("5 streams on a and 3 pending", () => a.open === 5 && cluster.pendingAttempts() === 3);
    const cfg = [
      "admin: { address: 127.0.0.1:0 }",
      "listeners:",
      "  - name: main",
      "    address: 127.0.0.1:0",
      '    routes: [{ match: { prefix: "/" }, cluster: backend }]',
      "clusters:",
      `  - { name: backend, endpoints: ["${b.address}"], maxConcurrentStreamsPerSession: 5, maxSessionsPerEndpoint: 1, circuitBreaker: { maxPendingCalls: 5 } }`,
    ].join("\n");
    const r = await px.instance.reload(configFromText(cfg, "<test>"));
    expect(r.ok, r.message).toBe(true);
    expect(r.applied).toEqual(["clusters[0].endpoints"]);
    expect(px.instance.clusters.get("backend")).toBe(cluster); // kept: only its endpoints changed
    // the 3 waiting ones never reached a, and went to b (a transparent retry: nothing was sent)
    await waitFor("3 streams on b", () => b.arrived.length === 3);
    expect(b.arrived).toEqual(["5", "6", "7"]);
    expect(cluster.pendingAttempts()).toBe(0);
    a.release(); // the 5 on a's draining session finish there
    const rs = await Promise.all(calls);
    for (const [i, x] of rs.entries()) {
      expect(x.err).toBeNull();
      expect(x.res!.toString()).toBe(`ok ${i}`);
    }
    expect(a.arrived).toEqual(["0", "1", "2", "3", "4"]);
    expect(a.maxOpen).toBe(5);
  });

  it("churn: 200 calls, 50 at a time, a third with a short deadline and some cancelled: never above 5, and every count back to 0", async () => {
    const up = await countingUpstream();
    up.hold = false;
    const px = await fx.proxyFor(up.address, { cluster: { ...LIMITS, circuitBreaker: { maxPendingCalls: 100 } } });
    const c = fx.client(px.address);
    const cluster = px.instance.clusters.get("backend")!;
    const codes = await runCalls(200, 50, (i) => {
      if (i % 7 === 0) {
        return new Promise<number>((resolve) => {
          const md = new grpc.Metadata();
          md.set("x-i", String(i));
          const cc = c.Unary(Buffer.from("x"), md, { deadline: Date.now() + 20_000 }, (err: grpc.ServiceError | null) => resolve(err?.code ?? 0));
          setTimeout(() => cc.cancel(), i % 3);
        });
      }
      return call(c, i, i % 3 === 0 ? { deadline: Date.now() + 20 } : {}).then((r) => r.err?.code ?? 0);
    });
    for (const [i, code] of codes.entries()) {
      if (i % 7 === 0) expect([0, grpc.status.CANCELLED]).toContain(code);
      else if (i % 3 === 0) expect([0, grpc.status.DEADLINE_EXCEEDED]).toContain(code);
      else expect(code).toBe(0);
    }
    expect(up.maxOpen).toBeLessThanOrEqual(5);
    expect(up.sessions).toBe(1);
    await waitFor("every stream closed", () => up.open === 0 && cluster.endpoints[0]!.active === 0);
    expect(cluster.pendingAttempts()).toBe(0);
    expect(cluster.endpoints[0]!.queued).toBe(0);
    const v = await clustersView(px);
    expect(v.endpoints[0]!.sessions).toEqual({ open: 1, draining: 0, streams: 0 });
    expect(v.breaker.maxPendingCalls.current).toBe(0);
  });
});
