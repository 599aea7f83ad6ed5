// Retries on the real grpc-status (issue 11): a route's retry policy retries a status in retryOn
// whether it came as Trailers-Only or as trailers after response headers with no message (the
// shape grpcio, akka-grpc and grpc-go servers that set headers first send); the call commits on
// the first response message, when the retry buffer overflows, when attempts run out or on a
// status not retried. Raw node:http2 upstreams script each attempt; grpc-js and raw h2 clients.
import { afterEach, describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import http2 from "node:http2";
import { echoClient, frame, rawCall, startProxy, startRawUpstream, statusOf, unary, type RawUpstream } from "../helpers/peers.js";
import { Cleanup, GRPC_RESPONSE_HEADERS, afterRequest, replyGrpc, sampleReaching } from "../helpers/scripted-upstream.js";
import type { DojangHandle } from "../../src/index.js";

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

const REQUEST = Buffer.from("ping");
const RETRY = { retryOn: ["UNAVAILABLE"], maxAttempts: 3, backoff: { base: "5ms", max: "20ms" } };

/** grpc-timeout as the gRPC spec writes it (PROTOCOL-HTTP2.md: 1 to 8 digits, then H M S m u n), in ms. */
function timeoutMs(v: unknown): number {
  const m = /^(\d{1,8})([HMSmun])$/.exec(String(v));
  expect(m, `grpc-timeout ${String(v)}`).not.toBeNull();
  const per: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 1e-3, n: 1e-6 };
  return Number(m![1]) * per[m![2]!]!;
}

type Script = (s: http2.ServerHttp2Stream, attempt: number, headers: http2.IncomingHttpHeaders) => void;

/** A raw upstream where `script` sees the attempt number (1-based, from grpc-previous-rpc-attempts). */
async function setup(
  script: Script,
  route: Record<string, unknown> = { retry: RETRY },
  listener: Record<string, unknown> = {},
  cluster: Record<string, unknown> = {},
): Promise<{ up: RawUpstream; px: DojangHandle }> {
  const up = cleanup.add(
    await startRawUpstream((s, h) => {
      const prev = h["grpc-previous-rpc-attempts"];
      script(s, typeof prev === "string" ? Number(prev) + 1 : 1, h);
    }),
    (u) => u.close(),
  );
  const px = cleanup.add(await startProxy(up.address, { route, listener, cluster }), (p) => p.close(0));
  return { up, px };
}

/** Headers, then trailers with this status and no message (the grpcio shape). */
function headersThenTrailers(s: http2.ServerHttp2Stream, code: number, extra: http2.OutgoingHttpHeaders = {}): void {
  s.respond({ ...GRPC_RESPONSE_HEADERS, "x-head": "kept" }, { waitForTrailers: true });
  s.once("wantTrailers", () => s.sendTrailers({ "grpc-status": String(code), "grpc-message": "try again", ...extra }));
  s.end();
}

function trailersOnly(s: http2.ServerHttp2Stream, code: number, extra: http2.OutgoingHttpHeaders = {}): void {
  s.respond({ ...GRPC_RESPONSE_HEADERS, "grpc-status": String(code), "grpc-message": "try again", ...extra }, { endStream: true });
}

function lastRecord(px: DojangHandle) {
  const calls = px.calls;
  return calls[calls.length - 1]!;
}

/** Waits until the journal holds `n` records (a call is recorded when its client stream closes). */
async function records(px: DojangHandle, n: number): Promise<void> {
  for (let i = 0; i < 200 && px.calls.length < n; i++) await new Promise((r) => setTimeout(r, 10));
}

describe("a status in retryOn is retried, however it came", () => {
  it("retries UNAVAILABLE sent as headers then trailers (no message) to success, with grpc-previous-rpc-attempts on attempts 2 and 3", async () => {
    const { up, px } = await setup(
      (s, n) => afterRequest(s, () => (n < 3 ? headersThenTrailers(s, 14) : replyGrpc(s, [Buffer.from(`attempt ${n}`)]))),
      { retry: RETRY },
      { attemptsHeader: true },
    );
    const raw = await rawCall(px.address, {}, frame(REQUEST));
    expect(statusOf(raw)).toBe("0");
    expect(raw.data).toEqual(frame(Buffer.from("attempt 3")));
    expect(raw.headers?.["x-dojang-attempts"]).toBe("3");
    expect(up.seen.map((r) => r.headers["grpc-previous-rpc-attempts"])).toEqual([undefined, "1", "2"]);
    // every attempt carried the whole request
    expect(up.seen.map((r) => Buffer.concat(r.body))).toEqual([frame(REQUEST), frame(REQUEST), frame(REQUEST)]);
    await records(px, 1);
    expect(lastRecord(px)).toMatchObject({ grpc_code: 0, decided_by: "upstream", attempts: 3 });
    expect(await sampleReaching(px.adminAddress, "dojang_retries_total", { cluster: "backend", reason: "status" }, 2)).toBe(2);
    expect(await sampleReaching(px.adminAddress, "dojang_call_attempts_bucket", { le: "3" }, 1)).toBe(1);
    expect(await sampleReaching(px.adminAddress, "dojang_call_attempts_bucket", { le: "2" }, 1, 100)).toBe(0);
  });

  it("retries UNAVAILABLE sent as Trailers-Only", async () => {
    const { up, px } = await setup((s, n) => afterRequest(s, () => (n === 1 ? trailersOnly(s, 14) : replyGrpc(s, [Buffer.from("ok")]))));
    const c = cleanup.add(echoClient(px.address), (x) => x.close());
    const r = await unary(c, REQUEST);
    expect(r.err).toBeNull();
    expect(r.res?.toString()).toBe("ok");
    expect(up.seen.length).toBe(2);
    await records(px, 1);
    expect(lastRecord(px).attempts).toBe(2);
  });

  // retryOn [RESOURCE_EXHAUSTED] and an UNAVAILABLE answer: the default retryOn ([UNAVAILABLE])
  // would retry it, so one attempt shows the key at work
  it("makes exactly one attempt for a status not in retryOn, and forwards headers and trailers as the upstream sent them", async () => {
    const { up, px } = await setup((s) => afterRequest(s, () => headersThenTrailers(s, 14)), { retry: { ...RETRY, retryOn: ["RESOURCE_EXHAUSTED"] } });
    const raw = await rawCall(px.address, {}, frame(REQUEST));
    expect(raw.headers?.["x-head"]).toBe("kept");
    expect(raw.headers?.["grpc-status"]).toBeUndefined();
    expect(raw.trailers?.["grpc-status"]).toBe("14");
    expect(up.seen.length).toBe(1);
    await records(px, 1);
    expect(lastRecord(px)).toMatchObject({ grpc_code: 14, attempts: 1 });
  });

  it("retries a status retryOn names that the default does not (RESOURCE_EXHAUSTED) to success", async () => {
    const { up, px } = await setup((s, n) => afterRequest(s, () => (n === 1 ? trailersOnly(s, 8) : replyGrpc(s, [Buffer.from("ok")]))), {
      retry: { ...RETRY, retryOn: ["RESOURCE_EXHAUSTED"] },
    });
    const c = cleanup.add(echoClient(px.address), (x) => x.close());
    const r = await unary(c, REQUEST);
    expect(r.err).toBeNull();
    expect(up.seen.length).toBe(2);
  });

  // 4, not the default 3, so the count is the key's
  it("stops at maxAttempts and forwards the last attempt's own status", async () => {
    const { up, px } = await setup((s) => afterRequest(s, () => headersThenTrailers(s, 14)), { retry: { ...RETRY, maxAttempts: 4 } });
    const raw = await rawCall(px.address, {}, frame(REQUEST));
    expect(raw.trailers?.["grpc-status"]).toBe("14");
    expect(raw.trailers?.["grpc-message"]).toBe("try again");
    expect(raw.headers?.["x-head"]).toBe("kept");
    expect(up.seen.length).toBe(4);
    await records(px, 1);
    expect(lastRecord(px)).toMatchObject({ grpc_code: 14, decided_by: "upstream", attempts: 4 });
  });

  it("does not retry at all without a policy (the status is forwarded, one attempt)", async () => {
    const { up, px } = await setup((s) => afterRequest(s, () => trailersOnly(s, 14)), {});
    const raw = await rawCall(px.address, {}, frame(REQUEST));
    expect(raw.headers?.["grpc-status"]).toBe("14");
    expect(up.seen.length).toBe(1);
  });
});

describe("grpc-retry-pushback-ms", () => {
  it("waits the upstream's pushback before the next attempt", async () => {
    const at: number[] = [];
    const { up, px } = await setup((s, n) => {
      at.push(performance.now());
      afterRequest(s, () => (n === 1 ? trailersOnly(s, 14, { "grpc-retry-pushback-ms": "300" }) : replyGrpc(s, [Buffer.from("ok")])));
    });
    const raw = await rawCall(px.address, {}, frame(REQUEST));
    expect(statusOf(raw)).toBe("0");
    expect(up.seen.length).toBe(2);
    expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(290);
  });

  it.each(["-1", "soon"])("stops retrying on a pushback of %j", async (pb) => {
    const { up, px } = await setup((s) => afterRequest(s, () => headersThenTrailers(s, 14, { "grpc-retry-pushback-ms": pb })));
    const raw = await rawCall(px.address, {}, frame(REQUEST));
    expect(raw.trailers?.["grpc-status"]).toBe("14");
    expect(up.seen.length).toBe(1);
  });
});

describe("time: perTryTimeout and the call's deadline", () => {
  it("cancels an attempt that outlives perTryTimeout and retries it", async () => {
    const { up, px } = await setup(
      (s, n) => {
        if (n === 1) return; // never answers
        afterRequest(s, () => replyGrpc(s, [Buffer.from("second")]));
      },
      { retry: { ...RETRY, perTryTimeout: "200ms" } },
    );
    const t0 = performance.now();
    const raw = await rawCall(px.address, { "grpc-timeout": "5S" }, frame(REQUEST));
    expect(statusOf(raw)).toBe("0");
    expect(raw.data).toEqual(frame(Buffer.from("second")));
    expect(performance.now() - t0).toBeGreaterThanOrEqual(190);
    expect(up.seen.length).toBe(2);
    for (let i = 0; i < 100 && up.seen[0]!.rstCode === undefined; i++) await new Promise((r) => setTimeout(r, 10));
    expect(up.seen[0]!.rstCode).toBe(http2.constants.NGHTTP2_CANCEL);
    await records(px, 1);
    expect(await sampleReaching(px.adminAddress, "dojang_retries_total", { reason: "per_try_timeout" }, 1)).toBe(1);
  });

  it("answers 4 when perTryTimeout passes on the last attempt", async () => {
    const { up, px } = await setup(() => {}, { retry: { ...RETRY, maxAttempts: 2, perTryTimeout: "100ms" } });
    const raw = await rawCall(px.address, {}, frame(REQUEST));
    expect(raw.headers?.["grpc-status"]).toBe("4");
    expect(up.seen.length).toBe(2);
    await records(px, 1);
    expect(lastRecord(px)).toMatchObject({ decided_by: "deadline", attempts: 2 });
  });

  it("never retries past the client's deadline, and sends each attempt what is left of it as grpc-timeout", async () => {
    // pushback 1.2 s in a 2 s budget: one retry fits, a second does not. (It was 200 ms in 300 ms,
    // with the answer due within 290 ms of the request, its connection included: on a loaded
    // machine the connection alone took longer.)
    const { up, px } = await setup((s) => afterRequest(s, () => trailersOnly(s, 14, { "grpc-retry-pushback-ms": "1200" })));
    const t0 = performance.now();
    const raw = await rawCall(px.address, { "grpc-timeout": "2S" }, frame(REQUEST));
    const took = performance.now() - t0;
    expect(raw.headers?.["grpc-status"]).toBe("14"); // the upstream's own status, not 4
    expect(up.seen.length).toBe(2);
    // answered once the second retry was known not to fit, not at the deadline
    expect(took).toBeLessThan(1900);
    const t1 = timeoutMs(up.seen[0]!.headers["grpc-timeout"]);
    const t2 = timeoutMs(up.seen[1]!.headers["grpc-timeout"]);
    expect(t1).toBeGreaterThan(1500);
    expect(t1).toBeLessThanOrEqual(2000);
    expect(t2).toBeGreaterThan(0);
    expect(t2).toBeLessThanOrEqual(800);
  });
});

describe("the commit point", () => {
  it("does not retry once a response message went to the client (a message, then UNAVAILABLE)", async () => {
    const { up, px } = await setup((s) => afterRequest(s, () => replyGrpc(s, [Buffer.from("partial")], { "grpc-status": "14" })));
    const raw = await rawCall(px.address, {}, frame(REQUEST));
    expect(raw.data).toEqual(frame(Buffer.from("partial")));
    expect(raw.trailers?.["grpc-status"]).toBe("14");
    expect(up.seen.length).toBe(1);
    await records(px, 1);
    expect(lastRecord(px).attempts).toBe(1);
  });

  it("commits when the request overflows bufferBytes: the next UNAVAILABLE is not retried", async () => {
    const { up, px } = await setup((s) => afterRequest(s, () => trailersOnly(s, 14)), { retry: { ...RETRY, bufferBytes: "1KiB" } });
    const big = Buffer.alloc(4096, 7);
    const raw = await rawCall(px.address, {}, frame(big));
    expect(raw.headers?.["grpc-status"]).toBe("14");
    expect(up.seen.length).toBe(1);
    expect(Buffer.concat(up.seen[0]!.body)).toEqual(frame(big));
    // a request under the cap is retried on the same route
    const small = await rawCall(px.address, {}, frame(REQUEST));
    expect(small.headers?.["grpc-status"]).toBe("14");
    expect(up.seen.length).toBe(4);
  });

  it("replays a client-streaming request whole into the next attempt", async () => {
    const { up, px } = await setup((s, n) => afterRequest(s, () => (n === 1 ? headersThenTrailers(s, 14) : replyGrpc(s, [Buffer.from("ok")]))));
    const session = http2.connect(`http://${px.address}`);
    cleanup.add(session, (s) => s.close());
    const req = session.request({ ":method": "POST", ":path": "/test.Echo/ClientStream", "content-type": "application/grpc", te: "trailers" });
    const trailers = new Promise<http2.IncomingHttpHeaders>((r) => req.on("trailers", r));
    req.on("data", () => {});
    req.write(frame(Buffer.from("one")));
    await new Promise((r) => setTimeout(r, 20));
    req.write(frame(Buffer.from("two")));
    await new Promise((r) => setTimeout(r, 20));
    req.end(frame(Buffer.from("three")));
    expect((await trailers)["grpc-status"]).toBe("0");
    const whole = Buffer.concat([frame(Buffer.from("one")), frame(Buffer.from("two")), frame(Buffer.from("three"))]);
    expect(up.seen.map((r) => Buffer.concat(r.body))).toEqual([whole, whole]);
  });
});

describe("a status the grpc-js client reads", () => {
  it("reaches a grpc-js client as OK after a retried headers-then-trailers UNAVAILABLE", async () => {
    const { px } = await setup((s, n) => afterRequest(s, () => (n === 1 ? headersThenTrailers(s, 14) : replyGrpc(s, [Buffer.from("ok")]))));
    const c = cleanup.add(echoClient(px.address), (x) => x.close());
    const r = await unary(c, REQUEST, new grpc.Metadata(), { deadline: Date.now() + 5000 });
    expect(r.err).toBeNull();
    expect(r.res?.toString()).toBe("ok");
  });
});
