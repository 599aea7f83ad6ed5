// issue 10 items 10 and 11, "one client's mistake must never cost another client's call":
// a raw-frame client sends a wrong content-length, or more streams than dojang advertises, on
// a connection that carries another call in flight, while a grpc-js bystander runs its calls
// through the same dojang to the same upstream.
import { describe, expect, it } from "vitest";
import { useFixtures, waitFor } from "../helpers/fixtures.js";
import { connectRawH2, grpcRequestFields } from "../helpers/raw-h2-client.js";
import { FRAME, FLAG_END_STREAM } from "../helpers/h2-frames.js";
import { BYSTANDER_PATH, echoOr, runBystander } from "../helpers/bystander.js";
import { frame } from "../helpers/peers.js";

const { proxyFor, rawUpstream, client, track } = useFixtures();
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('item 11: "a request with a wrong content-length ... answer that stream alone"', () => {
  it("resets only the stream whose DATA runs past its content-length; the call in flight beside it completes, the connection survives, and all 200 bystander calls succeed", async () => {
    const up = await rawUpstream(echoOr());
    const px = await proxyFor(up.address, { admin: false });
    const bystander = runBystander(client(px.address));
    const raw = track(await connectRawH2(px.address), (c) => c.close());
    // Stream 1: a call in flight (headers and half its request).
    raw.headers(1, grpcRequestFields(BYSTANDER_PATH));
    const msg = frame(Buffer.from("in flight"));
    raw.data(1, msg.subarray(0, 6));
    await waitFor("the call in flight to reach the upstream", () => up.seen.some((s) => s.body.length > 0));
    // Stream 3: content-length 10, then 20 bytes of DATA in the same write as its HEADERS.
    raw.headers(3, grpcRequestFields("/bad.Length/Call", [["content-length", "10"]]));
    raw.data(3, Buffer.alloc(20), true);
    await waitFor("the bad stream's end", () => raw.ended(3), 3000);
    expect(raw.on(3).find((f) => f.type === FRAME.RST_STREAM)?.errorCode).toBe(1); // PROTOCOL_ERROR, that stream
    await sleep(100);
    expect(raw.goaway()).toBeUndefined();
    expect(raw.closed).toBe(false);
    // The call in flight finishes normally on the same connection.
    raw.data(1, msg.subarray(6), true);
    await waitFor("the call in flight to complete", () => raw.ended(1), 3000);
    expect(raw.on(1).filter((f) => f.type === FRAME.DATA).reduce((n, f) => n + f.length, 0)).toBe(msg.length);
    expect(raw.on(1).some((f) => f.type === FRAME.HEADERS && (f.flags & FLAG_END_STREAM) !== 0)).toBe(true);
    await waitFor("the bad call's access record", () => px.calls.some((c) => c.path === "/bad.Length/Call"));
    expect(px.calls.find((c) => c.path === "/bad.Length/Call")).toMatchObject({ grpc_code: 13, decided_by: "bad_request" });
    const b = await bystander;
    expect(b.failures).toEqual([]);
    expect(b.ok).toBe(200);
  });
});

describe('item 10: "one stream over SETTINGS_MAX_CONCURRENT_STREAMS closes the whole connection ... refuse only what is over the limit"', () => {
  // What node:http2 (nghttp2) does, probed on Node 24: a stream over the limit the client has
  // not yet acknowledged is refused alone (RST_STREAM REFUSED_STREAM); once the client has
  // ACKed the SETTINGS, nghttp2 treats it as a connection error (GOAWAY PROTOCOL_ERROR "request
  // HEADERS: max concurrent streams exceeded"), a choice its author keeps on purpose (nghttp2
  // issue 687), although RFC 9113 §5.1.2 asks for a stream error. node enforces exactly the
  // limit it advertises and has no option to enforce a higher one, so dojang cannot advertise N
  // and refuse only the N+1st. Not fixed; see the README, "Bad requests and abusive clients".
  const LIMIT = 10;
  const openStreams = async (holdAck: boolean) => {
    const up = await rawUpstream(echoOr());
    const px = await proxyFor(up.address, { admin: false, listener: { maxConcurrentStreams: LIMIT } });
    const raw = track(await connectRawH2(px.address, { holdSettingsAck: holdAck }), (c) => c.close());
    for (let i = 0; i <= LIMIT; i++) raw.headers(1 + 2 * i, grpcRequestFields(BYSTANDER_PATH));
    await sleep(200);
    return raw;
  };

  it("refuses only the extra stream (REFUSED_STREAM) while the client has not acknowledged the limit", async () => {
    const raw = await openStreams(true);
    expect(raw.on(1 + 2 * LIMIT).map((f) => [f.type, f.errorCode])).toEqual([[FRAME.RST_STREAM, 7]]);
    expect(raw.goaway()).toBeUndefined();
    raw.ackSettings();
    for (let i = 0; i < LIMIT; i++) raw.data(1 + 2 * i, frame(Buffer.from(`c${i}`)), true);
    await waitFor("the ten accepted calls", () => Array.from({ length: LIMIT }, (_, i) => raw.ended(1 + 2 * i)).every(Boolean), 3000);
    expect(raw.goaway()).toBeUndefined();
  });

  it("node ends the whole connection (GOAWAY PROTOCOL_ERROR) for a stream over an acknowledged limit: known limit, not fixed", async () => {
    const raw = await openStreams(false);
    const g = raw.goaway();
    expect(g?.errorCode).toBe(1);
    expect(g?.payload?.subarray(8).toString()).toBe("request HEADERS: max concurrent streams exceeded");
  });
});
