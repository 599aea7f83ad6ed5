// A real dojang process with TLS listeners (issue 18 items 1 and 6): `--check` accepts what the
// start serves, the start-up line lists every socket of every listener with its protocols and
// TLS mode, and refused TLS handshakes of each kind (no client certificate, another CA's or an
// expired one, no common ALPN protocol, TLS 1.1, plain text, a client refusing dojang's
// certificate, a client that connects and leaves) are counted by reason on /metrics and logged at
// most once per listener and reason per second, with the client's address and never a
// certificate's bytes. Real handshakes from node:tls, node:net and the openssl command line;
// certificates made by openssl at test time.
import { execFile } from "node:child_process";
import net from "node:net";
import tls from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CertDir, type Ca, type CertFiles } from "../helpers/certs.js";
import { sample, scrape } from "../helpers/peers.js";
import { freePort, logLines, processTestKit, runCli, sleep, spawnDojang, waitFor, waitReady } from "../helpers/process.js";

const { backend, dir: tempDirFor } = processTestKit();
let certs: CertDir;
let ca: Ca;
let clientCa: Ca;
let otherCa: Ca;
let server: CertFiles;
let client: CertFiles;
let stranger: CertFiles;
let expired: CertFiles;

beforeAll(() => {
  certs = new CertDir();
  ca = certs.ca("server-ca");
  clientCa = certs.ca("client-ca");
  otherCa = certs.ca("other-ca");
  server = certs.leaf(ca, "default", { cn: "default.test", dns: ["default.test"], ip: ["127.0.0.1"] });
  client = certs.leaf(clientCa, "client", { cn: "client-one" });
  stranger = certs.leaf(otherCa, "stranger", { cn: "stranger" });
  expired = certs.leaf(clientCa, "expired", { cn: "expired-one", expired: true });
});
afterAll(() => certs.remove());

const tlsBlock = (o: { caFile?: string; requireClientCert?: boolean }): string =>
  `{ certFile: ${JSON.stringify(server.certFile)}, keyFile: ${JSON.stringify(server.keyFile)}` +
  (o.caFile === undefined ? "" : `, caFile: ${JSON.stringify(o.caFile)}`) +
  (o.requireClientCert === undefined ? "" : `, requireClientCert: ${o.requireClientCert}`) +
  " }";

function listener(name: string, port: number, extra: string[]): string[] {
  return [`  - name: ${name}`, `    address: 127.0.0.1:${port}`, ...extra.map((l) => `    ${l}`), "    routes:", '      - match: { prefix: "/" }', "        cluster: backend"];
}

function configText(adminPort: number, upstream: string, listeners: string[][]): string {
  return [`admin:`, `  address: 127.0.0.1:${adminPort}`, "listeners:", ...listeners.flat(), "clusters:", "  - name: backend", `    endpoints: ["${upstream}"]`, "drainTimeout: 1s", "logLevel: info", ""].join("\n");
}

const started = (lines: Record<string, any>[]) => lines.find((l) => l["msg"] === "dojang started");

describe("the start-up line and --check", () => {
  it("--check accepts a TLS listener with http1Address, and the start-up line lists every socket with its protocols and TLS mode", async () => {
    const b = await backend("a");
    const [admin, edge, edgeH1, inside, insideH1, optional, tlsOnly] = await Promise.all(Array.from({ length: 7 }, () => freePort()));
    const d = tempDirFor();
    const file = d.write(
      "dojang.yaml",
      configText(admin!, b.address, [
        listener("edge", edge!, ["grpcWeb: true", `http1Address: 127.0.0.1:${edgeH1}`, `tls: ${tlsBlock({ caFile: clientCa.certFile, requireClientCert: true })}`]),
        listener("inside", inside!, ["grpcWeb: true", `http1Address: 127.0.0.1:${insideH1}`]),
        listener("optional", optional!, [`tls: ${tlsBlock({ caFile: clientCa.certFile })}`]),
        listener("tls-only", tlsOnly!, [`tls: ${tlsBlock({})}`]),
      ]),
    );
    const check = await runCli(["--config", file, "--check"]);
    expect(check.stderr).toBe("");
    expect(check.code).toBe(0);
    const p = spawnDojang(["--config", file]);
    await waitReady(p, `127.0.0.1:${admin}`);
    const line = await waitFor("the start-up line", () => started(logLines(p)));
    expect(line["listeners"]).toEqual([
      {
        name: "edge",
        address: `127.0.0.1:${edge}`,
        sockets: [
          { address: `127.0.0.1:${edge}`, protocols: ["h2", "http/1.1"], tls: "mtls-required" },
          { address: `127.0.0.1:${edgeH1}`, protocols: ["http/1.1"], tls: "mtls-required" },
        ],
      },
      {
        name: "inside",
        address: `127.0.0.1:${inside}`,
        sockets: [
          { address: `127.0.0.1:${inside}`, protocols: ["h2c"], tls: "plaintext" },
          { address: `127.0.0.1:${insideH1}`, protocols: ["http/1.1"], tls: "plaintext" },
        ],
      },
      { name: "optional", address: `127.0.0.1:${optional}`, sockets: [{ address: `127.0.0.1:${optional}`, protocols: ["h2"], tls: "mtls-optional" }] },
      { name: "tls-only", address: `127.0.0.1:${tlsOnly}`, sockets: [{ address: `127.0.0.1:${tlsOnly}`, protocols: ["h2"], tls: "tls" }] },
    ]);
  });
});

// === refused handshakes ===

/** A TLS handshake (and, once it completes, one write) that dojang is expected to refuse; resolves when the socket closes. */
function tlsAttempt(port: number, o: tls.ConnectionOptions): Promise<void> {
  return new Promise((resolve) => {
    const s = tls.connect({ host: "127.0.0.1", port, servername: "default.test", ca: ca.cert, ALPNProtocols: ["h2", "http/1.1"], ...o }, () => s.write("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));
    const t = setTimeout(() => s.destroy(), 5000);
    s.on("error", () => {});
    s.on("close", () => {
      clearTimeout(t);
      resolve();
    });
  });
}

/** Plain TCP: send `bytes` (none: connect and leave), then close. */
function rawAttempt(port: number, bytes: string): Promise<void> {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1", () => {
      if (bytes === "") s.end();
      else s.write(bytes, () => setTimeout(() => s.end(), 100));
    });
    const t = setTimeout(() => s.destroy(), 5000);
    s.on("data", () => {});
    s.on("error", () => {});
    s.on("close", () => {
      clearTimeout(t);
      resolve();
    });
  });
}

/** openssl s_client that does not trust dojang's CA: it sends the unknown_ca alert. */
function opensslDistrusting(port: number): Promise<void> {
  return new Promise((resolve) => {
    const c = execFile("openssl", ["s_client", "-connect", `127.0.0.1:${port}`, "-servername", "default.test", "-CAfile", otherCa.certFile, "-verify_return_error", "-cert", client.certFile, "-key", client.keyFile], { timeout: 5000 }, () => resolve());
    c.stdin?.end();
  });
}

describe("refused TLS handshakes", () => {
  it("are counted by reason on /metrics and logged at most once per reason per second, with the client's address and no certificate bytes", { timeout: 60_000 }, async () => {
    const b = await backend("a");
    const [admin, edge, edgeH1] = await Promise.all(Array.from({ length: 3 }, () => freePort()));
    const d = tempDirFor();
    const file = d.write(
      "dojang.yaml",
      configText(admin!, b.address, [listener("edge", edge!, ["grpcWeb: true", `http1Address: 127.0.0.1:${edgeH1}`, `tls: ${tlsBlock({ caFile: clientCa.certFile, requireClientCert: true })}`])]),
    );
    const p = spawnDojang(["--config", file]);
    await waitReady(p, `127.0.0.1:${admin}`);
    const metrics = async (): Promise<Record<string, number>> => {
      const text = await scrape(`127.0.0.1:${admin}`);
      const out: Record<string, number> = {};
      for (const r of ["no_client_cert", "bad_client_cert", "protocol", "server_cert_refused", "timeout", "client_closed", "other"]) {
        out[r] = sample(text, "dojang_tls_handshake_errors_total", { listener: "edge", reason: r });
      }
      return out;
    };
    // every reason is on /metrics from the start, at 0
    expect(await metrics()).toEqual({ no_client_cert: 0, bad_client_cert: 0, protocol: 0, server_cert_refused: 0, timeout: 0, client_closed: 0, other: 0 });

    // no client certificate: 15 in a burst (TLS 1.3 and 1.2, both sockets), then one more after the log period
    for (let i = 0; i < 15; i++) await tlsAttempt(i % 3 === 2 ? edgeH1! : edge!, i % 2 === 0 ? {} : { maxVersion: "TLSv1.2" });
    await sleep(1100);
    await tlsAttempt(edge!, {});
    // a certificate another CA signed (TLS port), an expired one from the right CA (http1Address)
    await tlsAttempt(edge!, { cert: stranger.cert, key: stranger.key });
    await tlsAttempt(edgeH1!, { cert: expired.cert, key: expired.key });
    // protocol: no common ALPN protocol, TLS 1.1 only, plain-text HTTP/1.1 to http1Address, the h2c preface to the TLS port
    await tlsAttempt(edge!, { cert: client.cert, key: client.key, ALPNProtocols: ["spdy/3"] });
    await tlsAttempt(edge!, { cert: client.cert, key: client.key, minVersion: "TLSv1", maxVersion: "TLSv1.1", ciphers: "DEFAULT@SECLEVEL=0" });
    await rawAttempt(edgeH1!, "POST /demo.Meta/Who HTTP/1.1\r\nhost: x\r\ncontent-type: application/grpc-web\r\ncontent-length: 0\r\n\r\n");
    await rawAttempt(edge!, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    // a client that does not trust dojang's certificate
    await opensslDistrusting(edge!);
    // connect and leave (a TCP health check)
    await rawAttempt(edge!, "");

    const want = { no_client_cert: 16, bad_client_cert: 2, protocol: 4, server_cert_refused: 1, timeout: 0, client_closed: 1, other: 0 };
    await waitFor("the counts", async () => (JSON.stringify(await metrics()) === JSON.stringify(want) ? true : undefined), 5000).catch(() => undefined);
    expect(await metrics()).toEqual(want);
    // and the good client still gets through on both sockets
    for (const port of [edge!, edgeH1!]) {
      const alpn = await new Promise<string | false>((resolve, reject) => {
        const s = tls.connect({ host: "127.0.0.1", port, servername: "default.test", ca: ca.cert, cert: client.cert, key: client.key, ALPNProtocols: ["http/1.1"] }, () => {
          resolve(s.alpnProtocol ?? false);
          s.destroy();
        });
        s.on("error", reject);
      });
      expect(alpn).toBe("http/1.1");
    }
    expect((await metrics())["no_client_cert"]).toBe(16);

    // the log lines: warn, one per reason per second at most, suppressed ones counted on the next
    const refused = await waitFor("the log lines", () => {
      const l = logLines(p).filter((x) => x["msg"] === "TLS handshake refused");
      return l.some((x) => x["reason"] === "server_cert_refused") ? l : undefined;
    });
    for (const l of refused) {
      expect(l["level"]).toBe(40);
      expect(l["listener"]).toBe("edge");
      expect(l["client"]).toMatch(/^127\.0\.0\.1:\d+$/);
      expect(["address", "http1Address"]).toContain(l["socket"]);
    }
    const noCert = refused.filter((l) => l["reason"] === "no_client_cert");
    expect(noCert.length).toBeGreaterThanOrEqual(2); // the burst's first, and the one after the pause
    expect(noCert.length).toBeLessThan(16);
    expect(noCert.reduce((n, l) => n + 1 + (l["suppressed"] as number), 0)).toBe(16);
    expect(noCert[0]!["error"]).toBe("ERR_SSL_PEER_DID_NOT_RETURN_A_CERTIFICATE");
    const bad = refused.filter((l) => l["reason"] === "bad_client_cert");
    expect(bad.length).toBeGreaterThanOrEqual(1);
    expect(bad[0]).toMatchObject({ socket: "address", certificate_error: "UNABLE_TO_VERIFY_LEAF_SIGNATURE", sni: "default.test" });
    expect(refused.filter((l) => l["reason"] === "protocol").length).toBeGreaterThanOrEqual(1);
    expect(refused.find((l) => l["reason"] === "server_cert_refused")?.["error"]).toBe("ERR_SSL_TLSV1_ALERT_UNKNOWN_CA");
    // a client that only connected and left is counted, not warned about
    expect(refused.some((l) => l["reason"] === "client_closed")).toBe(false);
    // never a certificate's bytes (PEM, or any run of its base64)
    const out = p.stdout();
    expect(out).not.toContain("BEGIN CERTIFICATE");
    for (const c of [client, stranger, expired]) {
      const b64 = c.x509.raw.toString("base64");
      for (let i = 0; i + 24 <= b64.length; i += 24) expect(out).not.toContain(b64.slice(i, i + 24));
    }
  });
});
