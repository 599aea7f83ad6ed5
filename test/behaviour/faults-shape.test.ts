// Fault injection, end to end: `shape` faults, each breaking the gRPC wire shape of a real
// upstream's response in one way. A raw node:http2 client shows the exact frames; a grpc-js client
// shows what an application makes of them. The upstream is a real grpc-js server every time.
import { afterEach, describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import http2 from "node:http2";
import { echoClient, frame, rawCall, startGrpcServer, startProxy, unary, type EchoClient, type RawResult } from "../helpers/peers.js";
import { Cleanup } from "../helpers/scripted-upstream.js";
import type { DojangHandle, FaultMatchInput, FaultRuleInput, ShapeInput } from "../../src/index.js";

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

const REQUEST = Buffer.from("shape me");

interface Setup {
  px: DojangHandle;
  client: EchoClient;
  upstreamCalls: () => number;
  connections: () => number;
}

/** grpc-js Echo upstream (Unary echoes, ServerStream "n" sends n messages "m1".."mn"), dojang with one shape rule. */
async function setup(shape: { readonly shape: ShapeInput["shape"]; readonly contentType?: string }, match: FaultMatchInput = {}): Promise<Setup> {
  let n = 0;
  const srv = cleanup.add(
    await startGrpcServer({
      Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        n++;
        cb(null, call.request);
      },
      ServerStream: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
        n++;
        const k = Number(call.request.toString());
        for (let i = 1; i <= k; i++) call.write(Buffer.from(`m${i}`));
        call.end();
      },
      // answers the first message and ends, without waiting for the client's half-close
      Bidi: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
        n++;
        call.once("data", (d: Buffer) => {
          call.write(d);
          call.end();
        });
      },
    }),
    (s) => s.close(),
  );
  const px = cleanup.add(await startProxy(srv.address), (p) => p.close(0));
  let conns = 0;
  px.instance.listeners[0]!.server.on("connection", () => conns++);
  px.faults.add({ id: "shape", match, action: { kind: "shape", ...shape } } as FaultRuleInput);
  const client = cleanup.add(echoClient(px.address), (c) => c.close());
  return { px, client, upstreamCalls: () => n, connections: () => conns };
}

function raw(px: DojangHandle, opts: { endStream?: boolean; session?: http2.ClientHttp2Session } = {}): Promise<RawResult> {
  return rawCall(px.address, {}, frame(REQUEST), opts);
}

function md(entries: Record<string, string>): grpc.Metadata {
  const m = new grpc.Metadata();
  for (const [k, v] of Object.entries(entries)) m.set(k, v);
  return m;
}

async function lastCall(px: DojangHandle): Promise<DojangHandle["calls"][number] | undefined> {
  const end = Date.now() + 2000;
  while (px.calls.length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 5));
  return px.calls.at(-1);
}

describe("shape", () => {
  it("no_trailers ends the stream after the message with no trailers, and grpc-js reports 13 INTERNAL", async () => {
    const { px, client } = await setup({ shape: "no_trailers" });

    const r = await raw(px);
    expect(r.headers?.[":status"]).toBe(200);
    expect(r.data.equals(frame(REQUEST))).toBe(true);
    expect(r.trailers).toBeUndefined();
    expect(r.headers?.["grpc-status"]).toBeUndefined();
    expect(r.rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);

    const g = await unary(client, REQUEST);
    expect(g.err?.code).toBe(grpc.status.INTERNAL);
    expect(g.err?.details).toBe("Received RST_STREAM with code 0 (Call ended without gRPC status)");
    expect(await lastCall(px)).toMatchObject({ grpc_code: 13, decided_by: "fault", faults: ["shape"] });
  });

  it("trailers_without_status sends trailers without grpc-status or grpc-message, and grpc-js reports 2 UNKNOWN", async () => {
    const { px, client } = await setup({ shape: "trailers_without_status" });

    const r = await raw(px);
    expect(r.data.equals(frame(REQUEST))).toBe(true);
    expect(r.trailers).toBeDefined();
    expect(r.trailers?.["grpc-status"]).toBeUndefined();
    expect(r.trailers?.["grpc-message"]).toBeUndefined();

    const g = await unary(client, REQUEST);
    expect(g.err?.code).toBe(grpc.status.UNKNOWN);
    expect(await lastCall(px)).toMatchObject({ grpc_code: 2, decided_by: "fault" });
  });

  it("wrong_content_type sends the given content-type, which grpc-js does not check: the call succeeds", async () => {
    const { px, client } = await setup({ shape: "wrong_content_type", contentType: "text/html; charset=utf-8" });

    const r = await raw(px);
    expect(r.headers?.["content-type"]).toBe("text/html; charset=utf-8");
    expect(r.data.equals(frame(REQUEST))).toBe(true);
    expect(r.trailers?.["grpc-status"]).toBe("0");

    const g = await unary(client, REQUEST);
    expect(g.err).toBeNull();
    expect(g.res?.equals(REQUEST)).toBe(true);
  });

  it("wrong_content_type without a contentType sends text/plain", async () => {
    const { px } = await setup({ shape: "wrong_content_type" });
    const r = await raw(px);
    expect(r.headers?.["content-type"]).toBe("text/plain");
  });

  it("missing_content_type sends response headers without content-type, which grpc-js accepts", async () => {
    const { px, client } = await setup({ shape: "missing_content_type" });

    const r = await raw(px);
    expect(r.headers?.[":status"]).toBe(200);
    expect(r.headers?.["content-type"]).toBeUndefined();
    expect(r.trailers?.["grpc-status"]).toBe("0");

    const g = await unary(client, REQUEST);
    expect(g.err).toBeNull();
    expect(g.res?.equals(REQUEST)).toBe(true);
  });

  it("compressed_flag sets the compressed flag on the first message though no compression was negotiated, and grpc-js fails the call", async () => {
    const { px, client } = await setup({ shape: "compressed_flag" });

    const r = await raw(px);
    expect([undefined, "identity"]).toContain(r.headers?.["grpc-encoding"]); // no compression was negotiated
    expect(r.data[0]).toBe(1);
    expect(r.data.subarray(1).equals(frame(REQUEST).subarray(1))).toBe(true); // only the flag changed

    const g = await unary(client, REQUEST);
    expect(g.err).not.toBeNull();
    expect(g.err?.code).not.toBe(grpc.status.OK);
    expect(g.res).toBeUndefined();
  });

  it("compressed_flag touches only the first message of a stream", async () => {
    const { px } = await setup({ shape: "compressed_flag" });
    const r = await rawCall(px.address, { ":path": "/test.Echo/ServerStream" }, frame(Buffer.from("3")));
    const want = Buffer.concat([frame(Buffer.from("m1"), 1), frame(Buffer.from("m2")), frame(Buffer.from("m3"))]);
    expect(r.data.equals(want)).toBe(true);
  });

  it("truncated_message declares more bytes than the message has, then ends with status 0, and grpc-js gets no message", async () => {
    const { px, client } = await setup({ shape: "truncated_message" });

    const r = await raw(px);
    expect(r.data.length).toBe(5 + REQUEST.length);
    expect(r.data.readUInt32BE(1)).toBe(REQUEST.length + 16);
    expect(r.data.subarray(5).equals(REQUEST)).toBe(true);
    expect(r.trailers?.["grpc-status"]).toBe("0");

    const g = await unary(client, REQUEST);
    expect(g.res).toBeUndefined();
    expect(g.err?.code).toBe(grpc.status.UNIMPLEMENTED); // grpc-js: OK status with no whole message
    expect(g.err?.details).toBe("No message received");
  });

  it("rst_after_trailers follows the trailers with RST_STREAM(NO_ERROR), and the client still gets the status", async () => {
    const { px, client } = await setup({ shape: "rst_after_trailers" });

    // a client that has not half-closed, so the RST_STREAM is the stream's real end
    const s = http2.connect(`http://${px.address}`);
    s.on("error", () => {});
    cleanup.add(s, (x) => x.destroy());
    const r = await new Promise<RawResult>((resolve) => {
      const req = s.request({ ":method": "POST", ":path": "/test.Echo/Bidi", "content-type": "application/grpc", te: "trailers" });
      const out: RawResult = { headers: undefined, headersFlags: undefined, trailers: undefined, data: Buffer.alloc(0), rstCode: undefined };
      const chunks: Buffer[] = [];
      req.on("response", (h, f) => ((out.headers = h), (out.headersFlags = f)));
      req.on("trailers", (t) => (out.trailers = t));
      req.on("data", (d: Buffer) => chunks.push(d));
      req.on("error", () => {});
      req.on("close", () => resolve({ ...out, data: Buffer.concat(chunks), rstCode: req.rstCode }));
      req.write(frame(REQUEST));
    });
    expect(r.data.equals(frame(REQUEST))).toBe(true);
    expect(r.trailers?.["grpc-status"]).toBe("0");
    expect(r.rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);

    const g = await unary(client, REQUEST);
    expect(g.err).toBeNull();
    expect(g.res?.equals(REQUEST)).toBe(true);
  });

  it("breaks only the matched call: the same client's other calls on the same connection are well-formed", async () => {
    const { px, client, connections } = await setup({ shape: "no_trailers" }, { metadata: [{ name: "x-fault", equals: "shape" }] });

    const [hit, miss, other] = await Promise.all([
      unary(client, REQUEST, md({ "x-fault": "shape" })),
      unary(client, REQUEST),
      new Promise<{ n: number; code: number }>((resolve) => {
        let n = 0;
        const call = client.ServerStream(Buffer.from("2"), new grpc.Metadata(), {});
        call.on("data", () => n++);
        call.on("error", () => {});
        call.on("status", (st: grpc.StatusObject) => resolve({ n, code: st.code }));
      }),
    ]);
    expect(hit.err?.code).toBe(grpc.status.INTERNAL);
    expect(miss.err).toBeNull();
    expect(miss.res?.equals(REQUEST)).toBe(true);
    expect(other).toEqual({ n: 2, code: grpc.status.OK });
    expect(connections()).toBe(1);
  });
});
