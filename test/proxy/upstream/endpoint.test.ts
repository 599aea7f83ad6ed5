// One Endpoint alone, against a real node:http2 server on loopback: its host (what a Cluster is
// to it, EndpointHost) is a plain object that records what the endpoint tells it. A slot opens a
// session (counted as open by the host), its SETTINGS waiter counts as pending, maxPendingCalls
// says no through the host's overflow, attempt results go up for outlier detection, and a
// retired endpoint's session closes.
import { afterEach, describe, expect, it } from "vitest";
import { Endpoint, type EndpointHost } from "../../../src/proxy/upstream/endpoint.js";
import { UpstreamSession } from "../../../src/proxy/upstream/session.js";
import { Breaker } from "../../../src/proxy/upstream/breaker.js";
import type { Metrics } from "../../../src/proxy/observe/metrics.js";
import { waitFor } from "../../helpers/fixtures.js";
import { closeServers, clusterCfg, h2Server, recordingWaiter } from "./peer.js";

const endpoints: Endpoint[] = [];
afterEach(() => {
  for (const e of endpoints.splice(0)) for (const s of [...e.sessions]) s.h2.destroy();
  closeServers();
});

describe("Endpoint alone (a fake EndpointHost)", () => {
  it("opens a session for a slot, counts its waiter as pending, overflows at maxPendingCalls, reports results and drains when retired", async () => {
    const { port } = await h2Server(100);
    const calls: string[] = [];
    const open = new Set<UpstreamSession>();
    const counter = (r: string) => ({ inc: () => void calls.push(`connect ${r}`) });
    const cfg = clusterCfg("circuitBreaker: { maxPendingCalls: 1 }");
    // the real breaker, its overflow counter recorded
    const metrics = { upstreamOverflow: { labels: (_c: string, l: string) => ({ inc: () => void calls.push(`overflow ${l}`) }) } } as unknown as Metrics;
    const host: EndpointHost = {
      name: "backend",
      cfg,
      breaker: new Breaker("backend", cfg.circuitBreaker, open, metrics),
      connectCounters: { ok: counter("ok"), error: counter("error"), timeout: counter("timeout") },
      log: { warn: () => void calls.push("warn") } as unknown as EndpointHost["log"],
      keepaliveIntervalMs: 60_000,
      onAttemptResult: (_e, ok) => void calls.push(`result ${ok ? "ok" : "failed"}`),
      sessionOpened: (s) => void open.add(s),
      sessionClosed: (s) => void open.delete(s),
      onTooManyPings: () => void calls.push("too_many_pings"),
      onKeepaliveTimeout: () => void calls.push("keepalive timeout"),
    };
    const e = new Endpoint(host, "127.0.0.1", port);
    endpoints.push(e);
    expect(e.cluster).toBe(host);

    e.attemptStarted();
    const s = e.slot(recordingWaiter(calls, "w1"));
    expect(s).toBeInstanceOf(UpstreamSession);
    const sess = s as UpstreamSession;
    expect(sess.endpoint).toBe(e);
    expect(e.sessions).toEqual([sess]);
    expect(open.size).toBe(1);
    sess.addWaiter(recordingWaiter(calls, "w1"));
    expect(host.breaker.pendingAttempts).toBe(1);
    // a second attempt would wait too: maxPendingCalls 1 says no
    expect(e.slot(recordingWaiter(calls, "w2"))).toBe("cluster backend: maxPendingCalls 1 reached");

    await waitFor("the session to be ready", () => sess.state === "ready");
    expect(host.breaker.pendingAttempts).toBe(0);
    expect(calls).toEqual(["overflow maxPendingCalls", "connect ok", "w1 slot"]);
    // a ready session with room: the next slot is it, nothing counted
    expect(e.slot(recordingWaiter(calls, "w3"))).toBe(sess);

    e.attemptEnded("reset");
    expect(e.consecutiveFailures).toBe(1);
    expect(calls.at(-1)).toBe("result failed");

    e.retire();
    expect(e.sessions).toEqual([]);
    await waitFor("the retired endpoint's session to close", () => open.size === 0);
    expect(sess.state).toBe("closed");
  });
});
