// Upstream TLS per cluster (clusters[].tls) against a grpc-js server with TLS on loopback,
// certificates made by openssl at test time: verification on by default (a wrong CA is 14 with a
// message naming the verification failure), serverName is the SNI and the name verified, and a
// client certificate for an upstream that requires one.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import type { TLSSocket } from "node:tls";
import { CertDir, type Ca, type CertFiles } from "../helpers/certs.js";
import { useFixtures } from "../helpers/fixtures.js";
import { ECHO_SERVICE, unary, type GrpcServer } from "../helpers/peers.js";

const f = useFixtures();
let certs: CertDir;
let ca: Ca;
let otherCa: Ca;
let clientCa: Ca;
let backend: CertFiles;
let dojangClient: CertFiles;

beforeAll(() => {
  certs = new CertDir();
  ca = certs.ca("upstream-ca");
  otherCa = certs.ca("other-ca");
  clientCa = certs.ca("client-ca");
  // the upstream's certificate names backend.internal only (no IP): the name must come from serverName
  backend = certs.leaf(ca, "backend", { cn: "backend.internal", dns: ["backend.internal"] });
  dojangClient = certs.leaf(clientCa, "dojang-client", { cn: "dojang" });
});
afterAll(() => certs.remove());

/** A grpc-js Echo server with TLS; `clientCa` set: it requires a client certificate signed by it. */
async function tlsServer(requireClientCa?: Ca): Promise<GrpcServer & { sniSeen: string[] }> {
  const server = new grpc.Server();
  const sniSeen: string[] = [];
  server.addService(ECHO_SERVICE, {
    Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      sniSeen.push(String(call.getAuthContext().sslPeerCertificate?.subject?.CN ?? "-"));
      cb(null, Buffer.concat([Buffer.from("tls:"), call.request]));
    },
  });
  const creds = grpc.ServerCredentials.createSsl(requireClientCa?.cert ?? null, [{ cert_chain: backend.cert, private_key: backend.key }], requireClientCa !== undefined);
  const port = await new Promise<number>((resolve, reject) => server.bindAsync("127.0.0.1:0", creds, (err, p) => (err ? reject(err) : resolve(p))));
  const s = {
    address: `127.0.0.1:${port}`,
    server,
    sniSeen,
    close: () => new Promise<void>((r) => server.tryShutdown(() => r())).then(() => server.forceShutdown()),
  };
  return f.track(s, (x) => x.close());
}

describe("a cluster with tls", () => {
  it("connects over TLS (h2) and verifies the upstream against caFile, by serverName", async () => {
    const up = await tlsServer();
    const px = await f.proxyFor(up.address, { cluster: { tls: { caFile: ca.certFile, serverName: "backend.internal" } } });
    const r = await unary(f.client(px.address), Buffer.from("hi"));
    expect(r.err).toBeNull();
    expect(r.res?.toString()).toBe("tls:hi");
  });

  it("refuses an upstream whose certificate another CA signed: 14 naming the verification failure", async () => {
    const up = await tlsServer();
    const px = await f.proxyFor(up.address, { cluster: { tls: { caFile: otherCa.certFile, serverName: "backend.internal" } } });
    const r = await unary(f.client(px.address), Buffer.from("hi"), new grpc.Metadata(), { deadline: Date.now() + 5000 });
    expect(r.err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(r.err?.details).toMatch(/TLS certificate verification of 127\.0\.0\.1:\d+ failed: .*(UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED|UNABLE_TO_GET_ISSUER)/);
  });

  it("verifies by default: without caFile the system CAs do not know the test CA", async () => {
    const up = await tlsServer();
    const px = await f.proxyFor(up.address, { cluster: { tls: { serverName: "backend.internal" } } });
    const r = await unary(f.client(px.address), Buffer.from("hi"), new grpc.Metadata(), { deadline: Date.now() + 5000 });
    expect(r.err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(r.err?.details).toMatch(/TLS certificate verification .* failed/);
  });

  it("verifies the name: serverName is the name checked, and without it the endpoint's address is (not in the certificate)", async () => {
    const up = await tlsServer();
    const wrong = await f.proxyFor(up.address, { cluster: { tls: { caFile: ca.certFile, serverName: "other.internal" } } });
    const r = await unary(f.client(wrong.address), Buffer.from("hi"), new grpc.Metadata(), { deadline: Date.now() + 5000 });
    expect(r.err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(r.err?.details).toMatch(/ERR_TLS_CERT_ALTNAME_INVALID/);
    expect(r.err?.details).toMatch(/other\.internal/);
    const none = await f.proxyFor(up.address, { cluster: { tls: { caFile: ca.certFile } } });
    const n = await unary(f.client(none.address), Buffer.from("hi"), new grpc.Metadata(), { deadline: Date.now() + 5000 });
    expect(n.err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(n.err?.details).toMatch(/ERR_TLS_CERT_ALTNAME_INVALID/);
  });

  it("sends :scheme https and the serverName as SNI (a raw node:http2 TLS upstream records both)", async () => {
    const seen: { scheme: unknown; sni: unknown; alpn: unknown }[] = [];
    const server = http2.createSecureServer({ cert: backend.cert, key: backend.key });
    server.on("stream", (stream, headers) => {
      const sock = stream.session?.socket as (TLSSocket & { servername?: string }) | undefined;
      seen.push({ scheme: headers[":scheme"], sni: sock?.servername, alpn: sock?.alpnProtocol });
      stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(Buffer.from([0, 0, 0, 0, 0]));
    });
    server.on("session", (sess) => sess.on("error", () => {}));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    f.track(server, (x) => new Promise<void>((r) => x.close(() => r())));
    const address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
    const px = await f.proxyFor(address, { cluster: { tls: { caFile: ca.certFile, serverName: "backend.internal" } } });
    const r = await unary(f.client(px.address), Buffer.from("hi"));
    expect(r.err).toBeNull();
    expect(seen).toEqual([{ scheme: "https", sni: "backend.internal", alpn: "h2" }]);
    await px.close(0);
  });

  it("presents certFile/keyFile to an upstream that requires a client certificate (mTLS upstream)", async () => {
    const up = await tlsServer(clientCa);
    const without = await f.proxyFor(up.address, { cluster: { tls: { caFile: ca.certFile, serverName: "backend.internal" } } });
    const r = await unary(f.client(without.address), Buffer.from("hi"), new grpc.Metadata(), { deadline: Date.now() + 5000 });
    expect(r.err?.code).toBe(grpc.status.UNAVAILABLE);
    // at once (not at the deadline), naming the refusal
    expect(r.err?.details).toMatch(/TLS handshake with 127\.0\.0\.1:\d+ failed: .*certificate required/i);
    const px = await f.proxyFor(up.address, {
      cluster: { tls: { caFile: ca.certFile, serverName: "backend.internal", certFile: dojangClient.certFile, keyFile: dojangClient.keyFile } },
    });
    const ok = await unary(f.client(px.address), Buffer.from("mtls"));
    expect(ok.err).toBeNull();
    expect(ok.res?.toString()).toBe("tls:mtls");
    expect(up.sniSeen).toEqual(["dojang"]);
  });
});
