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

/** One `${NAME}` / `${NAME:-default}` a string used, and whether its default was taken (NAME unset or empty). */
export interface EnvUse {
  readonly name: string;
  /** "unset" or "empty" when the `:-` default was used, else undefined (the variable's own value was used) */
  readonly defaulted?: "unset" | "empty";
}

/** Which variables made the string at one key path (provenance), so an invalid value's message can name them. */
export interface EnvProvenance {
  readonly path: string;
  readonly segments: readonly PathSegment[];
  readonly uses: readonly EnvUse[];
}

export type ExpandStringResult =
  | { readonly ok: true; readonly value: string; readonly uses: readonly EnvUse[] }
  | { readonly ok: false; readonly errors: readonly string[] };

const VAR_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const NO_USES: readonly EnvUse[] = Object.freeze([]);

/**
 * Expands one string. Grammar (a subset of POSIX shell / Docker Compose):
 *   `$$`              a literal `$`
 *   `${NAME}`         the variable's value; an error if it is unset (set-but-empty gives "")
 *   `${NAME:-text}`   the value if set and non-empty, else `text` (taken literally, up to the first `}`)
 *   `$` before anything else is kept literally (`"a$b"` stays `a$b`).
 */
export function expandString(s: string, env: Env): ExpandStringResult {
  if (!s.includes("$")) return { ok: true, value: s, uses: NO_USES };
  let out = "";
  const errors: string[] = [];
  const uses: EnvUse[] = [];
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
      if (sep >= 0 && (value === undefined || value === "")) {
        out += body.slice(sep + 2);
        uses.push({ name, defaulted: value === undefined ? "unset" : "empty" });
      } else if (value === undefined) {
        errors.push(`environment variable "${name}" is not set (write "\${${name}:-default}" to give a default)`);
      } else {
        out += value;
        uses.push({ name });
      }
    }
    i = close + 1;
  }
  return errors.length > 0 ? { ok: false, errors } : { ok: true, value: out, uses };
}

/**
 * ` (from $CALL_TIMEOUT)`, ` (from $HOST, $PORT)`, ` (from the default of $CALL_TIMEOUT, which is
 * unset)`: appended to a config issue whose value came (partly) from the environment, so the
 * reader looks at the variable, not at the file. "" when no variable was used.
 */
export function provenanceSuffix(uses: readonly EnvUse[]): string {
  if (uses.length === 0) return "";
  const seen = new Set<string>();
  const parts: string[] = [];
  for (const u of uses) {
    const key = `${u.name}\u0000${u.defaulted ?? ""}`;
    if (seen.has(key)) continue;
    seen.add(key);
    parts.push(u.defaulted === undefined ? `$${u.name}` : `the default of $${u.name}, which is ${u.defaulted}`);
  }
  // "$A, $B" when every variable gave its own value; " and " once a part has its own comma.
  return ` (from ${parts.join(uses.some((u) => u.defaulted !== undefined) ? " and " : ", ")})`;
}

/**
 * Returns a copy of `value` with every string scalar expanded (mapping keys are left as they
 * are). Mappings are copied into null-prototype objects so a `__proto__` key stays an ordinary
 * (and, for the strict schema, unknown) key. Issues carry the key path of the string;
 * `provenance` lists every string that used a variable, with the variables it used.
 */
export function expandEnv(
  value: unknown,
  env: Env,
): { readonly value: unknown; readonly issues: readonly EnvIssue[]; readonly provenance: readonly EnvProvenance[] } {
  const issues: EnvIssue[] = [];
  const provenance: EnvProvenance[] = [];
  const ancestors = new Set<object>();
  const path: PathSegment[] = [];

  const walk = (v: unknown): unknown => {
    if (typeof v === "string") {
      const r = expandString(v, env);
      if (r.ok) {
        if (r.uses.length > 0) provenance.push({ path: formatPath(path), segments: [...path], uses: r.uses });
        return r.value;
      }
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

  return { value: walk(value), issues, provenance };
}
