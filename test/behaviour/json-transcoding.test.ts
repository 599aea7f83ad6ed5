// Contract (issue 21 part 2): a listener with jsonTranscoding turns JSON/HTTP requests that match
// a google.api.http rule of its descriptor set into gRPC calls (path variables, body "*" and
// field bodies, query parameters, the proto3 JSON mapping), answers gRPC statuses with the
// standard HTTP status and a google.rpc.Status body, streams server-streaming responses as a
// JSON array or NDJSON, and 404s or passes on what no rule matches. The upstream is a real grpc-js
// server (test/helpers/transcode.ts); requests are curl-shaped (undici over HTTP/1.1, node:http2
// for HTTP/2); native gRPC on the same listener is untouched.
import http2 from "node:http2";
import * as grpc from "@grpc/grpc-js";
import { Agent, request } from "undici";
import { afterAll, describe, expect, it } from "vitest";
import { configFromText } from "../../src/config/index.js";
import { startDojang, type DojangHandle } from "../../src/index.js";
import { useFixtures } from "../helpers/fixtures.js";
import { SHOP_SERVICE, shopDescriptorSet, startShopGrpcJs } from "../helpers/transcode.js";

const fx = useFixtures();
const agent = new Agent({ connections: 4 });
afterAll(() => agent.close());

type Shop = Awaited<ReturnType<typeof startShopGrpcJs>>;

async function setup(jt: Record<string, unknown> = {}, cluster?: string): Promise<{ up: Shop; px: DojangHandle; h1: string; h2: string }> {
  const up = fx.track(await startShopGrpcJs(), (u) => u.close());
  const px = await fx.proxyFor(cluster ?? up.address, { listener: { http1Address: "127.0.0.1:0", jsonTranscoding: { descriptorSet: shopDescriptorSet(), ...jt } } });
  return { up, px, h1: px.instance.http1Address(), h2: px.address };
}

interface Reply {
  status: number;
  headers: Record<string, unknown>;
  text: string;
}

async function h1(addr: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Reply> {
  const res = await request(`http://${addr}${path}`, {
    method: method as "GET",
    dispatcher: agent,
    headers: body === undefined ? headers : { "content-type": "application/json", ...headers },
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
}

function h2(addr: string, method: string, path: string, body?: unknown): Promise<Reply & { rst: number | undefined; broken: boolean }> {
  return new Promise((resolve, reject) => {
    const c = http2.connect(`http://${addr}`);
    c.on("error", reject);
    const s = c.request({ ":method": method, ":path": path, ...(body === undefined ? {} : { "content-type": "application/json" }) }, { endStream: body === undefined });
    if (body !== undefined) s.end(typeof body === "string" ? body : JSON.stringify(body));
    let head: Record<string, unknown> = {};
    let text = "";
    s.on("response", (h) => (head = h));
    s.setEncoding("utf8");
    s.on("data", (d: string) => (text += d));
    let broken = false;
    s.on("error", () => (broken = true));
    s.on("aborted", () => (broken = true));
    s.on("close", () => {
      resolve({ status: Number(head[":status"] ?? 0), headers: head, text, rst: s.rstCode, broken: broken || (s.rstCode ?? 0) !== 0 });
      c.close();
    });
  });
}

describe("JSON/HTTP requests become gRPC calls by the google.api.http rules", () => {
  it("GET with path variables (a multi-segment one) and query parameters, over HTTP/1.1 and HTTP/2; metadata goes upstream", async () => {
    const { up, h1: a1, h2: a2 } = await setup();
    const q = "?title=Dune&price_cents=1999&color=RED&tags=a&tags=b&inStock=true&size.weightGrams=9007199254740993";
    const r = await h1(a1, "GET", `/v1/shelves/s1/items/i%20one${q}`, undefined, { "x-tenant": "t1" });
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toBe("application/json");
    expect(JSON.parse(r.text)).toEqual({ shelf: "shelves/s1", id: "i one", title: "Dune", priceCents: "1999", color: "RED", tags: ["a", "b"], inStock: true, size: { weightGrams: "9007199254740993" } });
    expect(up.seen.at(-1)!.path).toBe(`/${SHOP_SERVICE}/GetItem`);
    expect(up.seen.at(-1)!.metadata.get("x-tenant")).toEqual(["t1"]);
    const r2 = await h2(a2, "GET", `/v1/shelves/s2/items/7${q}`);
    expect(r2.status).toBe(200);
    expect(JSON.parse(r2.text)).toMatchObject({ shelf: "shelves/s2", id: "7", priceCents: "1999" });
  });

  it('a field body (body: "item") with the rest from the path and the query', async () => {
    const { h1: a1 } = await setup();
    const r = await h1(a1, "POST", "/v1/shelves/s1/items?request_id=r-1", { title: "Emma", price_cents: "5" });
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text)).toEqual({ shelf: "shelves/s1", item: { title: "Emma", priceCents: "5" }, requestId: "r-1" });
  });

  it('body: "*" with the path winning over the body, an additional binding, ** and a custom verb', async () => {
    const { h1: a1, h2: a2 } = await setup();
    const r = await h1(a1, "PATCH", "/v1/items/from-path", { id: "from-body", title: "T" });
    expect(JSON.parse(r.text)).toEqual({ id: "from-path", title: "T" });
    const put = await h2(a2, "PUT", "/v1/items/p", { title: "U" });
    expect(JSON.parse(put.text)).toEqual({ id: "p", title: "U" });
    const f = await h1(a1, "GET", "/v1/files/a/b%2Fc/d.txt");
    expect(JSON.parse(f.text)).toEqual({ path: "a/b%2Fc/d.txt" });
    const v = await h1(a1, "POST", "/v1/items/x7:archive", {});
    expect(JSON.parse(v.text)).toEqual({ id: "x7" });
  });

  it("the proto3 JSON mapping both ways: well-known types, int64 and uint64 as strings, bytes, maps, oneofs, Any from the descriptor set", async () => {
    const { h1: a1 } = await setup();
    const body = {
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
    };
    const r = await h1(a1, "POST", "/v1/kinds", body);
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text)).toEqual({ ...body, wait: "1.500s", any: { "@type": body.any["@type"], path: "x/y" } });
  });

  it("gRPC statuses: the standard HTTP status and a google.rpc.Status JSON body", async () => {
    const { h1: a1, h2: a2 } = await setup();
    for (const [code, http] of [[5, 404], [3, 400], [16, 401], [7, 403], [8, 429], [14, 503], [12, 501], [9, 400], [10, 409], [4, 504], [1, 499], [2, 500]] as const) {
      const r = await h1(a1, "GET", `/v1/fail/${code}?message=why%20${code}`);
      expect([code, r.status]).toEqual([code, http]);
      expect(JSON.parse(r.text)).toEqual({ code, message: `why ${code}` });
    }
    const r2 = await h2(a2, "GET", "/v1/fail/6?message=dup");
    expect(r2.status).toBe(409);
    expect(JSON.parse(r2.text)).toEqual({ code: 6, message: "dup" });
  });

  it("a status dojang decides (no upstream answers): 503 with 14 UNAVAILABLE", async () => {
    const { h1: a1 } = await setup({}, "127.0.0.1:1");
    const r = await h1(a1, "GET", "/v1/shelves/s/items/1");
    expect(r.status).toBe(503);
    expect(JSON.parse(r.text)).toMatchObject({ code: 14 });
  });

  // key: listeners[].jsonTranscoding.streamFormat
  it("server streaming as a JSON array (streamFormat: array): messages as they come, [] for none, a cut body for a status after messages", async () => {
    const { h1: a1, h2: a2 } = await setup({ streamFormat: "array" });
    const r = await h1(a1, "GET", "/v1/stream/3?item.title=x");
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text)).toEqual([{ title: "x" }, { title: "x" }, { title: "x" }]);
    expect(JSON.parse((await h1(a1, "GET", "/v1/stream/0")).text)).toEqual([]);
    const cut = await h2(a2, "GET", "/v1/stream/2?item.title=then-fail");
    expect(cut.status).toBe(200);
    expect(cut.broken).toBe(true);
    expect(() => JSON.parse(cut.text)).toThrow();
    await expect(h1(a1, "GET", "/v1/stream/2?item.title=then-fail")).rejects.toThrow();
  });

  it("server streaming as NDJSON (streamFormat: ndjson): a line a message, {error} as the last line after a failure", async () => {
    const { h1: a1 } = await setup({ streamFormat: "ndjson" });
    const r = await h1(a1, "GET", "/v1/stream/2?item.title=y");
    expect(r.headers["content-type"]).toBe("application/x-ndjson");
    expect(r.text).toBe('{"title":"y"}\n{"title":"y"}\n');
    const f = await h1(a1, "GET", "/v1/stream/1?item.title=then-fail");
    expect(f.text.split("\n").filter(Boolean).map((l) => JSON.parse(l))).toEqual([{ title: "then-fail" }, { error: { code: 10, message: "stopped after the items" } }]);
    const e = await h1(a1, "GET", "/v1/fail/5?message=before");
    expect(e.status).toBe(404);
  });

  it("bad input is a 400 INVALID_ARGUMENT made here, with no call: bad JSON, an unknown field, a bad bool, a wrong type", async () => {
    const { up, h1: a1 } = await setup();
    for (const [method, path, body] of [
      ["POST", "/v1/kinds", "{nope"],
      ["POST", "/v1/kinds", { nope: 1 }],
      ["GET", "/v1/search?in_stock=yes", undefined],
      ["GET", "/v1/search?nope=1", undefined],
      ["POST", "/v1/kinds", { at: "yesterday" }],
      ["POST", "/v1/kinds", [1]],
    ] as const) {
      const r = await h1(a1, method, path, body);
      expect([path, body, r.status]).toEqual([path, body, 400]);
      expect(JSON.parse(r.text)).toMatchObject({ code: 3 });
    }
    expect(up.seen).toHaveLength(0);
  });

  it("what would be read wrongly is refused before any call: a key twice, an impossible date or hour, a Duration with text after it, bad base64 or escapes, a parameter twice", async () => {
    const { up, h1: a1, h2: a2 } = await setup({ ignoreUnknownFields: true });
    for (const [method, path, body] of [
      // a reader that keeps the first value and one that keeps the last must never both see this
      ["POST", "/v1/kinds", '{"note":"a","note":"b"}'],
      ["POST", "/v1/kinds", '{"meta":{"a":1,"\\u0061":2}}'],
      ["POST", "/v1/kinds", '\ufeff{"note":"a"}'],
      ["POST", "/v1/kinds", '{"at":"2024-02-30T00:00:00Z"}'],
      ["POST", "/v1/kinds", '{"at":"2024-01-01T24:00:00Z"}'],
      ["POST", "/v1/kinds", '{"wait":"1.5sjunk"}'],
      ["POST", "/v1/kinds", '{"wait":"315576000001s"}'],
      ["POST", "/v1/kinds", '{"blob":"AQ="}'],
      ["POST", "/v1/kinds", '{"serial":"0x10"}'],
      ["POST", "/v1/kinds", '{"serial":18446744073709551616}'],
      ["POST", "/v1/kinds", '{"delta":" 1"}'],
      ["GET", "/v1/search?title=a&title=b", undefined],
      ["GET", "/v1/search?title=a&title=b&title=c", undefined],
      ["GET", "/v1/search?price_cents=1&priceCents=2", undefined],
      ["GET", "/v1/search?title=%ZZ", undefined],
      ["GET", "/v1/search?title=%FF", undefined],
      ["GET", "/v1/search?title=a;price_cents=2", undefined],
      ["GET", "/v1/search?color=PURPLE", undefined],
      ["GET", "/v1/shelves/%FF/items/1", undefined],
      ["GET", "/v1/shelves/s/items/%zz", undefined],
    ] as const) {
      for (const r of [await h1(a1, method, path, body), await h2(a2, method, path, body)]) {
        expect([path, body, r.status]).toEqual([path, body, 400]);
        expect(JSON.parse(r.text)).toMatchObject({ code: 3 });
      }
    }
    expect(up.seen).toHaveLength(0);
  });

  it("a 64-bit integer keeps every digit, sent as a JSON number or a string, in the body, the path and the query", async () => {
    const { h1: a1 } = await setup();
    const r = await h1(a1, "POST", "/v1/kinds", '{"serial":18446744073709551615,"big":9007199254740993,"counts":{"a":-9223372036854775808}}');
    expect(JSON.parse(r.text)).toEqual({ serial: "18446744073709551615", big: "9007199254740993", counts: { a: "-9223372036854775808" } });
    const q = await h1(a1, "GET", "/v1/search?price_cents=9007199254740993&size.weightGrams=18446744073709551615");
    expect(JSON.parse(q.text)).toEqual({ priceCents: "9007199254740993", size: { weightGrams: "18446744073709551615" } });
  });

  // key: listeners[].jsonTranscoding.ignoreUnknownFields
  it("ignoreUnknownFields: unknown JSON fields and query parameters are dropped", async () => {
    const { h1: a1 } = await setup({ ignoreUnknownFields: true });
    expect(JSON.parse((await h1(a1, "POST", "/v1/kinds", { nope: 1, number: 2 })).text)).toEqual({ number: 2 });
    expect(JSON.parse((await h1(a1, "GET", "/v1/search?nope=1&title=t")).text)).toEqual({ title: "t" });
  });

  // key: listeners[].jsonTranscoding.emitDefaults
  it("emitDefaults: fields at their defaults are printed", async () => {
    const { h1: a1 } = await setup({ emitDefaults: true });
    const r = JSON.parse((await h1(a1, "GET", "/v1/files/x")).text);
    expect(r).toEqual({ path: "x" });
    const i = JSON.parse((await h1(a1, "GET", "/v1/search?title=t")).text);
    expect(i).toEqual({ shelf: "", id: "", title: "t", priceCents: "0", color: "COLOR_UNSPECIFIED", tags: [], inStock: false });
    const e = await h1(a1, "GET", "/v1/fail/5");
    expect(JSON.parse(e.text)).toEqual({ code: 5, message: "", details: [] });
  });

  // key: listeners[].jsonTranscoding.maxBodyBytes
  it("maxBodyBytes: a larger body is 413 and makes no call", async () => {
    const { up, h1: a1, h2: a2 } = await setup({ maxBodyBytes: 64 });
    const r = await h1(a1, "POST", "/v1/kinds", { note: "x".repeat(100) });
    expect(r.status).toBe(413);
    // larger than the stream's window: the client is told to stop sending, on both transports
    expect((await h2(a2, "POST", "/v1/kinds", { note: "x".repeat(3_000_000) })).status).toBe(413);
    expect((await h1(a1, "POST", "/v1/kinds", { note: "x".repeat(3_000_000) })).status).toBe(413);
    expect(JSON.parse(r.text)).toMatchObject({ code: 3 });
    expect((await h1(a1, "POST", "/v1/kinds", { note: "short" })).status).toBe(200);
    expect(up.seen).toHaveLength(1);
  });

  // key: listeners[].jsonTranscoding.unknownPaths
  it("unknownPaths: notFound answers 404 with a Status; passthrough hands the request on as if transcoding were off", async () => {
    const nf = await setup({ unknownPaths: "notFound" });
    const r = await h1(nf.h1, "GET", "/v2/nothing");
    expect(r.status).toBe(404);
    expect(JSON.parse(r.text)).toMatchObject({ code: 5 });
    // a method the rule does not name for that path is not a match either
    expect((await h1(nf.h1, "DELETE", "/v1/shelves/s/items/1")).status).toBe(404);
    // a CORS preflight that no rule names is handed on (gRPC-Web is off here: the native gRPC
    // path's answer to a method other than POST, 405 with grpc-status 13)
    const pre = await h2(nf.h2, "OPTIONS", "/v2/nothing");
    expect([pre.status, pre.headers["grpc-status"]]).toEqual([405, "13"]);
    const pt = await setup({ unknownPaths: "passthrough" });
    // the HTTP/1.1 socket's own answer to what is not gRPC-Web
    const p = await h1(pt.h1, "GET", "/v2/nothing");
    expect(p.status).toBe(415);
    // and on the HTTP/2 port the native gRPC path's (405 with grpc-status 13 for a GET), not the transcoder's 404
    const p2 = await h2(pt.h2, "GET", "/v2/nothing");
    expect([p2.status, p2.headers["grpc-status"]]).toEqual([405, "13"]);
  });

  it("native gRPC on the same listener is not transcoded (even to a path a rule would match)", async () => {
    const { up, px } = await setup();
    const client = new grpc.Client(px.address, grpc.credentials.createInsecure());
    fx.track(client, (c) => c.close());
    const req = Buffer.from([0x1a, 0x02, 0x68, 0x69]); // Item{title: "hi"}
    const res = await new Promise<Buffer>((resolve, reject) =>
      client.makeUnaryRequest(`/${SHOP_SERVICE}/Plain`, (b: Buffer) => b, (b: Buffer) => b, req, (err, r) => (err ? reject(err) : resolve(r!))),
    );
    expect(res.equals(req)).toBe(true);
    expect(up.seen.at(-1)!.path).toBe(`/${SHOP_SERVICE}/Plain`);
  });

  it("a reload that changes jsonTranscoding applies to the next request; one whose descriptor set does not load keeps the one in use", async () => {
    const { up, px, h1: a1 } = await setup({ streamFormat: "array" });
    const cfg = (jt: Record<string, unknown>): string =>
      JSON.stringify({
        // (the addresses as first configured: the listener and its sockets are kept)
        admin: { address: "127.0.0.1:0" },
        listeners: [{ name: "main", address: "127.0.0.1:0", http1Address: "127.0.0.1:0", jsonTranscoding: { descriptorSet: shopDescriptorSet(), ...jt }, routes: [{ match: { prefix: "/" }, cluster: "backend" }] }],
        clusters: [{ name: "backend", endpoints: [up.address] }],
      });
    expect((await h1(a1, "GET", "/v1/stream/1?item.title=z")).text).toBe('[{"title":"z"}]');
    expect((await px.instance.reload(configFromText(cfg({ streamFormat: "ndjson" }), "<test>"))).ok).toBe(true);
    expect((await h1(a1, "GET", "/v1/stream/1?item.title=z")).text).toBe('{"title":"z"}\n');
    await px.instance.reload(configFromText(cfg({ streamFormat: "array", descriptorSet: "no-such-file.binpb" }), "<test>"));
    expect((await h1(a1, "GET", "/v1/stream/1?item.title=z")).text).toBe('{"title":"z"}\n');
  });

  it("a descriptor set that does not load fails the start, naming the key and the file", async () => {
    await expect(
      startDojang({
        logLevel: "silent",
        config: {
          listeners: [{ name: "main", address: "127.0.0.1:0", jsonTranscoding: { descriptorSet: "no-such-file.binpb" }, routes: [{ match: { prefix: "/" }, cluster: "b" }] }],
          clusters: [{ name: "b", endpoints: ["127.0.0.1:1"] }],
        },
      }),
    ).rejects.toThrow(/jsonTranscoding\.descriptorSet "no-such-file\.binpb"/);
  });
});
