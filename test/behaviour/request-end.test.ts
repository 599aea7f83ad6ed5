// When dojang ends the upstream request (issue 13): at the client's 'end', in the loop turn it
// arrives, so the request's HEADERS, DATA and END_STREAM leave together. A client's RST_STREAM
// also ends node's readable side, but node marks the stream aborted first, so a reset that
// arrives with the request's frames stays a cancel: the upstream never sees END_STREAM for it
// (spec §10.2 P1). The frames come in one TCP write, as a client that sends and cancels at once
// would send them.
import http2 from "node:http2";
import { describe, expect, it } from "vitest";
import { useFixtures, waitFor } from "../helpers/fixtures.js";
import { FLAG_END_STREAM, FRAME, describeFrames, startFrameRecorder, type FrameRecorder } from "../helpers/frame-recorder.js";
import { FLAG_END_HEADERS, encodeFrame, encodeHeaderBlock } from "../helpers/h2-frames.js";
import { connectRawH2, grpcRequestFields } from "../helpers/raw-h2-client.js";
import { frame, rawCall, statusOf } from "../helpers/peers.js";

const { proxyFor, track } = useFixtures();

async function recorder(): Promise<FrameRecorder> {
  return track(await startFrameRecorder(), (r) => r.close());
}

/** A dojang whose upstream session is already up (one call that the silent recorder lets time out). */
async function warmProxy(): Promise<{ up: FrameRecorder; address: string }> {
  const up = await recorder();
  const px = await proxyFor(up.address);
  const r = await rawCall(px.address, { "grpc-timeout": "100m" }, frame(Buffer.from("warm")));
  expect(statusOf(r)).toBe("4");
  return { up, address: px.address };
}

const later = (up: FrameRecorder) => up.frames.filter((f) => f.streamId > 1);

describe("the upstream request's end", () => {
  it("sends a one-message request upstream as HEADERS then DATA(END_STREAM), the end riding on the data", async () => {
    const { up, address } = await warmProxy();
    const raw = track(await connectRawH2(address), (c) => c.close());
    raw.write(
      Buffer.concat([
        encodeFrame(FRAME.HEADERS, FLAG_END_HEADERS, 1, encodeHeaderBlock(grpcRequestFields("/test.Echo/Unary"))),
        encodeFrame(FRAME.DATA, FLAG_END_STREAM, 1, frame(Buffer.from("q"))),
      ]),
    );
    await waitFor("the request upstream", () => later(up).some((f) => f.type === FRAME.DATA));
    expect(describeFrames(later(up))).toBe("HEADERS DATA(END_STREAM)");
  });

  for (const [name, code] of [
    ["CANCEL", http2.constants.NGHTTP2_CANCEL],
    ["NO_ERROR", http2.constants.NGHTTP2_NO_ERROR],
  ] as const) {
    it(`never ends the upstream request of a client that sends HEADERS, DATA and RST_STREAM(${name}) in one write`, async () => {
      const { up, address } = await warmProxy();
      const raw = track(await connectRawH2(address), (c) => c.close());
      const rst = Buffer.alloc(4);
      rst.writeUInt32BE(code);
      // three streams, so one of them is not just luck of the timing
      const frames: Buffer[] = [];
      for (const id of [1, 3, 5]) {
        frames.push(
          encodeFrame(FRAME.HEADERS, FLAG_END_HEADERS, id, encodeHeaderBlock(grpcRequestFields("/test.Echo/ClientStream"))),
          encodeFrame(FRAME.DATA, 0, id, frame(Buffer.from("first"))),
          encodeFrame(FRAME.RST_STREAM, 0, id, rst),
        );
      }
      raw.write(Buffer.concat(frames));
      // a later call on the same connection: once it is upstream, the reset ones have been handled
      raw.write(
        Buffer.concat([
          encodeFrame(FRAME.HEADERS, FLAG_END_HEADERS, 7, encodeHeaderBlock(grpcRequestFields("/test.Echo/Unary"))),
          encodeFrame(FRAME.DATA, FLAG_END_STREAM, 7, frame(Buffer.from("q"))),
        ]),
      );
      await waitFor("the later call upstream", () => later(up).some((f) => f.type === FRAME.DATA && (f.flags & FLAG_END_STREAM) !== 0 && f.length === frame(Buffer.from("q")).length));
      const reset = later(up).filter((f) => f.streamId !== later(up).find((g) => g.length === frame(Buffer.from("q")).length && g.type === FRAME.DATA)!.streamId);
      for (const f of reset) expect((f.type === FRAME.DATA || f.type === FRAME.HEADERS) && (f.flags & FLAG_END_STREAM) !== 0, describeFrames([f])).toBe(false);
    });
  }
});
