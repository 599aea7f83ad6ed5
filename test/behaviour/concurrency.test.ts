// Concurrency: many calls on one client connection are multiplexed onto a few shared upstream
// sessions (never one per call), and dojang opens another session when the upstream's
// SETTINGS_MAX_CONCURRENT_STREAMS is full.
import { describe, expect, it } from "vitest";
import type * as grpc from "@grpc/grpc-js";
import type http2 from "node:http2";
import { frame, sample, scrape, startRawUpstream, unary, type EchoClient, type RawUpstream } from "../helpers/peers.js";

import { useFixtures } from "../helpers/fixtures.js";

const { proxyFor, client, track } = useFixtures();

interface Echo {
  up: RawUpstream;
  /** upstream HTTP/2 sessions accepted */
  sessions: () => number;
  /** most streams open at once, over all sessions / on any one session */
  maxOpen: () => number;
  maxOpenPerSession: () => number;
}

/**
 * A raw upstream that answers each call with "echo:" + its request payload after `holdMs`,
 * counting sessions and how many streams are open at once.
 */
async function echoUpstream(holdMs: number, settings: http2.Settings = {}): Promise<Echo> {
  let sessions = 0;
  let open = 0;
  let maxOpen = 0;
  let maxPerSession = 0;
  const perSession = new Map<http2.Http2Session, number>();
  const up = track(
    await startRawUpstream((stream, _headers, rec) => {
      const sess = stream.session!;
      open++;
      maxOpen = Math.max(maxOpen, open);
      const n = (perSession.get(sess) ?? 0) + 1;
      perSession.set(sess, n);
      maxPerSession = Math.max(maxPerSession, n);
      stream.on("close", () => {
        open--;
        perSession.set(sess, perSession.get(sess)! - 1);
      });
      stream.on("end", () => {
        setTimeout(() => {
          if (stream.destroyed) return;
          const payload = Buffer.concat(rec.body).subarray(5);
          stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
          stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
          stream.end(frame(Buffer.concat([Buffer.from("echo:"), payload])));
        }, holdMs);
      });
    }, settings),
    (u) => u.close(),
  );
  up.server.on("session", () => sessions++);
  return { up, sessions: () => sessions, maxOpen: () => maxOpen, maxOpenPerSession: () => maxPerSession };
}

function callMany(c: EchoClient, n: number): Promise<{ i: number; err: grpc.ServiceError | null; res: string | undefined }[]> {
  return Promise.all(
    Array.from({ length: n }, (_, i) => unary(c, Buffer.from(`call-${i}`)).then((r) => ({ i, err: r.err, res: r.res?.toString() }))),
  );
}

describe('"calls from one client connection are multiplexed onto few upstream sessions"', () => {
  it("completes 1,000 concurrent unary calls on one grpc-js connection, each with its own response, over at most 2 upstream sessions", { timeout: 30_000 }, async () => {
    const echo = await echoUpstream(100);
    const px = await proxyFor(echo.up.address);
    const c = client(px.address);
    const results = await callMany(c, 1000);

    const failed = results.filter((r) => r.err !== null);
    expect(failed.map((r) => `${r.i}: ${r.err?.code} ${r.err?.details}`)).toEqual([]);
    for (const r of results) expect(r.res).toBe(`echo:call-${r.i}`);
    expect(echo.up.seen).toHaveLength(1000);
    // multiplexed: many streams were open upstream at once, on very few sessions
    expect(echo.maxOpen()).toBeGreaterThanOrEqual(100);
    expect(echo.sessions()).toBeGreaterThanOrEqual(1);
    expect(echo.sessions()).toBeLessThanOrEqual(2);
    const m = await scrape(px.adminAddress);
    expect(sample(m, "dojang_downstream_sessions")).toBe(1); // the client really used one connection
    expect(sample(m, "dojang_calls_total", { grpc_code: "OK", decided_by: "upstream" })).toBe(1000);
  });
});

describe('"a second upstream session opens when the upstream\'s SETTINGS_MAX_CONCURRENT_STREAMS is reached"', () => {
  it("spreads 50 concurrent calls over more than one session when the upstream allows 10 streams each, and all succeed", { timeout: 30_000 }, async () => {
    const echo = await echoUpstream(100, { maxConcurrentStreams: 10 });
    const px = await proxyFor(echo.up.address);
    const c = client(px.address);
    // One call first, so dojang has the upstream's SETTINGS before the burst.
    expect((await unary(c, Buffer.from("warm"))).err).toBeNull();
    expect(echo.sessions()).toBe(1);

    const results = await callMany(c, 50);
    const failed = results.filter((r) => r.err !== null);
    expect(failed.map((r) => `${r.i}: ${r.err?.code} ${r.err?.details}`)).toEqual([]);
    for (const r of results) expect(r.res).toBe(`echo:call-${r.i}`);
    expect(echo.sessions()).toBeGreaterThan(1);
    expect(echo.maxOpenPerSession()).toBeLessThanOrEqual(10);
  });

  it("completes all of a cold burst of 50 calls that arrives before dojang has the upstream's SETTINGS, over more than one session", { timeout: 30_000 }, async () => {
    // Until the upstream's SETTINGS frame arrives its stream limit is unknown (RFC 9113 §6.5.2
    // says "unlimited"); grpc-go's client waits for the server preface before using a
    // connection. Streams the upstream refuses (REFUSED_STREAM) were never processed and are
    // safe to retry (spec §7, A6): either way, no call may fail.
    const echo = await echoUpstream(100, { maxConcurrentStreams: 10 });
    const px = await proxyFor(echo.up.address);
    const results = await callMany(client(px.address), 50);
    const failed = results.filter((r) => r.err !== null);
    expect(failed.map((r) => `${r.i}: ${r.err?.code} ${r.err?.details}`)).toEqual([]);
    for (const r of results) expect(r.res).toBe(`echo:call-${r.i}`);
    expect(echo.sessions()).toBeGreaterThan(1);
  });
});
