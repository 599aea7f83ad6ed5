// Reads a config file: the only file under src/config that touches the filesystem. Everything
// else (syntax, env expansion, schema, cross-references) is parse.ts, which is pure.

import { readFileSync } from "node:fs";
import { ConfigError, type ConfigIssue } from "../errors.js";
import type { Env } from "./env.js";
import { parseConfigText } from "./parse.js";
import type { Config } from "./schema.js";

/**
 * Reads and parses `path` as YAML, whatever its extension: JSON is valid YAML, and the YAML
 * parser gives a line and column for every syntax error (V8's JSON.parse does not). Throws
 * ConfigError(path, issues) on any issue, including an unreadable file (issue path "", the
 * errno in the message, the Node error kept as `cause`). The result is deep-frozen.
 * Synchronous on purpose: it runs once, before anything listens.
 */
export function loadConfigFile(path: string, env: Env = process.env): Config {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err: unknown) {
    const code = typeof err === "object" && err !== null && "code" in err ? String(err.code) : undefined;
    const detail = err instanceof Error ? err.message : String(err);
    const message = code !== undefined && !detail.startsWith(code) ? `${code}: ${detail}` : detail;
    throw new ConfigError(path, [{ path: "", message: `cannot read the config file: ${message}` }], { cause: err });
  }
  const r = parseConfigText(text, env);
  if (!r.ok) throw new ConfigError(path, r.issues);
  return r.config;
}

/**
 * Every TLS file the config names (listeners[].tls, clusters[].tls) that cannot be read, as an
 * issue on its key: `listeners[0].tls.certFile: cannot read "x.pem": ENOENT`. The CLI asks this
 * after loading (src/main.ts), so `--check` fails on a missing file; loadConfigFile itself reads
 * only the config (an example config may name certificates that exist only where it is deployed).
 * Only readability is checked here; the proxy parses the PEM when it starts
 * (src/proxy/downstream/tls.ts, src/proxy/upstream/tls.ts) and names the key there too.
 */
export function tlsFileIssues(config: Config): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const check = (key: string, file: string | null): void => {
    if (file === null) return;
    try {
      readFileSync(file);
    } catch (err: unknown) {
      const code = typeof err === "object" && err !== null && "code" in err ? String(err.code) : err instanceof Error ? err.message : String(err);
      issues.push({ path: key, message: `cannot read ${JSON.stringify(file)}: ${code}` });
    }
  };
  config.listeners.forEach((l, i) => {
    const t = l.tls;
    if (t === null) return;
    const at = `listeners[${i}].tls`;
    check(`${at}.certFile`, t.certFile);
    check(`${at}.keyFile`, t.keyFile);
    check(`${at}.caFile`, t.caFile);
    t.certificates.forEach((c, j) => {
      check(`${at}.certificates[${j}].certFile`, c.certFile);
      check(`${at}.certificates[${j}].keyFile`, c.keyFile);
    });
  });
  config.clusters.forEach((c, i) => {
    const t = c.tls;
    if (t === null) return;
    const at = `clusters[${i}].tls`;
    check(`${at}.caFile`, t.caFile);
    check(`${at}.certFile`, t.certFile);
    check(`${at}.keyFile`, t.keyFile);
  });
  return issues;
}
