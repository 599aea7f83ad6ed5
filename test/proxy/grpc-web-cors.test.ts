// CORS origin rules for gRPC-Web (src/proxy/downstream/cors.ts): exact origins, wildcards with and
// without a scheme, "*", the preflight answer and what a refused origin gets (nothing).
import { describe, expect, it } from "vitest";
import { compileCors, originAllowed, preflightCors, responseCors } from "../../src/proxy/downstream/cors.js";

describe("originAllowed()", () => {
  const p = compileCors(["https://app.example.com", "https://*.shop.test", "*.any.test", "localhost:8443"]);
  it.each([
    ["https://app.example.com", true],
    ["HTTPS://APP.EXAMPLE.COM", true],
    ["http://app.example.com", false], // another scheme is another origin
    ["https://app.example.com:8443", false], // and another port
    ["https://evil.app.example.com", false],
    ["https://a.shop.test", true],
    ["https://a.b.shop.test", true],
    ["https://shop.test", false], // the wildcard needs a label
    ["http://a.shop.test", false], // its scheme is fixed
    ["https://a.shop.test.evil.com", false],
    ["https://ashop.test", false],
    ["http://x.any.test", true], // no scheme in the rule: any scheme
    ["chrome-extension://x.any.test", true],
    ["https://any.test", false],
    ["http://localhost:8443", true],
    ["http://localhost:8444", false],
    ["null", false],
  ])("%s → %s", (origin, ok) => expect(originAllowed(p, origin)).toBe(ok));

  it('"*" allows every origin', () => expect(originAllowed(compileCors(["*"]), "https://whatever.test")).toBe(true));
});

describe("preflightCors() and responseCors()", () => {
  const p = compileCors(["https://app.example.com"]);
  it("answers an allowed origin's preflight with POST and the gRPC-Web headers plus what was asked (tokens only)", () => {
    const h = preflightCors(p, "https://app.example.com", "POST", "X-Custom, grpc-timeout, bad header, x-b3")!;
    expect(h["access-control-allow-origin"]).toBe("https://app.example.com");
    expect(h["access-control-allow-methods"]).toBe("POST");
    expect(h["access-control-allow-headers"]!.split(",")).toEqual(["content-type", "x-grpc-web", "x-user-agent", "grpc-timeout", "x-custom", "x-b3"]);
    expect(h["vary"]).toBe("Origin");
  });
  it("gives nothing to a refused origin, to a method other than POST, or without a cors policy", () => {
    expect(preflightCors(p, "https://evil.test", "POST", undefined)).toBeNull();
    expect(preflightCors(p, "https://app.example.com", "PUT", undefined)).toBeNull();
    expect(preflightCors(null, "https://app.example.com", "POST", undefined)).toBeNull();
    expect(responseCors(p, "https://evil.test")).toBeNull();
    expect(responseCors(p, undefined)).toBeNull();
  });
  it("exposes the status fields and a rate-limit refusal's hint on the actual response", () => {
    expect(responseCors(p, "https://app.example.com")).toEqual({
      "access-control-allow-origin": "https://app.example.com",
      "access-control-expose-headers": "grpc-status,grpc-message,grpc-status-details-bin,grpc-retry-pushback-ms,x-ratelimit-limit,x-ratelimit-remaining,x-ratelimit-reset",
      vary: "Origin",
    });
  });
});
