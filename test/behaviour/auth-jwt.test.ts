// Issue 21, authentication: a route's `jwt` block verifies the caller's bearer token (jose) against
// keys from a JWKS served over HTTPS by a real node https server (certificate from certs.ts), or
// from a JWKS file. Refusals end 16 UNAUTHENTICATED with decided_by jwt, never reach the upstream,
// are counted in dojang_auth_decisions_total, and no token or key appears in the logs. Key
// rotation (a new kid) and the JWKS server going down within and past staleWhileError.
import { writeFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { createLocalJWKSet, jwtVerify, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDojang, type DojangHandle } from "../../src/index.js";
import { CertDir, type Ca } from "../helpers/certs.js";
import { echoAll, jwks, memoryLogger, signingKey, startJwksServer, token, type JwksServer, type SigningKey } from "../helpers/auth.js";
import { echoClient, sample, scrape, unary, type EchoClient } from "../helpers/peers.js";
import type { RawUpstream } from "../helpers/peers.js";
import { assertDistBuilt, runCli, sleep, waitFor } from "../helpers/process.js";

const ISS = "https://issuer.test";
let certs: CertDir;
let ca: Ca;
let upstream: RawUpstream;
let rs: SigningKey, es: SigningKey, ed: SigningKey, ps: SigningKey, rogue: SigningKey;

beforeAll(async () => {
  certs = new CertDir();
  ca = certs.ca("jwks-ca");
  upstream = await echoAll();
  [rs, es, ed, ps] = await Promise.all([signingKey("RS256", "rs-1"), signingKey("ES256", "es-1"), signingKey("EdDSA", "ed-1"), signingKey("PS256", "ps-1")]);
  rogue = await signingKey("ES256", "es-1"); // same kid, other key
}, 60_000);
afterAll(async () => {
  await upstream.close();
  certs.remove();
});

interface Env {
  px: DojangHandle;
  c: EchoClient;
  lines: string[];
  close(): Promise<void>;
}

async function proxyWith({ jwt }: { jwt: Record<string, unknown> }): Promise<Env> {
  const { logger, lines } = memoryLogger();
  const px = await startDojang({
    logger,
    config: {
      admin: { address: "127.0.0.1:0" },
      accessLog: true,
      journal: 1000,
      listeners: [{ name: "main", address: "127.0.0.1:0", routes: [{ match: { prefix: "/" }, cluster: "backend", jwt }] }],
      clusters: [{ name: "backend", endpoints: [upstream.address] }],
    },
  });
  const c = echoClient(px.address);
  return { px, c, lines, close: async () => (c.close(), await px.close(0)) };
}

const bearer = (t: string): grpc.Metadata => {
  const m = new grpc.Metadata();
  m.set("authorization", `Bearer ${t}`);
  return m;
};

describe("route jwt with a JWKS URL over HTTPS", () => {
  let server: JwksServer;
  let env: Env;
  beforeAll(async () => {
    server = await startJwksServer(certs, ca, jwks(rs, es, ed, ps));
    env = await proxyWith({
      jwt: {
        issuer: ISS,
        audiences: ["shop", "admin"],
        clockSkew: "30s",
        jwks: { url: server.url, caFile: ca.certFile, refreshInterval: "1h", staleWhileError: "1h", timeout: "5s" },
        claimsHeader: "x-jwt-claims",
      },
    });
  }, 30_000);
  afterAll(async () => {
    await env.close();
    await server.close();
  });

  it("RS256, ES256 and EdDSA tokens pass; the upstream gets the claims header and no authorization header", { timeout: 30_000 }, async () => {
    for (const k of [rs, es, ed]) {
      const before = upstream.seen.length;
      const r = await unary(env.c, Buffer.from("hi"), bearer(await token(k, { iss: ISS, aud: "shop", sub: `user-${k.alg}`, role: "admin" })));
      expect(r.err).toBeNull();
      const seen = upstream.seen[before]!;
      expect(seen.headers["authorization"]).toBeUndefined();
      const claims = JSON.parse(Buffer.from(String(seen.headers["x-jwt-claims"]), "base64url").toString("utf8"));
      expect(claims).toMatchObject({ iss: ISS, aud: "shop", sub: `user-${k.alg}`, role: "admin" });
    }
    // a client's own claims header is replaced, not passed on
    const m = bearer(await token(es, { iss: ISS, aud: "admin", sub: "bob" }));
    m.set("x-jwt-claims", Buffer.from('{"sub":"root"}').toString("base64url"));
    const before = upstream.seen.length;
    expect((await unary(env.c, Buffer.from("x"), m)).err).toBeNull();
    expect(JSON.parse(Buffer.from(String(upstream.seen[before]!.headers["x-jwt-claims"]), "base64url").toString()).sub).toBe("bob");
  });

  it("each bad token ends 16 UNAUTHENTICATED (decided_by jwt) before the upstream, counted, with no token in the logs", { timeout: 30_000 }, async () => {
    const cases: [string, grpc.Metadata, RegExp][] = [
      ["missing", new grpc.Metadata(), /^jwt: missing bearer token$/],
      ["expired", bearer(await token(es, { iss: ISS, aud: "shop", expIn: -120 })), /^jwt: token expired$/],
      ["wrong issuer", bearer(await token(es, { iss: "https://evil.test", aud: "shop" })), /^jwt: iss claim check failed$/],
      ["wrong audience", bearer(await token(es, { iss: ISS, aud: "billing" })), /^jwt: aud claim check failed$/],
      ["bad signature", bearer(await token(rogue, { iss: ISS, aud: "shop" })), /^jwt: signature does not verify$/],
      ["algorithm not allowed (PS256)", bearer(await token(ps, { iss: ISS, aud: "shop" })), /^jwt: signing algorithm not allowed$/],
      ["garbage", bearer("not.a.jwt"), /^jwt: malformed token$/],
    ];
    const before = upstream.seen.length;
    const tokens: string[] = [];
    for (const [what, md, msg] of cases) {
      const auth = md.get("authorization")[0];
      if (typeof auth === "string") tokens.push(auth.slice(7));
      const r = await unary(env.c, Buffer.from(what), md);
      expect(r.err?.code, what).toBe(16);
      expect(r.err?.details, what).toMatch(msg);
    }
    expect(upstream.seen.length).toBe(before);
    expect(env.px.calls.filter((c) => c.decided_by === "jwt").length).toBeGreaterThanOrEqual(cases.length);
    const text = await scrape(env.px.adminAddress);
    expect(sample(text, "dojang_auth_decisions_total", { stage: "jwt", result: "deny" })).toBeGreaterThanOrEqual(cases.length);
    expect(sample(text, "dojang_calls_total", { decided_by: "jwt", grpc_code: "UNAUTHENTICATED" })).toBeGreaterThanOrEqual(cases.length);
    // nothing of the tokens (nor the signatures alone) in any log line or access record
    const logged = env.lines.join("\n") + JSON.stringify(env.px.calls);
    for (const t of tokens) {
      expect(logged).not.toContain(t);
      const sig = t.split(".")[2];
      if (sig !== undefined && sig.length > 10) expect(logged).not.toContain(sig);
    }
    for (const k of [rs, es, ed]) expect(logged).not.toContain(String(k.jwk.x ?? k.jwk.n).slice(0, 24));
  });

  // 45 s, not 60 s: a token 60 s past its exp is refused by the default skew (60s) too, so it
  // could not tell the configured 30s from the key being ignored; 45 s is within the default.
  it("clockSkew: a token expired 10 s ago passes with 30s of skew; one expired 45 s ago does not (the default 60s would pass it)", { timeout: 30_000 }, async () => {
    expect((await unary(env.c, Buffer.from("a"), bearer(await token(rs, { iss: ISS, aud: "shop", expIn: -10 })))).err).toBeNull();
    const late = await unary(env.c, Buffer.from("b"), bearer(await token(rs, { iss: ISS, aud: "shop", expIn: -45 })));
    expect(late.err?.code).toBe(16);
    expect(late.err?.details).toBe("jwt: token expired");
  });

  it("algorithms: a key the JWKS publishes signs a token the route refuses when its algorithm is not listed", { timeout: 30_000 }, async () => {
    // the JWKS has the ES256 and EdDSA keys; ES256 is in the default list, so only the key
    // `algorithms: [EdDSA]` refuses the ES256 token
    const server = await startJwksServer(certs, ca, jwks(es, ed));
    const only = await proxyWith({ jwt: { issuer: ISS, algorithms: ["EdDSA"], jwks: { url: server.url, caFile: ca.certFile } } });
    try {
      expect((await unary(only.c, Buffer.from("a"), bearer(await token(ed, { iss: ISS })))).err).toBeNull();
      const r = await unary(only.c, Buffer.from("b"), bearer(await token(es, { iss: ISS })));
      expect(r.err?.code).toBe(16);
      expect(r.err?.details).toBe("jwt: signing algorithm not allowed");
    } finally {
      await only.close();
      await server.close();
    }
  });
});

describe("JWKS refresh: key rotation and the server going down", () => {
  it("a token with a new kid fetches the keys again at once and passes", { timeout: 30_000 }, async () => {
    const server = await startJwksServer(certs, ca, jwks(es));
    const env = await proxyWith({ jwt: { issuer: ISS, jwks: { url: server.url, caFile: ca.certFile, refreshInterval: "1h", staleWhileError: "1h" } } });
    try {
      expect((await unary(env.c, Buffer.from("a"), bearer(await token(es, { iss: ISS })))).err).toBeNull();
      const next = await signingKey("ES256", "es-2");
      const t = await token(next, { iss: ISS });
      server.body = jwks(es, next); // the issuer publishes the new key
      await sleep(1100); // unknown kids fetch at most once a second
      const fetches = server.fetches;
      expect((await unary(env.c, Buffer.from("b"), bearer(t))).err).toBeNull();
      expect(server.fetches).toBe(fetches + 1);
      // a kid nobody publishes is refused (16), and does not fetch again within the second
      const stranger = await signingKey("ES256", "nobody");
      const r = await unary(env.c, Buffer.from("c"), bearer(await token(stranger, { iss: ISS })));
      expect(r.err?.code).toBe(16);
      expect(r.err?.details).toBe("jwt: no key matches the token (kid)");
    } finally {
      await env.close();
      await server.close();
    }
  });

  it("with the server down, the last keys serve through staleWhileError, then calls fail 16 until it is back", { timeout: 60_000 }, async () => {
    const server = await startJwksServer(certs, ca, jwks(es));
    const env = await proxyWith({ jwt: { issuer: ISS, jwks: { url: server.url, caFile: ca.certFile, refreshInterval: "1s", staleWhileError: "2s", timeout: "1s" } } });
    try {
      const t = await token(es, { iss: ISS, expIn: 600 });
      expect((await unary(env.c, Buffer.from("a"), bearer(t))).err).toBeNull();
      server.failing = true;
      await sleep(1500); // past refreshInterval, within the stale window: a refresh is tried and fails
      expect((await unary(env.c, Buffer.from("b"), bearer(t))).err).toBeNull();
      await waitFor("a fetch tried while down", () => (server.fetches >= 2 ? true : undefined), 10_000);
      await sleep(2000); // past refreshInterval + staleWhileError since the last good fetch
      const r = await waitFor("keys expired", async () => {
        const x = await unary(env.c, Buffer.from("c"), bearer(t));
        return x.err?.code === 16 ? x : undefined;
      }, 10_000, 200);
      expect(r.err?.details).toBe("jwt: verification keys unavailable");
      expect(env.lines.join("\n")).toContain("JWKS fetch failed");
      server.failing = false;
      await waitFor("keys back", async () => ((await unary(env.c, Buffer.from("d"), bearer(t))).err === null ? true : undefined), 10_000, 300);
    } finally {
      await env.close();
      await server.close();
    }
  });
});

describe("jwks.timeout: one fetch's limit", () => {
  // The judge is the JWKS server: it takes the request and never answers, and sees when dojang
  // gives the connection up. The control is the same server with a 10s timeout: still held when
  // the 400ms one is long gone, so the closing is the key's doing, not a default's.
  it("a JWKS server that never answers is given up after the timeout (the server sees the connection closed), and a call waiting for the keys ends 16 then", { timeout: 60_000 }, async () => {
    const TIMEOUT_MS = 400;
    /** a loaded 2-core machine: timers fire late and the process may wait for a CPU */
    const LATE_MS = 1500;
    const hung = await startJwksServer(certs, ca, jwks(es));
    const held = await startJwksServer(certs, ca, jwks(es));
    hung.hanging = true;
    held.hanging = true;
    const startedAt = performance.now(); // the first fetch starts with the proxy, not before
    const env = await proxyWith({ jwt: { issuer: ISS, jwks: { url: hung.url, caFile: ca.certFile, refreshInterval: "1h", staleWhileError: "1h", timeout: `${TIMEOUT_MS}ms` } } });
    const control = await proxyWith({ jwt: { issuer: ISS, jwks: { url: held.url, caFile: ca.certFile, refreshInterval: "1h", staleWhileError: "1h", timeout: "10s" } } });
    try {
      // a call while the first fetch hangs waits for it, and ends when it is given up
      const callAt = performance.now();
      const r = await unary(env.c, Buffer.from("a"), bearer(await token(es, { iss: ISS })));
      const callEnd = performance.now();
      expect(r.err?.code).toBe(16);
      expect(r.err?.details).toBe("jwt: verification keys unavailable");
      expect(callEnd - callAt).toBeLessThan(TIMEOUT_MS + LATE_MS);

      await waitFor("the hanging fetch to be given up", () => (hung.held[0]?.closedAt !== undefined ? true : undefined), 10_000, 10);
      const h = hung.held[0]!;
      // not before the timeout (its timer started after startedAt), and not long after the request came
      expect(h.closedAt! - startedAt).toBeGreaterThanOrEqual(TIMEOUT_MS);
      expect(h.closedAt! - h.at).toBeLessThan(TIMEOUT_MS + LATE_MS);
      // the control, asked at the same time with a 10s timeout, still holds its fetch open
      await waitFor("the control's fetch", () => (held.held.length > 0 ? true : undefined), 10_000, 10);
      const waitUntil = held.held[0]!.at + TIMEOUT_MS + LATE_MS + 100;
      await sleep(Math.max(0, waitUntil - performance.now()));
      expect(held.held[0]!.closedAt).toBeUndefined();
      expect(env.lines.join("\n")).toContain(`no answer in ${TIMEOUT_MS} ms`);
    } finally {
      await env.close();
      await control.close();
      await hung.close();
      await held.close();
    }
  });
});

describe("route jwt with a JWKS file", () => {
  it("verifies against the file's keys", { timeout: 30_000 }, async () => {
    const file = certs.path("jwks.json");
    writeFileSync(file, JSON.stringify(jwks(ed)));
    const env = await proxyWith({ jwt: { issuer: ISS, algorithms: ["EdDSA"], jwks: { file }, forwardToken: true } });
    try {
      const t = await token(ed, { iss: ISS });
      const before = upstream.seen.length;
      expect((await unary(env.c, Buffer.from("a"), bearer(t))).err).toBeNull();
      // forwardToken: true keeps the authorization header upstream
      expect(upstream.seen[before]!.headers["authorization"]).toBe(`Bearer ${t}`);
      expect((await unary(env.c, Buffer.from("b"), bearer(await token(es, { iss: ISS })))).err?.code).toBe(16);
    } finally {
      await env.close();
    }
  });
});

describe("clockSkew bounds iat too (issue \"0.5.1: what outside judges found\", item 4)", () => {
  /** A token signed by jose with `iat` `offset` seconds from now (and exp an hour after it). */
  async function issuedAt(offset: number): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ iss: ISS, sub: `iat${offset}`, iat: now + offset, exp: now + offset + 3600 }).setProtectedHeader({ alg: "ES256", kid: es.kid, typ: "JWT" }).sign(es.privateKey);
  }
  /** jose's own verdict on the same token (jwtVerify checks iat against the future with maxTokenAge set). */
  async function joseAccepts(t: string, skewS: number): Promise<boolean> {
    try {
      await jwtVerify(t, createLocalJWKSet(jwks(es)), { issuer: ISS, clockTolerance: skewS, maxTokenAge: "100 years" });
      return true;
    } catch {
      return false;
    }
  }

  it("a token issued an hour ahead is refused 16 (decided_by jwt, never sent); within clockSkew it passes, as jose's own check says", { timeout: 60_000 }, async () => {
    const file = certs.path("iat-jwks.json");
    writeFileSync(file, JSON.stringify(jwks(es)));
    for (const [skew, skewS] of [["30s", 30], ["0s", 0]] as const) {
      const env = await proxyWith({ jwt: { issuer: ISS, clockSkew: skew, jwks: { file } } });
      try {
        // offsets well clear of the boundary (signing and verifying may fall in different seconds)
        const offsets = skewS === 30 ? [-3600, 0, 20, 45, 3600] : [-5, 5, 3600];
        const got: Record<number, string> = {};
        const reference: Record<number, string> = {};
        for (const off of offsets) {
          const t = await issuedAt(off);
          reference[off] = (await joseAccepts(t, skewS)) ? "ok" : "refused";
          const before = upstream.seen.length;
          const r = await unary(env.c, Buffer.from("x"), bearer(t));
          got[off] = r.err === null ? "ok" : `${r.err.code} ${r.err.details}`;
          if (r.err !== null) expect(upstream.seen.length, `iat +${off}`).toBe(before);
        }
        const refused = "16 jwt: token issued in the future (iat)";
        expect(got, `clockSkew ${skew}`).toEqual(skewS === 30 ? { [-3600]: "ok", 0: "ok", 20: "ok", 45: refused, 3600: refused } : { [-5]: "ok", 5: refused, 3600: refused });
        // jose (the reference) draws the same line
        expect(Object.fromEntries(Object.entries(got).map(([k, v]) => [k, v === "ok" ? "ok" : "refused"]))).toEqual(reference);
        const n = Object.values(got).filter((v) => v !== "ok").length;
        expect(env.px.calls.filter((c) => c.decided_by === "jwt" && c.grpc_code === 16 && c.grpc_message === "jwt: token issued in the future (iat)").length).toBe(n);
        expect(sample(await scrape(env.px.adminAddress), "dojang_auth_decisions_total", { stage: "jwt", result: "deny" })).toBe(n);
      } finally {
        await env.close();
      }
    }
  });
});

describe("dojang --check and the jwks files", () => {
  it("a missing or malformed jwks.file, or an unreadable jwks.caFile, fails --check naming the key", { timeout: 60_000 }, async () => {
    assertDistBuilt();
    const bad = certs.path("not-jwks.json");
    writeFileSync(bad, JSON.stringify({ kty: "EC" }));
    const cfg = certs.path("check-jwks.json");
    writeFileSync(
      cfg,
      JSON.stringify({
        listeners: [
          {
            name: "main",
            address: "127.0.0.1:0",
            routes: [
              { match: { service: "a.A" }, cluster: "b", jwt: { issuer: ISS, jwks: { file: certs.path("absent.json") } } },
              { match: { service: "b.B" }, cluster: "b", jwt: { issuer: ISS, jwks: { file: bad } } },
              { match: { prefix: "/" }, cluster: "b", jwt: { issuer: ISS, jwks: { url: "https://127.0.0.1:1/jwks.json", caFile: certs.path("absent-ca.pem") } } },
            ],
          },
        ],
        clusters: [{ name: "b", endpoints: ["127.0.0.1:1"] }],
      }),
    );
    const r = await runCli(["--config", cfg, "--check"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`listeners[0].routes[0].jwt.jwks.file: cannot read ${JSON.stringify(certs.path("absent.json"))}: ENOENT`);
    expect(r.stderr).toContain(`listeners[0].routes[1].jwt.jwks.file: ${JSON.stringify(bad)} is not a JWKS document`);
    expect(r.stderr).toContain(`listeners[0].routes[2].jwt.jwks.caFile: cannot read ${JSON.stringify(certs.path("absent-ca.pem"))}: ENOENT`);
  });
});
