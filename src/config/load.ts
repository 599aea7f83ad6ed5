// Reads a config file: the only file under src/config that touches the filesystem. Everything
// else (syntax, env expansion, schema, cross-references) is parse.ts, which is pure.

import { readFileSync } from "node:fs";
import { ConfigError } from "../errors.js";
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

export { tlsFileIssues } from "./tls-files.js";
