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
  // nghttp2 ends the whole connection for a stream over a limit the client has acknowledged
  // (GOAWAY PROTOCOL_ERROR, nghttp2 issue 687) and node advertises exactly what nghttp2
  // enforces; so dojang gives nghttp2 room (advertisedStreams) and refuses the streams above
  // its own limit itself, with REFUSED_STREAM, before or after the client's SETTINGS ACK.
  const LIMIT = 10;
  const openStreams = async (holdAck: boolean, extra: number) => {
    const up = await rawUpstream(echoOr());
    const px = await proxyFor(up.address, { admin: false, listener: { maxConcurrentStreams: LIMIT } });
    const bystander = runBystander(client(px.address));
    const raw = track(await connectRawH2(px.address, { holdSettingsAck: holdAck }), (c) => c.close());
    for (let i = 0; i < LIMIT + extra; i++) raw.headers(1 + 2 * i, grpcRequestFields(BYSTANDER_PATH));
    await sleep(200);
    return { raw, px, bystander };
  };

  it.each([
    ["before the client acknowledged the limit", true],
    ["after the client acknowledged it", false],
  ])("refuses only the streams over the limit (REFUSED_STREAM) %s; the accepted calls complete on the same connection and the bystander's 200 calls succeed", async (_when, holdAck) => {
    const { raw, px, bystander } = await openStreams(holdAck, 3);
    for (let i = LIMIT; i < LIMIT + 3; i++) expect(raw.on(1 + 2 * i).map((f) => [f.type, f.errorCode])).toEqual([[FRAME.RST_STREAM, 7]]);
    expect(raw.goaway()).toBeUndefined();
    if (holdAck) raw.ackSettings();
    for (let i = 0; i < LIMIT; i++) raw.data(1 + 2 * i, frame(Buffer.from(`c${i}`)), true);
    await waitFor("the ten accepted calls", () => Array.from({ length: LIMIT }, (_, i) => raw.ended(1 + 2 * i)).every(Boolean), 3000);
    for (let i = 0; i < LIMIT; i++) expect(raw.on(1 + 2 * i).some((f) => f.type === FRAME.HEADERS && (f.flags & FLAG_END_STREAM) !== 0)).toBe(true);
    expect(raw.goaway()).toBeUndefined();
    expect(raw.closed).toBe(false);
    // a slot freed by a finished call is usable again on the same connection
    raw.headers(1 + 2 * (LIMIT + 3), grpcRequestFields(BYSTANDER_PATH));
    raw.data(1 + 2 * (LIMIT + 3), frame(Buffer.from("again")), true);
    await waitFor("a call in a freed slot", () => raw.ended(1 + 2 * (LIMIT + 3)), 3000);
    expect(raw.on(1 + 2 * (LIMIT + 3)).some((f) => f.type === FRAME.RST_STREAM)).toBe(false);
    const b = await bystander;
    expect(b.failures).toEqual([]);
    expect(b.ok).toBe(200);
    expect(px.calls.filter((c) => c.path === BYSTANDER_PATH).length).toBeGreaterThanOrEqual(200 + LIMIT);
  });

  it("advertises room above the limit, so that only a client ignoring even that loses its own connection", async () => {
    const { raw, bystander } = await openStreams(false, 0);
    expect(raw.peerSettings?.get(3)).toBe(110); // SETTINGS_MAX_CONCURRENT_STREAMS: 10 + max(10, 100)
    // awaited before the fixtures close its client (else its calls after the close reject unhandled)
    expect((await bystander).failures).toEqual([]);
  });
});
