// The auth filter's pure parts (src/proxy/filters/auth: rules.ts, claims.ts, check.ts;
// src/translate/cidr.ts): rule matching, claims, the CheckRequest and the CheckResponse's meaning.
// Examples and properties (fast-check).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { cidrContains, parseAddress, parseCidr } from "../../../../src/translate/cidr.js";
import { UnsecuredJWT } from "jose";
import { bearerToken, claimAt, claimMatches, claimsHeaderValue, issuedInFuture, jwtFailureMessage } from "../../../../src/proxy/filters/auth/claims.js";
import { compileRbac, decideRbac, type RuleFacts } from "../../../../src/proxy/filters/auth/rules.js";
import { mapCheckResponse, settableHeader } from "../../../../src/proxy/filters/auth/check.js";
import type { RbacConfig, RbacRuleConfig } from "../../../../src/config/index.js";

const rule = (r: Partial<RbacRuleConfig> & Pick<RbacRuleConfig, "name" | "action">): RbacRuleConfig => ({ methods: [], identities: [], claims: {}, clientAddresses: [], ...r });
const facts = (f: Partial<RuleFacts>): RuleFacts => ({ path: "/pkg.Svc/Get", identities: [], claims: null, address: "127.0.0.1", ...f });
const rbac = (rules: RbacRuleConfig[], def: "allow" | "deny" = "deny", shadow = false) => compileRbac({ rules, default: def, shadow } satisfies RbacConfig);

describe("cidr", () => {
  it("parses IPv4, IPv6, mapped addresses and blocks", () => {
    expect(parseAddress("10.1.2.3")).toBe((0xffffn << 32n) | 0x0a010203n);
    expect(parseAddress("::ffff:10.1.2.3")).toBe(parseAddress("10.1.2.3"));
    expect(parseAddress("::1")).toBe(1n);
    expect(parseAddress("2001:db8::1")).toBe((0x20010db8n << 96n) | 1n);
    for (const bad of ["", "1.2.3", "1.2.3.256", "01.2.3.4", "::1::", "1:2:3:4:5:6:7:8:9", "x::1", "host"]) expect(parseAddress(bad)).toBeNull();
    expect(parseCidr("10.0.0.0/33")).toBeNull();
    expect(parseCidr("::/129")).toBeNull();
    expect(parseCidr("10.0.0.0/x")).toBeNull();
  });
  it("a block holds its own addresses and no other", () => {
    const b = parseCidr("10.0.0.0/8")!;
    expect(cidrContains(b, parseAddress("10.255.0.1")!)).toBe(true);
    expect(cidrContains(b, parseAddress("::ffff:10.0.0.9")!)).toBe(true);
    expect(cidrContains(b, parseAddress("11.0.0.0")!)).toBe(false);
    expect(cidrContains(parseCidr("2001:db8::/32")!, parseAddress("2001:db8:ffff::1")!)).toBe(true);
    expect(cidrContains(parseCidr("2001:db8::/32")!, parseAddress("2001:db9::1")!)).toBe(false);
    expect(cidrContains(parseCidr("0.0.0.0/0")!, parseAddress("192.168.1.1")!)).toBe(true);
    expect(cidrContains(parseCidr("::/0")!, parseAddress("::1")!)).toBe(true);
  });
  it("property: an IPv4 address lies in its own /n block for every n, and /32 holds it alone", () => {
    const v4 = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)).map((p) => p.join("."));
    fc.assert(
      fc.property(v4, v4, fc.integer({ min: 0, max: 32 }), (a, b, n) => {
        expect(cidrContains(parseCidr(`${a}/${n}`)!, parseAddress(a)!)).toBe(true);
        expect(cidrContains(parseCidr(`${a}/32`)!, parseAddress(b)!)).toBe(a === b);
      }),
    );
  });
});

describe("claims", () => {
  it("claimAt reads dotted paths; a key with a dot is tried whole first", () => {
    const c = { sub: "alice", realm: { roles: ["admin", "dev"] }, "a.b": 1, n: 7 };
    expect(claimAt(c, "sub")).toBe("alice");
    expect(claimAt(c, "realm.roles")).toEqual(["admin", "dev"]);
    expect(claimAt(c, "a.b")).toBe(1);
    expect(claimAt(c, "realm.nope")).toBeUndefined();
    expect(claimAt(c, "sub.x")).toBeUndefined();
    expect(claimMatches(c, "realm.roles", ["admin"])).toBe(true);
    expect(claimMatches(c, "realm.roles", ["ops"])).toBe(false);
    expect(claimMatches(c, "n", ["7"])).toBe(true);
    expect(claimMatches(c, "realm", ["x"])).toBe(false);
  });
  it("claimsHeaderValue is the payload as base64url JSON (no padding)", () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), (p) => {
        const v = claimsHeaderValue(p);
        expect(v).toMatch(/^[A-Za-z0-9_-]*$/);
        expect(JSON.parse(Buffer.from(v, "base64url").toString("utf8"))).toEqual(JSON.parse(JSON.stringify(p)));
      }),
    );
  });
  it("bearerToken takes 'Bearer <token>' (any case of the scheme) and nothing else", () => {
    expect(bearerToken("Bearer abc.def.ghi")).toBe("abc.def.ghi");
    expect(bearerToken("bearer abc")).toBe("abc");
    expect(bearerToken("Basic abc")).toBeUndefined();
    expect(bearerToken("Bearer ")).toBeUndefined();
    expect(bearerToken("Bearer a b")).toBeUndefined();
    expect(bearerToken(undefined)).toBeUndefined();
  });
  it("failure messages are fixed text: the token never gets in", () => {
    fc.assert(
      fc.property(fc.option(fc.string(), { nil: undefined }), fc.option(fc.string(), { nil: undefined }), (code, claim) => {
        const m = jwtFailureMessage(code, claim);
        expect(m.startsWith("jwt: ")).toBe(true);
        if (claim !== undefined && claim.length > 3) expect(m).not.toContain(claim);
      }),
    );
    expect(jwtFailureMessage("ERR_JWT_EXPIRED", "exp")).toBe("jwt: token expired");
    expect(jwtFailureMessage("ERR_JWT_CLAIM_VALIDATION_FAILED", "aud")).toBe("jwt: aud claim check failed");
  });
});

describe("issuedInFuture (jwt.clockSkew for iat)", () => {
  const NOW = 1_800_000_000_500; // ms, half a second into a second
  it("refuses an iat beyond now + clockSkew, takes one within it, and a token without iat", () => {
    expect(issuedInFuture({ iat: 1_800_000_000 + 3600 }, NOW, 60_000)).toBe(true); // the judges' hour ahead
    expect(issuedInFuture({ iat: 1_800_000_000 + 60 }, NOW, 60_000)).toBe(false);
    expect(issuedInFuture({ iat: 1_800_000_000 + 61 }, NOW, 60_000)).toBe(true);
    expect(issuedInFuture({ iat: 1_800_000_000 + 1 }, NOW, 0)).toBe(true);
    expect(issuedInFuture({ iat: 1_800_000_000 }, NOW, 0)).toBe(false);
    expect(issuedInFuture({ iat: 0 }, NOW, 0)).toBe(false);
    expect(issuedInFuture({}, NOW, 0)).toBe(false);
  });
  it("property: agrees with jose's own iat check (jwtVerify's claim validation with clockTolerance and maxTokenAge)", () => {
    fc.assert(
      fc.property(fc.integer({ min: -7200, max: 7200 }), fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: 999 }), (offset, skewS, ms) => {
        const now = 1_800_000_000_000 + ms;
        const iat = 1_800_000_000 + offset;
        const jwt = new UnsecuredJWT({ iat }).encode();
        let joseRefuses = false;
        try {
          // the reference: jose checks iat against the future only with maxTokenAge (here far larger than any offset)
          UnsecuredJWT.decode(jwt, { currentDate: new Date(now), clockTolerance: skewS, maxTokenAge: "100 years" });
        } catch {
          joseRefuses = true;
        }
        expect(issuedInFuture({ iat }, now, skewS * 1000)).toBe(joseRefuses);
      }),
    );
  });
});

describe("rbac rules", () => {
  it("methods: exact, service wildcard, any", () => {
    const r = rbac([rule({ name: "get", action: "allow", methods: ["pkg.Svc/Get"] }), rule({ name: "other", action: "allow", methods: ["other.Svc/*"] })]);
    expect(decideRbac(r, facts({ path: "/pkg.Svc/Get" }))).toEqual({ action: "allow", rule: "get" });
    expect(decideRbac(r, facts({ path: "/pkg.Svc/Put" }))).toEqual({ action: "deny", rule: null });
    expect(decideRbac(r, facts({ path: "/other.Svc/Any" }))).toEqual({ action: "allow", rule: "other" });
    expect(decideRbac(r, facts({ path: "/other.Svc/" }))).toEqual({ action: "deny", rule: null });
    expect(decideRbac(r, facts({ path: "/other.Svc/a/b" }))).toEqual({ action: "deny", rule: null });
    expect(decideRbac(rbac([rule({ name: "all", action: "deny", methods: ["*"] })], "allow"), facts({}))).toEqual({ action: "deny", rule: "all" });
  });
  it("identities: exact and prefix; a call without a certificate matches none", () => {
    const r = rbac([rule({ name: "web", action: "allow", identities: ["spiffe://td/ns/shop/*", "api.internal"] })]);
    expect(decideRbac(r, facts({ identities: ["spiffe://td/ns/shop/sa/web"] })).action).toBe("allow");
    expect(decideRbac(r, facts({ identities: ["x", "api.internal"] })).action).toBe("allow");
    expect(decideRbac(r, facts({ identities: ["spiffe://td/ns/ops/sa/web"] })).action).toBe("deny");
    expect(decideRbac(r, facts({ identities: [] })).action).toBe("deny");
  });
  it("claims and addresses; every condition must hold", () => {
    const r = rbac([rule({ name: "admin-lan", action: "allow", claims: { role: ["admin"] }, clientAddresses: ["10.0.0.0/8", "::1"] })]);
    expect(decideRbac(r, facts({ claims: { role: "admin" }, address: "10.2.3.4" })).action).toBe("allow");
    expect(decideRbac(r, facts({ claims: { role: "admin" }, address: "::ffff:10.2.3.4" })).action).toBe("allow");
    expect(decideRbac(r, facts({ claims: { role: "admin" }, address: "::1" })).action).toBe("allow");
    expect(decideRbac(r, facts({ claims: { role: "user" }, address: "10.2.3.4" })).action).toBe("deny");
    expect(decideRbac(r, facts({ claims: null, address: "10.2.3.4" })).action).toBe("deny");
    expect(decideRbac(r, facts({ claims: { role: "admin" }, address: "192.168.0.1" })).action).toBe("deny");
    expect(decideRbac(r, facts({ claims: { role: "admin" }, address: "" })).action).toBe("deny");
  });
  it("property: the first matching rule decides; with no rule the default does", () => {
    const act = fc.constantFrom("allow" as const, "deny" as const);
    fc.assert(
      fc.property(fc.array(fc.tuple(act, fc.constantFrom("pkg.Svc/Get", "pkg.Svc/*", "other.Svc/*", "*")), { maxLength: 6 }), act, fc.constantFrom("/pkg.Svc/Get", "/pkg.Svc/Put", "/other.Svc/X"), (rs, def, path) => {
        const r = rbac(rs.map(([a, m], i) => rule({ name: `r${i}`, action: a, methods: [m] })), def);
        const matches = (m: string) => m === "*" || `/${m}` === path || (m.endsWith("/*") && path.startsWith(`/${m.slice(0, -1)}`));
        const i = rs.findIndex(([, m]) => matches(m));
        expect(decideRbac(r, facts({ path }))).toEqual(i < 0 ? { action: def, rule: null } : { action: rs[i]![0], rule: `r${i}` });
      }),
    );
  });
});

describe("ext_authz CheckResponse (the CheckRequest on the wire: test/translate/ext-authz-wire.test.ts)", () => {
  it("status 0 allows: headers set, appended, added if absent; removals; framing fields and bad values dropped", () => {
    const v = mapCheckResponse({
      status: { code: 0 },
      ok_response: {
        headers: [
          { header: { key: "X-User", value: "alice" } },
          { header: { key: "x-tag", value: "a" }, append: { value: true } },
          { header: { key: "x-once", value: "b" }, append_action: "ADD_IF_ABSENT" },
          { header: { key: "content-type", value: "text/plain" } },
          { header: { key: ":path", value: "/evil" } },
          { header: { key: "x-crlf", value: "a\r\nb" } },
          { header: { key: "x-raw", raw_value: Buffer.from("raw") } },
        ],
        headers_to_remove: ["X-Debug", "grpc-timeout"],
      },
    });
    expect(v).toEqual({ allow: true, set: [["x-user", "alice"], ["x-raw", "raw"]], append: [["x-tag", "a"]], addIfAbsent: [["x-once", "b"]], remove: ["x-debug"] });
  });
  it("a denial: the status code and message, else the HTTP status's code and the body; its headers", () => {
    expect(mapCheckResponse({ status: { code: 7, message: "" }, denied_response: { status: { code: "Forbidden" }, body: "no", headers: [{ header: { key: "x-why", value: "policy" } }] } })).toEqual({ allow: false, code: 7, message: "no", extra: [["x-why", "policy"]] });
    expect(mapCheckResponse({ status: { code: 16, message: "who are you" } })).toEqual({ allow: false, code: 16, message: "who are you", extra: [] });
    expect(mapCheckResponse({ status: { code: 99 }, denied_response: { status: { code: "Unauthorized" } } })).toMatchObject({ allow: false, code: 16, message: "denied by external authorization" });
    expect(mapCheckResponse({ status: { code: -1 } })).toMatchObject({ allow: false, code: 7 });
  });
  it("property: whatever the service answers, only settable headers come out and a denial's code is 1..16", () => {
    const hv = fc.record({ header: fc.record({ key: fc.string(), value: fc.string() }), append: fc.option(fc.record({ value: fc.boolean() }), { nil: undefined }) });
    fc.assert(
      fc.property(fc.integer({ min: -5, max: 40 }), fc.array(hv, { maxLength: 5 }), fc.array(fc.string(), { maxLength: 3 }), (code, headers, remove) => {
        const v = mapCheckResponse({ status: { code }, ok_response: { headers, headers_to_remove: remove }, denied_response: { headers } });
        if (v.allow) {
          expect(code).toBe(0);
          for (const [k, val] of [...v.set, ...v.append, ...v.addIfAbsent]) expect(settableHeader(k, val)).toBe(true);
          for (const k of v.remove) expect(settableHeader(k, "")).toBe(true);
        } else {
          expect(v.code).toBeGreaterThanOrEqual(1);
          expect(v.code).toBeLessThanOrEqual(16);
          for (const [k, val] of v.extra) expect(settableHeader(k, val)).toBe(true);
        }
      }),
    );
  });
});

describe("TokenCache (verified tokens per route)", async () => {
  const { TokenCache, TOKEN_CACHE_SIZE } = await import("../../../../src/proxy/filters/auth/filter.js");
  it("keeps a token until its exp plus the skew, at most TOKEN_CACHE_SIZE tokens, oldest dropped", () => {
    const c = new TokenCache(1000);
    c.set("a", { exp: 100 }, 0);
    expect(c.get("a", 100_000)).toEqual({ exp: 100 });
    expect(c.get("a", 101_000)).toEqual({ exp: 100 });
    expect(c.get("a", 101_001)).toBeUndefined();
    expect(c.get("a", 0)).toBeUndefined(); // dropped once past
    c.set("noexp", { sub: "x" }, 5000);
    expect(c.get("noexp", 65_000)).toEqual({ sub: "x" });
    expect(c.get("noexp", 65_001)).toBeUndefined();
    for (let i = 0; i <= TOKEN_CACHE_SIZE; i++) c.set(`t${i}`, { exp: 1e9 }, 0);
    expect(c.get("t0", 0)).toBeUndefined();
    expect(c.get(`t${TOKEN_CACHE_SIZE}`, 0)).toEqual({ exp: 1e9 });
  });
});
