// Issue 18 item 1: every socket a TLS listener opens is TLS with that listener's rules. A listener
// with `tls` + `grpcWeb` + `http1Address` serves HTTPS/1.1 on http1Address with its own
// certificates and client-certificate rule, so requireClientCert holds there as on the TLS port,
// and the verified identity goes upstream in x-forwarded-client-cert from either. Raw clients on
// each socket (node:net for plain text, node:tls for TLS, node:http2 for h2), a raw node:http2
// upstream that records every call that reaches it; certificates made by openssl at test time.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { copyFileSync, writeFileSync } from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import tls from "node:tls";
import { CertDir, type Ca, type CertFiles } from "../helpers/certs.js";
import { useFixtures } from "../helpers/fixtures.js";
import { echoOr } from "../helpers/bystander.js";
import { frame } from "../helpers/peers.js";
import { waitFor } from "../helpers/process.js";

const f = useFixtures();
let certs: CertDir;
let ca: Ca;
let clientCa: Ca;
let server: CertFiles;
let client: CertFiles;
let stranger: CertFiles;

beforeAll(() => {
  certs = new CertDir();
  ca = certs.ca("server-ca");
  clientCa = certs.ca("client-ca");
  server = certs.leaf(ca, "default", { cn: "default.test", dns: ["default.test"], ip: ["127.0.0.1"] });
  client = certs.leaf(clientCa, "client", { cn: "client-one", uri: ["spiffe://acme.test/ns/web/sa/client-one"] });
  stranger = certs.leaf(certs.ca("other-ca"), "stranger", { cn: "stranger" });
});
afterAll(() => certs.remove());

const XFCC = () => `Hash=${client.sha256};Subject="CN=client-one,O=dojang test";URI=spiffe://acme.test/ns/web/sa/client-one`;

/** A gRPC-Web unary request over HTTP/1.1, carrying a forged x-forwarded-client-cert. */
function webRequest(): Buffer {
  const body = frame(Buffer.from("hi"));
  const head =
    "POST /test.Echo/Unary HTTP/1.1\r\nhost: default.test\r\ncontent-type: application/grpc-web+proto\r\nx-grpc-web: 1\r\n" +
    `x-forwarded-client-cert: Hash=forged\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n`;
  return Buffer.concat([Buffer.from(head, "latin1"), body]);
}

interface Exchange {
  /** the TLS handshake completed on the client's side (TLS 1.3 may complete before the server refuses) */
  secure: boolean;
  /** every byte the server sent, as latin1 */
  data: string;
  error: string | undefined;
}

/**
 * One raw exchange: connect (plain TCP, or TLS with `tlsOpts`), send `request`, collect what comes
 * back until the server closes (5 s at most).
 */
function exchange(address: string, request: Buffer, tlsOpts?: tls.ConnectionOptions): Promise<Exchange> {
  const [host, port] = address.split(":") as [string, string];
  return new Promise((resolve) => {
    const out: Exchange = { secure: false, data: "", error: undefined };
    const sock =
      tlsOpts === undefined
        ? net.connect(Number(port), host, () => sock.write(request))
        : tls.connect({ host, port: Number(port), servername: "default.test", ca: ca.cert, ...tlsOpts }, () => {
            out.secure = true;
            sock.write(request);
          });
    const t = setTimeout(() => sock.destroy(), 5000);
    sock.on("data", (d: Buffer) => (out.data += d.toString("latin1")));
    sock.on("error", (e: NodeJS.ErrnoException) => (out.error ??= e.code ?? e.message));
    sock.on("close", () => {
      clearTimeout(t);
      resolve(out);
    });
  });
}

const withCert = (c: CertFiles): tls.ConnectionOptions => ({ cert: c.cert, key: c.key });

/** A native-style gRPC-Web call over h2 on the TLS port with `cert`; its grpc-status, or the error. */
async function h2Call(address: string, cert: CertFiles | undefined): Promise<string> {
  const s = http2.connect(`https://${address}`, { servername: "default.test", ca: ca.cert, ...(cert === undefined ? {} : withCert(cert)) });
  f.track(s, (x) => x.destroy());
  s.on("error", () => {});
  return new Promise((resolve) => {
    const req = s.request({ ":method": "POST", ":path": "/test.Echo/Unary", "content-type": "application/grpc-web+proto", "x-grpc-web": "1", "x-forwarded-client-cert": "Hash=forged" });
    req.on("error", (e: NodeJS.ErrnoException) => resolve(`error ${e.code ?? e.message}`));
    let got = "";
    req.on("response", (h) => (got += JSON.stringify(h)));
    req.on("data", (d: Buffer) => (got += d.toString("latin1")));
    req.on("end", () => resolve(/grpc-status"?:\s*"?(\d+)/.exec(got)?.[1] ?? `no status in ${got}`));
    req.end(frame(Buffer.from("hi")));
  });
}

const statusOf = (e: Exchange): string | undefined => /grpc-status:\s*(\d+)/.exec(e.data)?.[1];

function xfccSeen(up: { seen: { raw: string[] }[] }): string[][] {
  return up.seen.map((s) => s.raw.filter((_, i) => i % 2 === 1 && s.raw[i - 1] === "x-forwarded-client-cert"));
}

describe("http1Address on a TLS listener is HTTPS/1.1 with the listener's TLS", () => {
  const mtls = (requireClientCert: boolean) => ({ certFile: server.certFile, keyFile: server.keyFile, caFile: clientCa.certFile, requireClientCert });

  it("requireClientCert holds on every socket: plain text, TLS without a certificate, another CA's certificate are refused; a verified client is served on both, its identity upstream", async () => {
    const up = await f.rawUpstream(echoOr());
    const px = await f.proxyFor(up.address, { listener: { grpcWeb: true, http1Address: "127.0.0.1:0", tls: mtls(true) } });
    const h1 = px.instance.http1Address();
    const main = px.address;

    // plain-text HTTP/1.1 to http1Address (issue 18: this was served, grpc-status 0, no identity)
    const plain = await exchange(h1, webRequest());
    expect(plain.data).not.toMatch(/HTTP\/1\.1/);
    // plain-text HTTP/1.1 to the TLS port
    expect((await exchange(main, webRequest())).data).not.toMatch(/HTTP\/1\.1/);
    // TLS without a client certificate, on each socket (ALPN http/1.1 on both)
    for (const address of [h1, main]) {
      const none = await exchange(address, webRequest(), { ALPNProtocols: ["http/1.1"] });
      expect(none.data, address).toBe("");
      expect(none.error, address).toMatch(/CERTIFICATE_REQUIRED|HANDSHAKE_FAILURE|ECONNRESET/);
      const other = await exchange(address, webRequest(), { ALPNProtocols: ["http/1.1"], ...withCert(stranger) });
      expect(other.data, address).toBe("");
    }
    // h2 on the TLS port without a certificate
    expect(await h2Call(main, undefined)).toMatch(/^error/);
    // nothing of that reached the upstream
    expect(up.seen).toHaveLength(0);

    // a verified client certificate: served on http1Address, on the TLS port's HTTP/1.1 and h2
    const onH1 = await exchange(h1, webRequest(), withCert(client));
    expect(onH1.data).toMatch(/^HTTP\/1\.1 200/);
    expect(statusOf(onH1)).toBe("0");
    const onMainH1 = await exchange(main, webRequest(), { ALPNProtocols: ["http/1.1"], ...withCert(client) });
    expect(statusOf(onMainH1)).toBe("0");
    expect(await h2Call(main, client)).toBe("0");
    // three calls upstream, each with dojang's x-forwarded-client-cert and not the client's
    expect(xfccSeen(up)).toEqual([[XFCC()], [XFCC()], [XFCC()]]);
  });

  it("mTLS optional (caFile, no requireClientCert): http1Address serves clients without a certificate, names a verified one upstream, never a forged one", async () => {
    const up = await f.rawUpstream(echoOr());
    const px = await f.proxyFor(up.address, { listener: { grpcWeb: true, http1Address: "127.0.0.1:0", tls: mtls(false) } });
    const h1 = px.instance.http1Address();
    expect((await exchange(h1, webRequest())).data).not.toMatch(/HTTP\/1\.1/);
    expect(statusOf(await exchange(h1, webRequest(), {}))).toBe("0");
    expect(statusOf(await exchange(h1, webRequest(), withCert(stranger)))).toBe("0");
    expect(statusOf(await exchange(h1, webRequest(), withCert(client)))).toBe("0");
    expect(xfccSeen(up)).toEqual([[], [], [XFCC()]]);
  });

  it("TLS without client certificates: http1Address is HTTPS/1.1 (plain text refused); an h2c listener's http1Address stays plain HTTP/1.1", async () => {
    const up = await f.rawUpstream(echoOr());
    const secure = await f.proxyFor(up.address, { listener: { grpcWeb: true, http1Address: "127.0.0.1:0", tls: { certFile: server.certFile, keyFile: server.keyFile } } });
    const sh1 = secure.instance.http1Address();
    expect((await exchange(sh1, webRequest())).data).not.toMatch(/HTTP\/1\.1/);
    const ok = await exchange(sh1, webRequest(), {});
    expect(ok.data).toMatch(/^HTTP\/1\.1 200/);
    expect(statusOf(ok)).toBe("0");
    const plain = await f.proxyFor(up.address, { listener: { grpcWeb: true, http1Address: "127.0.0.1:0" } });
    expect(statusOf(await exchange(plain.instance.http1Address(), webRequest()))).toBe("0");
    expect(up.seen).toHaveLength(2);
    expect(xfccSeen(up)).toEqual([[], []]);
  });

  it("a renewed certificate is served on http1Address too", async () => {
    const certFile = certs.path("h1-live.pem");
    const keyFile = certs.path("h1-live.key");
    copyFileSync(server.certFile, certFile);
    copyFileSync(server.keyFile, keyFile);
    const up = await f.rawUpstream(echoOr());
    const px = await f.proxyFor(up.address, { listener: { grpcWeb: true, http1Address: "127.0.0.1:0", tls: { certFile, keyFile } } });
    const h1 = px.instance.http1Address();
    const cnOf = (address: string): Promise<string> =>
      new Promise((resolve, reject) => {
        const [host, port] = address.split(":") as [string, string];
        const s = tls.connect({ host, port: Number(port), servername: "default.test", rejectUnauthorized: false, ALPNProtocols: ["http/1.1"] }, () => {
          resolve(/CN=(.*)/.exec(s.getPeerX509Certificate()?.subject ?? "")?.[1] ?? "");
          s.destroy();
        });
        s.on("error", reject);
      });
    expect(await cnOf(h1)).toBe("default.test");
    const renewed = certs.leaf(ca, "h1-renewed", { cn: "renewed.test", dns: ["default.test"] });
    writeFileSync(keyFile, renewed.key);
    writeFileSync(certFile, renewed.cert);
    await waitFor("http1Address to serve the renewed certificate", async () => ((await cnOf(h1)) === "renewed.test" ? true : undefined));
    expect(await cnOf(px.address)).toBe("renewed.test");
  }, 20_000);
});
