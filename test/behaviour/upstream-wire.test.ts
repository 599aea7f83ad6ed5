// What the upstream sees on the wire, frame by frame (a recorder that speaks just enough
// HTTP/2): a request whose last DATA frame carried END_STREAM reaches the upstream the same way,
// and a cancel is a bare RST_STREAM(CANCEL) that never claims the request was complete
// (spec §10.2 P1: a cancelled client-streaming call must not look finished to the upstream).
import * as grpc from "@grpc/grpc-js";
import http2 from "node:http2";
import { describe, expect, it } from "vitest";
import { useFixtures, waitFor } from "../helpers/fixtures.js";
import { FRAME, describeFrames, startFrameRecorder, type FrameRecorder } from "../helpers/frame-recorder.js";
import { frame, rawCall, statusOf } from "../helpers/peers.js";

const { proxyFor, track } = useFixtures();

async function recorder(): Promise<FrameRecorder> {
  return track(await startFrameRecorder(), (r) => r.close());
}

const onStream = (r: FrameRecorder, id: number) => r.frames.filter((f) => f.streamId === id);

/** A client-streaming request left open (waitForTrailers, so that close(code) is a bare RST). */
function openRequest(address: string, headers: http2.OutgoingHttpHeaders): { req: http2.ClientHttp2Stream; closed: Promise<{ status: string | undefined }> } {
  const session = http2.connect(`http://${address}`);
  session.on("error", () => {});
  const req = session.request(
    { ":method": "POST", ":path": "/test.Echo/ClientStream", "content-type": "application/grpc", te: "trailers", ...headers },
    { endStream: false, waitForTrailers: true },
  );
  req.on("error", () => {});
  req.resume();
  let status: string | undefined;
  req.on("response", (h) => (status ??= h["grpc-status"] as string | undefined));
  req.on("trailers", (t) => (status = t["grpc-status"] as string | undefined));
  const closed = new Promise<{ status: string | undefined }>((resolve) =>
    req.on("close", () => {
      session.close();
      resolve({ status });
    }),
  );
  return { req, closed };
}
const firstStream = (r: FrameRecorder) => onStream(r, r.frames[0]?.streamId ?? -1);

describe("the request's end and a cancel, as the upstream sees them", () => {
  it("forwards a one-message request as HEADERS and one DATA frame with END_STREAM, and cancels it at the deadline with RST_STREAM(CANCEL)", async () => {
    const up = await recorder();
    const px = await proxyFor(up.address);
    const r = await rawCall(px.address, { "grpc-timeout": "300m" }, frame(Buffer.from("q")));
    expect(statusOf(r)).toBe(String(grpc.status.DEADLINE_EXCEEDED));
    await waitFor("the upstream to see the reset", () => firstStream(up).some((f) => f.type === FRAME.RST_STREAM));
    expect(describeFrames(firstStream(up))).toBe("HEADERS DATA(END_STREAM) RST_STREAM(8)");
    expect(firstStream(up)[1]!.length).toBe(frame(Buffer.from("q")).length);
  });

  it("resets an open client stream with RST_STREAM(CANCEL) alone when the client resets it: no END_STREAM reaches the upstream", async () => {
    const up = await recorder();
    const px = await proxyFor(up.address);
    const { req, closed } = openRequest(px.address, {});
    req.write(frame(Buffer.from("first")));
    await waitFor("the message to reach the upstream", () => firstStream(up).some((f) => f.type === FRAME.DATA));
    // waitForTrailers: node's close(code) is then a bare RST_STREAM (spec §10.2 P1). grpc-js's
    // cancel() is not: on Node 24 it sends DATA(END_STREAM) first, which dojang forwards as the
    // client sent it.
    req.close(http2.constants.NGHTTP2_CANCEL);
    await closed;
    await waitFor("the upstream to see the reset", () => firstStream(up).some((f) => f.type === FRAME.RST_STREAM));
    expect(describeFrames(firstStream(up))).toBe("HEADERS DATA RST_STREAM(8)");
  });

  it("cancels an open client stream at its deadline with RST_STREAM(CANCEL) alone: the upstream never sees the request as complete", async () => {
    const up = await recorder();
    const px = await proxyFor(up.address);
    const { req, closed } = openRequest(px.address, { "grpc-timeout": "300m" });
    req.write(frame(Buffer.from("first")));
    const r = await closed;
    expect(r.status).toBe(String(grpc.status.DEADLINE_EXCEEDED));
    await waitFor("the upstream to see the reset", () => firstStream(up).some((f) => f.type === FRAME.RST_STREAM));
    expect(describeFrames(firstStream(up))).toBe("HEADERS DATA RST_STREAM(8)");
  });

  it("sends an injected upstream_reset with exactly its code and no END_STREAM before it", async () => {
    const up = await recorder();
    const px = await proxyFor(up.address);
    px.faults.add({ id: "cut-up", action: { kind: "upstream_reset", afterRequestMessages: 1, code: "ENHANCE_YOUR_CALM" } });
    const { req, closed } = openRequest(px.address, {});
    // Once the request's HEADERS are out: a reset submitted before them never reaches the wire.
    await waitFor("the request to reach the upstream", () => firstStream(up).some((f) => f.type === FRAME.HEADERS));
    req.write(frame(Buffer.from("first")));
    const r = await closed;
    expect(r.status).toBe(String(grpc.status.RESOURCE_EXHAUSTED));
    await waitFor("the upstream to see the reset", () => firstStream(up).some((f) => f.type === FRAME.RST_STREAM));
    expect(describeFrames(firstStream(up))).toBe("HEADERS DATA RST_STREAM(11)");
  });
});
