// Issue 21, external authorization: a route's `extAuthz` asks Envoy's
// envoy.service.auth.v3.Authorization/Check over gRPC. The service is a real one from a registry:
// Istio's sample ext_authz server (istio.io/istio/samples/extauthz/cmd/extauthz, built by
// scripts/engines.mjs as .engines/bin/ext-authz, started here with -grpc 0). It allows a request
// that carries `x-ext-authz: allow` or whose source principal ends in /sa/a, adds
// x-ext-authz-check-result and x-ext-authz-check-received (the attributes it got) to the request,
// and denies the rest with 7 and its body. Also: the check failing (closed port, silence past the
// timeout) with and without failOpen, and the order jwt → rbac → ext_authz → rateLimit.
import net from "node:net";
import { writeFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDojang, type DojangHandle } from "../../src/index.js";
import { CertDir, type Ca, type CertFiles } from "../helpers/certs.js";
import { echoAll, h2Call, jwks, memoryLogger, signingKey, startExtAuthz, token, type ExtAuthzServer, type SigningKey } from "../helpers/auth.js";
import { sample, scrape, unary, type EchoClient, type RawUpstream } from "../helpers/peers.js";
import { freePort, killSpawned } from "../helpers/process.js";

let authz: ExtAuthzServer;
let upstream: RawUpstream;
let certs: CertDir;
let serverCa: Ca;
let clientCa: Ca;
let server: CertFiles;
let saA: CertFiles;

beforeAll(async () => {
  [authz, upstream] = await Promise.all([startExtAuthz(), echoAll()]);
  certs = new CertDir();
  serverCa = certs.ca("server-ca");
  clientCa = certs.ca("client-ca");
  server = certs.leaf(serverCa, "server", { cn: "dojang.test", dns: ["dojang.test"], ip: ["127.0.0.1"] });
  saA = certs.leaf(clientCa, "sa-a", { cn: "a", uri: ["spiffe://cluster.local/ns/default/sa/a"] });
}, 60_000);
afterAll(async () => {
  await upstream.close();
  certs.remove();
  await killSpawned();
});

async function proxy(route: Record<string, unknown>, listener: Record<string, unknown> = {}): Promise<DojangHandle> {
  return startDojang({
    logger: memoryLogger().logger,
    config: {
      admin: { address: "127.0.0.1:0" },
      journal: 100,
      listeners: [{ name: "main", address: "127.0.0.1:0", routes: [{ match: { prefix: "/" }, cluster: "backend", ...route }], ...listener }],
      clusters: [{ name: "backend", endpoints: [upstream.address] }],
    },
  });
}

describe("route extAuthz against Istio's ext_authz server", () => {
  it("allowed: the call goes on with the headers the service added; denied: its status, message and headers, decided_by ext_authz, not sent", { timeout: 30_000 }, async () => {
    const px = await proxy({ extAuthz: { address: authz.address, timeout: "5s" } });
    try {
      const before = upstream.seen.length;
      const ok = await h2Call(px.address, "/shop.Cart/Get", { "x-ext-authz": "allow", "x-request-id": "rid-42" });
      expect(ok.status).toBe("0");
      const seen = upstream.seen[before]!.headers;
      expect(seen["x-ext-authz-check-result"]).toBe("allowed");
      const received = String(seen["x-ext-authz-check-received"]);
      // the attributes dojang sent: method, path, host, the request's id and headers, the source address
      expect(received).toContain('path:"/shop.Cart/Get"');
      expect(received).toContain('method:"POST"');
      expect(received).toContain('id:"rid-42"');
      expect(received).toMatch(/key:"x-ext-authz"\s+value:"allow"/);
      expect(received).toContain('address:"127.0.0.1"');
      expect(received).toContain('protocol:"HTTP/2"');

      const no = await h2Call(px.address, "/shop.Cart/Get", { "x-ext-authz": "deny" });
      expect(no.status).toBe("7");
      expect(no.message).toBe("denied by ext_authz for not found header `x-ext-authz: allow` in the request");
      expect(no.all["x-ext-authz-check-result"]).toBe("denied");
      expect(upstream.seen.length - before).toBe(1);
      expect(px.calls.at(-1)).toMatchObject({ decided_by: "ext_authz", grpc_code: 7 });
      const text = await scrape(px.adminAddress);
      expect(sample(text, "dojang_auth_decisions_total", { stage: "ext_authz", result: "allow" })).toBe(1);
      expect(sample(text, "dojang_auth_decisions_total", { stage: "ext_authz", result: "deny" })).toBe(1);
      expect(sample(text, "dojang_calls_total", { decided_by: "ext_authz", grpc_code: "PERMISSION_DENIED" })).toBe(1);
    } finally {
      await px.close(0);
    }
  });

  it("the client certificate's identity goes as the source principal (and the certificate with includePeerCertificate)", { timeout: 30_000 }, async () => {
    const px = await proxy(
      { extAuthz: { address: authz.address, timeout: "5s", includePeerCertificate: true } },
      { tls: { certFile: server.certFile, keyFile: server.keyFile, caFile: clientCa.certFile, requireClientCert: true } },
    );
    const Ctor = grpc.makeGenericClientConstructor({ Get: { path: "/shop.Cart/Get", requestStream: false, responseStream: false, requestSerialize: (b: Buffer) => b, requestDeserialize: (b: Buffer) => b, responseSerialize: (b: Buffer) => b, responseDeserialize: (b: Buffer) => b, originalName: "Get" } }, "Cart");
    const c = new Ctor(px.address, grpc.credentials.createSsl(serverCa.cert, saA.key, saA.cert), { "grpc.ssl_target_name_override": "dojang.test", "grpc.enable_retries": 0 }) as unknown as EchoClient;
    try {
      const before = upstream.seen.length;
      // no x-ext-authz header: Istio's server allows it by the principal (…/sa/a)
      const r = await unary(c, Buffer.from("x"), new grpc.Metadata(), {}, "Get");
      expect(r.err).toBeNull();
      const received = String(upstream.seen[before]!.headers["x-ext-authz-check-received"]);
      expect(received).toContain('principal:"spiffe://cluster.local/ns/default/sa/a"');
      expect(received).toContain("certificate:\"-----BEGIN%20CERTIFICATE-----");
    } finally {
      c.close();
      await px.close(0);
    }
  });

  it("a check that fails (nothing listening) or times out (silent peer) denies with 7, or lets the call through with failOpen", { timeout: 30_000 }, async () => {
    const closed = `127.0.0.1:${await freePort()}`;
    const silent = net.createServer((s) => s.on("error", () => {}));
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    const silentAddr = `127.0.0.1:${(silent.address() as net.AddressInfo).port}`;
    const down = await proxy({ extAuthz: { address: closed, timeout: "2s" } });
    const slow = await proxy({ extAuthz: { address: silentAddr, timeout: "1s" } });
    const open = await proxy({ extAuthz: { address: closed, timeout: "2s", failOpen: true } });
    try {
      const a = await h2Call(down.address, "/shop.Cart/Get");
      expect(a.status).toBe("7");
      expect(a.message).toMatch(/^external authorization failed \(/);
      // the silent peer holds the check: the call waits the timeout (1s; its timer starts after
      // the call reached dojang) and not much longer (1.5 s for a loaded machine's timers). 1s,
      // far from the default 200ms, so that a dojang ignoring the key fails the lower bound
      // even with a loaded machine's connection time added to 200 ms.
      const asked = performance.now();
      const b = await h2Call(slow.address, "/shop.Cart/Get");
      const took = performance.now() - asked;
      expect(b.status).toBe("7");
      expect(b.message).toBe("external authorization failed (no answer in 1000 ms)");
      expect(took).toBeGreaterThanOrEqual(1000);
      expect(took).toBeLessThan(1000 + 1500);
      expect(slow.calls.at(-1)?.decided_by).toBe("ext_authz");
      expect((await h2Call(open.address, "/shop.Cart/Get")).status).toBe("0");
      expect(sample(await scrape(open.adminAddress), "dojang_auth_decisions_total", { stage: "ext_authz", result: "error_allow" })).toBe(1);
    } finally {
      await Promise.all([down.close(0), slow.close(0), open.close(0)]);
      silent.close();
    }
  });
});

describe("order: jwt → rbac → ext_authz → rateLimit → upstream", () => {
  let key: SigningKey;
  beforeAll(async () => {
    key = await signingKey("ES256", "k1");
  });

  it("a refusal at one stage asks none after it (no check, no token spent)", { timeout: 30_000 }, async () => {
    const file = certs.path("order-jwks.json");
    writeFileSync(file, JSON.stringify(jwks(key)));
    const px = await proxy({
      jwt: { issuer: "https://issuer.test", jwks: { file } },
      rbac: { rules: [{ name: "no-deletes", action: "deny", methods: ["shop.Cart/Delete"] }], default: "allow" },
      extAuthz: { address: authz.address, timeout: "5s" },
      rateLimit: { callsPerSecond: 0.001, burst: 1 },
    });
    try {
      const good = `Bearer ${await token(key, { iss: "https://issuer.test" })}`;
      const checks = authz.checks();
      expect((await h2Call(px.address, "/shop.Cart/Get", { "x-ext-authz": "allow" })).status).toBe("16"); // jwt
      expect((await h2Call(px.address, "/shop.Cart/Delete", { authorization: good, "x-ext-authz": "allow" })).status).toBe("7"); // rbac
      expect(authz.checks()).toBe(checks); // neither was checked
      expect((await h2Call(px.address, "/shop.Cart/Get", { authorization: good })).status).toBe("7"); // ext_authz denies
      // no stage before the limit spent its one token: this call gets it, the next is limited
      expect((await h2Call(px.address, "/shop.Cart/Get", { authorization: good, "x-ext-authz": "allow" })).status).toBe("0");
      expect((await h2Call(px.address, "/shop.Cart/Get", { authorization: good, "x-ext-authz": "allow" })).status).toBe("8");
      expect(px.calls.slice(-5).map((c) => c.decided_by)).toEqual(["jwt", "rbac", "ext_authz", "upstream", "rate_limited"]);
    } finally {
      await px.close(0);
    }
  });
});
