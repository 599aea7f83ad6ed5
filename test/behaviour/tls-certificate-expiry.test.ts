// dojang_tls_certificate_expiry_timestamp_seconds (what the DojangCertificateExpiresSoon alert
// reads): each certificate a TLS listener serves, by its key path, at its notAfter, as openssl
// reads the same file (the oracle); a renewed file shows its new date without a restart; a
// plaintext listener has none.
import { execFileSync } from "node:child_process";
import { copyFileSync, writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CertDir, type Ca, type CertFiles } from "../helpers/certs.js";
import { useFixtures } from "../helpers/fixtures.js";
import { sample, scrape } from "../helpers/peers.js";
import { waitFor } from "../helpers/process.js";

const f = useFixtures();
let certs: CertDir;
let ca: Ca;
let server: CertFiles;
let api: CertFiles;

beforeAll(() => {
  certs = new CertDir();
  ca = certs.ca("expiry-ca");
  server = certs.leaf(ca, "default", { cn: "default.test", dns: ["default.test"] });
  // an SNI certificate that has expired already
  api = certs.leaf(ca, "api", { cn: "api.example.com", dns: ["api.example.com"], expired: true });
});
afterAll(() => certs.remove());

/** The certificate's notAfter in epoch seconds, as openssl reads it. */
function opensslNotAfter(file: string): number {
  const out = execFileSync("openssl", ["x509", "-enddate", "-noout", "-in", file], { encoding: "utf8" }).trim();
  return Date.parse(out.replace(/^notAfter=/, "")) / 1000;
}

const METRIC = "dojang_tls_certificate_expiry_timestamp_seconds";

describe(METRIC, () => {
  it("is each served certificate's notAfter, by listener and key path, and follows a renewed file", async () => {
    const certFile = certs.path("live.pem");
    const keyFile = certs.path("live.key");
    copyFileSync(server.certFile, certFile);
    copyFileSync(server.keyFile, keyFile);
    const up = await f.grpcServer({});
    const px = await f.proxyFor(up.address, { listener: { tls: { certFile, keyFile, certificates: [{ serverNames: ["api.example.com"], certFile: api.certFile, keyFile: api.keyFile }] } } });
    const text = await scrape(px.adminAddress);
    expect(sample(text, METRIC, { listener: "main", certificate: "tls.certFile" })).toBe(opensslNotAfter(server.certFile));
    expect(sample(text, METRIC, { listener: "main", certificate: "tls.certificates[0].certFile" })).toBe(opensslNotAfter(api.certFile));
    // the expired one is in the past: the alert's `- time()` is negative for it
    expect(sample(text, METRIC, { certificate: "tls.certificates[0].certFile" })).toBeLessThan(Date.now() / 1000);

    // renewed: an expired certificate written over the file (a new key too) is served, and shown
    const renewed = certs.leaf(ca, "renewed", { cn: "renewed.test", dns: ["default.test"], expired: true });
    writeFileSync(keyFile, renewed.key);
    writeFileSync(certFile, renewed.cert);
    const want = opensslNotAfter(renewed.certFile);
    expect(want).not.toBe(opensslNotAfter(server.certFile));
    await waitFor("the renewed date", async () => (sample(await scrape(px.adminAddress), METRIC, { certificate: "tls.certFile" }) === want ? true : undefined), 10_000);
  });

  it("has no sample for a plaintext listener", async () => {
    const up = await f.grpcServer({});
    const px = await f.proxyFor(up.address);
    const text = await scrape(px.adminAddress);
    expect(text).toContain(`# TYPE ${METRIC} gauge`);
    expect(text.split("\n").filter((l) => l.startsWith(`${METRIC}{`))).toEqual([]);
  });
});
