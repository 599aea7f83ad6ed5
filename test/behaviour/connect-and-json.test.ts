// Contract: a listener may take JSON transcoding (jsonTranscoding) and Connect (connect: true)
// together. A JSON/HTTP request that a google.api.http rule matches is transcoded; a Connect call
// (which is also an application/json or application/proto POST) that no rule matches goes on to
// Connect instead of the transcoder's 404; a request neither takes still gets the 404 that
// unknownPaths: notFound promises. Real grpc-js upstream (echoes the request message), raw
// HTTP/1.1 and HTTP/2 clients.
import http2 from "node:http2";
import { create, toBinary, fromBinary } from "@bufbuild/protobuf";
import { Agent, request } from "undici";
import { afterAll, describe, expect, it } from "vitest";
import { useFixtures } from "../helpers/fixtures.js";
import { SHOP_SERVICE, shopDescriptorSet, shopRegistry, startShopGrpcJs } from "../helpers/transcode.js";

const fx = useFixtures();
const agent = new Agent({ connections: 2 });
afterAll(() => agent.close());

async function setup(): Promise<{ h1: string; h2: string; seen: { path: string }[] }> {
  const up = fx.track(await startShopGrpcJs(), (u) => u.close());
  const px = await fx.proxyFor(up.address, { listener: { http1Address: "127.0.0.1:0", connect: true, jsonTranscoding: { descriptorSet: shopDescriptorSet() } } });
  return { h1: px.instance.http1Address(), h2: px.address, seen: up.seen };
}

function h2Post(addr: string, path: string, headers: Record<string, string>, body: Uint8Array): Promise<{ status: number; ct: unknown; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const c = http2.connect(`http://${addr}`);
    c.on("error", reject);
    const s = c.request({ ":method": "POST", ":path": path, ...headers });
    s.end(Buffer.from(body));
    let head: Record<string, unknown> = {};
    const chunks: Buffer[] = [];
    s.on("response", (h) => (head = h));
    s.on("data", (d: Buffer) => chunks.push(d));
    s.on("error", reject);
    s.on("close", () => {
      c.close();
      resolve({ status: Number(head[":status"] ?? 0), ct: head["content-type"], body: Buffer.concat(chunks) });
    });
  });
}

describe("a listener with jsonTranscoding and connect", () => {
  it("transcodes what a rule matches, hands a Connect call no rule matches to Connect, and 404s the rest", async () => {
    const { h1, h2, seen } = await setup();
    const Item = shopRegistry().getMessage("dojang.test.shop.v1.Item")!;
    // 1. a google.api.http rule: transcoded (HTTP/1.1)
    const t = await request(`http://${h1}/v1/shelves/s1/items/i1`, { dispatcher: agent });
    expect(t.statusCode).toBe(200);
    expect(JSON.parse(await t.body.text())).toMatchObject({ shelf: "shelves/s1", id: "i1" });
    expect(seen.at(-1)!.path).toBe(`/${SHOP_SERVICE}/GetItem`);
    // 2. a Connect unary call (binary) to the method's own path: no rule matches it, Connect takes it
    const msg = toBinary(Item, create(Item, { id: "c1", title: "Connect" } as never));
    for (const [name, call] of [
      ["HTTP/2", () => h2Post(h2, `/${SHOP_SERVICE}/UpdateItem`, { "content-type": "application/proto", "connect-protocol-version": "1" }, msg)],
      [
        "HTTP/1.1",
        async () => {
          const r = await request(`http://${h1}/${SHOP_SERVICE}/UpdateItem`, { method: "POST", dispatcher: agent, headers: { "content-type": "application/proto", "connect-protocol-version": "1" }, body: Buffer.from(msg) });
          return { status: r.statusCode, ct: r.headers["content-type"], body: Buffer.from(await r.body.arrayBuffer()) };
        },
      ],
    ] as const) {
      const r = await call();
      expect(r.status, name).toBe(200);
      expect(r.ct, name).toBe("application/proto");
      expect(fromBinary(Item, r.body), name).toMatchObject({ id: "c1", title: "Connect" });
      expect(seen.at(-1)!.path, name).toBe(`/${SHOP_SERVICE}/UpdateItem`);
    }
    // 3. neither: a plain GET no rule matches gets unknownPaths' 404 with a google.rpc.Status body
    const calls = seen.length;
    const n = await request(`http://${h1}/v1/nothing/here`, { dispatcher: agent });
    expect(n.statusCode).toBe(404);
    expect(JSON.parse(await n.body.text())).toMatchObject({ code: 5 });
    expect(seen.length).toBe(calls);
  });
});
