// The transcoder (src/translate/transcode.ts) on the test descriptor set compiled by protoc: the
// rules it reads, the order it tries them in, the request message it builds, the standard
// code → HTTP status table, and clear errors for a descriptor set it cannot use.
import { fromBinary, toBinary, create } from "@bufbuild/protobuf";
import fc from "fast-check";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { DescriptorError, httpStatusOfCode, TranscodeInputError, Transcoder } from "../../src/translate/transcode.js";
import { shopDescriptorSet } from "../helpers/transcode.js";

const opts = { emitDefaults: false, ignoreUnknownFields: false };
const tc = new Transcoder(readFileSync(shopDescriptorSet()), opts);
const enc = new TextEncoder();

describe("Transcoder", () => {
  it("reads every google.api.http rule and additional binding; methods without one are not routes", () => {
    expect(tc.rules.map((r) => `${r.httpMethod} ${r.template.source} ${r.grpcPath.split("/")[2]}`)).toEqual([
      "GET /v1/{shelf=shelves/*}/items/{id} GetItem",
      "POST /v1/{shelf=shelves/*}/items CreateItem",
      "PATCH /v1/items/{id} UpdateItem",
      "PUT /v1/items/{id} UpdateItem",
      "GET /v1/files/{path=**} GetFile",
      "POST /v1/items/{id}:archive ArchiveItem",
      "GET /v1/search Search",
      "POST /v1/kinds Convert",
      "GET /v1/fail/{code} Fail",
      "GET /v1/stream/{count} Stream",
    ]);
    expect(tc.match("POST", "/dojang.test.shop.v1.Shop/Plain")).toBeNull();
  });

  it("path, then body, then query: the path wins over the body, the query sets only what neither did", () => {
    const m = tc.match("POST", "/v1/shelves/s/items")!;
    const bytes = tc.request(m, "shelf=ignored&request_id=q&item.title=ignored", enc.encode('{"title":"b"}'));
    const msg = fromBinary(m.rule.method.input, bytes) as unknown as { shelf: string; requestId: string; item: { title: string } };
    expect([msg.shelf, msg.requestId, msg.item.title]).toEqual(["shelves/s", "q", "b"]);
  });

  it("refuses what the message cannot hold with TranscodeInputError", () => {
    const k = tc.match("POST", "/v1/kinds")!;
    for (const body of ["{", "[]", '"x"', '{"nope":1}', '{"at":"x"}', '{"number":1.5}']) expect(() => tc.request(k, "", enc.encode(body))).toThrow(TranscodeInputError);
    const s = tc.match("GET", "/v1/search")!;
    for (const q of ["in_stock=1", "nope=1", "size=x", "size.nope=1"]) expect(() => tc.request(s, q, new Uint8Array())).toThrow(TranscodeInputError);
    expect(() => tc.request(tc.match("POST", "/v1/kinds")!, "", new Uint8Array([0xff, 0xfe]))).toThrow(TranscodeInputError);
  });

  it("property: any Item sent as JSON through body * comes back the same after a round trip through binary", () => {
    const u = tc.match("PATCH", "/v1/items/fixed")!;
    const desc = u.rule.method.input;
    fc.assert(
      fc.property(fc.string(), fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), fc.array(fc.string(), { maxLength: 3 }), fc.boolean(), (title, price, tags, inStock) => {
        const body = JSON.stringify({ title, priceCents: String(price), tags, inStock });
        const bytes = tc.request(u, "", enc.encode(body));
        const back = JSON.parse(tc.response(u.rule, bytes));
        const want: { [k: string]: unknown; title?: string; priceCents?: string; tags?: string[]; inStock?: boolean } = { id: "fixed" };
        if (title !== "") want.title = title;
        if (price !== 0n) want.priceCents = String(price);
        if (tags.length > 0) want.tags = tags;
        if (inStock) want.inStock = true;
        expect(back).toEqual(want);
        expect(toBinary(desc, fromBinary(desc, bytes))).toEqual(bytes);
      }),
    );
  });

  it("a google.rpc.Status body: code and message; with emitDefaults also details: []", () => {
    expect(JSON.parse(tc.status(5, "gone", undefined))).toEqual({ code: 5, message: "gone" });
    expect(JSON.parse(new Transcoder(readFileSync(shopDescriptorSet()), { ...opts, emitDefaults: true }).status(5, "gone", undefined))).toEqual({ code: 5, message: "gone", details: [] });
    void create;
  });

  it("status details print with the google.rpc types dojang carries, though the descriptor set has none; one of an unknown type is left out", () => {
    // google.rpc.Status{code: 3, message: "m", details: [Any(ErrorInfo{reason: "R"}), Any(no.such.T{})]}, by hand from the wire format
    const any = (url: string, value: number[]): number[] => [0x0a, url.length, ...enc.encode(url), 0x12, value.length, ...value];
    const info = any("type.googleapis.com/google.rpc.ErrorInfo", [0x0a, 0x01, 0x52]);
    const unknown = any("type.googleapis.com/no.such.T", [0x08, 0x01]);
    const status = new Uint8Array([0x08, 0x03, 0x12, 0x01, 0x6d, 0x1a, info.length, ...info, 0x1a, unknown.length, ...unknown]);
    expect(tc.registry.getMessage("google.rpc.ErrorInfo")).toBeDefined();
    expect(JSON.parse(tc.status(3, "m", status))).toEqual({ code: 3, message: "m", details: [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "R" }] });
    expect(JSON.parse(tc.status(3, "m", new Uint8Array([0xff])))).toEqual({ code: 3, message: "m" });
  });

  it("the query: a parameter for a field the path binds is skipped by either name; a field set twice, or a map without [key], is refused", () => {
    const g = tc.match("GET", "/v1/shelves/s/items/7")!;
    const read = (q: string): Record<string, unknown> => fromBinary(g.rule.method.input, tc.request(g, q, new Uint8Array())) as unknown as Record<string, unknown>;
    expect(read("id=8&title=t")).toMatchObject({ id: "7", title: "t" });
    expect(read("shelf=x&title=t")).toMatchObject({ shelf: "shelves/s", title: "t" });
    for (const q of ["title=a&title=b", "priceCents=1&price_cents=2", "tags=a;b", "title=%E0%A4%A"]) expect(() => tc.request(g, q, new Uint8Array())).toThrow(TranscodeInputError);
    const k = tc.match("POST", "/v1/kinds")!;
    expect(() => tc.request(k, "", enc.encode('{"counts":{"a":"1","a":"2"}}'))).toThrow(/duplicate key "a"/);
  });

  it("a descriptor set that is not one, or lacks the annotations, is a DescriptorError", () => {
    expect(() => new Transcoder(new Uint8Array([0xff, 0xff, 0xff]), opts)).toThrow(DescriptorError);
    expect(() => new Transcoder(new Uint8Array(), opts)).toThrow("google.api.http");
  });
});

describe("httpStatusOfCode (google/rpc/code.proto's mapping)", () => {
  it("maps each code", () => {
    expect(Array.from({ length: 17 }, (_, c) => httpStatusOfCode(c))).toEqual([200, 499, 500, 400, 504, 404, 409, 403, 429, 400, 409, 400, 501, 500, 503, 500, 401]);
  });
  it("property: a code outside 0..16 is 500", () => {
    fc.assert(
      fc.property(fc.integer().filter((c) => c < 0 || c > 16), (c) => {
        expect(httpStatusOfCode(c)).toBe(500);
      }),
    );
  });
});
