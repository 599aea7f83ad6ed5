// issue 10 item 12, first half: "A request that stops halfway (a 5-byte prefix declaring 100
// bytes, 10 bytes, then END_STREAM, no grpc-timeout) is never answered. A truncated message at
// END_STREAM is a client error dojang can decide at once (grpc-go answers 13 INTERNAL)."
// A raw-frame client sends the truncated request while a grpc-js bystander runs its calls
// through the same dojang to the same upstream.
import { describe, expect, it } from "vitest";
import { useFixtures, waitFor } from "../helpers/fixtures.js";
import { connectRawH2, field, grpcRequestFields } from "../helpers/raw-h2-client.js";
import { FRAME } from "../helpers/h2-frames.js";
import { BYSTANDER_PATH, echoOr, runBystander } from "../helpers/bystander.js";

const { proxyFor, rawUpstream, client, track } = useFixtures();

/** A 5-byte prefix declaring `declared` bytes, then only `body` bytes of it. */
function cutShort(declared: number, body: number): Buffer {
  const b = Buffer.alloc(5 + body, 0x61);
  b[0] = 0;
  b.writeUInt32BE(declared, 1);
  return b;
}

describe('"a truncated message at END_STREAM is a client error dojang decides at once: 13, as grpc-go answers"', () => {
  it("answers a request that ends 10 bytes into a declared 100-byte message with 13 \"unexpected EOF\" at once, cancels its upstream stream, and costs the bystander nothing", async () => {
    const up = await rawUpstream(echoOr()); // the cut call reaches the upstream, which waits for the rest
    const px = await proxyFor(up.address, { admin: false });
    const bystander = runBystander(client(px.address));

    const raw = track(await connectRawH2(px.address), (c) => c.close());
    const t0 = performance.now();
    raw.headers(1, grpcRequestFields("/test.Echo/Cut"));
    raw.data(1, cutShort(100, 10), true);
    await waitFor("the cut call's answer", () => raw.ended(1), 3000);
    const took = performance.now() - t0;

    const [head] = raw.headerBlocks(1);
    expect(field(head, ":status")).toBe("200");
    expect(raw.on(1).some((f) => f.type === FRAME.RST_STREAM && f.errorCode !== 0)).toBe(false);
    const rec = px.calls.find((c) => c.path === "/test.Echo/Cut");
    expect(rec).toMatchObject({ grpc_code: 13, grpc_message: "unexpected EOF", decided_by: "bad_request", req_messages: 1, req_bytes: 15 });
    expect(took).toBeLessThan(2000);
    // The upstream saw the first 15 bytes, then CANCEL: never END_STREAM after half a message.
    const cut = up.seen.find((s) => s.headers[":path"] === "/test.Echo/Cut")!;
    await waitFor("the upstream stream to close", () => cut.rstCode !== undefined);
    expect(cut.rstCode).toBe(8);
    expect(raw.goaway()).toBeUndefined();

    const b = await bystander;
    expect(b.failures).toEqual([]);
    expect(b.ok).toBe(200);
    expect(up.seen.filter((s) => s.headers[":path"] === BYSTANDER_PATH)).toHaveLength(200);
  });

  it("still forwards a request whose last message ends exactly at END_STREAM", async () => {
    const up = await rawUpstream(echoOr());
    const px = await proxyFor(up.address, { admin: false });
    const raw = track(await connectRawH2(px.address), (c) => c.close());
    raw.headers(1, grpcRequestFields(BYSTANDER_PATH));
    raw.data(1, cutShort(10, 10), true);
    await waitFor("the echo", () => raw.ended(1), 3000);
    expect(px.calls.find((c) => c.path === BYSTANDER_PATH)).toMatchObject({ grpc_code: 0, decided_by: "upstream", req_messages: 1, req_bytes: 15 });
  });
});
