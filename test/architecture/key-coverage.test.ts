// Issue 23, "the habit", and issue 0.4.1 item 9, "a key counts only where a test asserts its
// effect": a config key can be documented, parsed, shown on /config and /clusters, set by a dozen
// tests, and still do nothing. This test walks every key of the config's JSON Schema
// (config/dojang.schema.json, generated from src/config/schema.ts: it IS the list of keys) and
// fails for any key that has no entry in the registry of effects (key-effects.ts: the behaviour
// tests that assert what the key does, by file and title), unless the key is in ALLOW (pure
// plumbing) or UNJUDGED (no outside observer can tell), one reviewed reason each.
//
// Setting a key no longer counts by itself (it used to: jwks.timeout and tracing.exportTimeout
// passed with no test showing either doing anything). An entry is a claim a reviewer checks;
// what a machine can check of it, it does here:
//   - the named test exists in the named file, exactly once (found in the file's syntax tree: a
//     call of it/test whose title is that string), and is not skipped (.skip, .todo, .fails);
//   - its body asserts (an expect or assert call in it);
//   - its file sets the key, by the naming rule below (so an entry cannot point at a test of a
//     file that never configures the key).
//
// Which tests count: files under test/behaviour, test/process, test/observe, test/proxy,
// test/browser and test/xds. Not test/config (a parsing test shows the key is read, not that it
// does anything), not test/docs or test/examples.
//
// What "sets the key" means (designed to be hard to satisfy by accident):
//   - A MENTION of a name N is `N:` in a config position: a TS object key or a YAML key, optionally
//     quoted (`"N":`, JSON), not preceded by a letter, digit, `_`, `$`, `.` or `-`, and with the
//     colon right after the name (so `x ? timeout : 0` is not one).
//   - An OPENING of N is a mention whose value opens a structure: `{`, `[`, or the end of the line
//     (a YAML block). `cluster: "backend"` (a route's cluster) is a mention of `cluster`, not an opening.
//   - A key a.b.c (array brackets dropped) is named when some mention of its leaf `c` has as OWNER the
//     nearest preceding opening among the parents of every schema key whose leaf is also `c`, and that
//     owner is `b`. So `timeout:` counts for clusters[].keepalive.timeout only after `keepalive: {`,
//     for listeners[].routes[].timeout only after `routes: [`/`route: {` with no `keepalive: {` or
//     `healthCheck: {` in between. If the owner's name `b` is itself the name of several keys (`tls`
//     of a listener and of a cluster; `match` of a route and of a fault rule), the owner opening of
//     `b` must in turn be owned by `a`, and so on up, until the name reached belongs to one key.
//     A top-level key (workers, journal, ...) needs only its mention.
//   - `N: HC` (or `N: { ...HC`) with `const HC = {` in the file makes HC's definition an opening of N;
//     so does `const N = …` (a variable named after the key, handed over as `{ N }`).
//   - A leaf no other key shares, directly under listeners[], routes[] or clusters[] (`lb`,
//     `maxRequestMessageBytes`), needs only its mention: tests hand those objects to helpers piecemeal.
//   - Parent aliases: `listeners` also as `listener`, `routes` as `route`, `clusters` as `cluster`
//     (test/helpers/peers.ts startProxy's options). A fault rule (the schema's $defs.faultRule, used
//     by listeners[].faults[] and routes[].faults[], and what the admin API's POST /faults and the
//     library's faults.add() take) is one set of keys, `<faultRule>.…`; its root opens at `faults:`,
//     `rules:`, `add(`, `patch(` or `stringify(`, or is simply the start of the file.
//   - Or a comment that names the full path: `// key: clusters[].keepalive.timeout` (also `# key:`),
//     for a test that builds its config in a way the rule above cannot follow. Use it sparingly and
//     only in a test that really checks that key from outside.
// Keys that hold an object of keys (clusters[].keepalive) are not checked themselves: their leaves are.
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { parseAst } from "vitest/node";
import { EFFECTS, UNJUDGED } from "./key-effects.js";

const ROOT = resolve(import.meta.dirname, "../..");
const TEST_DIRS = ["test/behaviour", "test/process", "test/observe", "test/proxy", "test/browser", "test/xds"];
/** Files under those that only parse (the fault rule parser's tests): they count no more than test/config. */
const NOT_BEHAVIOUR = new Set(["test/proxy/filters/fault/config.test.ts"]);

/**
 * Pure plumbing: keys whose effect is only that the config holds together (a name others refer to)
 * or that no outside observer could tell apart. Reviewed; keep it short.
 */
const ALLOW: Readonly<Record<string, string>> = {
  "listeners[].name": "a label in logs and metrics; every listener test has one, nothing to assert beyond that",
  "clusters[].name": "the name routes refer to; listeners[].routes[].cluster is the behaviour",
  "<faultRule>.id": "the rule's handle for the admin API; every fault API test uses it to address the rule",
  "<faultRule>.description": "free text shown on GET /faults, no behaviour",
};

// === the keys ===

interface Node {
  $defs?: Record<string, Node>;
  $ref?: string;
  properties?: Record<string, Node>;
  items?: Node;
  additionalProperties?: Node | boolean;
  oneOf?: Node[];
  anyOf?: Node[];
  allOf?: Node[];
}
/** $defs entries walked once under their own name (they are used at several places). */
const DEF_ROOTS: Readonly<Record<string, string>> = { faultRule: "<faultRule>" };

function schemaKeys(schema: Node): { leaves: string[]; all: string[] } {
  const defs = schema.$defs ?? {};
  const all = new Set<string>();
  const leaves = new Set<string>();
  const walk = (n: unknown, path: string, stack: readonly string[]): boolean => {
    if (n === null || typeof n !== "object") return false;
    const node = n as Node;
    let hasChildren = false;
    if (typeof node.$ref === "string") {
      const def = node.$ref.replace("#/$defs/", "");
      if (stack.includes(def)) return false;
      if (DEF_ROOTS[def] !== undefined) {
        if (!stack.includes(`root:${def}`)) walk(defs[def], DEF_ROOTS[def]!, [...stack, def, `root:${def}`]);
        return true;
      }
      return walk(defs[def], path, [...stack, def]);
    }
    if (node.properties !== undefined) {
      for (const [k, v] of Object.entries(node.properties)) {
        hasChildren = true;
        const p = path === "" ? k : `${path}.${k}`;
        all.add(p);
        if (!walk(v, p, stack)) leaves.add(p);
      }
    }
    if (node.items !== undefined && walk(node.items, `${path}[]`, stack)) hasChildren = true;
    if (typeof node.additionalProperties === "object" && walk(node.additionalProperties, `${path}.*`, stack)) hasChildren = true;
    for (const x of [...(node.oneOf ?? []), ...(node.anyOf ?? []), ...(node.allOf ?? [])]) if (walk(x, path, stack)) hasChildren = true;
    return hasChildren;
  };
  walk(schema, "", []);
  return { leaves: [...leaves].sort(), all: [...all].sort() };
}

// === the rule ===

/** a.b[].c → ["a", "b", "c"] (a list of lists, b[][], too; the first segment of a fault rule key is "<faultRule>"). */
const segments = (key: string): string[] => key.split(".").map((s) => s.replace(/(\[\])+$/, ""));

const ALIASES: Readonly<Record<string, readonly string[]>> = {
  listeners: ["listeners", "listener"],
  routes: ["routes", "route"],
  clusters: ["clusters", "cluster"],
};
/** the list elements whose own keys count by their (unique) name alone */
const ELEMENTS = new Set(["listeners[]", "listeners[].routes[]", "clusters[]"]);
const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
const MENTION = (n: string) => new RegExp(`(?<![\\w$.-])(["']?)${esc(n)}\\1:`, "g");
const OPENING = (n: string) => new RegExp(`(?<![\\w$.-])(["']?)${esc(n)}\\1:[ \\t]*(?:[{[]|#.*$|$)`, "gm");
/** `const endpoints = …`: a variable named after the key, handed over as `{ endpoints }` */
const VARIABLE = (n: string) => new RegExp(`(?<![\\w$.])(?:const|let|var) ${esc(n)}\\b[^=\\n]*= `, "g");
const RULE_OPENING = /(?<![\w$-])(?:(["']?)(?:faults|rules)\1:[ \t]*(?:[{[]|$)|(?:add|patch|stringify)\()/gm;

function positions(re: RegExp, text: string): number[] {
  const out: number[] = [];
  for (const m of text.matchAll(re)) out.push(m.index);
  return out;
}

/** Where each parent name opens in one file (memoized per file). */
class FileIndex {
  private readonly openings = new Map<string, number[]>();
  private readonly mentions = new Map<string, number[]>();
  constructor(readonly text: string) {}
  mentionsOf(name: string): number[] {
    let m = this.mentions.get(name);
    if (m === undefined) this.mentions.set(name, (m = positions(MENTION(name), this.text)));
    return m;
  }
  openingsOf(name: string): number[] {
    let o = this.openings.get(name);
    if (o === undefined) {
      if (name === "<faultRule>") o = [0, ...positions(RULE_OPENING, this.text)];
      else {
        o = (ALIASES[name] ?? [name]).flatMap((a) => [...positions(OPENING(a), this.text), ...positions(VARIABLE(a), this.text), ...this.heldIn(a)]);
        o.sort((x, y) => x - y);
      }
      this.openings.set(name, o);
    }
    return o;
  }
  /** `N: HC` or `N: { ...HC` with `const HC = {` in the file: HC's definition opens N too. */
  private heldIn(name: string): number[] {
    const out: number[] = [];
    for (const m of this.text.matchAll(new RegExp(`(?<![\\w$.-])${esc(name)}:[ \\t]*(?:\\{[ \\t]*\\.\\.\\.)?([A-Za-z_$][\\w$]*)\\b(?![.(\\[])`, "g"))) {
      for (const d of this.text.matchAll(new RegExp(`(?<![\\w$.])${esc(m[1]!)}(?::[^=\\n]*)? = \\{`, "g"))) out.push(d.index);
    }
    return out;
  }
  /** the candidate whose last opening before `pos` is nearest (undefined: none opens before it) */
  owner(pos: number, candidates: readonly string[]): { name: string; at: number } | undefined {
    let best: { name: string; at: number } | undefined;
    for (const c of candidates) {
      for (const at of this.openingsOf(c)) {
        if (at >= pos) break;
        if (best === undefined || at > best.at || (at === best.at && c !== "<faultRule>")) best = { name: c, at };
      }
    }
    return best;
  }
}

class KeyRule {
  /** leaf name → the parent names (segment before it, "" at the top) of every key with that leaf */
  private readonly parents = new Map<string, string[]>();
  constructor(private readonly keys: readonly string[]) {
    for (const k of keys) {
      const s = segments(k);
      const leaf = s[s.length - 1]!;
      const p = s.length > 1 ? s[s.length - 2]! : "";
      const list = this.parents.get(leaf) ?? [];
      if (!list.includes(p)) list.push(p);
      this.parents.set(leaf, list);
    }
  }
  /** how many keys end with these segments */
  private sharing(suffix: readonly string[]): number {
    return this.keys.filter((k) => {
      const s = segments(k);
      return s.length >= suffix.length && suffix.every((x, i) => s[s.length - suffix.length + i] === x);
    }).length;
  }
  names(file: FileIndex, key: string): boolean {
    if (new RegExp(`(?://|#)\\s*key:\\s*${esc(key)}(?![\\w.\\[])`).test(file.text)) return true;
    const s = segments(key);
    // verify segment s[i] at position pos is owned by s[i-1]; recurse up while the suffix is shared
    const ownedBy = (i: number, pos: number): boolean => {
      if (i === 0) return true; // a top-level key, or the fault rule's root
      const name = s[i]!;
      const candidates = (this.parents.get(name) ?? []).filter((p) => p !== "");
      const want = s[i - 1]!;
      const o = file.owner(pos, candidates);
      if (o === undefined || o.name !== want) return false;
      // stop once the owner's name belongs to one key only (`keepalive`); `match` (a route's or a
      // fault rule's) or `tls` (a listener's or a cluster's) must be owned in turn
      if (i - 1 === 0 || this.sharing([want]) === 1) return true;
      return ownedBy(i - 1, o.at);
    };
    const leaf = s[s.length - 1]!;
    // a top-level key; or a leaf no other key has, directly under a listener, route or cluster (the
    // objects tests hand to helpers piecemeal, as startProxy's `route`, `listener`, `cluster`)
    if (s.length === 1 || (ELEMENTS.has(key.slice(0, key.lastIndexOf("."))) && this.sharing([leaf]) === 1)) return file.mentionsOf(leaf).length > 0;
    return file.mentionsOf(leaf).some((pos) => ownedBy(s.length - 1, pos));
  }
}

function testFiles(): { path: string; text: string }[] {
  const out: { path: string; text: string }[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.(ts|mjs|js)$/.test(e.name) && !NOT_BEHAVIOUR.has(relative(ROOT, p))) out.push({ path: relative(ROOT, p), text: readFileSync(p, "utf8") });
    }
  };
  for (const d of TEST_DIRS) walk(join(ROOT, d));
  return out;
}

// === the tests of a file, from its syntax tree ===

interface TestCase {
  /** the title as written: a string's value, or a template's source between its backticks */
  readonly title: string;
  /** .skip, .only, .each, ... on the way to the call */
  readonly modifiers: readonly string[];
  /** the source of the test function */
  readonly body: string;
}

type AstNode = { type: string; start: number; end: number; [k: string]: unknown };

/** Every it()/test() call of a TS file whose title is a literal (a string or a template). */
function testCases(text: string, file: string): TestCase[] {
  const out: TestCase[] = [];
  const rootOf = (callee: AstNode, mods: string[]): string | undefined => {
    if (callee.type === "Identifier") return callee["name"] as string;
    if (callee.type === "MemberExpression") {
      mods.push(((callee["property"] as AstNode)["name"] as string | undefined) ?? "");
      return rootOf(callee["object"] as AstNode, mods);
    }
    if (callee.type === "CallExpression") return rootOf(callee["callee"] as AstNode, mods);
    return undefined;
  };
  const walk = (n: unknown): void => {
    if (n === null || typeof n !== "object") return;
    if (Array.isArray(n)) {
      for (const x of n) walk(x);
      return;
    }
    const node = n as AstNode;
    if (node.type === "CallExpression") {
      const args = node["arguments"] as AstNode[];
      const mods: string[] = [];
      const root = rootOf(node["callee"] as AstNode, mods);
      if ((root === "it" || root === "test") && args.length >= 2) {
        const a = args[0]!;
        const title = a.type === "Literal" && typeof a["value"] === "string" ? (a["value"] as string) : a.type === "TemplateLiteral" ? text.slice(a.start + 1, a.end - 1) : undefined;
        // the function: an options object or a timeout may come before or after it
        const fn = args.slice(1).find((x) => x.type === "ArrowFunctionExpression" || x.type === "FunctionExpression");
        if (title !== undefined && fn !== undefined) out.push({ title, modifiers: mods, body: text.slice(fn.start, fn.end) });
      }
    }
    for (const [k, v] of Object.entries(node)) if (k !== "type" && typeof v === "object") walk(v);
  };
  walk(parseAst(text, { lang: "ts" }, file).body);
  return out;
}

const SKIPPED = new Set(["skip", "todo", "fails", "skipIf"]);
const ASSERTS = /\bexpect\s*(?:\.\s*\w+\s*)?\(|\bassert\w*\s*\(/;

/** What is wrong with one registry claim "<file> > <title>" for `key` (empty: nothing). */
function claimProblems(key: string, claim: string, rule: KeyRule, read: (path: string) => { index: FileIndex; tests: TestCase[] } | undefined): string[] {
  const at = claim.indexOf(" > ");
  if (at < 0) return [`${key}: "${claim}" is not "<file> > <test title>"`];
  const [path, title] = [claim.slice(0, at), claim.slice(at + 3)];
  const f = read(path);
  if (f === undefined) return [`${key}: ${path} is not a behaviour test file`];
  const found = f.tests.filter((t) => t.title === title);
  if (found.length !== 1) return [`${key}: ${found.length === 0 ? "no" : found.length} test titled "${title}" in ${path}`];
  const t = found[0]!;
  const problems: string[] = [];
  if (t.modifiers.some((m) => SKIPPED.has(m))) problems.push(`${key}: "${title}" is ${t.modifiers.join(".")} (a skipped test shows nothing)`);
  if (!ASSERTS.test(t.body)) problems.push(`${key}: "${title}" asserts nothing in its body`);
  if (!rule.names(f.index, key)) problems.push(`${key}: ${path} never sets the key (the naming rule above)`);
  return problems;
}

/** the schema's keys, the naming rule, and each behaviour test file's index and tests, by path */
function coverage(): { leaves: string[]; rule: KeyRule; read: (path: string) => { index: FileIndex; tests: TestCase[] } | undefined } {
  const schema = JSON.parse(readFileSync(join(ROOT, "config/dojang.schema.json"), "utf8")) as Node;
  const { leaves, all } = schemaKeys(schema);
  const rule = new KeyRule(all);
  const files = testFiles().map((f) => ({ path: f.path, text: f.text, index: new FileIndex(f.text) }));
  const parsed = new Map<string, { index: FileIndex; tests: TestCase[] }>();
  const read = (path: string) => {
    let p = parsed.get(path);
    if (p === undefined) {
      const f = files.find((x) => x.path === path);
      if (f === undefined) return undefined;
      parsed.set(path, (p = { index: f.index, tests: testCases(f.text, f.path) }));
    }
    return p;
  };
  return { leaves, rule, read };
}

describe("every config key has a behaviour test of its effect (issues 23 and 0.4.1 item 9)", () => {
  const { leaves, rule, read } = coverage();

  it("the walk finds the schema's keys (sanity: the list is not empty and has the deep ones)", () => {
    expect(leaves.length).toBeGreaterThan(100);
    expect(leaves).toContain("listeners[].tls.requireClientCert");
    expect(leaves).toContain("clusters[].circuitBreaker.maxPendingCalls");
    expect(leaves).toContain("<faultRule>.action.jitter.normal.stddev");
    expect(leaves).toContain("listeners[].routes[].retry.backoff.max");
  });

  it("every key has a behaviour test of its effect in the registry, or a reviewed reason in ALLOW or UNJUDGED", () => {
    const none = leaves.filter((k) => EFFECTS[k] === undefined && ALLOW[k] === undefined && UNJUDGED[k] === undefined);
    expect(none, `keys no registered test shows doing anything (write one and add it to key-effects.ts):\n  ${none.join("\n  ")}\n`).toEqual([]);
    const twice = leaves.filter((k) => [EFFECTS[k], ALLOW[k], UNJUDGED[k]].filter((x) => x !== undefined).length > 1);
    expect(twice, "in more than one of EFFECTS, ALLOW and UNJUDGED").toEqual([]);
  });

  it("each registered test exists once, is not skipped, asserts, and sits in a file that sets its key", () => {
    const problems = Object.entries(EFFECTS).flatMap(([k, claims]) => (claims.length === 0 ? [`${k}: no test`] : claims.flatMap((c) => claimProblems(k, c, rule, read))));
    expect(problems, `registry claims that do not hold:\n  ${problems.join("\n  ")}\n`).toEqual([]);
  });

  it("the registry, ALLOW and UNJUDGED name only keys of the schema", () => {
    const stale = [...Object.keys(EFFECTS), ...Object.keys(ALLOW), ...Object.keys(UNJUDGED)].filter((k) => !leaves.includes(k));
    expect(stale, "not keys of the schema").toEqual([]);
  });

  it("the rule tells keys with the same leaf apart, and is not fooled by look-alikes (self-test on made-up text)", () => {
    const f = (t: string) => new FileIndex(t);
    const named = (text: string, key: string) => rule.names(f(text), key);
    const ka = `cluster: { keepalive: { interval: "1s", timeout: "2s" } }`;
    expect(named(ka, "clusters[].keepalive.timeout")).toBe(true);
    expect(named(ka, "clusters[].healthCheck.timeout")).toBe(false);
    expect(named(ka, "listeners[].routes[].timeout")).toBe(false);
    const yaml = `listeners:\n  - name: a\n    routes: [{ match: { prefix: / }, cluster: backend, timeout: 1s }]\n    tls:\n      caFile: ca.pem\nclusters:\n  - name: b\n`;
    expect(named(yaml, "listeners[].routes[].timeout")).toBe(true);
    expect(named(yaml, "listeners[].tls.caFile")).toBe(true);
    expect(named(yaml, "clusters[].tls.caFile")).toBe(false);
    // a ternary is no key; a metric label `direction:` after a route's match is no fault rule's
    expect(named(`const x = cond ? timeout : 0;`, "listeners[].routes[].timeout")).toBe(false);
    expect(named(`route: { match: { prefix: "/" } }; sample(m, "x", { ...lbl, direction: "request" })`, "<faultRule>.match.direction")).toBe(false);
    expect(named(`px.faults.add({ match: { direction: "response" }, action: { kind: "stall" } })`, "<faultRule>.match.direction")).toBe(true);
    // a generic leaf needs its parent: `code:` in an expected error is not a fault action's
    expect(named(`expect(err).toMatchObject({ code: 14, message: "x" })`, "<faultRule>.action.code")).toBe(false);
    // a config held in a variable, and a unique leaf of a cluster handed over piecemeal
    expect(named(`const HC = { interval: "40ms", timeout: "500ms" };\nproxyFor(a, { cluster: { healthCheck: HC } })`, "clusters[].healthCheck.timeout")).toBe(true);
    expect(named(`distribution(bs, { endpoints, lb: "random" })`, "clusters[].lb")).toBe(true);
    expect(named(`// key: clusters[].tls.caFile`, "clusters[].tls.caFile")).toBe(true);
    expect(named(`// key: clusters[].tls.caFileX`, "clusters[].tls.caFile")).toBe(false);
  });
  it("a claim counts only for a test that exists, runs, asserts and sits in a file setting the key (self-test on made-up files)", () => {
    const files: Record<string, string> = {
      "sets.ts": `proxyFor(a, { cluster: { keepalive: { interval: "100ms", timeout: "200ms" } } });
it("drops the session after interval + timeout", async () => { expect(took).toBeLessThan(2500); });
it("only sets it", async () => { await call(); });
it.skip("skipped", async () => { expect(1).toBe(1); });
it.fails("known to fail", async () => { expect(1).toBe(2); });
it(\`\${N} calls\`, async () => { await expect(p).resolves.toBe(1); }, 60_000);`,
      "elsewhere.ts": `it("asserts, but the file never sets a keepalive", async () => { expect(x).toBe(1); });`,
    };
    const fake = (path: string) => (files[path] === undefined ? undefined : { index: new FileIndex(files[path]!), tests: testCases(files[path]!, path) });
    const k = "clusters[].keepalive.timeout";
    const of = (claim: string) => claimProblems(k, claim, rule, fake);
    expect(of("sets.ts > drops the session after interval + timeout")).toEqual([]);
    expect(of("sets.ts > ${N} calls")).toEqual([]);
    expect(of("sets.ts > only sets it")).toEqual([`${k}: "only sets it" asserts nothing in its body`]);
    expect(of("sets.ts > skipped")).toEqual([`${k}: "skipped" is skip (a skipped test shows nothing)`]);
    expect(of("sets.ts > known to fail")).toEqual([`${k}: "known to fail" is fails (a skipped test shows nothing)`]);
    expect(of("sets.ts > no such test")).toEqual([`${k}: no test titled "no such test" in sets.ts`]);
    expect(of("elsewhere.ts > asserts, but the file never sets a keepalive")).toEqual([`${k}: elsewhere.ts never sets the key (the naming rule above)`]);
    expect(of("nowhere.ts > x")).toEqual([`${k}: nowhere.ts is not a behaviour test file`]);
    expect(of("sets.ts drops the session")).toEqual([`${k}: "sets.ts drops the session" is not "<file> > <test title>"`]);
  });
});
