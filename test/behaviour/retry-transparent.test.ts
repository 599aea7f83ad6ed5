// Transparent retries (issue 11): an attempt the upstream never processed (RST_STREAM
// REFUSED_STREAM, a stream above a GOAWAY's last-stream-id, a connect that failed before the
// stream opened) is retried once, on another session or endpoint, with or without a retry
// policy; and a reset after the whole request was sent is told apart (decided_by
// upstream_reset_after_request) and retried only with retryResetAfterRequest. Raw node:http2
// upstreams put each shape on the wire; real sockets on loopback.
import { afterEach, describe, expect, it } from "vitest";
import http2 from "node:http2";
import { echoClient, frame, rawCall, startProxy, startRawUpstream, statusOf, unary, type RawUpstream } from "../helpers/peers.js";
import { Cleanup, afterRequest, replyGrpc, sampleReaching } from "../helpers/scripted-upstream.js";
import { freePort } from "../helpers/process.js";
import type { DojangHandle } from "../../src/index.js";

const { NGHTTP2_REFUSED_STREAM, NGHTTP2_INTERNAL_ERROR, NGHTTP2_NO_ERROR } = http2.constants;

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

const REQUEST = Buffer.from("ping");
const POLICY = { retryOn: ["UNAVAILABLE"], maxAttempts: 3, backoff: { base: "5ms", max: "20ms" } };

async function upstream(onStream: (s: http2.ServerHttp2Stream, n: number) => void): Promise<RawUpstream> {
  let n = 0;
  return cleanup.add(await startRawUpstream((s) => onStream(s, n++)), (u) => u.close());
}

async function proxy(endpoints: string[], route: Record<string, unknown> = {}): Promise<DojangHandle> {
  return cleanup.add(await startProxy(endpoints[0]!, { route, cluster: { endpoints } }), (p) => p.close(0));
}

async function records(px: DojangHandle, n: number): Promise<void> {
  for (let i = 0; i < 200 && px.calls.length < n; i++) await new Promise((r) => setTimeout(r, 10));
}

describe.each([
  ["without a retry policy", {}],
  ["with a retry policy", { retry: POLICY }],
])("transparent retries %s", (_name, route) => {
  it("retries a REFUSED_STREAM once, and the retry succeeds", async () => {
    const up = await upstream((s, n) => (n === 0 ? s.close(NGHTTP2_REFUSED_STREAM) : afterRequest(s, () => replyGrpc(s, [Buffer.from("second")]))));
    const px = await proxy([up.address], route);
    const raw = await rawCall(px.address, {}, frame(REQUEST));
    expect(statusOf(raw)).toBe("0");
    expect(raw.data).toEqual(frame(Buffer.from("second")));
    expect(up.seen.length).toBe(2);
    expect(Buffer.concat(up.seen[1]!.body)).toEqual(frame(REQUEST));
    await records(px, 1);
    expect(px.calls[0]).toMatchObject({ grpc_code: 0, attempts: 2 });
    expect(await sampleReaching(px.adminAddress, "dojang_retries_total", { reason: "refused" }, 1)).toBe(1);
  });

  it("retries a refusal only once: a second REFUSED_STREAM answers 14", async () => {
    const up = await upstream((s) => s.close(NGHTTP2_REFUSED_STREAM));
    const px = await proxy([up.address], route);
    const raw = await rawCall(px.address, {}, frame(REQUEST));
    expect(raw.headers?.["grpc-status"]).toBe("14");
    // one transparent retry; with a policy, later refusals are its ordinary retries (maxAttempts 3)
    expect(up.seen.length).toBe("retry" in route ? 4 : 2);
  });

  it("retries a stream above a GOAWAY's last-stream-id on a new session", async () => {
    const sessions = new Set<http2.Http2Session>();
    const up = await upstream((s, n) => {
      sessions.add(s.session!);
      // stream 3 of the first session: GOAWAY(last-stream-id 1), never processed
      if (n === 1) s.session!.goaway(NGHTTP2_NO_ERROR, 1);
      else afterRequest(s, () => replyGrpc(s, [Buffer.from(`reply ${n}`)]));
    });
    const px = await proxy([up.address], route);
    const c = cleanup.add(echoClient(px.address), (x) => x.close());
    expect((await unary(c, REQUEST)).res?.toString()).toBe("reply 0");
    const second = await unary(c, REQUEST);
    expect(second.err).toBeNull();
    expect(second.res?.toString()).toBe("reply 2");
    expect(up.seen.length).toBe(3);
    expect(sessions.size).toBe(2);
  });

  it("retries a connect that failed on the other endpoint", async () => {
    const dead = `127.0.0.1:${await freePort()}`;
    const up = await upstream((s) => afterRequest(s, () => replyGrpc(s, [Buffer.from("alive")])));
    const px = await proxy([dead, up.address], route);
    const c = cleanup.add(echoClient(px.address), (x) => x.close());
    for (let i = 0; i < 4; i++) {
      const r = await unary(c, REQUEST);
      expect(r.err).toBeNull();
      expect(r.res?.toString()).toBe("alive");
    }
    expect(up.seen.length).toBe(4);
    expect(await sampleReaching(px.adminAddress, "dojang_retries_total", { reason: "refused" }, 1)).toBeGreaterThanOrEqual(1);
  });
});

describe("a reset after the whole request was sent", () => {
  const resetAfterRequest = (s: http2.ServerHttp2Stream): void => afterRequest(s, () => s.close(NGHTTP2_INTERNAL_ERROR));

  it("is not retried by default, and says so in decided_by", async () => {
    const up = await upstream(resetAfterRequest);
    const px = await proxy([up.address], { retry: POLICY });
    const raw = await rawCall(px.address, {}, frame(REQUEST));
    expect(raw.headers?.["grpc-status"]).toBe("13");
    expect(up.seen.length).toBe(1);
    await records(px, 1);
    expect(px.calls[0]).toMatchObject({ decided_by: "upstream_reset_after_request", attempts: 1 });
    expect(await sampleReaching(px.adminAddress, "dojang_calls_total", { decided_by: "upstream_reset_after_request" }, 1)).toBe(1);
  });

  it("is retried with retryResetAfterRequest: true", async () => {
    const up = await upstream((s, n) => (n === 0 ? resetAfterRequest(s) : afterRequest(s, () => replyGrpc(s, [Buffer.from("again")]))));
    const px = await proxy([up.address], { retry: { ...POLICY, retryResetAfterRequest: true } });
    const raw = await rawCall(px.address, {}, frame(REQUEST));
    expect(statusOf(raw)).toBe("0");
    expect(up.seen.length).toBe(2);
    expect(await sampleReaching(px.adminAddress, "dojang_retries_total", { reason: "reset" }, 1)).toBe(1);
  });

  it("is retried when it came before the request ended (the upstream cannot have answered it)", async () => {
    const up = await upstream((s, n) => {
      if (n === 0) s.once("data", () => s.close(NGHTTP2_INTERNAL_ERROR));
      else afterRequest(s, () => replyGrpc(s, [Buffer.from("ok")]));
    });
    const px = await proxy([up.address], { retry: POLICY });
    const session = http2.connect(`http://${px.address}`);
    cleanup.add(session, (s) => s.close());
    const req = session.request({ ":method": "POST", ":path": "/test.Echo/ClientStream", "content-type": "application/grpc", te: "trailers" });
    const trailers = new Promise<http2.IncomingHttpHeaders>((r) => req.on("trailers", r));
    req.on("data", () => {});
    req.write(frame(Buffer.from("one")));
    await new Promise((r) => setTimeout(r, 100));
    req.end(frame(Buffer.from("two")));
    expect((await trailers)["grpc-status"]).toBe("0");
    expect(up.seen.length).toBe(2);
    expect(Buffer.concat(up.seen[1]!.body)).toEqual(Buffer.concat([frame(Buffer.from("one")), frame(Buffer.from("two"))]));
  });
});
