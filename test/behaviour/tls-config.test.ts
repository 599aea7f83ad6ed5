// TLS config: errors name the key (schema, --check, start), /config shows paths and never key
// material, and a reload that changes a listener's tls says it needs a restart.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readFileSync, writeFileSync } from "node:fs";
import { loadConfigFile, parseConfigText, tlsFileIssues } from "../../src/config/index.js";
import { reloadReport } from "../../src/config/reload.js";
import { startDojang } from "../../src/index.js";
import { CertDir, type Ca, type CertFiles } from "../helpers/certs.js";
import { assertDistBuilt, httpGet, runCli } from "../helpers/process.js";

let certs: CertDir;
let ca: Ca;
let server: CertFiles;
let other: CertFiles;

beforeAll(() => {
  certs = new CertDir();
  ca = certs.ca("ca");
  server = certs.leaf(ca, "server", { cn: "server.test", dns: ["server.test"] });
  other = certs.leaf(ca, "other", { cn: "other.test" });
});
afterAll(() => certs.remove());

const doc = (listenerTls: unknown, clusterTls: unknown = null): string =>
  JSON.stringify({
    listeners: [{ name: "main", address: "127.0.0.1:0", routes: [{ match: { prefix: "/" }, cluster: "b" }], tls: listenerTls }],
    clusters: [{ name: "b", endpoints: ["127.0.0.1:1"], tls: clusterTls }],
  });

function issues(text: string): string[] {
  const r = parseConfigText(text, {});
  return r.ok ? [] : r.issues.map((i) => `${i.path}: ${i.message}`);
}

describe("the tls keys in the config", () => {
  it("parse with their defaults", () => {
    const r = parseConfigText(doc({ certFile: "a.pem", keyFile: "a.key" }, {}), {});
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.config.listeners[0]!.tls).toEqual({ certFile: "a.pem", keyFile: "a.key", caFile: null, requireClientCert: false, certificates: [] });
    expect(r.config.clusters[0]!.tls).toEqual({ caFile: null, serverName: null, certFile: null, keyFile: null });
  });

  it.each([
    [{ keyFile: "a.key" }, null, "listeners[0].tls.certFile: is required"],
    [{ certFile: "a.pem", keyFile: "a.key", requireClientCert: true }, null, "listeners[0].tls.caFile: requireClientCert needs caFile"],
    [{ certFile: "a.pem", keyFile: "a.key", certificates: [{ serverNames: ["bad name"], certFile: "b.pem", keyFile: "b.key" }] }, null, 'listeners[0].tls.certificates[0].serverNames[0]: expected a server name like "api.example.com" or "*.example.com", got "bad name"'],
    [{ certFile: "a.pem", keyFile: "a.key", certificates: [{ serverNames: [], certFile: "b.pem", keyFile: "b.key" }] }, null, "listeners[0].tls.certificates[0].serverNames: needs at least one server name"],
    [{ certFile: "a.pem", keyFile: "a.key", cert: "x" }, null, "listeners[0].tls"],
    [null, { certFile: "c.pem" }, "clusters[0].tls.keyFile: a client certificate needs both certFile and keyFile"],
    [null, { serverName: "*.example.com" }, "clusters[0].tls.serverName: must be one name, not a wildcard"],
  ])("names the key of a mistake (%j, %j)", (l, c, want) => {
    const got = issues(doc(l, c));
    expect(got.some((g) => g.startsWith(want)), `${JSON.stringify(got)} has ${want}`).toBe(true);
  });

  it("an unreadable file is an issue naming the key (tlsFileIssues, which the CLI asks at --check and start)", () => {
    const path = certs.path("missing.json");
    writeFileSync(path, doc({ certFile: certs.path("nope.pem"), keyFile: server.keyFile }, { caFile: certs.path("nope-ca.pem") }));
    // loadConfigFile reads only the config (an example may name files that exist where it is deployed)
    const c = loadConfigFile(path, {});
    expect(tlsFileIssues(c)).toEqual([
      { path: "listeners[0].tls.certFile", message: `cannot read ${JSON.stringify(certs.path("nope.pem"))}: ENOENT` },
      { path: "clusters[0].tls.caFile", message: `cannot read ${JSON.stringify(certs.path("nope-ca.pem"))}: ENOENT` },
    ]);
  });

  it("dojang --check fails on a missing certificate file, naming the key, and passes once it is there", async () => {
    assertDistBuilt();
    const path = certs.path("check.yaml");
    writeFileSync(path, doc({ certFile: certs.path("later.pem"), keyFile: server.keyFile }));
    const bad = await runCli(["--config", path, "--check"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain(`listeners[0].tls.certFile: cannot read ${JSON.stringify(certs.path("later.pem"))}: ENOENT`);
    // and the same at start, before anything listens
    const start = await runCli(["--config", path]);
    expect(start.code).toBe(2);
    expect(start.stderr).toContain(`listeners[0].tls.certFile: cannot read ${JSON.stringify(certs.path("later.pem"))}: ENOENT`);
    writeFileSync(certs.path("later.pem"), server.cert);
    const ok = await runCli(["--config", path, "--check"]);
    expect(ok.stderr).toBe("");
    expect(ok.code).toBe(0);
  });

  it("config/edge.yaml's TLS part is valid: with its certificate files in place, dojang --check passes", async () => {
    assertDistBuilt();
    // the example names /etc/dojang/tls/…: the same files, made here, in a temp directory
    const d = new CertDir();
    try {
      const clients = d.ca("clients-ca");
      const internal = d.ca("internal-ca");
      d.leaf(internal, "edge", { cn: "edge.example.com", dns: ["edge.example.com"] });
      d.leaf(internal, "api", { cn: "api.example.com", dns: ["api.example.com"] });
      d.leaf(internal, "shop-wildcard", { cn: "*.shop.example.com", dns: ["*.shop.example.com"] });
      d.leaf(clients, "dojang-client", { cn: "dojang" });
      const text = readFileSync(new URL("../../config/edge.yaml", import.meta.url), "utf8");
      expect(text).toContain("/etc/dojang/tls/");
      const path = d.path("edge.yaml");
      writeFileSync(path, text.replaceAll("/etc/dojang/tls/", d.dir + "/"));
      const missing = certs.path("edge-missing.yaml");
      writeFileSync(missing, text.replaceAll("/etc/dojang/tls/", d.dir + "/nowhere/"));
      const bad = await runCli(["--config", missing, "--check"]);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain("listeners[0].tls.certFile: cannot read");
      expect(bad.stderr).toContain("clusters[0].tls.keyFile: cannot read");
      const ok = await runCli(["--config", path, "--check"]);
      expect(ok.stderr).toBe("");
      expect(ok.code).toBe(0);
    } finally {
      d.remove();
    }
  });

  it("a certificate that does not match its key fails the start, naming the key and not the contents", async () => {
    const start = startDojang({ logLevel: "silent", config: doc({ certFile: server.certFile, keyFile: other.keyFile }) });
    await expect(start).rejects.toThrow(/listener "main":\n\s+tls: not a usable certificate and key: .*key values mismatch/);
    await expect(startDojang({ logLevel: "silent", config: doc({ certFile: server.certFile, keyFile: certs.path("none.key") }) })).rejects.toThrow(
      `tls.keyFile: cannot read ${JSON.stringify(certs.path("none.key"))}: ENOENT`,
    );
    const garbage = certs.path("garbage.pem");
    writeFileSync(garbage, "hello");
    await expect(startDojang({ logLevel: "silent", config: doc({ certFile: garbage, keyFile: server.keyFile }) })).rejects.toThrow(/tls: not a usable certificate and key/);
    await expect(startDojang({ logLevel: "silent", config: doc(null, { caFile: certs.path("gone.pem") }) })).rejects.toThrow(/cluster "b":\n\s+tls.caFile: cannot read/);
  });

  it("/config shows the file paths and never the key material", async () => {
    const px = await startDojang({
      logLevel: "silent",
      config: { admin: { address: "127.0.0.1:0" }, ...JSON.parse(doc({ certFile: server.certFile, keyFile: server.keyFile, caFile: ca.certFile }, { caFile: ca.certFile, certFile: other.certFile, keyFile: other.keyFile })) },
    });
    try {
      const r = await httpGet(px.adminAddress!, "/config");
      expect(r.status).toBe(200);
      expect(r.body).toContain(JSON.stringify(server.keyFile));
      expect(r.body).toContain(JSON.stringify(other.keyFile));
      expect(r.body).not.toMatch(/BEGIN|PRIVATE|KEY-----/);
      expect(r.body).not.toContain(server.key.toString("utf8").split("\n")[1]!);
    } finally {
      await px.close(0);
    }
  });

  it("a reload that changes a listener's tls needs a restart (the files themselves are re-read when they change)", () => {
    const a = parseConfigText(doc({ certFile: "a.pem", keyFile: "a.key" }), {});
    const b = parseConfigText(doc({ certFile: "b.pem", keyFile: "a.key" }, {}), {});
    if (!a.ok || !b.ok) throw new Error("parse");
    const r = reloadReport(a.config, b.config);
    expect(r.notApplied).toEqual(["listeners[0].tls.certFile"]);
    expect(r.applied).toEqual(["clusters[0].tls"]);
  });
});
