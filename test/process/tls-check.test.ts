// TLS material at --check and at start (issue 18, item 3): a certificate and a key that do not
// belong together, a file that is not PEM, a file that cannot be read. `--check` loads the files
// the way start does, and both print the config error with its key path (exit 2, no stack),
// before anything listens. Certificates made with openssl (test/helpers/certs.ts).
import { mkdirSync } from "node:fs";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CertDir, type Ca, type CertFiles } from "../helpers/certs.js";
import { assertDistBuilt, canConnect, freePort, killSpawned, runCli, tempDir } from "../helpers/process.js";

let certs: CertDir;
let ca: Ca;
let a: CertFiles;
let b: CertFiles;
const tmp = tempDir();

beforeAll(() => {
  assertDistBuilt();
  certs = new CertDir();
  ca = certs.ca("ca");
  a = certs.leaf(ca, "a", { cn: "a.test", dns: ["a.test"] });
  b = certs.leaf(ca, "b", { cn: "b.test", dns: ["b.test"] });
});
afterEach(async () => {
  await killSpawned();
});
afterAll(() => {
  certs.remove();
  tmp.remove();
});

/** A config with one TLS listener on listenPort, an admin on adminPort, and optionally a TLS cluster. */
function config(name: string, tls: Record<string, unknown>, ports: { listen: number; admin: number }, clusterTls?: Record<string, unknown>): string {
  return tmp.write(
    name,
    JSON.stringify({
      admin: { address: `127.0.0.1:${ports.admin}` },
      listeners: [{ name: "main", address: `127.0.0.1:${ports.listen}`, tls, routes: [{ match: { prefix: "/" }, cluster: "b" }] }],
      clusters: [{ name: "b", endpoints: ["127.0.0.1:1"], ...(clusterTls === undefined ? {} : { tls: clusterTls }) }],
    }),
  );
}

/** --check and a start: both exit 2 with `want` on stderr, no stack, and neither listens. */
async function expectRefused(file: string, ports: { listen: number; admin: number }, want: readonly string[]): Promise<void> {
  for (const args of [["--check", "--config", file], ["--config", file]]) {
    const r = await runCli(args);
    const what = `${args.join(" ")}\nstderr:\n${r.stderr}`;
    expect(r.code, what).toBe(2);
    expect(r.stdout, what).toBe("");
    expect(r.stderr, what).toContain(`dojang: invalid config ${file}:\n`);
    for (const w of want) expect(r.stderr, what).toContain(w);
    // every line is the header or an issue: no source line, no stack frame
    for (const line of r.stderr.trimEnd().split("\n").slice(1)) expect(line, what).toMatch(/^ {2}(listeners|clusters)\[\d+\]\.tls\./);
    expect(r.stderr, what).not.toMatch(/^\s+at /m);
  }
  expect(await canConnect(ports.listen)).toBe(false);
  expect(await canConnect(ports.admin)).toBe(false);
}

async function ports(): Promise<{ listen: number; admin: number }> {
  return { listen: await freePort(), admin: await freePort() };
}

describe("a listener's certificate and key", () => {
  it("that do not belong together: listeners[0].tls.keyFile names both files and OpenSSL's reason", async () => {
    const p = await ports();
    const file = config("mismatch.json", { certFile: a.certFile, keyFile: b.keyFile }, p);
    await expectRefused(file, p, [`  listeners[0].tls.keyFile: ${JSON.stringify(b.keyFile)} is not the key of the certificate in ${JSON.stringify(a.certFile)}: key values mismatch`]);
  });

  it("that are not PEM: certFile and keyFile each named", async () => {
    const p = await ports();
    const junk = tmp.write("junk.pem", "not a certificate\n");
    const file = config("junk.json", { certFile: junk, keyFile: junk }, p);
    await expectRefused(file, p, [
      `  listeners[0].tls.certFile: ${JSON.stringify(junk)} is not a usable PEM certificate: `,
      `  listeners[0].tls.keyFile: ${JSON.stringify(junk)} is not a usable PEM private key: `,
    ]);
  });

  it("a certificate given as the key, and an SNI certificate with the wrong key", async () => {
    const p = await ports();
    const file = config("sni.json", { certFile: a.certFile, keyFile: a.certFile, certificates: [{ serverNames: ["b.test"], certFile: b.certFile, keyFile: a.keyFile }] }, p);
    await expectRefused(file, p, [
      `  listeners[0].tls.keyFile: ${JSON.stringify(a.certFile)} is not a usable PEM private key: `,
      `  listeners[0].tls.certificates[0].keyFile: ${JSON.stringify(a.keyFile)} is not the key of the certificate in ${JSON.stringify(b.certFile)}: key values mismatch`,
    ]);
  });

  it("that cannot be read (a directory, a missing file): the errno on the key", async () => {
    const p = await ports();
    const dir = `${tmp.dir}/a-directory.pem`;
    mkdirSync(dir, { recursive: true });
    const file = config("unreadable.json", { certFile: dir, keyFile: `${tmp.dir}/missing.key` }, p);
    await expectRefused(file, p, [`  listeners[0].tls.certFile: cannot read ${JSON.stringify(dir)}: EISDIR`, `  listeners[0].tls.keyFile: cannot read ${JSON.stringify(`${tmp.dir}/missing.key`)}: ENOENT`]);
  });

  it("a CA file with no certificate in it: listeners[0].tls.caFile", async () => {
    const p = await ports();
    const junk = tmp.write("junk-ca.pem", "-----BEGIN NOTHING-----\n");
    const file = config("ca.json", { certFile: a.certFile, keyFile: a.keyFile, caFile: junk }, p);
    await expectRefused(file, p, [`  listeners[0].tls.caFile: ${JSON.stringify(junk)} is not a usable PEM CA bundle: `]);
  });

  it("a matching pair passes --check (the check can pass)", async () => {
    const p = await ports();
    const file = config("good.json", { certFile: a.certFile, keyFile: a.keyFile, caFile: ca.certFile }, p);
    const r = await runCli(["--check", "--config", file]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
  });
});

describe("a cluster's client certificate", () => {
  it("with the wrong key: clusters[0].tls.keyFile, at --check and at start", async () => {
    const p = await ports();
    const file = tmp.write(
      "cluster.json",
      JSON.stringify({
        admin: { address: `127.0.0.1:${p.admin}` },
        listeners: [{ name: "main", address: `127.0.0.1:${p.listen}`, routes: [{ match: { prefix: "/" }, cluster: "b" }] }],
        clusters: [{ name: "b", endpoints: ["127.0.0.1:1"], tls: { caFile: ca.certFile, certFile: b.certFile, keyFile: a.keyFile } }],
      }),
    );
    await expectRefused(file, p, [`  clusters[0].tls.keyFile: ${JSON.stringify(a.keyFile)} is not the key of the certificate in ${JSON.stringify(b.certFile)}: key values mismatch`]);
  });
});
