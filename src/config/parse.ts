// Text or value → frozen, normalized Config, or every issue found, each with its key path
// (`listeners[0].routes[1].cluster`) or YAML position (`line 3, column 5: ...`).
// Order: syntax → env expansion → schema (zod) → cross-references. Pure: no filesystem access
// (load.ts is the only file that reads one); the environment is an argument.

import { LineCounter, parseDocument, visit, type ErrorCode } from "yaml";
import { z } from "zod";
import { ConfigError, type ConfigIssue } from "../errors.js";
import { expandEnv, provenanceSuffix, type Env, type EnvProvenance } from "./env.js";
import { didYouMean, formatPath, invalidTypeMessage, type PathSegment } from "./issues.js";
import { CONFIG_SCHEMA, DOCUMENT_SCHEMA, type Config } from "./schema.js";
import { formatHostPort, parseHostPort } from "./units.js";
import type { HostPort } from "./schema.js";
import { parseFaultList, parseFaultSetSettings } from "./faults/parse.js";
import type { FaultRule } from "./faults/model.js";
import { deepFreeze } from "./freeze.js";

export type ParseResult =
  | { readonly ok: true; readonly config: Config }
  | { readonly ok: false; readonly issues: readonly ConfigIssue[] };

export type ConfigFormat = "yaml" | "json";

export interface ParseOptions {
  /** "yaml" (default; JSON is valid YAML) or "json" (strict JSON.parse). */
  readonly format?: ConfigFormat;
}

/** An issue before its path is formatted; segments keep indexes numeric for sorting. */
interface RawIssue {
  readonly path: readonly PathSegment[];
  readonly message: string;
}

// === public entry points ===

/** text → Config. Collects every issue; YAML/JSON syntax errors have path "" and a "line L, column C: " message. */
export function parseConfigText(
  text: string,
  env: Env = process.env,
  options: ParseOptions = {},
): ParseResult {
  const source = text.startsWith("\uFEFF") ? text.slice(1) : text; // a BOM is not content
  const parsed = options.format === "json" ? parseJsonText(source) : parseYamlText(source);
  if (!parsed.ok) return { ok: false, issues: parsed.issues };
  return parseConfigValue(parsed.value, env);
}

/** An already-parsed JS value (from a library caller) → Config, with the same env expansion and validation. */
export function parseConfigValue(value: unknown, env: Env = process.env): ParseResult {
  if (value === undefined || value === null) {
    return { ok: false, issues: [{ path: "", message: "the config is empty: it needs at least listeners and clusters" }] };
  }
  const expanded = expandEnv(value, env);
  const issues: RawIssue[] = expanded.issues.map((i) => ({ path: i.segments, message: i.message }));
  // A string whose expansion failed is left unexpanded; its own schema complaint would only repeat the problem.
  const envPaths = new Set(expanded.issues.map((i) => i.path));

  const result = CONFIG_SCHEMA.safeParse(expanded.value, { error: messageForIssue });
  if (!result.success) {
    for (const iss of result.error.issues) {
      for (const h of humanIssues(iss)) if (!envPaths.has(formatPath(h.path))) issues.push(h);
    }
  }
  issues.push(...crossReferenceIssues(expanded.value));

  const faultIssues: ConfigIssue[] = [];
  const config = result.success ? withFaultRules(result.data, faultIssues) : undefined;
  if (issues.length > 0 || config === undefined || faultIssues.length > 0) {
    const all = sortIssues(issues).map((i) => ({ path: formatPath(i.path), message: i.message }));
    const named = nameVariables([...all, ...faultIssues], expanded.provenance, envPaths);
    return { ok: false, issues: dedupe(named) };
  }
  return { ok: true, config: deepFreeze(config) };
}

/**
 * Appends ` (from $VAR)` to every issue about a value that came from `${VAR}` expansion: the
 * file then looks right (`timeout: ${CALL_TIMEOUT:-30s}`) and the mistake is in the environment,
 * so the message must say where to look. Expansion errors themselves (`envPaths`) already name
 * their variable.
 */
function nameVariables(issues: readonly ConfigIssue[], provenance: readonly EnvProvenance[], envPaths: ReadonlySet<string>): ConfigIssue[] {
  if (provenance.length === 0) return [...issues];
  const byPath = new Map(provenance.map((p) => [p.path, provenanceSuffix(p.uses)]));
  return issues.map((i) => {
    const suffix = envPaths.has(i.path) ? undefined : byPath.get(i.path);
    return suffix === undefined ? i : { path: i.path, message: i.message + suffix };
  });
}

/**
 * Fault rules are parsed by the fault filter's own parser (Envoy's habit: each filter parses its
 * block), with the listener and route as their scope. Rule ids are unique across the document.
 */
function withFaultRules(c: Config, issues: ConfigIssue[]): Config {
  const ids = new Map<string, string>();
  const take = (raw: unknown, path: string, scope: { listener: string; route?: number }): readonly FaultRule[] => {
    const r = parseFaultList(raw, path, { source: "config", scope });
    if (!r.ok) {
      issues.push(...r.issues);
      return [];
    }
    r.rules.forEach((rule, i) => {
      if (rule.id === "") return; // no id given: the fault set assigns one ("f1", ...)
      const prev = ids.get(rule.id);
      if (prev !== undefined) issues.push({ path: `${path}[${i}].id`, message: `duplicate fault rule id "${rule.id}" (also at ${prev})` });
      else ids.set(rule.id, `${path}[${i}]`);
    });
    return r.rules;
  };
  const listeners = c.listeners.map((l, li) => ({
    ...l,
    faults: take(l.faults, `listeners[${li}].faults`, { listener: l.name }),
    routes: l.routes.map((r, ri) => ({ ...r, faults: take(r.faults, `listeners[${li}].routes[${ri}].faults`, { listener: l.name, route: ri }) })),
  }));
  const fs = parseFaultSetSettings(c.faultInjection, "faultInjection");
  if (!fs.ok) issues.push(...fs.issues);
  return { ...c, listeners, faultInjection: fs.ok ? fs.settings : { seed: 0, maxActiveFaults: null } };
}

/** Like parseConfigText, but throws ConfigError(source, issues). */
export function configFromText(text: string, source: string, env: Env = process.env, options: ParseOptions = {}): Config {
  const r = parseConfigText(text, env, options);
  if (!r.ok) throw new ConfigError(source, r.issues);
  return r.config;
}

// === syntax ===

type SyntaxResult = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly issues: readonly ConfigIssue[] };

const at = (line: number, col: number, message: string): ConfigIssue => ({ path: "", message: `line ${line}, column ${col}: ${message}` });

/** Rewrites of the yaml library's messages that address a programmer rather than a config author. */
const YAML_MESSAGES: Partial<Record<ErrorCode, string>> = {
  MULTIPLE_DOCS: 'a config file holds one YAML document; remove the second "---" and what follows, or merge them',
};

function parseYamlText(text: string): SyntaxResult {
  const lineCounter = new LineCounter();
  // merge: `<<: *defaults` lets a file share route or cluster settings. uniqueKeys (the default)
  // makes a repeated key an error instead of "last one wins".
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, merge: true, uniqueKeys: true });
  const position = (offset: number) => {
    const p = lineCounter.linePos(offset);
    return { line: Math.max(1, p.line), col: Math.max(1, p.col) };
  };
  // Warnings (an unknown tag such as `!foo`) are errors too: the value would silently be a string.
  const problems = [...doc.errors, ...doc.warnings];
  const issues = problems.map((e) => {
    const p = position(e.pos[0]);
    return at(p.line, p.col, YAML_MESSAGES[e.code] ?? e.message);
  });
  if (issues.length === 0) {
    // An alias to an anchor that is not defined (yet) makes toJS() throw without a position.
    visit(doc, {
      Alias(_key, node) {
        if (node.resolve(doc) === undefined) {
          const p = position(node.range?.[0] ?? 0);
          issues.push(at(p.line, p.col, `alias *${node.source} refers to no anchor &${node.source} defined before it`));
        }
      },
    });
  }
  if (issues.length > 0) return { ok: false, issues };
  try {
    return { ok: true, value: doc.toJS({ maxAliasCount: 100 }) };
  } catch (err: unknown) {
    // e.g. "Excessive alias count indicates a resource exhaustion attack"
    return { ok: false, issues: [{ path: "", message: `cannot build the document: ${errorMessage(err)}` }] };
  }
}

function parseJsonText(text: string): SyntaxResult {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (err: unknown) {
    // V8 says `... in JSON at position 42 (line 3 column 5)` for most errors, nothing for an
    // unexpected token (its message quotes the text around it instead), and "Unexpected end of
    // JSON input" at the end. The position is used when there is one; it is never guessed.
    const raw = errorMessage(err);
    const pos = /\bat position (\d+)/.exec(raw);
    const offset = pos !== null ? Number(pos[1]) : /end of JSON input/.test(raw) ? text.length : undefined;
    if (offset === undefined) return { ok: false, issues: [{ path: "", message: `invalid JSON: ${raw}` }] };
    const before = text.slice(0, offset);
    const line = before.split("\n").length;
    const col = offset - (before.lastIndexOf("\n") + 1) + 1;
    const message = raw.replace(/\s*(in JSON )?at position \d+.*$/s, "");
    return { ok: false, issues: [at(line, col, message)] };
  }
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

// === schema issues → human messages ===


/** Per-parse error map: wins over zod's defaults, loses to the schema's own `error` params. */
function messageForIssue(iss: z.core.$ZodRawIssue): string | undefined {
  if (iss.code === "invalid_type") return invalidTypeMessage(iss.expected, iss.input);
  return undefined;
}

/** One zod issue → one or more issues; an unrecognized-keys issue becomes one per key, with a suggestion. */
function humanIssues(iss: z.core.$ZodIssue): RawIssue[] {
  const path = iss.path.filter((s): s is PathSegment => typeof s !== "symbol");
  if (iss.code === "unrecognized_keys") {
    const known = knownKeysAt(DOCUMENT_SCHEMA, path) ?? [];
    return iss.keys.map((key) => ({
      path: [...path, key],
      message: `unknown key ${JSON.stringify(key)}${didYouMean(key, known)}`,
    }));
  }
  return [{ path, message: iss.message }];
}

/** The keys a strict object accepts at `path`, found by walking the schema (for "did you mean"). */
function knownKeysAt(schema: z.ZodType, path: readonly PathSegment[]): string[] | undefined {
  let s: z.ZodType | undefined = schema;
  let i = 0;
  while (s !== undefined) {
    if (s instanceof z.ZodPipe) s = s.in as z.ZodType;
    else if (s instanceof z.ZodOptional || s instanceof z.ZodNullable || s instanceof z.ZodDefault || s instanceof z.ZodPrefault)
      s = s.unwrap() as z.ZodType;
    else if (i === path.length) return s instanceof z.ZodObject ? Object.keys(s.shape) : undefined;
    else if (s instanceof z.ZodArray && typeof path[i] === "number") {
      s = s.element as z.ZodType;
      i++;
    } else if (s instanceof z.ZodObject && typeof path[i] === "string") {
      s = (s.shape as Record<string, z.ZodType | undefined>)[path[i] as string];
      i++;
    } else return undefined;
  }
  return undefined;
}

// === cross-references (on the expanded raw value, so they are found even when the schema fails elsewhere) ===

const asArray = (v: unknown): readonly unknown[] => (Array.isArray(v) ? v : []);
const field = (v: unknown, key: string): unknown =>
  typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>)[key] : undefined;

function crossReferenceIssues(doc: unknown): RawIssue[] {
  const issues: RawIssue[] = [];
  const listeners = asArray(field(doc, "listeners"));
  const clustersValue = field(doc, "clusters");
  const clusters = asArray(clustersValue);

  // Unique names.
  const clusterNames = uniqueNames("cluster", "clusters", clusters, issues);
  uniqueNames("listener", "listeners", listeners, issues);

  // Every route's cluster exists (only when there is a non-empty cluster list to check against;
  // a missing or empty one is reported by the schema, and "unknown cluster" on every route would be noise).
  if (Array.isArray(clustersValue) && clustersValue.length > 0) {
    listeners.forEach((l, li) => {
      asArray(field(l, "routes")).forEach((r, ri) => {
        const c = field(r, "cluster");
        if (typeof c === "string" && c !== "" && !clusterNames.has(c)) {
          issues.push({
            path: ["listeners", li, "routes", ri, "cluster"],
            message: `unknown cluster ${JSON.stringify(c)}${didYouMean(c, clusterNames.keys())}`,
          });
        }
        // the side calls' services named by cluster (rateLimit.global.cluster, extAuthz.cluster)
        for (const at of [["rateLimit", "global"], ["extAuthz"]] as const) {
          const owner = at.reduce<unknown>((v, k) => field(v, k), r);
          const sc = field(owner, "cluster");
          if (typeof sc === "string" && sc !== "" && !clusterNames.has(sc)) {
            issues.push({
              path: ["listeners", li, "routes", ri, ...at, "cluster"],
              message: `unknown cluster ${JSON.stringify(sc)}${didYouMean(sc, clusterNames.keys())}`,
            });
          }
        }
      });
    });
  }

  // admin.readyClusters names clusters that exist.
  if (Array.isArray(clustersValue) && clustersValue.length > 0) {
    asArray(field(field(doc, "admin"), "readyClusters")).forEach((c, i) => {
      if (typeof c === "string" && c !== "" && !clusterNames.has(c)) {
        issues.push({ path: ["admin", "readyClusters", i], message: `unknown cluster ${JSON.stringify(c)}${didYouMean(c, clusterNames.keys())}` });
      }
    });
  }

  // No two routes of one listener with the same match: the second could never be chosen.
  listeners.forEach((l, li) => {
    const seen = new Map<string, number>();
    asArray(field(l, "routes")).forEach((r, ri) => {
      const key = matchKey(field(r, "match"));
      if (key === undefined) return;
      const first = seen.get(key);
      if (first === undefined) seen.set(key, ri);
      else {
        issues.push({
          path: ["listeners", li, "routes", ri, "match"],
          message: `same match as ${formatPath(["listeners", li, "routes", first, "match"])}, so this route could never be chosen`,
        });
      }
    });
  });

  // No two sockets on one address (admin included). Port 0 is ephemeral: never a clash.
  const bound: { path: PathSegment[]; hp: HostPort }[] = [];
  const bind = (path: PathSegment[], v: unknown) => {
    if (typeof v !== "string") return;
    const r = parseHostPort(v);
    if (!r.ok || r.hostPort.port === 0) return;
    const clash = bound.find((b) => addressesClash(b.hp, r.hostPort));
    if (clash !== undefined) {
      const same = clash.hp.host === r.hostPort.host;
      issues.push({
        path,
        message: same
          ? `address ${formatHostPort(r.hostPort)} is already used by ${formatPath(clash.path)}`
          : `address ${formatHostPort(r.hostPort)} overlaps ${formatPath(clash.path)} (${formatHostPort(clash.hp)}): a wildcard host takes the port on every interface`,
      });
    } else bound.push({ path, hp: r.hostPort });
  };
  bind(["admin", "address"], field(field(doc, "admin"), "address"));
  listeners.forEach((l, li) => bind(["listeners", li, "address"], field(l, "address")));

  return issues;
}

function uniqueNames(kind: string, key: string, items: readonly unknown[], issues: RawIssue[]): Map<string, number> {
  const names = new Map<string, number>();
  items.forEach((item, i) => {
    const name = field(item, "name");
    if (typeof name !== "string" || name === "") return;
    const first = names.get(name);
    if (first === undefined) names.set(name, i);
    else {
      issues.push({
        path: [key, i, "name"],
        message: `duplicate ${kind} name ${JSON.stringify(name)} (first used at ${formatPath([key, first, "name"])})`,
      });
    }
  });
  return names;
}

/** A comparable key for a well-formed match (exactly one kind), else undefined (the schema reports it). */
function matchKey(m: unknown): string | undefined {
  const kinds = (["prefix", "path", "service"] as const).filter((k) => field(m, k) !== undefined);
  const kind = kinds[0];
  if (kinds.length !== 1 || kind === undefined) return undefined;
  const value = field(m, kind);
  const authority = field(m, "authority");
  if (typeof value !== "string" || (authority !== undefined && typeof authority !== "string")) return undefined;
  return JSON.stringify([kind, value, authority === undefined ? null : authority.toLowerCase()]);
}

/**
 * Two listening addresses on one port clash if the hosts are equal, or if one is a wildcard that
 * covers the other: "::" is dual-stack in Node (covers everything), "0.0.0.0" covers IPv4 and names.
 */
function addressesClash(a: HostPort, b: HostPort): boolean {
  if (a.port !== b.port) return false;
  if (a.host === b.host || a.host === "::" || b.host === "::") return true;
  const covers = (wild: HostPort, other: HostPort) => wild.host === "0.0.0.0" && !other.host.includes(":");
  return covers(a, b) || covers(b, a);
}

// === ordering, freezing ===

/** By path (indexes numerically), stable, so one key's issues stay together; "" (syntax) first. */
function sortIssues(issues: readonly RawIssue[]): RawIssue[] {
  const cmp = (a: readonly PathSegment[], b: readonly PathSegment[]): number => {
    for (let i = 0; i < Math.min(a.length, b.length); i++) {
      const x = a[i];
      const y = b[i];
      if (x === y) continue;
      if (typeof x === "number" && typeof y === "number") return x - y;
      return String(x) < String(y) ? -1 : 1;
    }
    return a.length - b.length;
  };
  return [...issues].sort((a, b) => cmp(a.path, b.path));
}

function dedupe(issues: readonly ConfigIssue[]): ConfigIssue[] {
  const seen = new Set<string>();
  return issues.filter((i) => {
    const k = `${i.path}\u0000${i.message}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

export { deepFreeze };
