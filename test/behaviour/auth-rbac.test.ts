// Issue 21, per-method rules: a route's `rbac` allows or denies by gRPC method, by the verified
// client certificate's URI/DNS SANs (mTLS on a TLS listener), by verified JWT claims and by client
// address; the first matching rule decides, else `default`. A denial ends 7 PERMISSION_DENIED
// (decided_by rbac) before the upstream and is counted; shadow mode only counts and logs.
import { writeFileSync } from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDojang, type DojangHandle } from "../../src/index.js";
import { CertDir, type Ca, type CertFiles } from "../helpers/certs.js";
import { echoAll, h2Call, jwks, memoryLogger, signingKey, token, type SigningKey } from "../helpers/auth.js";
import { sample, scrape, unary, type EchoClient, type RawUpstream } from "../helpers/peers.js";

let certs: CertDir;
let serverCa: Ca;
let clientCa: Ca;
let server: CertFiles;
let web: CertFiles;
let batch: CertFiles;
let upstream: RawUpstream;
let key: SigningKey;
let jwksFile: string;
const ISS = "https://issuer.test";

beforeAll(async () => {
  certs = new CertDir();
  serverCa = certs.ca("server-ca");
  clientCa = certs.ca("client-ca");
  server = certs.leaf(serverCa, "server", { cn: "dojang.test", dns: ["dojang.test"], ip: ["127.0.0.1"] });
  web = certs.leaf(clientCa, "web", { cn: "web", uri: ["spiffe://shop.test/ns/shop/sa/web"] });
  batch = certs.leaf(clientCa, "batch", { cn: "batch", dns: ["batch.jobs.internal"] });
  upstream = await echoAll();
  key = await signingKey("ES256", "k1");
  jwksFile = certs.path("jwks.json");
  writeFileSync(jwksFile, JSON.stringify(jwks(key)));
}, 60_000);
afterAll(async () => {
  await upstream.close();
  certs.remove();
});

async function proxy(route: Record<string, unknown>, listener: Record<string, unknown> = {}, logger = memoryLogger().logger): Promise<DojangHandle> {
  return startDojang({
    logger,
    config: {
      admin: { address: "127.0.0.1:0" },
      listeners: [{ name: "main", address: "127.0.0.1:0", routes: [{ match: { prefix: "/" }, cluster: "backend", ...route }], ...listener }],
      clusters: [{ name: "backend", endpoints: [upstream.address] }],
    },
  });
}

const ECHO = grpc.makeGenericClientConstructor(
  Object.fromEntries(
    ["Unary", "Get", "Delete"].map((m) => [m, { path: `/${m === "Unary" ? "test.Echo" : "shop.Cart"}/${m}`, requestStream: false, responseStream: false, requestSerialize: (b: Buffer) => b, requestDeserialize: (b: Buffer) => b, responseSerialize: (b: Buffer) => b, responseDeserialize: (b: Buffer) => b, originalName: m }]),
  ),
  "Multi",
);
function client(address: string, cert?: CertFiles): EchoClient {
  const creds = cert === undefined ? grpc.credentials.createSsl(serverCa.cert) : grpc.credentials.createSsl(serverCa.cert, cert.key, cert.cert);
  return new ECHO(address, creds, { "grpc.ssl_target_name_override": "dojang.test", "grpc.default_authority": "dojang.test", "grpc.enable_retries": 0 }) as unknown as EchoClient;
}
/** One h2c call to /shop.Cart/Get from a socket bound to `local`; the socket's own source address and the status. */
function fromAddress(local: string, address: string): Promise<{ local: string | undefined; status: string | undefined; message: string | undefined }> {
  return new Promise((resolve) => {
    const at = address.lastIndexOf(":");
    const [host, port] = [address.slice(0, at).replace(/^\[|\]$/g, ""), Number(address.slice(at + 1))];
    const s = http2.connect(`http://${address}`, { createConnection: () => net.connect({ host, port, localAddress: local }) });
    s.on("error", () => {});
    let src: string | undefined;
    s.on("connect", () => (src = s.socket.localAddress));
    const req = s.request({ ":method": "POST", ":path": "/shop.Cart/Get", "content-type": "application/grpc", te: "trailers" });
    let all: http2.IncomingHttpHeaders = {};
    req.on("response", (h) => (all = { ...all, ...h }));
    req.on("trailers", (t) => (all = { ...all, ...t }));
    req.on("data", () => {});
    req.on("error", () => {});
    req.on("close", () => {
      s.close();
      const st = all["grpc-status"];
      const msg = all["grpc-message"];
      resolve({ local: src, status: typeof st === "string" ? st : undefined, message: typeof msg === "string" ? decodeURIComponent(msg) : undefined });
    });
    req.end(Buffer.from([0, 0, 0, 0, 0]));
  });
}

const code = async (c: EchoClient, method: string, md = new grpc.Metadata()): Promise<number> => {
  const r = await unary(c, Buffer.from("x"), md, {}, method);
  return r.err === null ? 0 : r.err.code;
};

describe("route rbac", () => {
  it("by method and by client certificate SAN (URI prefix, DNS exact); no rule → default deny: 7, decided_by rbac, not sent", { timeout: 30_000 }, async () => {
    const px = await proxy(
      {
        rbac: {
          rules: [
            { name: "no-deletes", action: "deny", methods: ["shop.Cart/Delete"] },
            { name: "shop-workloads", action: "allow", methods: ["shop.Cart/*"], identities: ["spiffe://shop.test/ns/shop/*"] },
            { name: "batch", action: "allow", methods: ["test.Echo/Unary"], identities: ["batch.jobs.internal"] },
          ],
          default: "deny",
        },
      },
      { tls: { certFile: server.certFile, keyFile: server.keyFile, caFile: clientCa.certFile, requireClientCert: false } },
    );
    const w = client(px.address, web);
    const b = client(px.address, batch);
    const anon = client(px.address);
    try {
      const before = upstream.seen.length;
      expect(await code(w, "Get")).toBe(0);
      expect(await code(w, "Delete")).toBe(7);
      expect(await code(w, "Unary")).toBe(7);
      expect(await code(b, "Unary")).toBe(0);
      expect(await code(b, "Get")).toBe(7);
      expect(await code(anon, "Get")).toBe(7);
      expect(upstream.seen.length - before).toBe(2);
      const r = await unary(w, Buffer.from("x"), new grpc.Metadata(), {}, "Delete");
      expect(r.err?.details).toBe("rbac: /shop.Cart/Delete denied: rule no-deletes denies it");
      const r2 = await unary(anon, Buffer.from("x"), new grpc.Metadata(), {}, "Get");
      expect(r2.err?.details).toBe("rbac: /shop.Cart/Get denied: no rule allows it");
      const text = await scrape(px.adminAddress);
      expect(sample(text, "dojang_auth_decisions_total", { stage: "rbac", result: "deny" })).toBe(6);
      expect(sample(text, "dojang_auth_decisions_total", { stage: "rbac", result: "allow" })).toBe(2);
      expect(sample(text, "dojang_calls_total", { decided_by: "rbac", grpc_code: "PERMISSION_DENIED" })).toBe(6);
    } finally {
      for (const c of [w, b, anon]) c.close();
      await px.close(0);
    }
  });

  it("by JWT claims, after the token is verified", { timeout: 30_000 }, async () => {
    const px = await proxy({
      jwt: { issuer: ISS, jwks: { file: jwksFile } },
      rbac: { rules: [{ name: "admins", action: "allow", claims: { "realm.roles": ["admin"] } }], default: "deny" },
    });
    try {
      const as = async (roles: string[]) => (await h2Call(px.address, "/shop.Cart/Get", { authorization: `Bearer ${await token(key, { iss: ISS, realm: { roles } })}` })).status;
      expect(await as(["dev", "admin"])).toBe("0");
      expect(await as(["dev"])).toBe("7");
      // no token: the jwt stage refuses first (16), the rules are not asked
      expect((await h2Call(px.address, "/shop.Cart/Get")).status).toBe("16");
    } finally {
      await px.close(0);
    }
  });

  // Each client is a real socket whose source address the test checks (the rule's input), on a
  // listener that takes that family: 127.0.0.1 on an IPv4 listener, ::1 on [::1], and 127.0.0.1
  // on a dual-stack [::] listener, where node reports the client as ::ffff:127.0.0.1.
  it("by client address (CIDR), IPv4 and IPv6 loopback", { timeout: 30_000 }, async () => {
    const rules = { rules: [{ name: "outside", action: "deny", clientAddresses: ["10.0.0.0/8"] }, { name: "loopback", action: "allow", clientAddresses: ["127.0.0.0/8", "::1/128"] }], default: "deny" };
    const v4 = await proxy({ rbac: rules });
    const v6 = await proxy({ rbac: rules }, { address: "[::1]:0" });
    // IPv4 blocks only: ::1 is not 127.0.0.1
    const v6only4 = await proxy({ rbac: { rules: [{ name: "v4-loopback", action: "allow", clientAddresses: ["127.0.0.0/8"] }] } }, { address: "[::1]:0" });
    // a deny rule on ::1 ahead of an allow-everything default
    const v6deny = await proxy({ rbac: { rules: [{ name: "no-v6-loopback", action: "deny", clientAddresses: ["::1/128"] }], default: "allow" } }, { address: "[::1]:0" });
    // dual stack: the IPv4 client arrives as ::ffff:127.0.0.1, which the IPv4 block still matches
    const dual = await proxy({ rbac: { rules: [{ name: "v4-loopback", action: "allow", clientAddresses: ["127.0.0.0/8"] }] } }, { address: "[::]:0" });
    const px2 = await proxy({ rbac: { rules: [{ name: "lan-only", action: "allow", clientAddresses: ["10.0.0.0/8"] }] } });
    const port = (px: DojangHandle) => Number(/:(\d+)$/.exec(px.address)![1]);
    try {
      expect(await fromAddress("127.0.0.1", `127.0.0.1:${port(v4)}`)).toEqual({ local: "127.0.0.1", status: "0", message: undefined });
      expect(await fromAddress("::1", `[::1]:${port(v6)}`)).toEqual({ local: "::1", status: "0", message: undefined });
      expect(await fromAddress("::1", `[::1]:${port(v6only4)}`)).toEqual({ local: "::1", status: "7", message: "rbac: /shop.Cart/Get denied: no rule allows it" });
      expect(await fromAddress("::1", `[::1]:${port(v6deny)}`)).toEqual({ local: "::1", status: "7", message: "rbac: /shop.Cart/Get denied: rule no-v6-loopback denies it" });
      expect(await fromAddress("127.0.0.1", `127.0.0.1:${port(dual)}`)).toEqual({ local: "127.0.0.1", status: "0", message: undefined });
      expect(await fromAddress("127.0.0.1", `127.0.0.1:${port(px2)}`)).toEqual({ local: "127.0.0.1", status: "7", message: "rbac: /shop.Cart/Get denied: no rule allows it" });
      expect(sample(await scrape(v6.adminAddress), "dojang_auth_decisions_total", { stage: "rbac", result: "allow" })).toBe(1);
    } finally {
      await Promise.all([v4, v6, v6only4, v6deny, dual, px2].map((p) => p.close(0)));
    }
  });

  it("shadow: true lets every call through and only counts and logs what it would deny", { timeout: 30_000 }, async () => {
    const { logger, lines } = memoryLogger();
    const px = await proxy({ rbac: { rules: [{ name: "reads", action: "allow", methods: ["shop.Cart/Get"] }], default: "deny", shadow: true } }, {}, logger);
    try {
      expect((await h2Call(px.address, "/shop.Cart/Get")).status).toBe("0");
      expect((await h2Call(px.address, "/shop.Cart/Delete")).status).toBe("0");
      const text = await scrape(px.adminAddress);
      expect(sample(text, "dojang_auth_decisions_total", { stage: "rbac", result: "shadow_deny" })).toBe(1);
      expect(sample(text, "dojang_auth_decisions_total", { stage: "rbac", result: "deny" })).toBe(0);
      const shadowLines = lines.filter((l) => l.includes("rbac shadow: would deny (no rule allows it)"));
      expect(shadowLines.length).toBe(1);
      expect(JSON.parse(shadowLines[0]!)).toMatchObject({ path: "/shop.Cart/Delete", rule: null });
    } finally {
      await px.close(0);
    }
  });
});
