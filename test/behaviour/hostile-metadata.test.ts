// issue 10 item 9: "A -bin metadata value that is not valid base64 is forwarded to the
// upstream; a grpcio upstream then drops the HTTP/2 connection that dojang shares between
// clients ... Check -bin values at dojang (grpc-go's server answers 400 + grpc-status 13
// "malformed binary metadata"; do the same, for that call only) and anything else in request
// headers that an upstream would treat as a connection error."
// A raw-frame client sends the bad calls (node:http2's client refuses to) while a grpc-js
// bystander runs 200 calls through the same dojang to the same recording upstream.
import { describe, expect, it } from "vitest";
import { useFixtures, waitFor } from "../helpers/fixtures.js";
import { connectRawH2, field, grpcRequestFields, type RawH2Client } from "../helpers/raw-h2-client.js";
import { FRAME } from "../helpers/h2-frames.js";
import { BYSTANDER_PATH, echoOr, runBystander } from "../helpers/bystander.js";
import { frame } from "../helpers/peers.js";

const { proxyFor, rawUpstream, client, track } = useFixtures();

/** Sends one call on stream `id` with `extra` fields and a small message; waits for its end. */
async function badCall(raw: RawH2Client, id: number, path: string, extra: [string, string][]): Promise<void> {
  raw.headers(id, grpcRequestFields(path, extra));
  raw.data(id, frame(Buffer.from("hi")), true);
  await waitFor(`an answer on stream ${id}`, () => raw.ended(id), 3000);
}

describe('"a field an upstream would treat as a connection error is that call\'s error alone: 400 + 13, never forwarded"', () => {
  it("answers bad -bin base64, a name gRPC forbids, a value with trailing whitespace and a non-ASCII value with 400 + 13; the upstream never sees them and all 200 bystander calls succeed", async () => {
    const up = await rawUpstream(echoOr());
    const px = await proxyFor(up.address, { admin: false });
    const bystander = runBystander(client(px.address));
    const raw = track(await connectRawH2(px.address), (c) => c.close());

    const cases: [string, [string, string][], RegExp][] = [
      ["/bad.Meta/Bin", [["x-trace-bin", "!!!"]], /^malformed binary metadata in header "x-trace-bin": illegal base64 data at input byte 0$/],
      ["/bad.Meta/Folded", [["x-a-bin", "AAEC, AAED"]], /illegal base64 data at input byte 4/],
      ["/bad.Meta/Name", [["x!y", "1"]], /metadata name "x!y"/],
      ["/bad.Meta/Space", [["x-foo", "a "]], /value of "x-foo" has leading or trailing whitespace/],
      ["/bad.Meta/Latin1", [["x-foo", "caf\xe9"]], /value of "x-foo" has a byte outside printable ASCII/],
    ];
    let id = 1;
    for (const [path, extra] of cases) {
      await badCall(raw, id, path, extra);
      const [head] = raw.headerBlocks(id);
      expect(field(head, ":status"), path).toBe("400");
      expect(raw.on(id).filter((f) => f.type === FRAME.HEADERS)).toHaveLength(1); // Trailers-Only
      id += 2;
    }
    for (const [path, , message] of cases) {
      const rec = px.calls.find((c) => c.path === path);
      expect(rec, path).toMatchObject({ grpc_code: 13, decided_by: "bad_request", req_messages: 0 });
      expect(rec!.grpc_message).toMatch(message);
      expect(rec!.upstream ?? null).toBeNull();
    }
    // The same connection still works, and nothing bad reached the upstream.
    raw.headers(id, grpcRequestFields(BYSTANDER_PATH, [["x-good-bin", "Zm9vAGJhcg"]]));
    raw.data(id, frame(Buffer.from("ok")), true);
    await waitFor("the good call", () => raw.ended(id), 3000);
    expect(px.calls.find((c) => c.path === BYSTANDER_PATH && c.grpc_code === 0)).toBeDefined();
    expect(raw.goaway()).toBeUndefined();

    const b = await bystander;
    expect(b.failures).toEqual([]);
    expect(b.ok).toBe(200);
    expect(up.seen.filter((s) => String(s.headers[":path"]).startsWith("/bad.Meta/"))).toEqual([]);
    expect(up.seen.some((s) => s.raw.includes("x-good-bin"))).toBe(true);
  });

  it("node:http2 resets an upper-case name or a connection header with PROTOCOL_ERROR, that stream only (nghttp2, before dojang sees it)", async () => {
    const up = await rawUpstream(echoOr());
    const px = await proxyFor(up.address, { admin: false });
    const bystander = runBystander(client(px.address), 50);
    const raw = track(await connectRawH2(px.address), (c) => c.close());
    await badCall(raw, 1, "/bad.Meta/Upper", [["X-Foo", "a"]]);
    await badCall(raw, 3, "/bad.Meta/Connection", [["connection", "close"]]);
    for (const id of [1, 3]) expect(raw.on(id).map((f) => [f.type, f.errorCode])).toEqual([[FRAME.RST_STREAM, 1]]);
    expect(raw.goaway()).toBeUndefined();
    expect((await bystander).ok).toBe(50);
    expect(up.seen.filter((s) => String(s.headers[":path"]).startsWith("/bad.Meta/"))).toEqual([]);
  });

  it("node:http2 drops a field with NUL, CR, LF or DEL before dojang sees it (known limit: the call goes on without it); the bad bytes never reach the upstream", async () => {
    const up = await rawUpstream(echoOr());
    const px = await proxyFor(up.address, { admin: false });
    const raw = track(await connectRawH2(px.address), (c) => c.close());
    let id = 1;
    for (const v of ["a\0b", "a\rb", "a\nb", "a\x7fb"]) {
      raw.headers(id, grpcRequestFields(BYSTANDER_PATH, [["x-ctl", v]]));
      raw.data(id, frame(Buffer.from("hi")), true);
      await waitFor("the echo", () => raw.ended(id), 3000);
      id += 2;
    }
    expect(up.seen).toHaveLength(4);
    for (const s of up.seen) expect(s.raw).not.toContain("x-ctl");
    expect(raw.goaway()).toBeUndefined();
  });
});
