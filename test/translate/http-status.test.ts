import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { codeFromHttpStatus, httpStatusMessage, httpStatusText } from "../../src/translate/http-status.js";

describe("codeFromHttpStatus() follows grpc-go HTTPStatusConvTab", () => {
  it.each([
    [400, 13], [401, 16], [403, 7], [404, 12], [429, 14], [502, 14], [503, 14], [504, 14],
  ] as const)("maps HTTP %i to gRPC %i", (status, code) => {
    expect(codeFromHttpStatus(status)).toBe(code);
  });

  it.each([200, 201, 204, 301, 405, 415, 431, 499, 500, 501, 505, 0, 999])(
    "falls back to UNKNOWN for HTTP %i",
    (status) => { expect(codeFromHttpStatus(status)).toBe(2); },
  );

  it("maps every other status to UNKNOWN", () => {
    const table = new Set([400, 401, 403, 404, 429, 502, 503, 504]);
    fc.assert(fc.property(fc.integer({ min: 0, max: 1000 }), (s) => {
      if (!table.has(s)) expect(codeFromHttpStatus(s)).toBe(2);
    }));
  });
});

describe("httpStatusText() uses Go net/http StatusText wording", () => {
  it.each([
    [100, "Continue"], [200, "OK"], [204, "No Content"], [301, "Moved Permanently"], [400, "Bad Request"],
    [401, "Unauthorized"], [403, "Forbidden"], [404, "Not Found"], [405, "Method Not Allowed"],
    [413, "Request Entity Too Large"], [415, "Unsupported Media Type"], [418, "I'm a teapot"],
    [429, "Too Many Requests"], [431, "Request Header Fields Too Large"], [500, "Internal Server Error"],
    [501, "Not Implemented"], [502, "Bad Gateway"], [503, "Service Unavailable"], [504, "Gateway Timeout"],
  ] as const)("words %i as %j", (status, text) => {
    expect(httpStatusText(status)).toBe(text);
  });

  it("returns an empty string for a status Go does not know", () => {
    expect(httpStatusText(299)).toBe("");
    expect(httpStatusText(306)).toBe("");
    expect(httpStatusText(600)).toBe("");
  });
});

describe("httpStatusMessage() reproduces grpc-go's client message", () => {
  it("names an unexpected content-type with Go quoting", () => {
    expect(httpStatusMessage(503, "text/html")).toBe(
      'unexpected HTTP status code received from server: 503 (Service Unavailable); transport: received unexpected content-type "text/html"',
    );
  });

  it("reports a missing content-type", () => {
    expect(httpStatusMessage(404, undefined)).toBe(
      "unexpected HTTP status code received from server: 404 (Not Found); malformed header: missing HTTP content-type",
    );
  });

  it("omits the content-type part when the content-type is gRPC", () => {
    expect(httpStatusMessage(503, "application/grpc")).toBe(
      "unexpected HTTP status code received from server: 503 (Service Unavailable)",
    );
    expect(httpStatusMessage(429, "application/grpc+proto")).toBe(
      "unexpected HTTP status code received from server: 429 (Too Many Requests)",
    );
  });

  it("keeps the HTTP part for status 200 with a non-gRPC content-type", () => {
    expect(httpStatusMessage(200, "text/plain; charset=utf-8")).toBe(
      'unexpected HTTP status code received from server: 200 (OK); transport: received unexpected content-type "text/plain; charset=utf-8"',
    );
  });

  it("escapes quotes, backslashes and control bytes in the content-type like Go %q", () => {
    expect(httpStatusMessage(500, 'a"b\\c\td\x01')).toBe(
      'unexpected HTTP status code received from server: 500 (Internal Server Error); transport: received unexpected content-type "a\\"b\\\\c\\td\\x01"',
    );
  });

  it("prints latin1 header bytes that are invalid UTF-8 as \\x escapes and valid UTF-8 as text", () => {
    // node delivers header values one char per wire byte: "\xc3\xa9" is the UTF-8 of é.
    expect(httpStatusMessage(500, "x\xff")).toMatch(/content-type "x\\xff"$/);
    expect(httpStatusMessage(500, "\xc3\xa9")).toMatch(/content-type "é"$/);
    expect(httpStatusMessage(500, "\xc2\x85")).toMatch(/content-type "\\u0085"$/);
  });

  it("leaves an unknown status's text empty as Go does", () => {
    expect(httpStatusMessage(299, undefined)).toBe(
      "unexpected HTTP status code received from server: 299 (); malformed header: missing HTTP content-type",
    );
  });
});
