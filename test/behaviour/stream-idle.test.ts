// issue 10 item 12, second half: "a stream on which nothing moves either way for a long time
// needs a default streamIdleTimeout (Envoy's is 5 minutes), settable per listener and per
// route, with its own decided_by." dojang answers 14 UNAVAILABLE, decided_by stream_idle, after
// between one and two idle periods; a slow stream that keeps moving is never cut. A grpc-js
// bystander runs its calls through the same dojang alongside.
import { describe, expect, it } from "vitest";
import { useFixtures, waitFor } from "../helpers/fixtures.js";
import { connectRawH2, grpcRequestFields } from "../helpers/raw-h2-client.js";
import { BYSTANDER_PATH, echoOr, runBystander } from "../helpers/bystander.js";
import { frame } from "../helpers/peers.js";

const { proxyFor, rawUpstream, client, track } = useFixtures();
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const IDLE_MS = 300;

describe('"streamIdleTimeout: a stream on which nothing moves either way ends with its own decided_by"', () => {
  it("ends a call whose client sent headers only (no deadline) and whose upstream never answers, with 14 stream_idle, and costs the bystander nothing", async () => {
    const up = await rawUpstream(echoOr());
    const px = await proxyFor(up.address, { admin: false, listener: { streamIdleTimeout: `${IDLE_MS}ms` } });
    const bystander = runBystander(client(px.address));
    const raw = track(await connectRawH2(px.address), (c) => c.close());
    const t0 = performance.now();
    raw.headers(1, grpcRequestFields("/test.Echo/Silent"));
    await waitFor("the idle call's answer", () => raw.ended(1), 5000);
    const took = performance.now() - t0;
    expect(took).toBeGreaterThanOrEqual(IDLE_MS - 20);
    expect(took).toBeLessThan(2 * IDLE_MS + 1500);
    expect(px.calls.find((c) => c.path === "/test.Echo/Silent")).toMatchObject({
      grpc_code: 14,
      decided_by: "stream_idle",
      grpc_message: `stream idle timeout: nothing moved either way for ${IDLE_MS} ms`,
    });
    const silent = up.seen.find((s) => s.headers[":path"] === "/test.Echo/Silent")!;
    await waitFor("the upstream stream to be cancelled", () => silent.rstCode !== undefined);
    expect(silent.rstCode).toBe(8);
    expect(raw.goaway()).toBeUndefined();
    const b = await bystander;
    expect(b.failures).toEqual([]);
    expect(b.ok).toBe(200);
  });

  it("never cuts a slow call that keeps moving, however long it runs", async () => {
    // The upstream answers the streaming call's headers, then one message every IDLE_MS / 3,
    // ten times (over three idle periods), then its status.
    const up = await rawUpstream(
      echoOr((stream) => {
        stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
        stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
        void (async () => {
          for (let i = 0; i < 10 && !stream.destroyed; i++) {
            await sleep(IDLE_MS / 3);
            stream.write(frame(Buffer.from(`tick-${i}`)));
          }
          if (!stream.destroyed) stream.end();
        })();
      }),
    );
    const px = await proxyFor(up.address, { admin: false, listener: { streamIdleTimeout: `${IDLE_MS}ms` } });
    const bystander = runBystander(client(px.address), 50);
    const raw = track(await connectRawH2(px.address), (c) => c.close());
    const t0 = performance.now();
    raw.headers(1, grpcRequestFields("/test.Echo/Slow"), true);
    await waitFor("the slow call to end", () => raw.ended(1), 10_000);
    expect(performance.now() - t0).toBeGreaterThan(3 * IDLE_MS);
    expect(px.calls.find((c) => c.path === "/test.Echo/Slow")).toMatchObject({ grpc_code: 0, decided_by: "upstream", resp_messages: 10 });
    expect((await bystander).ok).toBe(50);
  });

  it("takes the route's streamIdleTimeout over the listener's, and 0 turns it off", async () => {
    const up = await rawUpstream(echoOr());
    const px = await proxyFor(up.address, {
      admin: false,
      listener: {
        streamIdleTimeout: "0s",
        routes: [
          { match: { path: "/test.Echo/Short" }, cluster: "backend", streamIdleTimeout: `${IDLE_MS}ms` },
          { match: { prefix: "/" }, cluster: "backend" },
        ],
      },
    });
    const raw = track(await connectRawH2(px.address), (c) => c.close());
    raw.headers(1, grpcRequestFields("/test.Echo/Short"));
    raw.headers(3, grpcRequestFields("/test.Echo/Never"));
    await waitFor("the route's idle timeout", () => raw.ended(1), 5000);
    await sleep(3 * IDLE_MS);
    expect(raw.ended(3)).toBe(false); // listener: 0 = never
    expect(px.calls.find((c) => c.path === "/test.Echo/Short")).toMatchObject({ grpc_code: 14, decided_by: "stream_idle" });
  });
});
