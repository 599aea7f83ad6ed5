// Listener and route keys the key-coverage test (test/architecture/key-coverage.test.ts, issue 23)
// found no behaviour test for, each checked from outside: the SETTINGS and window a client is
// given, which calls the upstream sees, which upstream answers, what the client gets.
//   initialWindowSize, connectionWindowSize: "what a client may send before dojang reads it"
//     (README, Limits): SETTINGS_INITIAL_WINDOW_SIZE per stream, the connection window grown by a
//     WINDOW_UPDATE right after the preface
//   maxHeaderListPairs: the header fields a request may carry (node's default of 128 resets calls
//     with much metadata; dojang's default is 2000)
//   routes[].match.authority: "optional authority": the route matches only calls to that host
import * as grpc from "@grpc/grpc-js";
import http2 from "node:http2";
import { describe, expect, it } from "vitest";
import { startDojang, type DojangHandle } from "../../src/index.js";
import { echoClient, unary } from "../helpers/peers.js";
import { useFixtures, waitFor } from "../helpers/fixtures.js";
import { startBackend } from "../helpers/backends.js";

const fx = useFixtures();

describe("listeners[].initialWindowSize and connectionWindowSize: what a client may send before dojang reads it", () => {
  /** The window a fresh client connection is given: SETTINGS_INITIAL_WINDOW_SIZE and the connection window. */
  async function windows(px: DojangHandle): Promise<{ initialWindowSize: number | undefined; connectionWindow: number }> {
    const s = fx.track(http2.connect(`http://${px.address}`), (x) => x.destroy());
    s.on("error", () => {});
    await new Promise<void>((r) => s.once("remoteSettings", () => r()));
    // the WINDOW_UPDATE follows dojang's SETTINGS; the client sends no DATA, so nothing shrinks it
    await waitFor("the connection window to grow past the initial 65535", () => s.state.remoteWindowSize !== 65_535, 5000).catch(() => {});
    return { initialWindowSize: s.remoteSettings.initialWindowSize, connectionWindow: s.state.remoteWindowSize! };
  }

  it("a client connection gets SETTINGS_INITIAL_WINDOW_SIZE = initialWindowSize and a connection window of connectionWindowSize", async () => {
    const b = fx.track(await startBackend("b"), (x) => x.close());
    const px = await fx.proxyFor(b.address, { listener: { initialWindowSize: "100KiB", connectionWindowSize: "5MiB" } });
    expect(await windows(px)).toEqual({ initialWindowSize: 100 * 1024, connectionWindow: 5 * 1024 * 1024 });
    // and calls still pass with them
    expect((await unary(fx.client(px.address), Buffer.alloc(300 * 1024, 1))).err).toBeNull();
  });

  it("the defaults, for contrast: 1 MiB and 16 MiB", async () => {
    const b = fx.track(await startBackend("b"), (x) => x.close());
    const px = await fx.proxyFor(b.address);
    expect(await windows(px)).toEqual({ initialWindowSize: 1024 * 1024, connectionWindow: 16 * 1024 * 1024 });
  });
});

describe("listeners[].maxHeaderListPairs: the header fields a request may carry", () => {
  const withMetadata = (n: number): grpc.Metadata => {
    const md = new grpc.Metadata();
    for (let i = 0; i < n; i++) md.set(`x-m-${i}`, "v");
    return md;
  };

  it("with maxHeaderListPairs 40, a call with 60 metadata entries is refused (8) before the upstream; one with 10 passes", async () => {
    const b = fx.track(await startBackend("b"), (x) => x.close());
    const px = await fx.proxyFor(b.address, { listener: { maxHeaderListPairs: 40 } });
    const c = fx.client(px.address);
    const many = await unary(c, Buffer.from("x"), withMetadata(60));
    // node resets the stream with ENHANCE_YOUR_CALM, which a gRPC client reads as 8
    expect(many.err?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(b.calls).toBe(0);
    const few = await unary(fx.client(px.address), Buffer.from("x"), withMetadata(10));
    expect(few.err).toBeNull();
    expect(few.res!.toString()).toBe("b");
    expect(b.calls).toBe(1);
  });

  // (not beyond ~110: the grpc-js upstream has node's own default of 128)
  it("the default (2000), for contrast: the call with 60 entries passes, and one with 100", async () => {
    const b = fx.track(await startBackend("b"), (x) => x.close());
    const px = await fx.proxyFor(b.address);
    const c = fx.client(px.address);
    expect((await unary(c, Buffer.from("x"), withMetadata(60))).err).toBeNull();
    expect((await unary(c, Buffer.from("x"), withMetadata(100))).err).toBeNull();
    expect(b.calls).toBe(2);
  });
});

describe("listeners[].routes[].match.authority: a route limited to the calls for one host", () => {
  it("calls to api.example.com (any port, any case) take the authority route; others fall through to the next", async () => {
    const api = fx.track(await startBackend("api"), (x) => x.close());
    const rest = fx.track(await startBackend("rest"), (x) => x.close());
    const px = fx.track(
      await startDojang({
        logLevel: "silent",
        config: {
          listeners: [
            {
              name: "main",
              address: "127.0.0.1:0",
              routes: [
                { match: { prefix: "/", authority: "api.example.com" }, cluster: "api" },
                { match: { prefix: "/" }, cluster: "rest" },
              ],
            },
          ],
          clusters: [
            { name: "api", endpoints: [api.address] },
            { name: "rest", endpoints: [rest.address] },
          ],
        },
      }),
      (p) => p.close(0),
    );
    const answer = async (authority: string | undefined): Promise<string> => {
      const opts = authority === undefined ? {} : { "grpc.default_authority": authority };
      const c = fx.track(echoClient(px.address, opts), (x) => x.close());
      const r = await unary(c, Buffer.from("x"));
      return r.err === null ? r.res!.toString() : `code ${r.err.code}`;
    };
    expect(await answer("api.example.com")).toBe("api");
    expect(await answer("API.Example.com:443")).toBe("api");
    expect(await answer("other.example.com")).toBe("rest");
    expect(await answer(undefined)).toBe("rest");
    expect({ api: api.calls, rest: rest.calls }).toEqual({ api: 2, rest: 2 });
  });
});
