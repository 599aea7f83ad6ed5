// Message size limits (route maxRequestMessageBytes / maxResponseMessageBytes, default 4 MiB):
// refused at the 5-byte prefix with 8 RESOURCE_EXHAUSTED in grpc-go's words, the over-limit
// message never forwarded, the upstream stream cancelled (RST_STREAM CANCEL).
import { describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import http2 from "node:http2";
import {
  frame,
  unary,
  type GrpcServer,
  type RawUpstream,
} from "../helpers/peers.js";
import type { DojangHandle } from "../../src/index.js";
import { useFixtures, waitFor, waitForMetric } from "../helpers/fixtures.js";

const { proxyFor, rawUpstream, grpcServer, client, track } = useFixtures();

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const LIMIT_1K = { maxRequestMessageBytes: 1024, maxResponseMessageBytes: 1024 };
const MAX_4MIB = 4 * 1024 * 1024;

/** A 5-byte prefix declaring `length`, followed by only `body` (fewer bytes than declared). */
function prefixOnly(length: number, body = Buffer.alloc(0)): Buffer {
  const b = Buffer.alloc(5 + body.length);
  b.writeUInt32BE(length, 1);
  body.copy(b, 5);
  return b;
}

const bodyOf = (up: RawUpstream, i = 0): Buffer => Buffer.concat(up.seen[i]?.body ?? []);

/** grpc-js echo upstream that counts the calls its handlers actually received. */
async function echoUpstream(): Promise<{ server: GrpcServer; handled: () => number }> {
  let handled = 0;
  const server = await grpcServer({
    Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      handled++;
      cb(null, call.request);
    },
  });
  return { server, handled: () => handled };
}

/** Raw upstream that answers with response headers, then the given chunks, then stays open. */
function respondWith(chunks: readonly Buffer[], gapMs = 0) {
  return (stream: http2.ServerHttp2Stream): void => {
    stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
    void (async () => {
      for (const c of chunks) {
        if (stream.destroyed) return;
        stream.write(c);
        if (gapMs > 0) await sleep(gapMs);
      }
    })();
  };
}

describe('"a request message over maxRequestMessageBytes is refused at its prefix with 8 RESOURCE_EXHAUSTED"', () => {
  it("refuses a declared 1000000-byte message at its prefix, before its body arrives, and forwards only the earlier message", async () => {
    const up = await rawUpstream(() => {
      /* reads, never answers */
    });
    const px = await proxyFor(up.address, { route: LIMIT_1K });
    const session = track(http2.connect(`http://${px.address}`), (s) => s.destroy());
    session.on("error", () => {});
    const req = session.request(
      { ":method": "POST", ":path": "/test.Echo/ClientStream", "content-type": "application/grpc", te: "trailers" },
      { endStream: false },
    );
    req.on("error", () => {});
    let headers: http2.IncomingHttpHeaders | undefined;
    let flags = 0;
    req.on("response", (h, f) => {
      headers = h;
      flags = f;
    });
    const small = frame(Buffer.from("small and fine"));
    req.write(small);
    await waitFor("the small message to reach the upstream", () => bodyOf(up).length === small.length);

    // A prefix declaring 1,000,000 bytes and just 3 of them: the client never sends the rest
    // and never half-closes, so an answer proves dojang decided at the prefix.
    req.write(prefixOnly(1_000_000, Buffer.from("abc")));
    await waitFor("dojang's answer", () => headers !== undefined);
    expect(headers![":status"]).toBe(200);
    expect(flags & 1).toBe(1); // Trailers-Only: no response headers had gone out
    expect(headers!["grpc-status"]).toBe("8");
    expect(headers!["grpc-message"]).toBe("grpc: received message larger than max (1000000 vs. 1024)");

    await waitFor("the upstream stream to close", () => up.seen[0]?.rstCode !== undefined);
    expect(up.seen[0]!.rstCode).toBe(http2.constants.NGHTTP2_CANCEL);
    expect(bodyOf(up).equals(small)).toBe(true); // not one byte of the over-limit message
  });

  it("closes the client's still-open request stream with RST_STREAM NO_ERROR after the Trailers-Only 8, and counts the call", async () => {
    // grpc-go's server sends RST_STREAM(NO_ERROR) after an early status when the client has not
    // half-closed (spec §3.2, §4.1); otherwise the refused call stays open until the client leaves.
    const up = await rawUpstream(() => {});
    const px = await proxyFor(up.address, { route: LIMIT_1K });
    const session = track(http2.connect(`http://${px.address}`), (s) => s.destroy());
    session.on("error", () => {});
    const req = session.request(
      { ":method": "POST", ":path": "/test.Echo/ClientStream", "content-type": "application/grpc", te: "trailers" },
      { endStream: false },
    );
    req.on("error", () => {});
    req.resume();
    let status: string | undefined;
    let closed = false;
    req.on("response", (h) => (status = String(h["grpc-status"])));
    req.on("close", () => (closed = true));
    req.write(prefixOnly(2048, Buffer.from("abc")));
    await waitFor("dojang's answer", () => status !== undefined);
    expect(status).toBe("8");
    await waitFor("dojang to close the client's stream", () => closed, 2000);
    expect(req.rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);
    await waitForMetric(px, "dojang_calls_total", { grpc_code: "RESOURCE_EXHAUSTED", decided_by: "message_too_large" }, 1);
    await waitForMetric(px, "dojang_active_calls", {}, 0);
  });

  it("passes a request message of exactly maxRequestMessageBytes", async () => {
    const { server, handled } = await echoUpstream();
    const px = await proxyFor(server.address, { route: LIMIT_1K });
    const req = Buffer.alloc(1024, 0x61);
    const r = await unary(client(px.address), req);
    expect(r.err).toBeNull();
    expect(r.res?.equals(req)).toBe(true);
    expect(handled()).toBe(1);
  });

  it("refuses a request message one byte over the limit with grpc-go's message, and the upstream handler never runs", async () => {
    const { server, handled } = await echoUpstream();
    const px = await proxyFor(server.address, { route: LIMIT_1K });
    const r = await unary(client(px.address), Buffer.alloc(1025, 0x61));
    expect(r.err?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(r.err?.details).toBe("grpc: received message larger than max (1025 vs. 1024)");
    await sleep(50);
    expect(handled()).toBe(0);
  });
});

describe('"a response message over maxResponseMessageBytes ends the call with 8 RESOURCE_EXHAUSTED and cancels the upstream"', () => {
  it("answers 8 for a 1025-byte response message and resets the upstream with RST_STREAM CANCEL", async () => {
    const up = await rawUpstream(respondWith([frame(Buffer.alloc(1025, 0x62))]));
    const px = await proxyFor(up.address, { route: LIMIT_1K });
    const r = await unary(client(px.address), Buffer.from("q"));
    expect(r.err?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(r.err?.details).toBe("grpc: received message larger than max (1025 vs. 1024)");
    expect(r.res).toBeUndefined();
    await waitFor("the upstream stream to close", () => up.seen[0]?.rstCode !== undefined);
    expect(up.seen[0]!.rstCode).toBe(http2.constants.NGHTTP2_CANCEL);
  });

  it("refuses a response at the prefix when the upstream declares a huge message and sends only part of it", async () => {
    const up = await rawUpstream(respondWith([prefixOnly(0xffff_ffff, Buffer.alloc(100))]));
    const px = await proxyFor(up.address, { route: LIMIT_1K });
    const r = await unary(client(px.address), Buffer.from("q"));
    expect(r.err?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(r.err?.details).toBe("grpc: received message larger than max (4294967295 vs. 1024)");
    await waitFor("the upstream stream to close", () => up.seen[0]?.rstCode !== undefined);
    expect(up.seen[0]!.rstCode).toBe(http2.constants.NGHTTP2_CANCEL);
  });

  it("passes a response message of exactly maxResponseMessageBytes", async () => {
    const up = await rawUpstream((stream) => {
      stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(frame(Buffer.alloc(1024, 0x63)));
    });
    const px = await proxyFor(up.address, { route: LIMIT_1K });
    const r = await unary(client(px.address), Buffer.from("q"));
    expect(r.err).toBeNull();
    expect(r.res?.equals(Buffer.alloc(1024, 0x63))).toBe(true);
  });
});

describe('"on a server stream, messages before the over-limit one arrive; then 8"', () => {
  const small = [0, 1, 2].map((i) => Buffer.alloc(100, 0x30 + i));

  async function serverStream(px: DojangHandle): Promise<{ got: Buffer[]; st: grpc.StatusObject }> {
    const call = client(px.address).ServerStream(Buffer.from("q"), new grpc.Metadata(), {});
    const got: Buffer[] = [];
    call.on("data", (m: Buffer) => got.push(m));
    call.on("error", () => {});
    const st = await new Promise<grpc.StatusObject>((r) => call.on("status", r));
    return { got, st };
  }

  it("delivers the three messages sent before the over-limit one, then 8, and cancels the upstream", async () => {
    const up = await rawUpstream(respondWith([...small.map((m) => frame(m)), prefixOnly(5000, Buffer.alloc(10))], 30));
    const px = await proxyFor(up.address, { route: LIMIT_1K });
    const { got, st } = await serverStream(px);
    expect(got).toEqual(small);
    expect(st.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(st.details).toBe("grpc: received message larger than max (5000 vs. 1024)");
    await waitFor("the upstream stream to close", () => up.seen[0]?.rstCode !== undefined);
    expect(up.seen[0]!.rstCode).toBe(http2.constants.NGHTTP2_CANCEL);
  });

  it("delivers the earlier messages even when they share one DATA frame with the over-limit prefix", async () => {
    // DATA frame boundaries mean nothing in gRPC (spec §3.1): three complete messages and the
    // over-limit prefix arrive in one chunk, and the three must still be forwarded.
    const one = Buffer.concat([...small.map((m) => frame(m)), prefixOnly(5000, Buffer.alloc(10))]);
    const up = await rawUpstream(respondWith([one]));
    const px = await proxyFor(up.address, { route: LIMIT_1K });
    const { got, st } = await serverStream(px);
    expect(st.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(st.details).toBe("grpc: received message larger than max (5000 vs. 1024)");
    expect(got).toEqual(small);
  });
});

describe('"the default limits are 4 MiB (4194304 passes, 4194305 fails)"', () => {
  it("passes a 4194304-byte request and a 4194304-byte response with no limits configured", async () => {
    const { server } = await echoUpstream();
    const px = await proxyFor(server.address);
    const req = Buffer.alloc(MAX_4MIB, 0x64);
    const r = await unary(client(px.address), req);
    expect(r.err).toBeNull();
    expect(r.res?.length).toBe(MAX_4MIB);
    expect(r.res?.equals(req)).toBe(true);
  });

  it("refuses a 4194305-byte request with 8 (4194305 vs. 4194304)", async () => {
    const { server, handled } = await echoUpstream();
    const px = await proxyFor(server.address);
    const r = await unary(client(px.address), Buffer.alloc(MAX_4MIB + 1, 0x65));
    expect(r.err?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(r.err?.details).toBe("grpc: received message larger than max (4194305 vs. 4194304)");
    expect(handled()).toBe(0);
  });

  it("refuses a 4194305-byte response with 8 (4194305 vs. 4194304)", async () => {
    const server = await grpcServer({
      Unary: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.alloc(MAX_4MIB + 1, 0x66)),
    });
    const px = await proxyFor(server.address);
    const r = await unary(client(px.address), Buffer.from("q"));
    expect(r.err?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(r.err?.details).toBe("grpc: received message larger than max (4194305 vs. 4194304)");
  });
});
