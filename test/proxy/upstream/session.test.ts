// One UpstreamSession alone, against a real node:http2 server on loopback: its owner (what an
// Endpoint is to it, SessionOwner) is a plain object that records what the session tells it.
// Connect, waiters served on the peer's SETTINGS (the limit taken from them), and a GOAWAY
// ENHANCE_YOUR_CALM "too_many_pings" reported up, then the session retired and closed.
import http2 from "node:http2";
import { afterEach, describe, expect, it } from "vitest";
import { UpstreamSession, type SessionOwner } from "../../../src/proxy/upstream/session.js";
import { waitFor } from "../../helpers/fixtures.js";
import { closeServers, clusterCfg, h2Server, recordingWaiter } from "./peer.js";

const opened: UpstreamSession[] = [];
afterEach(() => {
  for (const s of opened.splice(0)) s.h2.destroy();
  closeServers();
});

describe("UpstreamSession alone (a fake SessionOwner)", () => {
  it("connects, serves its waiters on the peer's SETTINGS, and reports too_many_pings, its retirement and its close up", async () => {
    const { port, sessions } = await h2Server(3);
    const calls: string[] = [];
    let pending = 0;
    const owner: SessionOwner = {
      label: `127.0.0.1:${port}`,
      host: "127.0.0.1",
      url: `http://127.0.0.1:${port}`,
      queued: 0,
      keepaliveIntervalMs: 60_000,
      dispatch: () => void calls.push("dispatch"),
      requeueFront: () => void calls.push("requeueFront"),
      remove: () => void calls.push("remove"),
      waiting: (n) => void (pending += n),
      doneWaiting: (n) => void (pending -= n),
      onConnectResult: (_s, r) => void calls.push(`connect ${r}`),
      onSessionOpened: () => void calls.push("opened"),
      onSessionClosed: () => void calls.push("closed"),
      onTooManyPings: () => void calls.push("too_many_pings"),
      onKeepaliveTimeout: () => void calls.push("keepalive timeout"),
    };
    const s = new UpstreamSession(owner, clusterCfg("maxConcurrentStreamsPerSession: 10"));
    opened.push(s);
    expect(s.endpoint).toBe(owner);
    expect(calls).toEqual(["opened"]);
    expect(s.state).toBe("connecting");
    s.addWaiter(recordingWaiter(calls, "w1"));
    expect(pending).toBe(1);

    await waitFor("the session to be ready", () => s.state === "ready");
    expect(calls).toEqual(["opened", "connect ok", "w1 slot"]);
    expect(pending).toBe(0);
    expect(s.limit).toBe(3); // min(10, the peer's SETTINGS_MAX_CONCURRENT_STREAMS)

    await waitFor("the server's side of the session", () => sessions.length === 1);
    sessions[0]!.goaway(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM, 0, Buffer.from("too_many_pings", "latin1"));
    // as grpc-go's server does after too_many_pings, it closes the connection too
    sessions[0]!.close();
    await waitFor("the session to close", () => s.state === "closed");
    expect(calls).toEqual(["opened", "connect ok", "w1 slot", "too_many_pings", "remove", "closed"]);
    expect(s.lost).toBe(true);
  });
});
