// Listener and route keys the key-coverage test (test/architecture/key-coverage.test.ts, issue 23)
// found no behaviour test for, each checked from outside: the SETTINGS and window a client is
// given, which calls the upstream sees, which upstream answers, what the client gets.
//   initialWindowSize, connectionWindowSize: "what a client may send before dojang reads it"
//     (README, Limits): SETTINGS_INITIAL_WINDOW_SIZE per stream, the connection window grown by a
//     WINDOW_UPDATE right after the preface
//   maxHeaderListPairs: the header fields a request may carry (node's default of 128 resets calls
//     with much metadata; dojang's default is 2000)
//   routes[].match.authority: "optional authority": the route matches only calls to that host
//   maxSessionMemoryMiB: node's maxSessionMemory per client connection; data queued to be sent
//     counts, and while a connection is over it node refuses its new streams (ENHANCE_YOUR_CALM)
import * as grpc from "@grpc/grpc-js";
import http2 from "node:http2";
import { describe, expect, it } from "vitest";
import { startDojang, type DojangHandle } from "../../src/index.js";
import { echoClient, unary } from "../helpers/peers.js";
import { useFixtures, waitFor } from "../helpers/fixtures.js";
import { startBackend } from "../helpers/backends.js";
import { connectRawH2, grpcRequestFields } from "../helpers/raw-h2-client.js";
import { FRAME } from "../helpers/h2-frames.js";
import { frame } from "../helpers/peers.js";
import { replyGrpc } from "../helpers/scripted-upstream.js";

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

describe("listeners[].maxHeaderListSize on the HTTP/2 listener (test/behaviour/attack-http1.test.ts covers the HTTP/1.1 side)", () => {
  it("is advertised as SETTINGS_MAX_HEADER_LIST_SIZE, and a call whose metadata is over it is refused before the upstream; a smaller one passes", async () => {
    const b = fx.track(await startBackend("b"), (x) => x.close());
    const px = await fx.proxyFor(b.address, { listener: { maxHeaderListSize: "4KiB" } });
    const s = fx.track(http2.connect(`http://${px.address}`), (x) => x.destroy());
    s.on("error", () => {});
    await new Promise<void>((r) => s.once("remoteSettings", () => r()));
    expect(s.remoteSettings.maxHeaderListSize).toBe(4096);
    const big = new grpc.Metadata();
    big.set("x-big", "v".repeat(6000));
    const r = await unary(fx.client(px.address), Buffer.from("x"), big);
    // dojang's node resets the stream (ENHANCE_YOUR_CALM): a gRPC client reads 8
    expect(r.err?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(b.calls).toBe(0);
    const small = new grpc.Metadata();
    small.set("x-big", "v".repeat(2000));
    expect((await unary(fx.client(px.address), Buffer.from("x"), small)).err).toBeNull();
    expect(b.calls).toBe(1);
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

describe("listeners[].maxSessionMemoryMiB: the memory one client connection may hold in node's session", () => {
  /**
   * A raw client that never sends WINDOW_UPDATE opens 150 server-streaming calls; the upstream
   * answers each with two 16 KiB messages. Past the first 64 KiB (the client's connection window)
   * dojang's writes queue in the session, about one 16 KiB chunk per call: over 2 MiB, under the
   * 8 MiB per-connection response budget (so the overload guard cuts nothing). Then a new stream
   * is opened every 200 ms, up to `maxProbes`, until one is reset.
   */
  async function newStreamWhenFull(maxSessionMemoryMiB: number | undefined, maxProbes: number) {
    const up = await fx.rawUpstream((st, headers) => {
      if (headers[":path"] !== "/test.Echo/ServerStream") replyGrpc(st, [Buffer.from("ok")]);
      else replyGrpc(st, [Buffer.alloc(16 * 1024, 1), Buffer.alloc(16 * 1024, 2)]);
    });
    const px = await fx.proxyFor(up.address, maxSessionMemoryMiB === undefined ? {} : { listener: { maxSessionMemoryMiB } });
    const raw = fx.track(await connectRawH2(px.address), (r) => r.close());
    const S = 150;
    for (let i = 0; i < S; i++) {
      raw.headers(1 + 2 * i, grpcRequestFields("/test.Echo/ServerStream"));
      raw.data(1 + 2 * i, frame(Buffer.from("x")), true);
    }
    await waitFor("the upstream to get the 150 calls", () => up.seen.length === S, 10_000);
    await waitFor("response HEADERS on the 150 calls", () => Array.from({ length: S }, (_, i) => 1 + 2 * i).every((sid) => raw.on(sid).some((f) => f.type === FRAME.HEADERS)), 10_000);
    // probes: each answered (reset, or taken: it reaches the upstream) before the next
    const probes = { refused: undefined as number | undefined, taken: 0 };
    for (let id = 1 + 2 * S, n = 0; n < maxProbes && probes.refused === undefined; id += 2, n++) {
      const before = up.seen.length;
      raw.headers(id, grpcRequestFields("/test.Echo/Unary"));
      raw.data(id, frame(Buffer.from("x")), true);
      await waitFor("an answer to the probe", () => raw.on(id).some((f) => f.type === FRAME.RST_STREAM) || up.seen.length > before, 5000);
      probes.refused = raw.on(id).find((f) => f.type === FRAME.RST_STREAM)?.errorCode;
      if (probes.refused === undefined) probes.taken++;
      else expect(up.seen.length, "a refused stream is no upstream call").toBe(before);
      await new Promise((r) => setTimeout(r, 200));
    }
    return { ...probes, px };
  }

  it("with maxSessionMemoryMiB 1 a connection holding ~2 MiB of queued response gets its new streams refused (ENHANCE_YOUR_CALM, no upstream call); another connection is unaffected", async () => {
    const r = await newStreamWhenFull(1, 25);
    expect(r.refused).toBe(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM);
    const other = await unary(fx.client(r.px.address), Buffer.from("x"));
    expect(other.err).toBeNull();
  });

  it("the default (64 MiB), for contrast: new streams are taken and reach the upstream", async () => {
    const r = await newStreamWhenFull(undefined, 5);
    expect(r).toMatchObject({ refused: undefined, taken: 5 });
  });
});
