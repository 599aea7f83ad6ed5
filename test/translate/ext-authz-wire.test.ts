// envoy.service.auth.v3.Authorization/Check on the wire (src/translate/ext-authz-wire.ts), judged
// by protobufjs with Envoy's own .proto files: the CheckRequest written for a call's attributes is
// byte for byte what protobufjs encodes for the same message, and a CheckResponse reads as
// protobufjs reads it (the verdict it gives is the same).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { protoRoot } from "../../src/protos/load.js";
import { mapCheckResponse } from "../../src/proxy/filters/auth/check.js";
import { frameMessage } from "../../src/translate/framing.js";
import { decodeCheckResponse, encodeCheckRequest, type CheckFacts } from "../../src/translate/ext-authz-wire.js";

const Request = protoRoot().lookupType("envoy.service.auth.v3.CheckRequest");
const Response = protoRoot().lookupType("envoy.service.auth.v3.CheckResponse");
const StatusCode = protoRoot().lookupEnum("envoy.type.v3.StatusCode");

const hex = (b: Uint8Array): string => Buffer.from(b).toString("hex");

/**
 * The CheckRequest for `f` as a plain object, as Envoy's ext_authz filter fills it
 * (attribute_context.proto): proto3 leaves an empty string out, so this does too; port_value is
 * in a oneof and always set.
 */
function expected(f: CheckFacts): Record<string, unknown> {
  const headers: Record<string, string> = {};
  for (const name in f.head) {
    const v = f.head[name]!;
    headers[name] = name === ":scheme" ? f.scheme : Array.isArray(v) ? v.join(",") : String(v);
  }
  const nonEmpty = (o: Record<string, unknown>) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== "" && v !== 0));
  const seconds = Math.floor(f.nowMs / 1000);
  return {
    attributes: {
      source: nonEmpty({
        address: { socket_address: { ...nonEmpty({ address: f.clientAddress }), port_value: f.clientPort ?? 0 } },
        principal: f.principal,
        certificate: f.certificatePem === "" ? "" : encodeURIComponent(f.certificatePem),
      }),
      request: {
        time: nonEmpty({ seconds, nanos: (f.nowMs - seconds * 1000) * 1e6 }),
        http: nonEmpty({ id: f.requestId, method: "POST", headers, path: headers[":path"] ?? "", host: headers[":authority"] ?? "", scheme: f.scheme, protocol: "HTTP/2" }),
      },
    },
  };
}

const facts: CheckFacts = {
  // the head as earlier stages left it: its :scheme is the upstream's, the Check names the client's
  head: { ":method": "POST", ":scheme": "https", ":path": "/pkg.Svc/Get", ":authority": "api", "x-a": ["1", "2"], "content-type": "application/grpc", "grpc-timeout": "100m" },
  scheme: "http",
  requestId: "rid-1",
  clientAddress: "127.0.0.1",
  clientPort: 5555,
  principal: "spiffe://td/sa/a",
  certificatePem: "-----BEGIN CERTIFICATE-----\nAB+/=\n-----END CERTIFICATE-----\n",
  nowMs: 1_700_000_000_123,
};

describe("encodeCheckRequest", () => {
  it("the request carries the head's method, path, host and headers (repeated ones joined), the client's scheme, the source and its principal", () => {
    const b = encodeCheckRequest(facts);
    expect(b[0]).toBe(0);
    expect(Buffer.from(b).readUInt32BE(1)).toBe(b.length - 5);
    const req = Request.toObject(Request.decode(b.subarray(5)), { longs: String, defaults: false }) as { attributes: { source: Record<string, unknown>; request: { time: unknown; http: Record<string, unknown> } } };
    const a = req.attributes;
    expect(a.source).toEqual({ address: { socket_address: { address: "127.0.0.1", port_value: 5555 } }, principal: "spiffe://td/sa/a", certificate: encodeURIComponent("-----BEGIN CERTIFICATE-----\nAB+/=\n-----END CERTIFICATE-----\n") });
    expect(a.request.time).toEqual({ seconds: "1700000000", nanos: 123_000_000 });
    expect(a.request.http).toMatchObject({ id: "rid-1", method: "POST", path: "/pkg.Svc/Get", host: "api", scheme: "http", protocol: "HTTP/2" });
    expect(a.request.http["headers"]).toEqual({ ":method": "POST", ":scheme": "http", ":path": "/pkg.Svc/Get", ":authority": "api", "x-a": "1,2", "content-type": "application/grpc", "grpc-timeout": "100m" });
    expect(hex(b)).toBe(hex(frameMessage(Request.encode(Request.fromObject(expected(facts))).finish())));
  });

  it("a client without a port, a certificate or a principal, a head without :path or :authority, a whole second: those fields are left out, port_value 0 is not", () => {
    const f: CheckFacts = { head: { ":method": "POST" }, scheme: "https", requestId: "", clientAddress: "", clientPort: undefined, principal: "", certificatePem: "", nowMs: 1_700_000_000_000 };
    const b = encodeCheckRequest(f);
    expect(hex(b)).toBe(hex(frameMessage(Request.encode(Request.fromObject(expected(f))).finish())));
    // source { address { socket_address { port_value: 0 } } } written as such
    expect(hex(b)).toContain("0a060a040a021800");
  });

  const text = fc.oneof(fc.string({ maxLength: 30 }), fc.string({ unit: "grapheme", maxLength: 10 }), fc.string({ minLength: 100, maxLength: 300 }));
  /** a header value as node gives it: latin-1 text, or a repeated field's list */
  const value = fc.oneof(fc.string({ unit: "binary-ascii", maxLength: 40 }), fc.array(fc.string({ maxLength: 20 }), { minLength: 1, maxLength: 3 }), fc.nat({ max: 99999 }));
  const head = fc.dictionary(fc.oneof(fc.constantFrom(":method", ":scheme", ":path", ":authority", "content-type", "x-a", "123"), fc.stringMatching(/^[a-z0-9-]{1,20}$/)), value, { maxKeys: 12 });
  const anyFacts = fc.record({
    head,
    scheme: fc.constantFrom("http", "https"),
    requestId: fc.oneof(fc.constant(""), fc.uuid()),
    clientAddress: fc.constantFrom("", "127.0.0.1", "::1", "::ffff:10.0.0.1"),
    clientPort: fc.option(fc.integer({ min: 0, max: 65535 }), { nil: undefined }),
    principal: text,
    certificatePem: fc.oneof(fc.constant(""), text),
    nowMs: fc.integer({ min: 0, max: 2 ** 45 }),
  });

  it("property: for any call's attributes, the bytes are protobufjs's for the same CheckRequest", () => {
    fc.assert(
      fc.property(anyFacts, (f) => {
        const theirs = hex(frameMessage(Request.encode(Request.fromObject(expected(f))).finish()));
        expect(hex(encodeCheckRequest(f))).toBe(theirs);
        // a buffer from a pool holds old bytes (ext-authz.ts passes Buffer.allocUnsafe): every one is overwritten
        expect(hex(encodeCheckRequest(f, (n) => new Uint8Array(n).fill(0xaa)))).toBe(theirs);
      }),
      { numRuns: 500 },
    );
  });
});

/** What protobufjs reads, in decodeCheckResponse's shape (an HTTP status as its number, append_action by name). */
function protobufjsRead(b: Uint8Array): Record<string, unknown> {
  const o = Response.toObject(Response.decode(b), { enums: String, longs: Number, bytes: Array, defaults: false, oneofs: true }) as Record<string, unknown>;
  const opts = (hs: unknown) =>
    (hs as Record<string, unknown>[] | undefined)?.map((h) => {
      const header = h["header"] as Record<string, unknown> | undefined;
      const r: Record<string, unknown> = {};
      if (header !== undefined) r["header"] = { ...header, ...(header["raw_value"] !== undefined ? { raw_value: Uint8Array.from(header["raw_value"] as number[]) } : {}) };
      if (h["append"] !== undefined) r["append"] = h["append"];
      if (h["append_action"] !== undefined) r["append_action"] = h["append_action"];
      return r;
    });
  const out: Record<string, unknown> = {};
  if (o["status"] !== undefined) {
    const s = o["status"] as Record<string, unknown>;
    out["status"] = Object.fromEntries(Object.entries(s).filter(([k]) => k === "code" || k === "message"));
  }
  const okr = o["ok_response"] as Record<string, unknown> | undefined;
  const den = o["denied_response"] as Record<string, unknown> | undefined;
  // the oneof: the member on the wire last wins (protobufjs names it in `http_response`)
  if (okr !== undefined && o["http_response"] === "ok_response") {
    const r: Record<string, unknown> = {};
    if (okr["headers"] !== undefined) r["headers"] = opts(okr["headers"]);
    if (okr["headers_to_remove"] !== undefined) r["headers_to_remove"] = okr["headers_to_remove"];
    out["ok_response"] = r;
  }
  if (den !== undefined && o["http_response"] === "denied_response") {
    const r: Record<string, unknown> = {};
    const st = den["status"] as { code?: string } | undefined;
    if (st !== undefined) r["status"] = st.code === undefined ? {} : { code: StatusCode.values[st.code] };
    if (den["headers"] !== undefined) r["headers"] = opts(den["headers"]);
    if (den["body"] !== undefined) r["body"] = den["body"];
    out["denied_response"] = r;
  }
  return out;
}

/** Bytes as a list of numbers (a Buffer and a Uint8Array of the same bytes compare equal). */
function plain(v: unknown): unknown {
  if (v instanceof Uint8Array) return { bytes: [...v] };
  if (Array.isArray(v)) return v.map(plain);
  if (typeof v === "object" && v !== null) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  return v;
}

/**
 * A string field's text: short (read a byte at a time) and long (read in one decoder call, such as
 * the ~700-byte x-ext-authz-check-received Istio's sample answers with), ASCII and not.
 */
const fieldText = fc.oneof(fc.string(), fc.string({ minLength: 20, maxLength: 800 }), fc.string({ unit: "grapheme", minLength: 5, maxLength: 200 }), fc.string({ unit: "binary", maxLength: 40 }));
const headerOption = fc.record(
  {
    header: fc.record({ key: fc.string(), value: fieldText, raw_value: fc.uint8Array({ maxLength: 8 }) }, { requiredKeys: [] }),
    append: fc.record({ value: fc.boolean() }, { requiredKeys: [] }),
    append_action: fc.constantFrom("APPEND_IF_EXISTS_OR_ADD", "ADD_IF_ABSENT", "OVERWRITE_IF_EXISTS_OR_ADD", "OVERWRITE_IF_EXISTS"),
    keep_empty_value: fc.boolean(),
  },
  { requiredKeys: [] },
);
const checkResponse = fc.oneof(
  fc.record(
    {
      status: fc.record({ code: fc.integer({ min: -3, max: 20 }), message: fieldText, details: fc.array(fc.record({ type_url: fc.string(), value: fc.uint8Array({ maxLength: 4 }) }), { maxLength: 1 }) }, { requiredKeys: [] }),
      ok_response: fc.record(
        {
          headers: fc.array(headerOption, { maxLength: 3 }),
          headers_to_remove: fc.array(fieldText, { maxLength: 3 }),
          response_headers_to_add: fc.array(headerOption, { maxLength: 1 }),
          query_parameters_to_remove: fc.array(fc.string(), { maxLength: 1 }),
        },
        { requiredKeys: [] },
      ),
    },
    { requiredKeys: [] },
  ),
  fc.record(
    {
      status: fc.record({ code: fc.integer({ min: 0, max: 20 }), message: fc.string() }, { requiredKeys: [] }),
      denied_response: fc.record(
        { status: fc.record({ code: fc.constantFrom("Forbidden", "Unauthorized", "TooManyRequests", "BadGateway", "OK", "Continue", "NetworkAuthenticationRequired") }, { requiredKeys: [] }), headers: fc.array(headerOption, { maxLength: 3 }), body: fieldText },
        { requiredKeys: [] },
      ),
      dynamic_metadata: fc.record({ fields: fc.dictionary(fc.string(), fc.record({ bool_value: fc.boolean() }), { maxKeys: 2 }) }),
    },
    { requiredKeys: [] },
  ),
);

describe("decodeCheckResponse", () => {
  it("property: reads what the verdict needs as protobufjs reads it, and the verdict is the same", () => {
    fc.assert(
      fc.property(checkResponse, (r) => {
        const b = Response.encode(Response.fromObject(r)).finish();
        const mine = decodeCheckResponse(b)!;
        const theirs = protobufjsRead(b);
        expect(plain(mine)).toEqual(plain(theirs));
        expect(mapCheckResponse(mine as Record<string, unknown>)).toEqual(mapCheckResponse(theirs));
      }),
      { numRuns: 500 },
    );
  });

  it("a leading U+FEFF is text, kept as protobufjs keeps it, in a short string and a long one", () => {
    // the WHATWG decoder drops a leading byte-order mark unless told not to; a header value is not a file
    for (const value of ["\uFEFFa", `\uFEFF${"x".repeat(40)}`, `\uFEFF\u00e9${"y".repeat(30)}`]) {
      const b = Response.encode(Response.fromObject({ ok_response: { headers: [{ header: { key: "x-bom", value } }] } })).finish();
      expect(plain(decodeCheckResponse(b))).toEqual(plain(protobufjsRead(b)));
      expect((decodeCheckResponse(b) as { ok_response: { headers: { header: { value: string } }[] } }).ok_response.headers[0]!.header.value).toBe(value);
    }
  });

  it("the oneof's last member on the wire wins", () => {
    const ok = Response.encode(Response.fromObject({ ok_response: { headers_to_remove: ["x-a"] } })).finish();
    const denied = Response.encode(Response.fromObject({ denied_response: { body: "no" } })).finish();
    expect(decodeCheckResponse(Buffer.concat([ok, denied]))).toEqual({ denied_response: { body: "no" } });
    expect(decodeCheckResponse(Buffer.concat([denied, ok]))).toEqual({ ok_response: { headers_to_remove: ["x-a"] } });
  });

  it("bytes that are not a CheckResponse: null, never a throw", () => {
    expect(decodeCheckResponse(Uint8Array.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f]))).toBeNull();
    expect(decodeCheckResponse(Uint8Array.from([0x1a, 0x03, 0x12, 0x05, 0x0a]))).toBeNull();
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (b) => {
        const r = decodeCheckResponse(b);
        expect(r === null || typeof r === "object").toBe(true);
      }),
    );
  });
});
