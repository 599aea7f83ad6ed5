// Contract (issue 21 part 2): dojang's JSON transcoding answers as grpc-gateway does for the same
// descriptor set and the same curl-shaped requests, and where it does not, the difference is the
// one docs/guides/json-transcoding.md lists. Both sit in front of the same real grpc-go upstream
// (test/engines/grpc-gateway, which is also the gateway: grpc-gateway's runtime, no generated
// code). dojang runs with the settings closest to grpc-gateway's defaults (emitDefaults,
// ignoreUnknownFields, streamFormat: ndjson).
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDojang, type DojangHandle } from "../../src/index.js";
import { shopDescriptorSet, startGoShop } from "../helpers/transcode.js";

const agent = new Agent({ connections: 4 });
let gateway = "";
let dojang = "";
let px: DojangHandle | undefined;

beforeAll(async () => {
  const upstream = await startGoShop("upstream");
  gateway = await startGoShop("gateway", ["-upstream", upstream]);
  px = await startDojang({
    logLevel: "silent",
    config: {
      listeners: [
        {
          name: "main",
          address: "127.0.0.1:0",
          http1Address: "127.0.0.1:0",
          jsonTranscoding: { descriptorSet: shopDescriptorSet(), emitDefaults: true, ignoreUnknownFields: true, streamFormat: "ndjson" },
          routes: [{ match: { prefix: "/" }, cluster: "go" }],
        },
      ],
      clusters: [{ name: "go", endpoints: [upstream] }],
    },
  });
  dojang = px.instance.http1Address();
}, 60_000);
afterAll(async () => {
  await px?.close(0);
  await agent.close();
});

interface Reply {
  status: number;
  contentType: string;
  text: string;
}

async function call(addr: string, method: string, path: string, body?: string): Promise<Reply> {
  const res = await request(`http://${addr}${path}`, {
    method: method as "GET",
    dispatcher: agent,
    ...(body === undefined ? {} : { body, headers: { "content-type": "application/json" } }),
  });
  return { status: res.statusCode, contentType: String(res.headers["content-type"]), text: await res.body.text() };
}

/** grpc-gateway prints unset message fields as null where proto3 JSON (and dojang) leaves them out. */
function dropNulls(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(dropNulls);
  if (v !== null && typeof v === "object") return Object.fromEntries(Object.entries(v).filter(([, x]) => x !== null).map(([k, x]) => [k, dropNulls(x)]));
  return v;
}

/** NDJSON lines; grpc-gateway wraps each message as {"result": message}. */
function lines(text: string, unwrap: boolean): unknown[] {
  return text
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .map((o) => dropNulls(unwrap && "result" in o ? o["result"] : o));
}

const KINDS = JSON.stringify({
  at: "2024-02-29T12:00:00.500Z",
  wait: "1.5s",
  meta: { a: [1, "x", null, true] },
  value: { k: 2 },
  big: "9223372036854775807",
  note: "hi",
  mask: "title,size.width",
  any: { "@type": "type.googleapis.com/dojang.test.shop.v1.File", path: "x/y" },
  blob: "AAEC",
  counts: { a: "5" },
  number: 4,
  ratio: 0.5,
  delta: -3,
  serial: "18446744073709551615",
});

/** Requests both answer alike: same HTTP status, same JSON (unset message fields aside). */
const SAME: readonly [method: string, path: string, body?: string][] = [
  ["GET", "/v1/shelves/s1/items/i%20one?title=Dune&price_cents=1999&color=RED&tags=a&tags=b&inStock=true&size.weightGrams=9007199254740993"],
  ["GET", "/v1/search?color=2&size.width=1.5"],
  ["GET", "/v1/search?nope=1&title=t"],
  ["POST", "/v1/shelves/s1/items?request_id=r-1", '{"title":"Emma","price_cents":"5"}'],
  ["POST", "/v1/shelves/s1/items", ""],
  ["PATCH", "/v1/items/from-path", '{"id":"from-body","title":"T"}'],
  ["PUT", "/v1/items/p", '{"title":"U","nope":1}'],
  ["POST", "/v1/items/x7:archive", "{}"],
  ["GET", "/v1/files/a/b/c.txt"],
  ["POST", "/v1/kinds", KINDS],
  ["POST", "/v1/kinds", '{"word":"w"}'],
  ["GET", "/v1/fail/0"],
  ...[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16].map((c) => ["GET", `/v1/fail/${c}?message=why%20${c}`] as [string, string]),
];

describe("dojang and grpc-gateway give the same answers for the same descriptor set and requests", () => {
  it.each(SAME)("%s %s %s", async (method, path, body) => {
    const [g, d] = await Promise.all([call(gateway, method, path, body), call(dojang, method, path, body)]);
    expect(d.status).toBe(g.status);
    expect(d.contentType).toBe(g.contentType);
    expect(dropNulls(JSON.parse(d.text))).toEqual(dropNulls(JSON.parse(g.text)));
  });

  it("server streaming as NDJSON: the same messages (grpc-gateway wraps each in {result}), the same {error} line after a failure", async () => {
    for (const path of ["/v1/stream/3?item.title=x", "/v1/stream/0", "/v1/stream/2?item.title=then-fail"]) {
      const [g, d] = await Promise.all([call(gateway, "GET", path), call(dojang, "GET", path)]);
      expect(d.status).toBe(g.status);
      expect(lines(d.text, false)).toEqual(lines(g.text, true));
    }
  });

  it("bad input: both 400 with code 3 INVALID_ARGUMENT (their messages differ)", async () => {
    for (const [method, path, body] of [
      ["POST", "/v1/kinds", "{nope"],
      ["POST", "/v1/kinds", '{"at":"yesterday"}'],
      ["POST", "/v1/kinds", '{"number":"x"}'],
      ["GET", "/v1/search?in_stock=yes", undefined],
      ["GET", "/v1/search?price_cents=x", undefined],
    ] as const) {
      const [g, d] = await Promise.all([call(gateway, method, path, body), call(dojang, method, path, body)]);
      expect([path, body, d.status]).toEqual([path, body, g.status]);
      expect(JSON.parse(d.text).code).toBe(3);
      expect(JSON.parse(g.text).code).toBe(3);
    }
  });
});

describe("the differences docs/guides/json-transcoding.md lists", () => {
  it("unset message fields: grpc-gateway prints null, dojang leaves them out (proto3 JSON)", async () => {
    const [g, d] = await Promise.all([call(gateway, "GET", "/v1/search?title=t"), call(dojang, "GET", "/v1/search?title=t")]);
    expect(JSON.parse(g.text).size).toBeNull();
    expect("size" in JSON.parse(d.text)).toBe(false);
  });

  it('"**" variables: grpc-gateway decodes %2F, dojang keeps it encoded (http.proto\'s multi-segment rule)', async () => {
    const [g, d] = await Promise.all([call(gateway, "GET", "/v1/files/a/b%2Fc/d.txt"), call(dojang, "GET", "/v1/files/a/b%2Fc/d.txt")]);
    expect(JSON.parse(g.text)).toEqual({ path: "a/b/c/d.txt" });
    expect(JSON.parse(d.text)).toEqual({ path: "a/b%2Fc/d.txt" });
  });

  it("no rule for the path: both 404 code 5, in their own words; a known path with another method: grpc-gateway 501 (12, Method Not Allowed), dojang 404", async () => {
    const [g, d] = await Promise.all([call(gateway, "GET", "/v2/nothing"), call(dojang, "GET", "/v2/nothing")]);
    expect([g.status, d.status]).toEqual([404, 404]);
    expect([JSON.parse(g.text).code, JSON.parse(d.text).code]).toEqual([5, 5]);
    const [g2, d2] = await Promise.all([call(gateway, "DELETE", "/v1/items/p"), call(dojang, "DELETE", "/v1/items/p")]);
    expect([g2.status, d2.status]).toEqual([501, 404]);
    expect([JSON.parse(g2.text).code, JSON.parse(d2.text).code]).toEqual([12, 5]);
  });
});
