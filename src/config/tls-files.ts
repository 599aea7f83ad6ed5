// Whether the TLS files a config names can be read and used: apart from load.ts so that the served
// process, which takes its config already parsed from the launcher (src/config/handover.ts), can
// run the check without loading the parser.
import { createPrivateKey } from "node:crypto";
import { readFileSync } from "node:fs";
import { createSecureContext } from "node:tls";
import type { ConfigIssue } from "../errors.js";
import type { Config } from "./schema.js";

/** OpenSSL's reason without its code prefix ("error:05800074:x509 certificate routines::key values mismatch" → "key values mismatch"). */
function reason(err: unknown): string {
  const m = err instanceof Error ? err.message : String(err);
  const i = m.lastIndexOf("::");
  return i >= 0 && m.startsWith("error:") ? m.slice(i + 2) : m;
}

/**
 * Every problem with the TLS files the config names (listeners[].tls, clusters[].tls, and a
 * route's jwt.jwks file or CA file), each on
 * its key: a file that cannot be read (`listeners[0].tls.certFile: cannot read "x.pem": ENOENT`),
 * a certificate or CA file with no PEM certificate in it, a key that is not a PEM private key,
 * and a key that does not belong to its certificate (`listeners[0].tls.keyFile: …`). The files
 * are loaded the way the proxy loads them when it starts (node's secure contexts, OpenSSL's
 * reason in the message); the key material itself is never part of a message.
 *
 * The CLI asks this after loading the config (src/main.ts), for `--check` and before a start
 * alike, so both fail the same way (exit 2, key paths, no stack); loadConfigFile itself reads only
 * the config (an example config may name certificates that exist only where it is deployed).
 */
export function tlsFileIssues(config: Config): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const read = (key: string, file: string | null): Buffer | undefined => {
    if (file === null) return undefined;
    try {
      return readFileSync(file);
    } catch (err: unknown) {
      const code = typeof err === "object" && err !== null && "code" in err ? String(err.code) : err instanceof Error ? err.message : String(err);
      issues.push({ path: key, message: `cannot read ${JSON.stringify(file)}: ${code}` });
      return undefined;
    }
  };
  /** a certificate chain (or CA bundle): at least one PEM certificate OpenSSL can parse */
  const certs = (key: string, file: string, pem: Buffer, what: string): boolean => {
    try {
      createSecureContext({ cert: pem });
      return true;
    } catch (err) {
      issues.push({ path: key, message: `${JSON.stringify(file)} is not a usable ${what}: ${reason(err)}` });
      return false;
    }
  };
  const pair = (at: string, certFile: string | null, keyFile: string | null): void => {
    const cert = read(`${at}.certFile`, certFile);
    const key = read(`${at}.keyFile`, keyFile);
    if (cert === undefined || key === undefined || certFile === null || keyFile === null) return;
    const certOk = certs(`${at}.certFile`, certFile, cert, "PEM certificate");
    let keyOk = true;
    try {
      createPrivateKey(key);
    } catch (err) {
      keyOk = false;
      issues.push({ path: `${at}.keyFile`, message: `${JSON.stringify(keyFile)} is not a usable PEM private key: ${reason(err)}` });
    }
    if (!certOk || !keyOk) return;
    try {
      createSecureContext({ cert, key });
    } catch (err) {
      issues.push({ path: `${at}.keyFile`, message: `${JSON.stringify(keyFile)} is not the key of the certificate in ${JSON.stringify(certFile)}: ${reason(err)}` });
    }
  };
  const ca = (key: string, file: string | null): void => {
    const pem = read(key, file);
    if (pem !== undefined && file !== null) certs(key, file, pem, "PEM CA bundle");
  };
  config.listeners.forEach((l, i) => {
    const t = l.tls;
    if (t === null) return;
    const at = `listeners[${i}].tls`;
    pair(at, t.certFile, t.keyFile);
    ca(`${at}.caFile`, t.caFile);
    t.certificates.forEach((c, j) => pair(`${at}.certificates[${j}]`, c.certFile, c.keyFile));
  });
  config.clusters.forEach((c, i) => {
    const t = c.tls;
    if (t === null) return;
    const at = `clusters[${i}].tls`;
    ca(`${at}.caFile`, t.caFile);
    pair(at, t.certFile, t.keyFile);
  });
  // routes[].jwt.jwks (issue 21): the JWKS file must be a JWKS document, the JWKS server's CA a PEM bundle
  config.listeners.forEach((l, i) =>
    l.routes.forEach((r, j) => {
      const src = r.jwt?.jwks;
      if (src === undefined) return;
      const at = `listeners[${i}].routes[${j}].jwt.jwks`;
      if ("url" in src) return ca(`${at}.caFile`, src.caFile);
      const text = read(`${at}.file`, src.file);
      if (text === undefined) return;
      let doc: unknown;
      try {
        doc = JSON.parse(text.toString("utf8"));
      } catch {
        doc = undefined;
      }
      if (typeof doc !== "object" || doc === null || !Array.isArray((doc as { keys?: unknown }).keys)) issues.push({ path: `${at}.file`, message: `${JSON.stringify(src.file)} is not a JWKS document (JSON with a "keys" list)` });
    }),
  );
  return issues;
}
