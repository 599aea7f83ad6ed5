// Contract (issue 11, step 2): "Circuit breakers per cluster: connections, pending calls (waiting
// for a stream slot) … overflow answers 14 at once with decided_by="overflow"" and "Upstream
// keepalive: PING every interval, session dropped when one is not answered in time; back off on
// GOAWAY ENHANCE_YOUR_CALM "too_many_pings"". Raw TCP peers speak just enough HTTP/2 to be an
// upstream that never answers PINGs, or answers them with GOAWAY; grpc-js upstreams for the rest.
import * as grpc from "@grpc/grpc-js";
import net from "node:net";
import { describe, expect, it } from "vitest";
import { sample, scrape, unary } from "../helpers/peers.js";
import { useFixtures, waitFor } from "../helpers/fixtures.js";
import { FLAG_ACK, FRAME, FrameReader, encodeFrame, frameHeader } from "../helpers/h2-frames.js";
import { runCalls, startBackend } from "../helpers/backends.js";

const fx = useFixtures();
const ENHANCE_YOUR_CALM = 11;

interface PingPeer {
  readonly address: string;
  /** PINGs received (not ACKs) */
  pings: number;
  /** connections accepted */
  connections: number;
}

/**
 * An HTTP/2 upstream on a raw socket: SETTINGS and their ACKs, streams never answered; on PING
 * it `ack`s, stays silent, or says GOAWAY ENHANCE_YOUR_CALM "too_many_pings"; `silent` sends
 * not even SETTINGS (a connect that never completes).
 */
async function pingPeer(onPing: "ack" | "ignore" | "too_many_pings" | "silent"): Promise<PingPeer> {
  const sockets = new Set<net.Socket>();
  const peer: PingPeer = { address: "", pings: 0, connections: 0 };
  const server = net.createServer((sock) => {
    peer.connections++;
    sockets.add(sock);
    sock.on("close", () => sockets.delete(sock));
    sock.on("error", () => {});
    if (onPing === "silent") return;
    sock.write(frameHeader(0, FRAME.SETTINGS, 0, 0));
    const reader = new FrameReader(true);
    sock.on("data", (d: Buffer) => {
      for (const f of reader.push(d)) {
        if (f.type === FRAME.SETTINGS && (f.flags & FLAG_ACK) === 0) sock.write(frameHeader(0, FRAME.SETTINGS, FLAG_ACK, 0));
        if (f.type !== FRAME.PING || (f.flags & FLAG_ACK) !== 0) continue;
        peer.pings++;
        if (onPing === "ack") sock.write(encodeFrame(FRAME.PING, FLAG_ACK, 0, f.payload));
        if (onPing === "too_many_pings") {
          const debug = Buffer.from("too_many_pings");
          const p = Buffer.alloc(8 + debug.length);
          p.writeUInt32BE(0, 0);
          p.writeUInt32BE(ENHANCE_YOUR_CALM, 4);
          debug.copy(p, 8);
          sock.write(encodeFrame(FRAME.GOAWAY, 0, 0, p));
        }
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  fx.track(server, (s) => {
    for (const x of sockets) x.destroy();
    return new Promise<void>((r) => s.close(() => r()));
  });
  return Object.assign(peer, { address: `127.0.0.1:${(server.address() as net.AddressInfo).port}` });
}

describe('"Circuit breakers per cluster … overflow answers 14 at once with decided_by=overflow"', () => {
  it("maxPendingCalls: attempts waiting for a session past the limit end at once, 14, naming the limit", async () => {
    const peer = await pingPeer("silent"); // TCP accepted, no SETTINGS ever: every attempt waits
    const px = await fx.proxyFor(peer.address, { cluster: { connectTimeout: "10s", circuitBreaker: { maxPendingCalls: 2 } } });
    const c = fx.client(px.address);
    const waiting = [unary(c, Buffer.from("x"), undefined, { deadline: Date.now() + 1500 }), unary(c, Buffer.from("x"), undefined, { deadline: Date.now() + 1500 })];
    const cluster = px.instance.clusters.get("backend")!;
    await waitFor("two attempts waiting", () => cluster.pendingAttempts() === 2);
    const t0 = performance.now();
    const r = await unary(c, Buffer.from("x"));
    expect(performance.now() - t0).toBeLessThan(500);
    expect(r.err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(r.err?.details).toBe("cluster backend: maxPendingCalls 2 reached");
    expect(sample(await scrape(px.adminAddress), "dojang_calls_total", { decided_by: "overflow" })).toBe(1);
    expect(sample(await scrape(px.adminAddress), "dojang_upstream_overflow_total", { cluster: "backend", limit: "maxPendingCalls" })).toBe(1);
    // no attempt was made (issue 23: it was recorded as 1)
    await waitFor("the overflow's record", () => px.calls.length === 1);
    expect(px.calls[0]).toMatchObject({ decided_by: "overflow", attempts: 0 });
    expect(px.calls[0]!.upstream).toBeUndefined();
    // the two waiting ones were not disturbed: they end by their own deadline
    for (const w of await Promise.all(waiting)) expect(w.err?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    // and with nothing pending, a new attempt may wait again
    const later = await unary(c, Buffer.from("x"), undefined, { deadline: Date.now() + 300 });
    expect(later.err?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
  });

  it("maxConnections: an endpoint that would need a session beyond the cluster's limit overflows; the other keeps serving", async () => {
    const a = fx.track(await startBackend("a"), (b) => b.close());
    const b = fx.track(await startBackend("b"), (x) => x.close());
    const px = await fx.proxyFor(a.address, { cluster: { endpoints: [a.address, b.address], circuitBreaker: { maxConnections: 1 } } });
    const c = fx.client(px.address);
    const rs = await runCalls(6, 1, () => unary(c, Buffer.from("x")));
    const ok = rs.filter((r) => r.err === null);
    const over = rs.filter((r) => r.err !== null);
    expect(ok.length).toBe(3);
    expect(new Set(ok.map((r) => r.res!.toString())).size).toBe(1);
    for (const r of over) {
      expect(r.err!.code).toBe(grpc.status.UNAVAILABLE);
      expect(r.err!.details).toBe("cluster backend: maxConnections 1 reached");
    }
    expect(px.instance.clusters.get("backend")!.open.size).toBe(1);
    expect(sample(await scrape(px.adminAddress), "dojang_upstream_overflow_total", { cluster: "backend", limit: "maxConnections" })).toBe(3);
  });
});

describe('"Upstream keepalive: PING every interval, session dropped when one is not answered in time; back off on too_many_pings"', () => {
  it("a peer that never ACKs PING: the session is dropped after interval + timeout, and the call on it sees the connection lost", async () => {
    const peer = await pingPeer("ignore");
    const px = await fx.proxyFor(peer.address, { cluster: { keepalive: { interval: "100ms", timeout: "200ms" } } });
    const c = fx.client(px.address);
    const t0 = performance.now();
    const r = await unary(c, Buffer.from("x"), undefined, { deadline: Date.now() + 5000 });
    const took = performance.now() - t0;
    expect(r.err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(took).toBeGreaterThan(250);
    expect(took).toBeLessThan(2500);
    expect(peer.pings).toBe(1);
    expect(sample(await scrape(px.adminAddress), "dojang_upstream_keepalive_timeouts_total", { cluster: "backend" })).toBe(1);
    expect(sample(await scrape(px.adminAddress), "dojang_calls_total", { decided_by: "upstream_connection_lost" })).toBe(1);
    await waitFor("the session to be gone", () => px.instance.clusters.get("backend")!.open.size === 0);
  });

  it("a peer that ACKs: PINGs keep coming every interval and the session stays", async () => {
    const peer = await pingPeer("ack");
    const px = await fx.proxyFor(peer.address, { cluster: { keepalive: { interval: "100ms", timeout: "200ms" } } });
    const c = fx.client(px.address);
    expect((await unary(c, Buffer.from("x"), undefined, { deadline: Date.now() + 200 })).err?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    await waitFor("four PINGs", () => peer.pings >= 4, 3000);
    expect(px.instance.clusters.get("backend")!.open.size).toBe(1);
    expect(peer.connections).toBe(1);
    expect(sample(await scrape(px.adminAddress), "dojang_upstream_keepalive_timeouts_total", { cluster: "backend" })).toBe(0);
  });

  it('GOAWAY ENHANCE_YOUR_CALM "too_many_pings" doubles the cluster\'s interval (and /clusters shows it)', async () => {
    const peer = await pingPeer("too_many_pings");
    const px = await fx.proxyFor(peer.address, { cluster: { keepalive: { interval: "100ms", timeout: "1s" } } });
    const cluster = px.instance.clusters.get("backend")!;
    const c = fx.client(px.address);
    void unary(c, Buffer.from("x"), undefined, { deadline: Date.now() + 300 });
    await waitFor("the first too_many_pings", () => cluster.keepaliveIntervalMs === 200, 3000);
    // the next session (the first was sent away) PINGs at the new interval, and is told again
    void unary(c, Buffer.from("x"), undefined, { deadline: Date.now() + 600 });
    await waitFor("the second too_many_pings", () => cluster.keepaliveIntervalMs === 400, 3000);
    const body = (await (await fetch(`http://${px.adminAddress}/clusters`)).json()) as { keepalive: { intervalMs: number } }[];
    expect(body[0]!.keepalive.intervalMs).toBe(400);
  });
});
