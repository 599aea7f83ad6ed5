// Fault injection, end to end: `abort`, `http` and `reset` as real clients see them. grpc-js for
// what an application observes (code, message, details, messages before the failure); raw
// node:http2 where grpc-js hides the wire (Trailers-Only, the RST_STREAM code, partial messages).
// Each kind is also checked not to touch a call on the same connection that its rule does not match.
import { afterEach, describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import http2 from "node:http2";
import { echoClient, frame, rawCall, startGrpcServer, startProxy, unary, type EchoClient, type RawResult } from "../helpers/peers.js";
import { Cleanup, hasEndStream } from "../helpers/scripted-upstream.js";
import type { DojangHandle, H2CodeInput } from "../../src/index.js";
import { connections } from "../helpers/fixtures.js";

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

// === peers ===

interface Upstream {
  readonly address: string;
  /** handler invocations per method */
  readonly calls: Record<string, number>;
}

/**
 * A grpc-js Echo upstream. Unary echoes; ServerStream takes "n,size" and sends n messages of
 * `size` bytes, message i filled with the digit i % 10; ClientStream answers "got N".
 */
async function startUpstream(): Promise<Upstream> {
  const calls: Record<string, number> = { Unary: 0, ServerStream: 0, ClientStream: 0, Bidi: 0 };
  const srv = await startGrpcServer({
    Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      calls["Unary"]!++;
      cb(null, call.request);
    },
    ServerStream: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
      calls["ServerStream"]!++;
      const [n = 0, size = 8] = call.request.toString().split(",").map(Number);
      for (let i = 1; i <= n; i++) call.write(messageOf(i, size));
      call.end();
    },
    ClientStream: (call: grpc.ServerReadableStream<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      calls["ClientStream"]!++;
      let n = 0;
      call.on("data", () => n++);
      call.on("end", () => cb(null, Buffer.from(`got ${n}`)));
    },
    Bidi: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
      calls["Bidi"]!++;
      call.on("data", (d: Buffer) => call.write(d));
      call.on("end", () => call.end());
    },
  });
  cleanup.add(srv, (s) => s.close());
  return { address: srv.address, calls };
}

function messageOf(i: number, size: number): Buffer {
  return Buffer.alloc(size, 0x30 + (i % 10));
}

async function proxy(upstream: string, o: Parameters<typeof startProxy>[1] = {}): Promise<DojangHandle> {
  return cleanup.add(await startProxy(upstream, o), (p) => p.close(0));
}

function client(px: DojangHandle): EchoClient {
  return cleanup.add(echoClient(px.address), (c) => c.close());
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

interface StreamResult {
  messages: Buffer[];
  status: grpc.StatusObject;
  err: grpc.ServiceError | undefined;
}

function serverStream(c: EchoClient, req: string, meta = new grpc.Metadata(), opts: grpc.CallOptions = {}): Promise<StreamResult> {
  return new Promise((resolve) => {
    const messages: Buffer[] = [];
    let err: grpc.ServiceError | undefined;
    const call = c.ServerStream(Buffer.from(req), meta, opts);
    call.on("data", (m: Buffer) => messages.push(m));
    call.on("error", (e: grpc.ServiceError) => (err = e));
    call.on("status", (status: grpc.StatusObject) => setImmediate(() => resolve({ messages, status, err })));
  });
}

/** gRPC frames in a DATA byte stream; `rest` is the bytes of an incomplete last frame. */
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

const SERVER_STREAM = "/test.Echo/ServerStream";

function rawServerStream(px: DojangHandle, req: string, headers: http2.OutgoingHttpHeaders = {}, s?: http2.ClientHttp2Session): Promise<RawResult> {
  return rawCall(px.address, { ":path": SERVER_STREAM, ...headers }, frame(Buffer.from(req)), s === undefined ? {} : { session: s });
}

// === abort ===

describe("abort", () => {
  it("sends Trailers-Only with the chosen code, message and status details, and never calls the upstream", async () => {
    const up = await startUpstream();
    const details = Buffer.from("\x08\x0e\x12\x0bstatus-proto", "latin1");
    const px = await proxy(up.address);
    px.faults.add({ id: "flaky", action: { kind: "abort", code: "UNAVAILABLE", message: "down: 50% ☂", details: details.toString("base64") } });

    const r = await unary(client(px), Buffer.from("hi"));
    expect(r.err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(r.err?.details).toBe("down: 50% ☂");
    expect(r.res).toBeUndefined();
    expect(r.metadata).toBeUndefined(); // Trailers-Only: no separate response headers
    const got = r.err?.metadata.get("grpc-status-details-bin") ?? [];
    expect(got).toHaveLength(1);
    expect(Buffer.compare(got[0] as Buffer, details)).toBe(0);

    const raw = await rawCall(px.address, {}, frame(Buffer.from("hi")));
    expect(hasEndStream(raw.headersFlags)).toBe(true);
    expect(raw.headers?.[":status"]).toBe(200);
    expect(raw.headers?.["content-type"]).toBe("application/grpc");
    expect(raw.headers?.["grpc-status"]).toBe("14");
    expect(raw.headers?.["grpc-status-details-bin"]).toBe(details.toString("base64"));
    expect(raw.trailers).toBeUndefined();
    expect(raw.data.length).toBe(0);

    expect(up.calls["Unary"]).toBe(0);
    const rec = px.calls.at(-1);
    expect(rec).toMatchObject({ grpc_code: 14, decided_by: "fault", faults: ["flaky"], fault_kinds: ["abort"] });
  });

  it("with afterMessages N on a server stream delivers exactly N messages and then the code", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "midway", match: { method: "ServerStream" }, action: { kind: "abort", code: "FAILED_PRECONDITION", message: "stop here", afterMessages: 2 } });

    const r = await serverStream(client(px), "5,100");
    expect(r.messages).toHaveLength(2);
    expect(r.messages[0]!.equals(messageOf(1, 100))).toBe(true);
    expect(r.messages[1]!.equals(messageOf(2, 100))).toBe(true);
    expect(r.status.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(r.status.details).toBe("stop here");

    const raw = await rawServerStream(px, "5,100");
    expect(hasEndStream(raw.headersFlags)).toBe(false); // real headers first
    const f = framesOf(raw.data);
    expect(f.frames).toHaveLength(2);
    expect(f.rest.length).toBe(0);
    expect(raw.trailers?.["grpc-status"]).toBe("9");
    expect(raw.trailers?.["grpc-message"]).toBe("stop here");
  });

  it("with afterMessages 0 sends the upstream's headers and then trailers with the code, not Trailers-Only", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "zero", action: { kind: "abort", code: 13, afterMessages: 0 } });

    const raw = await rawServerStream(px, "3,10");
    expect(raw.headers?.[":status"]).toBe(200);
    expect(hasEndStream(raw.headersFlags)).toBe(false);
    expect(raw.headers?.["grpc-status"]).toBeUndefined();
    expect(raw.data.length).toBe(0);
    expect(raw.trailers?.["grpc-status"]).toBe("13");
    expect(raw.trailers?.["grpc-message"]).toBe("injected fault");
  });

  it("leaves unmatched calls on the same connection alone: another method and a call without the matching metadata succeed", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    const conns = connections(px);
    px.faults.add({ id: "by-md", match: { method: "Unary", metadata: [{ name: "x-fault", equals: "abort" }] }, action: { kind: "abort", code: "ABORTED", message: "chosen" } });
    const c = client(px);

    const [hit, miss, other] = await Promise.all([
      unary(c, Buffer.from("a"), md({ "x-fault": "abort" })),
      unary(c, Buffer.from("b"), md({ "x-fault": "no" })),
      serverStream(c, "3,4", md({ "x-fault": "abort" })),
    ]);
    expect(hit.err?.code).toBe(grpc.status.ABORTED);
    expect(miss.err).toBeNull();
    expect(miss.res?.toString()).toBe("b");
    expect(other.status.code).toBe(grpc.status.OK);
    expect(other.messages).toHaveLength(3);
    expect(conns()).toBe(1);
    expect(px.faults.list().find((s) => s.rule.id === "by-md")).toMatchObject({ matched: 1, fired: 1 });
  });
});

// === http ===

describe("http", () => {
  const PAGE = "<html><body><h1>503 Service Unavailable</h1>\n<p>maintenance</p></body></html>";

  it("sends the raw status and HTML body verbatim to a raw client, without touching the upstream", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "html", action: { kind: "http", status: 503, body: PAGE } });

    const raw = await rawCall(px.address, {}, frame(Buffer.from("x")));
    expect(raw.headers?.[":status"]).toBe(503);
    expect(raw.headers?.["content-type"]).toBe("text/html");
    expect(raw.headers?.["grpc-status"]).toBeUndefined();
    expect(raw.data.toString("utf8")).toBe(PAGE);
    expect(raw.trailers).toBeUndefined();
    expect(up.calls["Unary"]).toBe(0);
  });

  it("is read by a grpc-js client as 14 UNAVAILABLE from the HTTP status, while an unmatched call on the same connection succeeds", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    const conns = connections(px);
    px.faults.add({ id: "html", match: { method: "Unary" }, action: { kind: "http", status: 503, body: PAGE } });
    const c = client(px);

    const [r, ok] = await Promise.all([unary(c, Buffer.from("x")), serverStream(c, "2,3")]);
    expect(r.err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(r.err?.details).toContain("503");
    expect(ok.status.code).toBe(grpc.status.OK);
    expect(ok.messages).toHaveLength(2);
    expect(conns()).toBe(1);
    await until(() => px.calls.some((x) => x.path === "/test.Echo/Unary"));
    expect(px.calls.find((x) => x.path === "/test.Echo/Unary")).toMatchObject({ grpc_code: 14, decided_by: "fault", faults: ["html"] });
  });
});

// === reset ===

async function until(cond: () => boolean, ms = 2000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond() && Date.now() < end) await new Promise((r) => setTimeout(r, 5));
}

describe("reset", () => {
  it.each([
    [3, "FLOW_CONTROL_ERROR"],
    [85, 85],
  ])("before_headers puts RST_STREAM %i on the wire as the stream's only frame", async (code, given) => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "rst", action: { kind: "reset", code: given as H2CodeInput, at: "before_headers" } });

    const raw = await rawCall(px.address, {}, frame(Buffer.from("x")));
    expect(raw.rstCode).toBe(code);
    expect(raw.headers).toBeUndefined();
    expect(raw.data.length).toBe(0);
    expect(up.calls["Unary"]).toBe(0);

    const r = await unary(client(px), Buffer.from("x"));
    expect(r.err?.code).toBe(grpc.status.INTERNAL); // grpc-js: any RST code without a special meaning
    expect(r.err?.details).toBe(`Received RST_STREAM with code ${code}`);
  });

  it("after_headers sends the upstream's response headers and then RST_STREAM with the code, and no message", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "rst", action: { kind: "reset", code: 85, at: "after_headers" } });

    const raw = await rawCall(px.address, {}, frame(Buffer.from("payload")));
    expect(raw.headers?.[":status"]).toBe(200);
    expect(hasEndStream(raw.headersFlags)).toBe(false);
    expect(raw.data.length).toBe(0);
    expect(raw.trailers).toBeUndefined();
    expect(raw.rstCode).toBe(85);
    expect(up.calls["Unary"]).toBe(1);

    const r = await unary(client(px), Buffer.from("payload"));
    expect(r.err?.code).toBe(grpc.status.INTERNAL);
    expect(r.err?.details).toBe("Received RST_STREAM with code 85");
    expect(r.res).toBeUndefined();
  });

  it("after_messages N on a server stream delivers exactly N whole messages and then RST_STREAM with the code", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "rst", action: { kind: "reset", code: "FLOW_CONTROL_ERROR", at: "after_messages", messages: 2 } });

    const raw = await rawServerStream(px, "5,64");
    const f = framesOf(raw.data);
    expect(f.frames).toHaveLength(2);
    expect(f.rest.length).toBe(0);
    expect(f.frames[1]!.equals(messageOf(2, 64))).toBe(true);
    expect(raw.trailers).toBeUndefined();
    expect(raw.rstCode).toBe(3);

    const r = await serverStream(client(px), "5,64");
    expect(r.messages).toHaveLength(2);
    expect(r.status.code).toBe(grpc.status.INTERNAL);
    expect(r.status.details).toBe("Received RST_STREAM with code 3");
  });

  it("after_messages 0 sends the response headers and then RST_STREAM, with no message", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "rst", action: { kind: "reset", code: "INTERNAL_ERROR", at: "after_messages", messages: 0 } });

    const raw = await rawServerStream(px, "3,10");
    expect(raw.headers?.[":status"]).toBe(200);
    expect(raw.data.length).toBe(0);
    expect(raw.trailers).toBeUndefined();
    expect(raw.rstCode).toBe(http2.constants.NGHTTP2_INTERNAL_ERROR);
  });

  it("mid_message N delivers N whole messages and part of the next one, then RST_STREAM with the code", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "rst", action: { kind: "reset", code: 85, at: "mid_message", messages: 1 } });

    const raw = await rawServerStream(px, "4,200");
    const f = framesOf(raw.data);
    expect(f.frames).toHaveLength(1);
    expect(f.frames[0]!.equals(messageOf(1, 200))).toBe(true);
    // part of message 2: its prefix may be there, its payload is not complete
    expect(f.rest.length).toBeGreaterThan(0);
    expect(f.rest.length).toBeLessThan(205);
    if (f.rest.length >= 5) expect(f.rest.readUInt32BE(1)).toBe(200);
    expect(raw.trailers).toBeUndefined();
    expect(raw.rstCode).toBe(85);

    const r = await serverStream(client(px), "4,200");
    expect(r.messages).toHaveLength(1);
    expect(r.status.code).toBe(grpc.status.INTERNAL);
  });

  it("resets only the matched stream: a concurrent call on the same connection gets its reply and status", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    const conns = connections(px);
    px.faults.add({ id: "rst", match: { metadata: [{ name: "x-fault", present: true }] }, action: { kind: "reset", code: "CANCEL", at: "after_messages", messages: 1 } });
    const s = session(px);

    const [hit, miss] = await Promise.all([rawServerStream(px, "3,10", { "x-fault": "1" }, s), rawServerStream(px, "3,10", {}, s)]);
    expect(hit.rstCode).toBe(http2.constants.NGHTTP2_CANCEL);
    expect(framesOf(hit.data).frames).toHaveLength(1);
    expect(miss.trailers?.["grpc-status"]).toBe("0");
    expect(framesOf(miss.data).frames).toHaveLength(3);
    expect(s.destroyed).toBe(false);
    expect(conns()).toBe(1);
  });
});
