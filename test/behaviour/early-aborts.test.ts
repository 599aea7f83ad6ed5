// Calls dojang answers itself before (or instead of) reaching an upstream: invalid gRPC requests,
// an already-spent budget, no route, an unreachable or silent upstream (spec sheet §11.6, §11.7).
// Each abort is followed by a good call on the same client connection.
import { afterEach, describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import http2 from "node:http2";
import net, { type AddressInfo, type Socket } from "node:net";
import { echoClient, frame, rawCall, startProxy, startRawUpstream, statusOf, unary, type RawResult, type RawUpstream } from "../helpers/peers.js";
import { Cleanup, afterRequest, hasEndStream, replyGrpc, sampleReaching } from "../helpers/scripted-upstream.js";
import type { DojangHandle } from "../../src/index.js";

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

const REQUEST = Buffer.from("ping");

/** An upstream that echoes every request body back with grpc-status 0 (and records each stream). */
async function echoUpstream(): Promise<RawUpstream> {
  return cleanup.add(
    await startRawUpstream((s, _h, rec) => afterRequest(s, () => replyGrpc(s, [Buffer.concat(rec.body).subarray(5)]))),
    (u) => u.close(),
  );
}

/** One raw HTTP/2 connection to dojang, shared by every call of a test. */
function connect(px: DojangHandle): http2.ClientHttp2Session {
  const session = http2.connect(`http://${px.address}`);
  session.on("error", () => {});
  return cleanup.add(session, (s) => new Promise<void>((r) => (s.closed ? r() : s.close(() => r()))));
}

function calls(px: DojangHandle, labels: Record<string, string>, want: number): Promise<number> {
  return sampleReaching(px.adminAddress, "dojang_calls_total", labels, want);
}

/** The abort's shape on the wire: one HEADERS with END_STREAM, a gRPC content-type, no DATA. */
function expectLocalReply(r: RawResult, httpStatus: number, grpcStatus: number, message: string): void {
  expect(r.headers?.[":status"]).toBe(httpStatus);
  expect(r.headers?.["content-type"]).toBe("application/grpc");
  expect(r.headers?.["grpc-status"]).toBe(String(grpcStatus));
  expect(r.headers?.["grpc-message"]).toBe(message);
  expect(hasEndStream(r.headersFlags)).toBe(true);
  expect(r.trailers).toBeUndefined();
  expect(r.data.length).toBe(0);
}

/** A good unary call on `session` reaches the upstream and comes back OK. */
async function expectGoodCall(px: DojangHandle, session: http2.ClientHttp2Session, path = "/test.Echo/Unary"): Promise<void> {
  const ok = await rawCall(px.address, { ":path": path }, frame(Buffer.from("still here")), { session });
  expect(ok.headers?.[":status"]).toBe(200);
  expect(ok.data).toEqual(frame(Buffer.from("still here")));
  expect(statusOf(ok)).toBe("0");
  expect(session.closed || session.destroyed).toBe(false);
}

describe('spec §11.7: "a request content-type that is not gRPC gets HTTP 415 with content-type: application/grpc and grpc-status 3"', () => {
  it.each(["application/json", "text/plain"])("answers HTTP 415 with grpc-status 3 to a %s request without calling the upstream, and the connection carries on", async (ct) => {
    const up = await echoUpstream();
    const px = cleanup.add(await startProxy(up.address), (p) => p.close(0));
    const session = connect(px);

    const r = await rawCall(px.address, { "content-type": ct }, Buffer.from("{}"), { session });
    expectLocalReply(r, 415, 3, `invalid gRPC request content-type "${ct}"`);
    expect(up.seen.length).toBe(0);

    await expectGoodCall(px, session);
    expect(up.seen.length).toBe(1);
    expect(await calls(px, { grpc_code: "INVALID_ARGUMENT", decided_by: "bad_request" }, 1)).toBe(1);
  });
});

describe('spec §11.7: "a malformed grpc-timeout gets HTTP 400 with grpc-status 13 (0S and clamped large H values are valid)"', () => {
  it.each([
    ["1s", 'transport: timeout unit is not recognized: "1s"'],
    ["100000000S", 'transport: timeout string is too long: "100000000S"'],
    ["abc", 'transport: timeout unit is not recognized: "abc"'],
    ["xS", 'strconv.ParseUint: parsing "x": invalid syntax'],
  ])("answers HTTP 400 with grpc-status 13 to grpc-timeout %j without calling the upstream, and the connection carries on", async (timeout, why) => {
    const up = await echoUpstream();
    const px = cleanup.add(await startProxy(up.address), (p) => p.close(0));
    const session = connect(px);

    const r = await rawCall(px.address, { "grpc-timeout": timeout }, frame(REQUEST), { session });
    expectLocalReply(r, 400, 13, `malformed grpc-timeout: ${why}`);
    expect(up.seen.length).toBe(0);

    await expectGoodCall(px, session);
    expect(up.seen.length).toBe(1);
    expect(await calls(px, { grpc_code: "INTERNAL", decided_by: "bad_request" }, 1)).toBe(1);
  });

  it("forwards a clamped large H grpc-timeout as a valid budget", async () => {
    const up = await echoUpstream();
    const px = cleanup.add(await startProxy(up.address), (p) => p.close(0));
    const session = connect(px);

    const r = await rawCall(px.address, { "grpc-timeout": "99999999H" }, frame(Buffer.from("still here")), { session });
    expect(statusOf(r)).toBe("0");
    expect(up.seen.length).toBe(1);
    expect(up.seen[0]!.headers["grpc-timeout"]).toMatch(/^\d{1,8}[numSMH]$/);
  });
});

describe('spec §11.7: "A budget that is already ≤ 0 when the call would go upstream gets 4 at once, and nothing is sent upstream."', () => {
  it("answers 4 DEADLINE_EXCEEDED at once to grpc-timeout 0S without calling the upstream, and the connection carries on", async () => {
    const up = await echoUpstream();
    const px = cleanup.add(await startProxy(up.address), (p) => p.close(0));
    const session = connect(px);

    const r = await rawCall(px.address, { "grpc-timeout": "0S" }, frame(REQUEST), { session });
    expectLocalReply(r, 200, 4, "context deadline exceeded");
    expect(up.seen.length).toBe(0);

    await expectGoodCall(px, session);
    expect(up.seen.length).toBe(1);
    expect(await calls(px, { grpc_code: "DEADLINE_EXCEEDED", decided_by: "deadline" }, 1)).toBe(1);
  });
});

describe('call.ts, "Early aborts mirror grpc-go\'s server (spec §11.7)": a :method other than POST gets HTTP 405 with grpc-status 13', () => {
  it("answers HTTP 405 with grpc-status 13 to a GET without calling the upstream, and the connection carries on", async () => {
    const up = await echoUpstream();
    const px = cleanup.add(await startProxy(up.address), (p) => p.close(0));
    const session = connect(px);

    const r = await rawCall(px.address, { ":method": "GET" }, undefined, { session });
    expectLocalReply(r, 405, 13, 'Received a HEADERS frame with :method "GET" which should be POST');
    expect(up.seen.length).toBe(0);

    await expectGoodCall(px, session);
    expect(up.seen.length).toBe(1);
    expect(await calls(px, { grpc_code: "INTERNAL", decided_by: "bad_request" }, 1)).toBe(1);
  });
});

describe('outcome.ts DECIDED_BY.no_route: "no route matched the request\'s :path or authority" (a status dojang writes: spec §11.6)', () => {
  it("answers 12 UNIMPLEMENTED as Trailers-Only to a call no route matches, and a routed call on the same connection goes through", async () => {
    const up = await echoUpstream();
    const px = cleanup.add(await startProxy(up.address, { route: { match: { path: "/other.Svc/M" } } }), (p) => p.close(0));
    const client = cleanup.add(echoClient(px.address), (c) => c.close());

    const viaGrpcJs = await unary(client, REQUEST);
    expect(viaGrpcJs.status?.code).toBe(grpc.status.UNIMPLEMENTED);
    expect(viaGrpcJs.status?.details).toContain("/test.Echo/Unary");

    const session = connect(px);
    const r = await rawCall(px.address, {}, frame(REQUEST), { session });
    expect(r.headers?.[":status"]).toBe(200);
    expect(r.headers?.["content-type"]).toBe("application/grpc");
    expect(r.headers?.["grpc-status"]).toBe("12");
    expect(hasEndStream(r.headersFlags)).toBe(true);
    expect(r.data.length).toBe(0);
    expect(up.seen.length).toBe(0);

    await expectGoodCall(px, session, "/other.Svc/M");
    expect(up.seen.length).toBe(1);
    expect(await calls(px, { grpc_method: "Unary", grpc_code: "UNIMPLEMENTED", decided_by: "no_route" }, 2)).toBe(2);
  });
});

describe('spec §10.1: "\'error\' (e.g. ECONNREFUSED, which dojang maps to 14)"; outcome.ts DECIDED_BY.upstream_unreachable: "dojang could not connect to any upstream endpoint"', () => {
  /** dojang with /test.Echo/Unary routed to `deadAddress` and everything else to a working upstream. */
  async function proxyWithDeadRoute(deadAddress: string, dead: Record<string, unknown> = {}): Promise<{ px: DojangHandle; up: RawUpstream }> {
    const up = await echoUpstream();
    const px = await startProxy(up.address, {
      listener: {
        routes: [
          { match: { path: "/test.Echo/Unary" }, cluster: "dead" },
          { match: { prefix: "/" }, cluster: "backend" },
        ],
      },
      top: {
        clusters: [
          { name: "dead", endpoints: [deadAddress], ...dead },
          { name: "backend", endpoints: [up.address] },
        ],
      },
    });
    cleanup.add(px, (p) => p.close(0));
    return { px, up };
  }

  it("answers 14 UNAVAILABLE naming the refused connection when nothing listens on the upstream port, and other calls carry on", async () => {
    const probe = net.createServer();
    await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
    const deadPort = (probe.address() as AddressInfo).port;
    await new Promise<void>((r) => probe.close(() => r()));
    const { px } = await proxyWithDeadRoute(`127.0.0.1:${deadPort}`);
    const client = cleanup.add(echoClient(px.address), (c) => c.close());

    const r = await unary(client, REQUEST);
    expect(r.status?.code).toBe(grpc.status.UNAVAILABLE);
    // soft: a wrong message should not hide the checks below
    expect.soft(r.status?.details).toMatch(/refused/i);
    expect.soft(r.status?.details).toContain(String(deadPort));

    const session = connect(px);
    const raw = await rawCall(px.address, {}, frame(REQUEST), { session });
    expect(raw.headers?.[":status"]).toBe(200);
    expect(raw.headers?.["content-type"]).toBe("application/grpc");
    expect(raw.headers?.["grpc-status"]).toBe("14");
    expect(hasEndStream(raw.headersFlags)).toBe(true);

    await expectGoodCall(px, session, "/test.Echo/ClientStream");
    const again = await unary(client, REQUEST);
    expect(again.status?.code).toBe(grpc.status.UNAVAILABLE);
    expect(await calls(px, { grpc_method: "Unary", grpc_code: "UNAVAILABLE", decided_by: "upstream_unreachable" }, 3)).toBe(3);
  });

  it("answers 14 UNAVAILABLE within a bounded time when the upstream accepts TCP but never speaks HTTP/2 (connectTimeout 200ms)", async () => {
    const silentSockets = new Set<Socket>();
    let accepted = 0;
    const silent = net.createServer((sock) => {
      accepted++;
      silentSockets.add(sock);
      sock.on("error", () => {});
      sock.on("close", () => silentSockets.delete(sock));
    });
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    cleanup.add(silent, (srv) => {
      for (const sock of silentSockets) sock.destroy();
      return new Promise<void>((r) => srv.close(() => r()));
    });
    const { px } = await proxyWithDeadRoute(`127.0.0.1:${(silent.address() as AddressInfo).port}`, { connectTimeout: "200ms" });
    const client = cleanup.add(echoClient(px.address), (c) => c.close());

    // The client's deadline only keeps a hanging proxy from hanging the test: the connect
    // timeout must answer long before it.
    const t0 = performance.now();
    const r = await unary(client, REQUEST, new grpc.Metadata(), { deadline: Date.now() + 2500 });
    const took = performance.now() - t0;
    expect(r.status?.code).toBe(grpc.status.UNAVAILABLE);
    expect(r.status?.details).toMatch(/connect timeout/i);
    expect(took).toBeGreaterThanOrEqual(150);
    expect(took).toBeLessThan(2000);
    expect(accepted).toBeGreaterThanOrEqual(1); // TCP connected: it was the h2 handshake that timed out

    const session = connect(px);
    await expectGoodCall(px, session, "/test.Echo/ClientStream");
    expect(await calls(px, { grpc_method: "Unary", grpc_code: "UNAVAILABLE", decided_by: "upstream_unreachable" }, 1)).toBe(1);
  });
});
