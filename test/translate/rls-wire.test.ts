// envoy.service.ratelimit.v3 on the wire (src/translate/rls-wire.ts), judged by protobufjs with
// Envoy's own .proto files (the descriptors scripts/protos.mjs builds): a request written from a
// route's template is byte for byte what protobufjs encodes for the descriptors buildDescriptors
// gives; a response reads as protobufjs reads it.
import fc from "fast-check";
import type { Type } from "protobufjs";
import { describe, expect, it } from "vitest";
import { protoRoot } from "../../src/protos/load.js";
import { frameMessage } from "../../src/translate/framing.js";
import { buildDescriptors, type EntrySpec, type RlsResponse } from "../../src/translate/rate-limit-global.js";
import { compileRlsRequest, decodeRlsResponse, encodeRlsRequest } from "../../src/translate/rls-wire.js";

const Request = protoRoot().lookupType("envoy.service.ratelimit.v3.RateLimitRequest");
const Response = protoRoot().lookupType("envoy.service.ratelimit.v3.RateLimitResponse");

/** protobufjs's bytes for `obj`, framed as a gRPC message. */
function reference(t: Type, obj: Record<string, unknown>): Uint8Array {
  return frameMessage(t.encode(t.fromObject(obj)).finish());
}

const hex = (b: Uint8Array | null): string | null => (b === null ? null : Buffer.from(b).toString("hex"));

/** Well-formed text (any plane), and the ASCII of real headers. */
const text = fc.oneof(fc.string({ unit: "grapheme", minLength: 1, maxLength: 40 }), fc.string({ minLength: 1, maxLength: 200 }));
const HEADERS = ["x-tenant", "x-user", "x-empty"] as const;
const source = fc.oneof(
  fc.record({ kind: fc.constant("literal" as const), value: text }),
  fc.record({ kind: fc.constant("header" as const), name: fc.constantFrom(...HEADERS) }),
  fc.constant({ kind: "client_address" as const }),
  fc.constant({ kind: "service" as const }),
  fc.constant({ kind: "method" as const }),
);
const specs = fc.array(fc.array(fc.record({ key: text, source }), { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 5 });
const headValue = fc.oneof(fc.constant(""), text, fc.array(text, { minLength: 1, maxLength: 3 }));
const input = fc.record({
  // the call's canonical method path (grpc-path.ts), which the service and method entries read
  path: fc.constantFrom("/pkg.Svc/Method", "/a.B/C", "/no-method", "/x/y/z", "/ü.Ü/ß"),
  clientAddress: fc.constantFrom("", "127.0.0.1", "::1", "2001:db8::7"),
  head: fc.record(
    {
      "x-tenant": headValue,
      "x-user": headValue,
      "x-empty": fc.constant(""),
    },
    { requiredKeys: [] },
  ),
});

describe("encodeRlsRequest", () => {
  it("a route's request: domain, then each descriptor whose entries all have values, literals as compiled", () => {
    const s: EntrySpec[][] = [
      [{ key: "remote_address", source: { kind: "client_address" } }],
      [
        { key: "generic_key", source: { kind: "literal", value: "edge" } },
        { key: "tenant", source: { kind: "header", name: "x-tenant" } },
      ],
      [{ key: "user", source: { kind: "header", name: "x-user" } }],
    ];
    const t = compileRlsRequest("edge", s);
    const got = encodeRlsRequest(t, { path: "/pkg.Svc/M", clientAddress: "10.1.2.3", head: { "x-tenant": ["acme", "other"] } });
    // written out by hand from the .proto: domain "edge"; descriptor { remote_address=10.1.2.3 };
    // descriptor { generic_key=edge, tenant=acme }; the x-user descriptor left out
    const a = (t: string): string => Buffer.from(t).toString("hex");
    const want =
      "0a04" + a("edge") + // domain (1)
      "121c" + "0a1a" + "0a0e" + a("remote_address") + "1208" + a("10.1.2.3") + // descriptors (2) { entries (1) { key (1), value (2) } }
      "1225" + "0a13" + "0a0b" + a("generic_key") + "1204" + a("edge") + "0a0e" + "0a06" + a("tenant") + "1204" + a("acme");
    expect(hex(got)).toBe(`00${(want.length / 2).toString(16).padStart(8, "0")}${want}`);
    expect(hex(got)).toBe(hex(reference(Request, { domain: "edge", descriptors: buildDescriptors(s, { path: "/pkg.Svc/M", clientAddress: "10.1.2.3", head: { "x-tenant": ["acme", "other"] } }) })));
  });

  it("no descriptor with every value: nothing to ask (null)", () => {
    const t = compileRlsRequest("d", [[{ key: "user", source: { kind: "header", name: "x-user" } }], [{ key: "m", source: { kind: "method" } }]]);
    expect(encodeRlsRequest(t, { path: "/not-grpc", clientAddress: "127.0.0.1", head: {} })).toBeNull();
  });

  it("a lone surrogate is written as U+FFFD (EF BF BD), as TextEncoder and node's Buffer write it", () => {
    const t = compileRlsRequest("d", [[{ key: "k", source: { kind: "header", name: "x-user" } }]]);
    const got = encodeRlsRequest(t, { path: "/pkg.Svc/M", clientAddress: "", head: { "x-user": "a\ud800b" } })!;
    expect(hex(got)).toContain(Buffer.from("a\ufffdb").toString("hex"));
    expect(hex(got)).toBe(hex(reference(Request, { domain: "d", descriptors: [{ entries: [{ key: "k", value: "a\ufffdb" }] }] })));
  });

  it("property: for any route and call, the bytes are protobufjs's for { domain, buildDescriptors(...) } (null when that list is empty)", () => {
    fc.assert(
      fc.property(text, specs, input, (domain, s, inp) => {
        const got = encodeRlsRequest(compileRlsRequest(domain, s), inp);
        const ds = buildDescriptors(s, inp);
        expect(hex(got)).toBe(ds.length === 0 ? null : hex(reference(Request, { domain, descriptors: ds })));
      }),
      { numRuns: 500 },
    );
  });
});

/** What protobufjs reads, in the shape decodeRlsResponse gives (enums by name; a Duration's seconds a number). */
function protobufjsRead(b: Uint8Array, withStatuses: boolean): RlsResponse {
  const o = Response.toObject(Response.decode(b), { enums: String, longs: Number, defaults: false }) as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  if (o["overall_code"] !== undefined) out["overall_code"] = o["overall_code"];
  if (withStatuses && Array.isArray(o["statuses"]) && o["statuses"].length > 0) {
    out["statuses"] = (o["statuses"] as Record<string, unknown>[]).map((s) => {
      const r: Record<string, unknown> = {};
      for (const k of ["code", "current_limit", "limit_remaining", "duration_until_reset"]) if (s[k] !== undefined) r[k] = s[k];
      return r;
    });
  }
  return out as RlsResponse;
}

const code = fc.constantFrom("UNKNOWN", "OK", "OVER_LIMIT");
const status = fc.record(
  {
    code,
    current_limit: fc.record({ requests_per_unit: fc.nat(), unit: fc.constantFrom("UNKNOWN", "SECOND", "MINUTE", "HOUR", "DAY", "MONTH", "YEAR"), name: fc.string() }, { requiredKeys: [] }),
    limit_remaining: fc.nat(),
    duration_until_reset: fc.record({ seconds: fc.integer({ min: 0, max: 2 ** 40 }), nanos: fc.integer({ min: 0, max: 999_999_999 }) }, { requiredKeys: [] }),
    // fields the decoder skips
    quota: fc.record({ requests: fc.nat(), id: fc.string() }, { requiredKeys: [] }),
  },
  { requiredKeys: [] },
);
const response = fc.record(
  {
    overall_code: code,
    statuses: fc.array(status, { maxLength: 4 }),
    response_headers_to_add: fc.array(fc.record({ key: fc.string({ minLength: 1 }), value: fc.string() }), { maxLength: 2 }),
    raw_body: fc.uint8Array({ maxLength: 20 }),
    dynamic_metadata: fc.record({ fields: fc.dictionary(fc.string(), fc.record({ string_value: fc.string() }), { maxKeys: 2 }) }),
  },
  { requiredKeys: [] },
);

describe("decodeRlsResponse", () => {
  it("property: reads overall_code (and the statuses when asked) as protobufjs does, skipping the other fields", () => {
    fc.assert(
      fc.property(response, fc.boolean(), (r, withStatuses) => {
        const b = Response.encode(Response.fromObject(r)).finish();
        expect(decodeRlsResponse(b, withStatuses)).toEqual(protobufjsRead(b, withStatuses));
      }),
      { numRuns: 500 },
    );
  });

  it("a value written wider than its field (an int64 enum, a 10-byte varint) reads as protobuf reads it: the low 32 bits", () => {
    // overall_code = 2 written as a ten-byte varint (2 + 2^63, sign bits set)
    expect(decodeRlsResponse(Uint8Array.from([0x08, 0x82, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]), false)).toEqual({ overall_code: "OVER_LIMIT" });
    // an enum number the .proto does not list stays a number's text
    expect(decodeRlsResponse(Uint8Array.from([0x08, 0x07]), false)).toEqual({ overall_code: "7" });
    // a known field with another wire type is skipped as unknown (protobuf-go, C++)
    expect(decodeRlsResponse(Uint8Array.from([0x0d, 2, 0, 0, 0, 0x08, 0x01]), false)).toEqual({ overall_code: "OK" });
  });

  it("bytes that are not a RateLimitResponse: null, never a throw", () => {
    const bad = [
      [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f], // the misbehaving service's "undecodable message": field 2^43-1, wire type 7
      [0x12, 0x05, 0x08], // statuses (2) claims 5 bytes, 1 follows
      [0x08], // overall_code without its value
      [0x00, 0x01], // field number 0
      [0x0f, 0x00], // wire type 7
      [0x0c], // an end-group with no group
      [0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01], // an eleven-byte varint
    ];
    for (const b of bad) expect(decodeRlsResponse(Uint8Array.from(b), true), Buffer.from(b).toString("hex")).toBeNull();
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), fc.boolean(), (b, w) => {
        const r = decodeRlsResponse(b, w);
        expect(r === null || typeof r === "object").toBe(true);
      }),
    );
  });

  it("a group among unknown fields is skipped whole", () => {
    // field 9 as a group holding a varint field, then overall_code OVER_LIMIT
    expect(decodeRlsResponse(Uint8Array.from([0x4b, 0x08, 0x01, 0x4c, 0x08, 0x02]), false)).toEqual({ overall_code: "OVER_LIMIT" });
  });
});
