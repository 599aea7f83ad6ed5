// `${VAR}` / `${VAR:-default}` / `$$` expansion in the string scalars of an already-parsed
// config value. Expanding after parsing (not in the raw text) means an environment value can
// never inject YAML structure: it only ever becomes (part of) one string, which typed fields
// then coerce ("${PORT:-8080}", `timeout: ${T:-5s}`). Pure: the environment is an argument.

import type { ConfigIssue } from "../errors.js";
import { formatPath, type PathSegment } from "./issues.js";

export type Env = Readonly<Record<string, string | undefined>>;

/** A ConfigIssue that also keeps its path as segments (indexes numeric), for sorting with schema issues. */
export interface EnvIssue extends ConfigIssue {
  readonly segments: readonly PathSegment[];
}

export type ExpandStringResult = { readonly ok: true; readonly value: string } | { readonly ok: false; readonly errors: readonly string[] };

const VAR_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Expands one string. Grammar (a subset of POSIX shell / Docker Compose):
 *   `$$`              a literal `$`
 *   `${NAME}`         the variable's value; an error if it is unset (set-but-empty gives "")
 *   `${NAME:-text}`   the value if set and non-empty, else `text` (taken literally, up to the first `}`)
 *   `$` before anything else is kept literally (`"a$b"` stays `a$b`).
 */
export function expandString(s: string, env: Env): ExpandStringResult {
  if (!s.includes("$")) return { ok: true, value: s };
  let out = "";
  const errors: string[] = [];
  let i = 0;
  while (i < s.length) {
    const dollar = s.indexOf("$", i);
    if (dollar < 0) {
      out += s.slice(i);
      break;
    }
    out += s.slice(i, dollar);
    const next = s[dollar + 1];
    if (next === "$") {
      out += "$";
      i = dollar + 2;
      continue;
    }
    if (next !== "{") {
      out += "$";
      i = dollar + 1;
      continue;
    }
    const close = s.indexOf("}", dollar + 2);
    if (close < 0) {
      errors.push(`unterminated "\${" in ${JSON.stringify(s)} (write "$$" for a literal "$")`);
      break;
    }
    const body = s.slice(dollar + 2, close);
    const sep = body.indexOf(":-");
    const name = sep < 0 ? body : body.slice(0, sep);
    if (!VAR_NAME.test(name)) {
      errors.push(
        name === ""
          ? `empty variable name in "\${${body}}"`
          : `invalid variable name ${JSON.stringify(name)} in "\${${body}}" (letters, digits and "_"; only the ":-" default form is supported)`,
      );
    } else {
      const value = env[name];
      if (sep >= 0) {
        out += value === undefined || value === "" ? body.slice(sep + 2) : value;
      } else if (value === undefined) {
        errors.push(`environment variable "${name}" is not set (write "\${${name}:-default}" to give a default)`);
      } else {
        out += value;
      }
    }
    i = close + 1;
  }
  return errors.length > 0 ? { ok: false, errors } : { ok: true, value: out };
}

/**
 * Returns a copy of `value` with every string scalar expanded (mapping keys are left as they
 * are). Mappings are copied into null-prototype objects so a `__proto__` key stays an ordinary
 * (and, for the strict schema, unknown) key. Issues carry the key path of the string.
 */
export function expandEnv(value: unknown, env: Env): { readonly value: unknown; readonly issues: readonly EnvIssue[] } {
  const issues: EnvIssue[] = [];
  const ancestors = new Set<object>();
  const path: PathSegment[] = [];

  const walk = (v: unknown): unknown => {
    if (typeof v === "string") {
      const r = expandString(v, env);
      if (r.ok) return r.value;
      for (const message of r.errors) issues.push({ path: formatPath(path), segments: [...path], message });
      return v;
    }
    if (typeof v !== "object" || v === null) return v;
    if (ancestors.has(v)) {
      issues.push({ path: formatPath(path), segments: [...path], message: "circular reference" });
      return undefined;
    }
    if (Array.isArray(v)) {
      ancestors.add(v);
      const out = v.map((item, index) => {
        path.push(index);
        const r = walk(item);
        path.pop();
        return r;
      });
      ancestors.delete(v);
      return out;
    }
    const proto: unknown = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== null) return v; // Map, Date, class instance: the schema rejects it
    ancestors.add(v);
    const out: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
    for (const key of Object.keys(v)) {
      path.push(key);
      out[key] = walk((v as Record<string, unknown>)[key]);
      path.pop();
    }
    ancestors.delete(v);
    return out;
  };

  return { value: walk(value), issues };
}
