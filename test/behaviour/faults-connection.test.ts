// Fault injection, end to end: faults that act on connections or on the upstream leg. `goaway`
// (graceful and abrupt) and `close_connection` on the client's connection; `unreachable` and
// `upstream_reset` on the upstream side. grpc-js clients for what an application observes, raw
// node:http2 clients and upstreams for the frames (GOAWAY's last-stream-id, RST_STREAM codes).
import { afterEach, describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import http2 from "node:http2";
import { echoClient, frame, rawCall, startGrpcServer, startProxy, startRawUpstream, unary, type EchoClient, type RawResult } from "../helpers/peers.js";
import { Cleanup, GRPC_RESPONSE_HEADERS } from "../helpers/scripted-upstream.js";
import type { DojangHandle } from "../../src/index.js";
import { connections } from "../helpers/fixtures.js";

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

// === peers ===

interface Upstream {
  readonly address: string;
  readonly calls: Record<string, number>;
}

/** grpc-js Echo upstream: Unary echoes ("sleep:N" answers after N ms); ServerStream takes "n,size". */
async function startUpstream(): Promise<Upstream> {
  const calls: Record<string, number> = { Unary: 0, ServerStream: 0 };
  const srv = await startGrpcServer({
    Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      calls["Unary"]!++;
      const m = /^sleep:(\d+)$/.exec(call.request.toString());
      if (m === null) return cb(null, call.request);
      const t = setTimeout(() => cb(null, call.request), Number(m[1]));
      call.on("cancelled", () => clearTimeout(t));
    },
    ServerStream: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
      calls["ServerStream"]!++;
      const [n = 0, size = 8] = call.request.toString().split(",").map(Number);
      for (let i = 1; i <= n; i++) call.write(Buffer.alloc(size, 0x30 + (i % 10)));
      call.end();
    },
  });
  cleanup.add(srv, (s) => s.close());
  return { address: srv.address, calls };
}

async function proxy(upstream: string, o: Parameters<typeof startProxy>[1] = {}): Promise<DojangHandle> {
  return cleanup.add(await startProxy(upstream, o), (p) => p.close(0));
}

function client(px: DojangHandle, opts: grpc.ClientOptions = {}): EchoClient {
  return cleanup.add(echoClient(px.address, opts), (c) => c.close());
}


function session(px: DojangHandle): http2.ClientHttp2Session {
  const s = http2.connect(`http://${px.address}`);
  s.on("error", () => {});
  return cleanup.add(s, (x) => x.destroy());
}

function md(entries: Record<string, string>): grpc.Metadata {
  const m = new grpc.Metadata();
  for (const [k, v] of Object.entries(entries)) m.set(k, v);
  return m;
}

function framesOf(data: Buffer): { frames: Buffer[]; rest: Buffer } {
  const frames: Buffer[] = [];
  let at = 0;
  while (at + 5 <= data.length) {
    const len = data.readUInt32BE(at + 1);
    if (at + 5 + len > data.length) break;
    frames.push(data.subarray(at + 5, at + 5 + len));
    at += 5 + len;
  }
  return { frames, rest: data.subarray(at) };
}

interface StreamResult {
  messages: Buffer[];
  status: grpc.StatusObject;
}

function serverStream(c: EchoClient, req: string, meta = new grpc.Metadata()): Promise<StreamResult> {
  return new Promise((resolve) => {
    const messages: Buffer[] = [];
    const call = c.ServerStream(Buffer.from(req), meta, {});
    call.on("data", (m: Buffer) => messages.push(m));
    call.on("error", () => {});
    call.on("status", (status: grpc.StatusObject) => setImmediate(() => resolve({ messages, status })));
  });
}

function onGoaway(s: http2.ClientHttp2Session): Promise<{ code: number; lastStreamID: number }> {
  return new Promise((resolve) => s.once("goaway", (code: number, lastStreamID: number) => resolve({ code, lastStreamID })));
}

/** A request on `s` that may be refused: resolves with the result, or the error request() threw. */
async function tryCall(px: DojangHandle, s: http2.ClientHttp2Session, body: string, headers: http2.OutgoingHttpHeaders = {}): Promise<RawResult | Error> {
  try {
    return await rawCall(px.address, headers, frame(Buffer.from(body)), { session: s });
  } catch (err) {
    return err as Error;
  }
}

function statusIn(r: RawResult | Error): string | undefined {
  if (r instanceof Error) return undefined;
  const v = r.trailers?.["grpc-status"] ?? r.headers?.["grpc-status"];
  return typeof v === "string" ? v : undefined;
}

// === goaway ===

describe("goaway", () => {
  it("graceful lets the call finish OK, and the connection takes no new call", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "bye", fire: { calls: "1" }, action: { kind: "goaway", mode: "graceful" } });
    const s = session(px);
    const goaway = onGoaway(s);

    const first = await rawCall(px.address, {}, frame(Buffer.from("one")), { session: s });
    expect(first.trailers?.["grpc-status"]).toBe("0");
    expect(framesOf(first.data).frames.map((f) => f.toString())).toEqual(["one"]);
    const g = await goaway;
    expect(g.code).toBe(http2.constants.NGHTTP2_NO_ERROR);
    expect(g.lastStreamID).toBe(1); // the faulted call's own stream: it is processed

    const second = await tryCall(px, s, "two");
    expect(statusIn(second)).toBeUndefined(); // refused on this connection
    expect(up.calls["Unary"]).toBe(1);

    const fresh = await rawCall(px.address, {}, frame(Buffer.from("three")));
    expect(fresh.trailers?.["grpc-status"]).toBe("0");
    expect(up.calls["Unary"]).toBe(2);
  });

  it("graceful moves a grpc-js client's next call to a new connection, and both calls succeed", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    const conns = connections(px);
    px.faults.add({ id: "bye", fire: { calls: "1" }, action: { kind: "goaway", mode: "graceful", code: "NO_ERROR" } });
    const c = client(px);

    const a = await unary(c, Buffer.from("a"));
    expect(a.err).toBeNull();
    expect(a.res?.toString()).toBe("a");
    const b = await unary(c, Buffer.from("b"));
    expect(b.err).toBeNull();
    expect(b.res?.toString()).toBe("b");
    expect(conns()).toBe(2);
  });

  it("abrupt fails the calls in flight on that connection with 14 UNAVAILABLE, and a new connection works", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    const conns = connections(px);
    // code NO_ERROR (the default): node's client then closes gracefully, so what ends the
    // in-flight call is dojang closing the connection (a non-zero code makes node itself reset
    // every stream with that code, which grpc-js maps like an RST_STREAM code)
    px.faults.add({ id: "cut", match: { metadata: [{ name: "x-fault", equals: "goaway" }] }, action: { kind: "goaway", mode: "abrupt" } });
    const c = client(px);
    expect((await unary(c, Buffer.from("warm"))).err).toBeNull();

    const inflight = unary(c, Buffer.from("sleep:1500"));
    await until(() => up.calls["Unary"] === 2);
    const t0 = Date.now();
    const trigger = await unary(c, Buffer.from("now"), md({ "x-fault": "goaway" }));
    const slow = await inflight;
    expect(slow.err).not.toBeNull();
    expect(slow.err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(Date.now() - t0).toBeLessThan(1000); // failed at the GOAWAY, not after the upstream's 1.5 s
    expect(trigger.err).not.toBeNull();

    const after = await unary(c, Buffer.from("again"));
    expect(after.err).toBeNull();
    expect(after.res?.toString()).toBe("again");
    expect(conns()).toBe(2);
  });

  it("abrupt sends GOAWAY with the code and a last-stream-id below every in-flight stream, then closes the connection", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "cut", match: { metadata: [{ name: "x-fault", equals: "goaway" }] }, action: { kind: "goaway", mode: "abrupt", code: "ENHANCE_YOUR_CALM" } });
    const s = session(px);
    const goaway = onGoaway(s);
    const closed = new Promise<void>((r) => s.once("close", () => r()));

    const done = await rawCall(px.address, {}, frame(Buffer.from("first")), { session: s }); // stream 1, finished
    expect(done.trailers?.["grpc-status"]).toBe("0");
    const inflight = tryCall(px, s, "sleep:1500"); // stream 3
    await until(() => up.calls["Unary"] === 2);
    const trigger = tryCall(px, s, "x", { "x-fault": "goaway" }); // stream 5

    const g = await goaway;
    expect(g.code).toBe(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM);
    // soft: the connection-level checks below still run when only the stream id is off
    expect.soft(g.lastStreamID).toBeLessThan(3);
    expect(statusIn(await inflight)).toBeUndefined();
    expect(statusIn(await trigger)).toBeUndefined();
    await closed;

    const fresh = await rawCall(px.address, {}, frame(Buffer.from("fresh")));
    expect(fresh.trailers?.["grpc-status"]).toBe("0");
  });
});

// === close_connection ===

describe("close_connection", () => {
  it("closes the client's connection after exactly afterBytes response bytes, without trailers", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "cut", action: { kind: "close_connection", afterBytes: 250 } });
    const s = session(px);
    const closed = new Promise<void>((r) => s.once("close", () => r()));

    const raw = await rawCall(px.address, { ":path": "/test.Echo/ServerStream" }, frame(Buffer.from("5,100")), { session: s });
    expect(raw.headers?.[":status"]).toBe(200);
    expect(raw.data.length).toBe(250); // two 105-byte messages and 40 bytes of the third
    const f = framesOf(raw.data);
    expect(f.frames).toHaveLength(2);
    expect(f.rest.length).toBe(40);
    expect(raw.trailers).toBeUndefined();
    await closed;
    expect(s.destroyed).toBe(true);
  });

  it("gives a grpc-js client the whole messages before the cut and then 14 UNAVAILABLE", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "cut", action: { kind: "close_connection", afterBytes: "250" } });

    const r = await serverStream(client(px), "5,100");
    expect(r.messages).toHaveLength(2);
    expect(r.status.code).toBe(grpc.status.UNAVAILABLE);
    await until(() => px.calls.length === 1);
    expect(px.calls[0]).toMatchObject({ grpc_code: 14, decided_by: "fault", faults: ["cut"], fault_kinds: ["close_connection"] });
  });
});

// === unreachable ===

describe("unreachable", () => {
  it("finishes with 14 UNAVAILABLE without opening any upstream connection", async () => {
    let upstreamConnections = 0;
    const up = cleanup.add(
      await startRawUpstream((st) => {
        st.respond(GRPC_RESPONSE_HEADERS, { waitForTrailers: true });
        st.once("wantTrailers", () => st.sendTrailers({ "grpc-status": "0" }));
        st.end(frame(Buffer.from("ok")));
      }),
      (u) => u.close(),
    );
    up.server.on("connection", () => upstreamConnections++);
    const px = await proxy(up.address);
    px.faults.add({ id: "gone", action: { kind: "unreachable" } });

    const r = await unary(client(px), Buffer.from("x"));
    expect(r.err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(r.err?.details).toBe("fault: upstream made unreachable");
    await new Promise((res) => setTimeout(res, 50));
    expect(upstreamConnections).toBe(0);
    expect(up.seen).toHaveLength(0);
    expect(px.calls.at(-1)).toMatchObject({ grpc_code: 14, decided_by: "fault", faults: ["gone"], upstream: undefined });
  });

  it("leaves another method on the same connection reaching the upstream", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    const conns = connections(px);
    px.faults.add({ id: "gone", match: { method: "Unary" }, action: { kind: "unreachable" } });
    const c = client(px);

    const [r, ok] = await Promise.all([unary(c, Buffer.from("x")), serverStream(c, "2,5")]);
    expect(r.err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(ok.status.code).toBe(grpc.status.OK);
    expect(ok.messages).toHaveLength(2);
    expect(up.calls).toEqual({ Unary: 0, ServerStream: 1 });
    expect(conns()).toBe(1);
  });
});

// === upstream_reset ===

describe("upstream_reset", () => {
  /** A raw upstream for ClientStream that reads and never answers (the fault ends the stream). */
  async function silentUpstream() {
    return cleanup.add(
      await startRawUpstream(() => {}),
      (u) => u.close(),
    );
  }

  function clientStream(c: EchoClient, messages: Buffer[], gapMs: number): Promise<{ err: grpc.ServiceError | null; res: Buffer | undefined }> {
    return new Promise((resolve) => {
      const call = c.ClientStream(new grpc.Metadata(), {}, (err, res) => resolve({ err, res }));
      let i = 0;
      const next = (): void => {
        if (i >= messages.length) return void call.end();
        call.write(messages[i++]!);
        setTimeout(next, gapMs);
      };
      next();
    });
  }

  it("resets the upstream stream with the chosen code once N request messages were forwarded", async () => {
    const up = await silentUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "cut-up", action: { kind: "upstream_reset", afterRequestMessages: 2, code: "ENHANCE_YOUR_CALM" } });
    const msgs = [1, 2, 3, 4].map((i) => Buffer.from(`request-${i}`));

    const r = await clientStream(client(px), msgs, 20);
    await until(() => up.seen[0]?.rstCode !== undefined);
    expect(up.seen).toHaveLength(1);
    const f = framesOf(Buffer.concat(up.seen[0]!.body));
    expect(f.frames.map((b) => b.toString())).toEqual(["request-1", "request-2"]);
    expect(f.rest.length).toBe(0);
    expect(up.seen[0]!.rstCode).toBe(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM);
    // the client gets what that code means (ENHANCE_YOUR_CALM: 8 RESOURCE_EXHAUSTED)
    expect(r.err?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(r.err?.details).toContain("after 2 request messages");
  });

  it("with afterRequestMessages 0 (the default) resets the upstream stream before any request message reaches it", async () => {
    const up = await silentUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "cut-up", action: { kind: "upstream_reset" } });

    const r = await unary(client(px), Buffer.from("never forwarded"));
    await until(() => up.seen[0]?.rstCode !== undefined);
    expect(up.seen).toHaveLength(1);
    expect(Buffer.concat(up.seen[0]!.body).length).toBe(0);
    expect(up.seen[0]!.rstCode).toBe(http2.constants.NGHTTP2_CANCEL);
    expect(r.err?.code).toBe(grpc.status.CANCELLED);
  });

  it("counts request messages that arrive together in one chunk", async () => {
    const up = await silentUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "cut-up", action: { kind: "upstream_reset", afterRequestMessages: 1, code: 85 } });
    const body = Buffer.concat([frame(Buffer.from("a")), frame(Buffer.from("b")), frame(Buffer.from("c"))]);

    const raw = await rawCall(px.address, { ":path": "/test.Echo/ClientStream" }, body);
    await until(() => up.seen[0]?.rstCode !== undefined);
    const f = framesOf(Buffer.concat(up.seen[0]!.body));
    expect(f.frames.map((b) => b.toString())).toEqual(["a"]);
    expect(up.seen[0]!.rstCode).toBe(85);
    expect(raw.headers?.["grpc-status"] ?? raw.trailers?.["grpc-status"]).toBe("2"); // an unknown RST code reads as 2 UNKNOWN
  });
});

async function until(cond: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond() && Date.now() < end) await new Promise((r) => setTimeout(r, 5));
}
