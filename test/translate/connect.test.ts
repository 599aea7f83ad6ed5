// src/translate/connect.ts: the Connect protocol's tables and codecs (connectrpc.com/docs/protocol),
// by vectors from the spec and properties (fast-check) for the round trips.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { decodeTimeout } from "../../src/translate/timeout.js";
import {
  END_STREAM_FLAG,
  codeFromConnectName,
  codeFromHttpStatus,
  connectCodeName,
  connectErrorFor,
  connectHttpStatus,
  connectLocalHttpStatus,
  connectResponseContentType,
  connectTimeoutForNs,
  decodeBase64Loose,
  decodeStatusProto,
  encodeBase64Raw,
  encodeEndStream,
  encodeStatusProto,
  grpcContentType,
  grpcStatusFor,
  grpcTimeoutForConnect,
  isConnectGet,
  parseConnectContentType,
  parseConnectTimeout,
  parseEndStream,
  parseGetQuery,
  percentDecode,
} from "../../src/translate/connect.js";

describe("content types", () => {
  it.each([
    ["application/proto", { kind: "unary", codec: "proto" }],
    ["application/json", { kind: "unary", codec: "json" }],
    ["Application/JSON; charset=utf-8", { kind: "unary", codec: "json" }],
    ["application/connect+proto", { kind: "stream", codec: "proto" }],
    ["application/connect+json", { kind: "stream", codec: "json" }],
    ["application/connect+custom.v2", { kind: "stream", codec: "custom.v2" }],
  ])("%s is Connect", (ct, want) => {
    expect(parseConnectContentType(ct)).toEqual(want);
  });

  it.each(["application/grpc", "application/grpc+proto", "application/grpc-web", "application/xml", "application/connect+", "application/connect+a b", "text/plain", "", undefined])("%s is not", (ct) => {
    expect(parseConnectContentType(ct)).toBeNull();
  });

  it("upstream and response types", () => {
    expect(grpcContentType("proto")).toBe("application/grpc");
    expect(grpcContentType("json")).toBe("application/grpc+json");
    expect(connectResponseContentType({ kind: "unary", codec: "json" })).toBe("application/json");
    expect(connectResponseContentType({ kind: "stream", codec: "proto" })).toBe("application/connect+proto");
  });
});

describe("codes", () => {
  // the protocol's table: code name → HTTP status
  const TABLE: [number, string, number][] = [
    [1, "canceled", 499], [2, "unknown", 500], [3, "invalid_argument", 400], [4, "deadline_exceeded", 504],
    [5, "not_found", 404], [6, "already_exists", 409], [7, "permission_denied", 403], [8, "resource_exhausted", 429],
    [9, "failed_precondition", 400], [10, "aborted", 409], [11, "out_of_range", 400], [12, "unimplemented", 501],
    [13, "internal", 500], [14, "unavailable", 503], [15, "data_loss", 500], [16, "unauthenticated", 401],
  ];
  it.each(TABLE)("code %i is %s, HTTP %i", (code, name, status) => {
    expect(connectCodeName(code)).toBe(name);
    expect(codeFromConnectName(name)).toBe(code);
    expect(connectHttpStatus(code)).toBe(status);
  });

  it("a code outside 1..16 is unknown (HTTP 500); ok and strangers are no code", () => {
    fc.assert(fc.property(fc.integer().filter((c) => c < 1 || c > 16), (c) => connectCodeName(c) === "unknown" && connectHttpStatus(c) === 500));
    expect(codeFromConnectName("ok")).toBeUndefined();
    expect(codeFromConnectName("CANCELLED")).toBeUndefined();
  });

  it("a path that names no method is 404 (no route, or the upstream's HTTP 404), as a Connect server's unknown procedure; the upstream's own 12 is 501", () => {
    expect(connectLocalHttpStatus(12, "no_route")).toBe(404);
    expect(connectLocalHttpStatus(12, "upstream_http")).toBe(404);
    expect(connectLocalHttpStatus(12, "upstream")).toBe(501);
    expect(connectLocalHttpStatus(14, "upstream_http")).toBe(503);
    expect(connectLocalHttpStatus(14, undefined)).toBe(503);
  });

  it("an HTTP status without Connect's error JSON: the protocol's table", () => {
    expect([400, 401, 403, 404, 429, 502, 503, 504, 500, 418].map(codeFromHttpStatus)).toEqual([13, 16, 7, 12, 14, 14, 14, 14, 2, 2]);
  });
});

describe("timeouts", () => {
  it("connect-timeout-ms: 1 to 10 digits", () => {
    expect(parseConnectTimeout("250")).toEqual({ ok: true, ms: 250 });
    expect(parseConnectTimeout("9999999999")).toEqual({ ok: true, ms: 9999999999 });
    for (const bad of ["", "-1", "1.5", "12345678901", "1s", " 5"]) expect(parseConnectTimeout(bad).ok).toBe(false);
  });

  it("becomes a grpc-timeout that gives the upstream no less time, and no more than a unit's rounding", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 9_999_999_999 }), (ms) => {
        const g = decodeTimeout(grpcTimeoutForConnect(ms));
        if (!g.ok) return false;
        const want = BigInt(ms) * 1_000_000n;
        return g.ns >= want && (ms === 0 || g.ns - want < 60_000_000_000n);
      }),
    );
    expect(grpcTimeoutForConnect(250)).toBe("250000u");
  });

  it("and back: a budget in ns to whole ms, rounded up", () => {
    expect(connectTimeoutForNs(1n)).toBe("1");
    expect(connectTimeoutForNs(2_000_000n)).toBe("2");
    expect(connectTimeoutForNs(0n)).toBe("0");
    expect(connectTimeoutForNs(10n ** 20n)).toBe("9999999999");
    fc.assert(fc.property(fc.integer({ min: 1, max: 9_999_999_999 }), (ms) => Number(connectTimeoutForNs(decodeOk(grpcTimeoutForConnect(ms)))) >= ms && Number(connectTimeoutForNs(BigInt(ms) * 1_000_000n)) === ms));
  });
});

function decodeOk(s: string): bigint {
  const r = decodeTimeout(s);
  if (!r.ok) throw new Error(r.error);
  return r.ns;
}

describe("the GET form", () => {
  it("reads the spec's example query", () => {
    const r = parseGetQuery("message=%7B%22sentence%22%3A%22hi%22%7D&encoding=json&connect=v1");
    expect(r).toMatchObject({ ok: true, codec: "json", compression: null });
    expect(new TextDecoder().decode((r as { message: Uint8Array }).message)).toBe('{"sentence":"hi"}');
  });

  it("base64=1: base64url, padded or not; compression", () => {
    const bytes = Uint8Array.from([0xfb, 0xff, 0x00, 0x10]);
    const url = Buffer.from(bytes).toString("base64url");
    for (const m of [url, `${url}==`.slice(0, url.length + ((4 - (url.length % 4)) % 4))]) {
      const r = parseGetQuery(`encoding=proto&base64=1&compression=gzip&message=${m}`);
      expect(r).toMatchObject({ ok: true, codec: "proto", compression: "gzip" });
      expect([...(r as { message: Uint8Array }).message]).toEqual([...bytes]);
    }
  });

  it("refuses a missing encoding, connect other than v1, bad base64", () => {
    expect(parseGetQuery("message=abc").ok).toBe(false);
    expect(parseGetQuery("encoding=json&connect=v2").ok).toBe(false);
    expect(parseGetQuery("encoding=proto&base64=1&message=a").ok).toBe(false);
    expect(isConnectGet("a=1&encoding=json")).toBe(true);
    expect(isConnectGet("xencoding=json")).toBe(false);
  });

  it("property: any bytes survive base64url and percent-encoding", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (b) => {
        const viaB64 = parseGetQuery(`encoding=proto&base64=1&message=${Buffer.from(b).toString("base64url")}`);
        const viaPct = parseGetQuery(`encoding=proto&message=${[...b].map((x) => `%${x.toString(16).padStart(2, "0")}`).join("")}`);
        return viaB64.ok && viaPct.ok && Buffer.from(viaB64.message).equals(Buffer.from(b)) && Buffer.from(viaPct.message).equals(Buffer.from(b));
      }),
    );
    expect(Buffer.from(percentDecode("a+b%2x%41")).toString()).toBe("a b%2xA");
  });
});

describe("base64", () => {
  it("property: raw standard encoding decodes back, in either alphabet", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 100 }), (b) => {
        const s = encodeBase64Raw(b);
        return s === Buffer.from(b).toString("base64").replace(/=+$/, "") && Buffer.from(decodeBase64Loose(s)!).equals(Buffer.from(b)) && Buffer.from(decodeBase64Loose(Buffer.from(b).toString("base64url"))!).equals(Buffer.from(b));
      }),
    );
    expect(decodeBase64Loose("a")).toBeNull();
    expect(decodeBase64Loose("ab!d")).toBeNull();
  });
});

describe("errors: gRPC status ↔ Connect's error JSON", () => {
  const detail = { typeUrl: "type.googleapis.com/google.rpc.ErrorInfo", value: Uint8Array.from([0x0a, 0x03, 0x61, 0x62, 0x63]) };

  it("a status with details (grpc-status-details-bin) becomes code, message and details", () => {
    const bin = Buffer.from(encodeStatusProto({ code: 5, message: "ignored here", details: [detail] })).toString("base64");
    expect(connectErrorFor(5, "no such thing", bin)).toEqual({ code: "not_found", message: "no such thing", details: [{ type: "google.rpc.ErrorInfo", value: "CgNhYmM" }] });
    expect(connectErrorFor(13, "")).toEqual({ code: "internal" });
    expect(connectErrorFor(2, "x", "!!!not base64")).toEqual({ code: "unknown", message: "x" });
  });

  it("and back: the code by name, else by HTTP status; details as a google.rpc.Status", () => {
    const back = grpcStatusFor({ code: "not_found", message: "m", details: [{ type: "google.rpc.ErrorInfo", value: "CgNhYmM" }] }, 404);
    expect(back.code).toBe(5);
    expect(back.message).toBe("m");
    expect(decodeStatusProto(decodeBase64Loose(back.detailsBin!)!)).toEqual({ code: 5, message: "m", details: [detail] });
    expect(grpcStatusFor({ code: "bogus" }, 503)).toEqual({ code: 14, message: "", detailsBin: undefined });
    expect(grpcStatusFor("not json", 401).code).toBe(16);
  });

  it("property: status → error JSON → status keeps code, message and details", () => {
    const arb = fc.record({
      code: fc.integer({ min: 1, max: 16 }),
      message: fc.string(),
      details: fc.array(fc.record({ typeUrl: fc.stringMatching(/^[a-z][a-z0-9.]{0,20}$/).map((t) => `type.googleapis.com/${t}`), value: fc.uint8Array({ maxLength: 40 }) }), { maxLength: 3 }),
    });
    fc.assert(
      fc.property(arb, (s) => {
        const bin = Buffer.from(encodeStatusProto(s)).toString("base64");
        const json = JSON.parse(JSON.stringify(connectErrorFor(s.code, s.message, bin))) as unknown;
        const back = grpcStatusFor(json, 200);
        const st = back.detailsBin === undefined ? { details: [] } : decodeStatusProto(decodeBase64Loose(back.detailsBin)!)!;
        return back.code === s.code && back.message === s.message && JSON.stringify(st.details.map((d) => [d.typeUrl, [...d.value]])) === JSON.stringify(s.details.map((d) => [d.typeUrl, [...d.value]]));
      }),
    );
  });

  it("google.rpc.Status: malformed bytes are null, never a throw", () => {
    fc.assert(fc.property(fc.uint8Array({ maxLength: 64 }), (b) => {
      const r = decodeStatusProto(b);
      return r === null || typeof r.code === "number";
    }));
    expect(decodeStatusProto(Uint8Array.from([0x12, 0x05, 0x61]))).toBeNull();
  });
});

describe("the end-of-stream envelope", () => {
  it("success with trailers, and an error", () => {
    const ok = encodeEndStream(null, [["x-a", "1"], ["X-A", "2"], ["x-b", "3"]]);
    expect(ok[0]).toBe(END_STREAM_FLAG);
    expect(Buffer.from(ok).readUInt32BE(1)).toBe(ok.length - 5);
    expect(parseEndStream(ok.subarray(5))).toEqual({ error: null, metadata: { "x-a": ["1", "2"], "x-b": ["3"] } });
    const bad = encodeEndStream({ code: "unavailable", message: "down" }, []);
    expect(new TextDecoder().decode(bad.subarray(5))).toBe('{"error":{"code":"unavailable","message":"down"}}');
    expect(new TextDecoder().decode(encodeEndStream(null, []).subarray(5))).toBe("{}");
    expect(parseEndStream(new TextEncoder().encode("[1]"))).toBeNull();
  });
});
