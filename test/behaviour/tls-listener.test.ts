// Listener TLS over real sockets on loopback, certificates made by openssl at test time
// (test/helpers/certs.ts): a grpc-js client with TLS credentials through dojang's TLS listener to
// a plaintext upstream; the certificate chosen by SNI; ALPN h2 only; mTLS (no certificate → no
// handshake; a verified one → x-forwarded-client-cert upstream, a client's own stripped); and
// certificate files replaced while a call runs on an old connection.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import { copyFileSync, mkdirSync, renameSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import http2 from "node:http2";
import net from "node:net";
import tls from "node:tls";
import { CertDir, type Ca, type CertFiles } from "../helpers/certs.js";
import { useFixtures } from "../helpers/fixtures.js";
import { sample, scrape, unary, type EchoClient } from "../helpers/peers.js";
import { waitFor } from "../helpers/process.js";

const f = useFixtures();
let certs: CertDir;
let ca: Ca;
let clientCa: Ca;
let server: CertFiles;
let api: CertFiles;
let wild: CertFiles;
let client: CertFiles;
let stranger: CertFiles;

beforeAll(() => {
  certs = new CertDir();
  ca = certs.ca("server-ca");
  clientCa = certs.ca("client-ca");
  server = certs.leaf(ca, "default", { cn: "default.test", dns: ["default.test", "localhost"], ip: ["127.0.0.1"] });
  api = certs.leaf(ca, "api", { cn: "api.example.com", dns: ["api.example.com"] });
  wild = certs.leaf(ca, "wild", { cn: "*.wild.example.com", dns: ["*.wild.example.com"] });
  client = certs.leaf(clientCa, "client", { cn: "client-one", o: "Acme, Inc", uri: ["spiffe://acme.test/ns/web/sa/client-one"], dns: ["client-one.acme.test", "alt.acme.test"] });
  const otherCa = certs.ca("other-ca");
  stranger = certs.leaf(otherCa, "stranger", { cn: "stranger" });
});
afterAll(() => certs.remove());

function tlsClient(address: string, name: string, o: { cert?: CertFiles; ca?: Ca } = {}): EchoClient {
  const creds = grpc.credentials.createSsl((o.ca ?? ca).cert, o.cert?.key ?? null, o.cert?.cert ?? null);
  return f.track(
    echoClientWith(address, creds, { "grpc.ssl_target_name_override": name, "grpc.default_authority": name }),
    (x) => x.close(),
  );
}

/** echoClient's options with TLS credentials (peers.ts makes insecure ones). */
function echoClientWith(address: string, creds: grpc.ChannelCredentials, opts: grpc.ClientOptions): EchoClient {
  const Ctor = grpc.makeGenericClientConstructor(
    { Unary: { path: "/test.Echo/Unary", requestStream: false, responseStream: false, requestSerialize: (b: Buffer) => b, requestDeserialize: (b: Buffer) => b, responseSerialize: (b: Buffer) => b, responseDeserialize: (b: Buffer) => b, originalName: "Unary" } },
    "Echo",
  );
  return new Ctor(address, creds, { "grpc.enable_retries": 0, ...opts }) as unknown as EchoClient;
}

/** The certificate a TLS handshake with `servername` gets, and the ALPN protocol chosen. */
function handshake(address: string, servername: string | undefined, o: { alpn?: string[]; cert?: CertFiles } = {}): Promise<{ cn: string; alpn: string | false; authorized: boolean; socket: tls.TLSSocket }> {
  const [host, port] = [address.slice(0, address.lastIndexOf(":")), Number(address.slice(address.lastIndexOf(":") + 1))];
  return new Promise((resolve, reject) => {
    const s = tls.connect({
      host,
      port,
      ...(servername === undefined ? {} : { servername }),
      ALPNProtocols: o.alpn ?? ["h2"],
      ca: ca.cert,
      rejectUnauthorized: false,
      ...(o.cert === undefined ? {} : { cert: o.cert.cert, key: o.cert.key }),
    });
    const t = setTimeout(() => {
      s.destroy();
      reject(new Error("handshake timed out"));
    }, 5000);
    s.once("secureConnect", () => {
      clearTimeout(t);
      const cn = /CN=(.*)/.exec(s.getPeerX509Certificate()?.subject ?? "")?.[1] ?? "";
      resolve({ cn, alpn: s.alpnProtocol ?? false, authorized: s.authorized, socket: s });
    });
    s.once("error", (err) => {
      clearTimeout(t);
      reject(err);
    });
  });
}

async function closeSocket(s: tls.TLSSocket): Promise<void> {
  s.destroy();
}

const echo = (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>): void => cb(null, Buffer.concat([Buffer.from("echo:"), call.request]));

describe("a TLS listener", () => {
  it("carries a grpc-js call with TLS credentials to a plaintext upstream (ALPN h2)", async () => {
    const up = await f.grpcServer({ Unary: echo });
    const px = await f.proxyFor(up.address, { listener: { tls: { certFile: server.certFile, keyFile: server.keyFile } } });
    const c = tlsClient(px.address, "default.test");
    const r = await unary(c, Buffer.from("over tls"));
    expect(r.err).toBeNull();
    expect(r.res?.toString()).toBe("echo:over tls");
    const h = await handshake(px.address, "default.test");
    expect(h.alpn).toBe("h2");
    expect(h.authorized).toBe(true);
    await closeSocket(h.socket);
    // the same client without TLS cannot talk to it
    const plain = f.client(px.address);
    const p = await unary(plain, Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 3000 });
    expect(p.err?.code).toBe(grpc.status.UNAVAILABLE);
  });

  it("offers only h2 in ALPN: a client that speaks only http/1.1 is refused in the handshake", async () => {
    const up = await f.grpcServer({ Unary: echo });
    const px = await f.proxyFor(up.address, { listener: { tls: { certFile: server.certFile, keyFile: server.keyFile } } });
    await expect(handshake(px.address, "default.test", { alpn: ["http/1.1"] })).rejects.toThrow(/no.application.protocol|alert number 120/i);
  });

  it("chooses the certificate by SNI: exact names, one-label wildcards, else the default", async () => {
    const up = await f.grpcServer({ Unary: echo });
    const px = await f.proxyFor(up.address, {
      listener: {
        tls: {
          certFile: server.certFile,
          keyFile: server.keyFile,
          certificates: [
            { serverNames: ["API.example.com"], certFile: api.certFile, keyFile: api.keyFile },
            { serverNames: ["*.wild.example.com"], certFile: wild.certFile, keyFile: wild.keyFile },
          ],
        },
      },
    });
    const seen: Record<string, string> = {};
    for (const name of ["api.example.com", "Api.Example.Com", "x.wild.example.com", "a.b.wild.example.com", "wild.example.com", "other.test", undefined]) {
      const h = await handshake(px.address, name);
      seen[String(name)] = h.cn;
      await closeSocket(h.socket);
    }
    expect(seen).toEqual({
      "api.example.com": "api.example.com",
      "Api.Example.Com": "api.example.com",
      "x.wild.example.com": "*.wild.example.com",
      "a.b.wild.example.com": "default.test",
      "wild.example.com": "default.test",
      "other.test": "default.test",
      undefined: "default.test",
    });
    // and a grpc-js client that names api.example.com verifies that certificate and calls
    const c = tlsClient(px.address, "api.example.com");
    expect((await unary(c, Buffer.from("sni"))).res?.toString()).toBe("echo:sni");
  });
});

describe("client certificates (mTLS)", () => {
  const mtls = () => ({ certFile: server.certFile, keyFile: server.keyFile, caFile: clientCa.certFile, requireClientCert: true });

  it("refuses the handshake of a client without a certificate, or with one the CA did not sign", async () => {
    const up = await f.grpcServer({ Unary: echo });
    const px = await f.proxyFor(up.address, { listener: { tls: mtls() } });
    const none = tlsClient(px.address, "default.test");
    const r = await unary(none, Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 3000 });
    expect(r.err?.code).toBe(grpc.status.UNAVAILABLE);
    const bad = tlsClient(px.address, "default.test", { cert: stranger });
    const b = await unary(bad, Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 3000 });
    expect(b.err?.code).toBe(grpc.status.UNAVAILABLE);
    // at the TLS level: the server ends the handshake (TLS 1.3 reports it at the first read)
    const h = await handshake(px.address, "default.test").catch((e: Error) => e);
    if (!(h instanceof Error)) {
      const ended = await new Promise<string>((resolve) => {
        h.socket.once("error", (e) => resolve(e.message));
        h.socket.once("close", () => resolve("closed"));
        h.socket.write("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
      });
      expect(ended).toMatch(/certificate required|closed|alert/i);
    }
  });

  it("bounds the handshake by requestHeadersTimeout: a client that connects to either TLS socket and sends nothing is closed after it, not node's 120 s", { timeout: 45_000 }, async () => {
    const up = await f.grpcServer({ Unary: echo });
    const px = await f.proxyFor(up.address, { listener: { tls: mtls(), requestHeadersTimeout: "1s", grpcWeb: true, http1Address: "127.0.0.1:0" } });
    const h1 = px.instance.listeners[0]!.http1Address!;
    const [host, port] = [px.address.slice(0, px.address.lastIndexOf(":")), Number(px.address.slice(px.address.lastIndexOf(":") + 1))];
    /** ms from connect to the server's close; 20 s means never (the test's own bound) */
    const silent = (h: string, p: number): Promise<number> =>
      new Promise((resolve) => {
        const t0 = performance.now();
        const sock = f.track(net.connect({ host: h, port: p }), (x) => x.destroy());
        sock.on("error", () => {});
        const t = setTimeout(() => resolve(Infinity), 20_000);
        sock.once("close", () => {
          clearTimeout(t);
          resolve(performance.now() - t0);
        });
      });
    const [h2Ms, h1Ms] = await Promise.all([silent(host, port), silent(h1.address, h1.port)]);
    // Near the 1 s configured: not before it (the timer starts at accept, after the client's
    // connect began), and at most 1.5 s late, which is what a loaded 2-core machine adds to a
    // timer and a close (the default, 10 s, and node's own 120 s are far outside; this bound
    // used to be 20 s, which any of them would have met).
    for (const ms of [h2Ms, h1Ms]) {
      expect(ms).toBeGreaterThanOrEqual(900);
      expect(ms).toBeLessThan(1000 + 1500);
    }
    // and counted as what it is
    await waitFor("the timeouts on /metrics", async () => sample(await scrape(px.adminAddress), "dojang_tls_handshake_errors_total", { listener: "main", reason: "timeout" }) === 2 ? true : undefined);
  });

  it("passes the verified identity upstream in x-forwarded-client-cert (Envoy's format) and strips a client's own", async () => {
    const up = await f.rawUpstream((stream) => {
      stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(Buffer.from([0, 0, 0, 0, 0]));
    });
    const px = await f.proxyFor(up.address, { listener: { tls: mtls() } });
    const c = tlsClient(px.address, "default.test", { cert: client });
    const md = new grpc.Metadata();
    md.add("x-forwarded-client-cert", "Hash=forged;Subject=\"CN=admin\"");
    const r = await unary(c, Buffer.from("x"), md);
    expect(r.err).toBeNull();
    const raw = up.seen[0]!.raw;
    const xfcc = raw.filter((_, i) => i % 2 === 1 && raw[i - 1] === "x-forwarded-client-cert");
    expect(xfcc).toEqual([
      `Hash=${client.sha256};Subject="CN=client-one,O=Acme\\, Inc";URI=spiffe://acme.test/ns/web/sa/client-one;DNS=client-one.acme.test;DNS=alt.acme.test`,
    ]);
  });

  it("gives gRPC-Web calls the same x-forwarded-client-cert, over HTTPS/1.1 (ALPN http/1.1) and over h2, and strips a client's own", async () => {
    const up = await f.rawUpstream((stream) => {
      stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(Buffer.from([0, 0, 0, 0, 0]));
    });
    const px = await f.proxyFor(up.address, { listener: { grpcWeb: true, tls: mtls() } });
    const [host, port] = px.address.split(":") as [string, string];
    const body = Buffer.from([0, 0, 0, 0, 0]);
    const head = { "content-type": "application/grpc-web+proto", "x-grpc-web": "1", "x-forwarded-client-cert": "Hash=forged" };
    // HTTPS/1.1: a raw TLS socket that offers only http/1.1
    const h1 = tls.connect({ host, port: Number(port), servername: "default.test", ca: ca.cert, cert: client.cert, key: client.key, ALPNProtocols: ["http/1.1"] });
    f.track(h1, (s) => s.destroy());
    await new Promise<void>((resolve, reject) => h1.once("secureConnect", resolve).once("error", reject));
    expect(h1.alpnProtocol).toBe("http/1.1");
    const h1Reply = new Promise<string>((resolve) => {
      let got = "";
      h1.on("data", (d: Buffer) => {
        got += d.toString("latin1");
        if (got.includes("grpc-status")) resolve(got);
      });
    });
    h1.write(`POST /test.Echo/Unary HTTP/1.1\r\nhost: default.test\r\n${Object.entries(head).map(([k, v]) => `${k}: ${v}\r\n`).join("")}content-length: ${body.length}\r\n\r\n`);
    h1.write(body);
    expect(await h1Reply).toMatch(/^HTTP\/1\.1 200/);
    // h2: node's http2 client with the same certificate
    const h2 = http2.connect(`https://${px.address}`, { servername: "default.test", ca: ca.cert, cert: client.cert, key: client.key });
    f.track(h2, (s) => s.close());
    const req = h2.request({ ":method": "POST", ":path": "/test.Echo/Unary", ...head });
    req.end(body);
    const status = await new Promise<string | undefined>((resolve) => {
      let got = "";
      req.on("data", (d: Buffer) => (got += d.toString("latin1")));
      req.on("response", (h) => (got += JSON.stringify(h)));
      req.on("end", () => resolve(/grpc-status"?:\s*"?(\d+)/.exec(got)?.[1] ?? got));
    });
    expect(status).toBe("0");
    expect(up.seen).toHaveLength(2);
    for (const s of up.seen) {
      const raw = s.raw;
      expect(raw.filter((_, i) => i % 2 === 1 && raw[i - 1] === "x-forwarded-client-cert")).toEqual([
        `Hash=${client.sha256};Subject="CN=client-one,O=Acme\\, Inc";URI=spiffe://acme.test/ns/web/sa/client-one;DNS=client-one.acme.test;DNS=alt.acme.test`,
      ]);
    }
  });

  it("verifies client certificates on a certificate chosen by SNI as on the default one", async () => {
    const up = await f.rawUpstream((stream) => {
      stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(Buffer.from([0, 0, 0, 0, 0]));
    });
    const px = await f.proxyFor(up.address, { listener: { tls: { ...mtls(), certificates: [{ serverNames: ["api.example.com"], certFile: api.certFile, keyFile: api.keyFile }] } } });
    const none = await unary(tlsClient(px.address, "api.example.com"), Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 3000 });
    expect(none.err?.code).toBe(grpc.status.UNAVAILABLE);
    const bad = await unary(tlsClient(px.address, "api.example.com", { cert: stranger }), Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 3000 });
    expect(bad.err?.code).toBe(grpc.status.UNAVAILABLE);
    const ok = await unary(tlsClient(px.address, "api.example.com", { cert: client }), Buffer.from("x"));
    expect(ok.err).toBeNull();
    expect(up.seen).toHaveLength(1);
    expect(up.seen[0]!.headers["x-forwarded-client-cert"]).toMatch(new RegExp(`^Hash=${client.sha256};Subject="CN=client-one,`));
  });

  it("strips a client's x-forwarded-client-cert on a listener without client certificates, TLS or not", async () => {
    const up = await f.rawUpstream((stream) => {
      stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(Buffer.from([0, 0, 0, 0, 0]));
    });
    const md = new grpc.Metadata();
    md.add("x-forwarded-client-cert", "Hash=forged");
    const plain = await f.proxyFor(up.address);
    expect((await unary(f.client(plain.address), Buffer.from("x"), md)).err).toBeNull();
    const secure = await f.proxyFor(up.address, { listener: { tls: { certFile: server.certFile, keyFile: server.keyFile } } });
    expect((await unary(tlsClient(secure.address, "default.test", { cert: client }), Buffer.from("x"), md)).err).toBeNull();
    expect(up.seen).toHaveLength(2);
    for (const s of up.seen) expect(s.headers["x-forwarded-client-cert"]).toBeUndefined();
  });

  it("with caFile but not requireClientCert: a client without a certificate is served, with no x-forwarded-client-cert", async () => {
    const up = await f.rawUpstream((stream) => {
      stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(Buffer.from([0, 0, 0, 0, 0]));
    });
    const px = await f.proxyFor(up.address, { listener: { tls: { ...mtls(), requireClientCert: false } } });
    expect((await unary(tlsClient(px.address, "default.test"), Buffer.from("x"))).err).toBeNull();
    expect((await unary(tlsClient(px.address, "default.test", { cert: stranger }), Buffer.from("x"))).err).toBeNull();
    expect((await unary(tlsClient(px.address, "default.test", { cert: client }), Buffer.from("x"))).err).toBeNull();
    expect(up.seen.map((s) => (s.headers["x-forwarded-client-cert"] as string | undefined)?.slice(0, 5))).toEqual([undefined, undefined, "Hash="]);
  });
});

describe("certificate files replaced", () => {
  it("new handshakes get the new certificate while a call on an old connection completes; a broken file is refused and the old certificate kept", async () => {
    // the listener's own copies of the files, replaced below
    const certFile = certs.path("live.pem");
    const keyFile = certs.path("live.key");
    copyFileSync(server.certFile, certFile);
    copyFileSync(server.keyFile, keyFile);
    let release: (() => void) | undefined;
    const up = await f.grpcServer({
      Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        if (call.request.toString() === "hold") release = () => cb(null, Buffer.from("held call done"));
        else cb(null, call.request);
      },
    });
    const px = await f.proxyFor(up.address, { listener: { tls: { certFile, keyFile } } });
    const old = tlsClient(px.address, "default.test");
    const held = unary(old, Buffer.from("hold"), new grpc.Metadata(), { deadline: Date.now() + 20_000 });
    await waitFor("the held call to reach the upstream", () => (release === undefined ? undefined : true));
    expect((await handshake(px.address, "default.test")).cn).toBe("default.test");

    // a broken file: refused, the old certificate still served
    const lt = px.instance.listeners[0]!.tls!;
    writeFileSync(certFile, "-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n");
    await waitFor("the broken file to be refused", () => (lt.refusedReloads > 0 ? true : undefined));
    const still = await handshake(px.address, "default.test");
    expect(still.cn).toBe("default.test");
    await closeSocket(still.socket);

    // a renewed certificate (new key too): written key first, then cert
    const renewed = certs.leaf(ca, "renewed", { cn: "renewed.test", dns: ["default.test"] });
    writeFileSync(keyFile, renewed.key);
    writeFileSync(certFile, renewed.cert);
    await waitFor("a new handshake to see the renewed certificate", async () => {
      const h = await handshake(px.address, "default.test");
      await closeSocket(h.socket);
      return h.cn === "renewed.test" ? true : undefined;
    });
    // a new grpc-js connection verifies the renewed certificate and calls
    const fresh = tlsClient(px.address, "default.test");
    expect((await unary(fresh, Buffer.from("new conn"))).res?.toString()).toBe("new conn");
    // the old connection was not dropped: its held call completes, and it takes another call
    release!();
    const r = await held;
    expect(r.err).toBeNull();
    expect(r.res?.toString()).toBe("held call done");
    expect((await unary(old, Buffer.from("again"))).res?.toString()).toBe("again");
    expect(lt.reloads).toBeGreaterThanOrEqual(1);
  }, 30_000);

  it("follows a Kubernetes-style secret volume: files that are symlinks through a `..data` link swapped atomically", async () => {
    // <dir>/tls.crt -> ..data/tls.crt, ..data -> v1; the update makes v2 and renames a new link over ..data
    const dir = certs.path("secret-volume");
    mkdirSync(join(dir, "v1"), { recursive: true });
    copyFileSync(server.certFile, join(dir, "v1", "tls.crt"));
    copyFileSync(server.keyFile, join(dir, "v1", "tls.key"));
    symlinkSync("v1", join(dir, "..data"));
    symlinkSync(join("..data", "tls.crt"), join(dir, "tls.crt"));
    symlinkSync(join("..data", "tls.key"), join(dir, "tls.key"));
    const up = await f.grpcServer({ Unary: echo });
    const px = await f.proxyFor(up.address, { listener: { tls: { certFile: join(dir, "tls.crt"), keyFile: join(dir, "tls.key") } } });
    const first = await handshake(px.address, "default.test");
    expect(first.cn).toBe("default.test");
    await closeSocket(first.socket);
    const lt = px.instance.listeners[0]!.tls!;
    const renewed = certs.leaf(ca, "k8s-renewed", { cn: "k8s-renewed.test", dns: ["default.test"] });
    mkdirSync(join(dir, "v2"));
    copyFileSync(renewed.certFile, join(dir, "v2", "tls.crt"));
    copyFileSync(renewed.keyFile, join(dir, "v2", "tls.key"));
    symlinkSync("v2", join(dir, "..data_tmp"));
    renameSync(join(dir, "..data_tmp"), join(dir, "..data"));
    await waitFor("a new handshake to see the swapped certificate", async () => {
      const h = await handshake(px.address, "default.test");
      await closeSocket(h.socket);
      return h.cn === "k8s-renewed.test" ? true : undefined;
    });
    expect(lt.reloads).toBe(1);
    expect(lt.refusedReloads).toBe(0);
  }, 30_000);
});

