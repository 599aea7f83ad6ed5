// config/dojang.schema.json: current (regenerated and compared), and true to the examples: every
// YAML example validates against it, and configs dojang refuses for a reason the schema can express
// are refused by it too. The validator below covers the JSON Schema keywords the generated file
// uses (it fails loudly on any other), so no schema library is needed for the test.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse as parseYaml, parseAllDocuments } from "yaml";
import { parseConfigText } from "../../src/config/parse.js";
import { configJsonSchema, configJsonSchemaFiles, type JsonSchema } from "../../src/config/json-schema.js";

const ROOT = join(import.meta.dirname, "..", "..");
const CONFIG_DIR = join(ROOT, "config");
const BENCH_DIR = join(ROOT, "bench", "examples");
const read = (file: string) => readFileSync(file, "utf8");

// === a small validator for the keywords the generated schema uses ===

const KNOWN = new Set([
  "$schema", "$ref", "$defs", "title", "description", "default", "type", "enum", "const", "pattern", "minimum", "maximum",
  "minLength", "maxLength", "minItems", "maxItems", "required", "properties", "additionalProperties", "items", "prefixItems",
  "anyOf", "oneOf",
]);

function typeOf(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}

function validate(root: JsonSchema, schema: JsonSchema, value: unknown, path = ""): string[] {
  for (const k of Object.keys(schema)) if (!KNOWN.has(k)) throw new Error(`validator does not know keyword ${k} (at ${path})`);
  const ref = schema["$ref"];
  if (typeof ref === "string") {
    const name = /^#\/\$defs\/(.+)$/.exec(ref)?.[1];
    const target = (root["$defs"] as Record<string, JsonSchema> | undefined)?.[name ?? ""];
    if (target === undefined) throw new Error(`unresolved $ref ${ref}`);
    return validate(root, target, value, path);
  }
  const errs: string[] = [];
  const at = path === "" ? "(root)" : path;
  const t = typeOf(value);
  const type = schema["type"];
  if (type !== undefined) {
    const types = Array.isArray(type) ? (type as string[]) : [type as string];
    const ok = types.includes(t) || (t === "integer" && types.includes("number"));
    if (!ok) return [`${at}: expected ${types.join(" or ")}, got ${t}`];
  }
  if (Array.isArray(schema["enum"]) && !(schema["enum"] as unknown[]).includes(value)) errs.push(`${at}: not one of ${JSON.stringify(schema["enum"])}`);
  if ("const" in schema && schema["const"] !== value) errs.push(`${at}: must be ${JSON.stringify(schema["const"])}`);
  if (typeof value === "string") {
    if (typeof schema["pattern"] === "string" && !new RegExp(schema["pattern"], "u").test(value)) errs.push(`${at}: ${JSON.stringify(value)} does not match the pattern`);
    if (typeof schema["minLength"] === "number" && value.length < schema["minLength"]) errs.push(`${at}: too short`);
    if (typeof schema["maxLength"] === "number" && value.length > schema["maxLength"]) errs.push(`${at}: too long`);
  }
  if (typeof value === "number") {
    if (typeof schema["minimum"] === "number" && value < schema["minimum"]) errs.push(`${at}: below ${schema["minimum"]}`);
    if (typeof schema["maximum"] === "number" && value > schema["maximum"]) errs.push(`${at}: above ${schema["maximum"]}`);
  }
  if (Array.isArray(value)) {
    if (typeof schema["minItems"] === "number" && value.length < schema["minItems"]) errs.push(`${at}: fewer than ${schema["minItems"]} items`);
    if (typeof schema["maxItems"] === "number" && value.length > schema["maxItems"]) errs.push(`${at}: more than ${schema["maxItems"]} items`);
    const prefix = (schema["prefixItems"] as JsonSchema[] | undefined) ?? [];
    value.forEach((item, i) => {
      const s = prefix[i] ?? schema["items"];
      if (s === false) errs.push(`${path}[${i}]: no item allowed here`);
      else if (typeof s === "object" && s !== null) errs.push(...validate(root, s as JsonSchema, item, `${path}[${i}]`));
    });
  }
  if (t === "object") {
    const obj = value as Record<string, unknown>;
    const props = (schema["properties"] as Record<string, JsonSchema> | undefined) ?? {};
    for (const r of (schema["required"] as string[] | undefined) ?? []) if (!(r in obj)) errs.push(`${path === "" ? "" : path + "."}${r}: is required`);
    for (const [k, v] of Object.entries(obj)) {
      const child = `${path === "" ? "" : path + "."}${k}`;
      const s = props[k];
      if (s !== undefined) errs.push(...validate(root, s, v, child));
      else if (schema["additionalProperties"] === false) errs.push(`${child}: unknown key`);
    }
  }
  for (const k of ["anyOf", "oneOf"] as const) {
    const alts = schema[k] as JsonSchema[] | undefined;
    if (alts === undefined) continue;
    const results = alts.map((a) => validate(root, a, value, path));
    const passing = results.filter((r) => r.length === 0).length;
    if (k === "anyOf" && passing === 0) errs.push(...(results.length === 1 ? results[0]! : [`${at}: matches none of ${alts.length} alternatives (${results.map((r) => r[0]).join("; ")})`]));
    if (k === "oneOf" && passing !== 1) {
      errs.push(passing === 0 ? `${at}: matches none of ${alts.length} alternatives` : `${at}: matches ${passing} alternatives`);
    }
  }
  return errs;
}

const SCHEMA = JSON.parse(read(join(CONFIG_DIR, "dojang.schema.json"))) as JsonSchema;
const FRAGMENT = JSON.parse(read(join(CONFIG_DIR, "dojang.fragment.schema.json"))) as JsonSchema;
const check = (value: unknown, schema: JsonSchema = SCHEMA) => validate(schema, schema, value);

// === the committed files ===

describe("config/dojang.schema.json", () => {
  it("is what the zod schema generates now (run `npm run build` after changing src/config/schema.ts)", () => {
    for (const [name, text] of Object.entries(configJsonSchemaFiles())) {
      expect(read(join(CONFIG_DIR, name)), `config/${name} is current`).toBe(text);
    }
  });

  it("describes every key, and says what a duration, a size and an enum accept", () => {
    const s = configJsonSchema();
    const listener = (s["properties"] as JsonSchema)["listeners"] as JsonSchema;
    const lp = (listener["items"] as JsonSchema)["properties"] as Record<string, JsonSchema>;
    const rp = ((lp["routes"]!["items"] as JsonSchema)["properties"]) as Record<string, JsonSchema>;
    expect(rp["timeout"]).toMatchObject({ type: ["string", "null"], description: expect.stringContaining("30s") });
    // a number is a duration only as 0, and only where 0 is allowed
    expect((s["properties"] as Record<string, JsonSchema>)["drainTimeout"]).toMatchObject({ type: ["string", "integer"], minimum: 0, maximum: 0 });
    expect(rp["maxRequestMessageBytes"]).toMatchObject({ default: "4MiB", maximum: 2 ** 32 - 1 });
    expect((s["properties"] as Record<string, JsonSchema>)["logLevel"]).toMatchObject({
      anyOf: [{ enum: ["fatal", "error", "warn", "info", "debug", "trace", "silent"] }, expect.anything()],
      default: "info",
    });
    expect((s["properties"] as Record<string, JsonSchema>)["concurrentMarking"]).toMatchObject({ anyOf: [{ enum: ["auto", "on", "off"] }, expect.anything()] });
    expect(s["additionalProperties"]).toBe(false);
    expect(lp["faults"]!["items"]).toEqual({ $ref: "#/$defs/faultRule" });
    // Every property everywhere has a description (the generator refuses otherwise; this checks the file).
    const undocumented: string[] = [];
    const walk = (n: unknown, p: string) => {
      if (typeof n !== "object" || n === null) return;
      if (Array.isArray(n)) return n.forEach((x, i) => walk(x, `${p}/${i}`));
      const o = n as JsonSchema;
      const props = o["properties"] as Record<string, JsonSchema> | undefined;
      if (props !== undefined) for (const [k, v] of Object.entries(props)) if (typeof v["description"] !== "string") undocumented.push(`${p}/${k}`);
      for (const [k, v] of Object.entries(o)) walk(v, `${p}/${k}`);
    };
    walk(s, "#");
    expect(undocumented).toEqual([]);
  });

  it("has the fault rule kinds as a oneOf on kind", () => {
    const rule = (SCHEMA["$defs"] as Record<string, JsonSchema>)["faultRule"]!;
    const action = (rule["properties"] as Record<string, JsonSchema>)["action"]!;
    const kinds = (action["oneOf"] as JsonSchema[]).map((k) => ((k["properties"] as Record<string, JsonSchema>)["kind"]!)["const"]);
    expect(kinds).toEqual(["abort", "http", "reset", "goaway", "close_connection", "shape", "delay", "bandwidth", "blackhole", "stall", "deadline", "unreachable", "upstream_reset"]);
    expect(rule["required"]).toEqual(["action"]);
  });
});

// === the examples ===

const configYamls = readdirSync(CONFIG_DIR).filter((f) => f.endsWith(".yaml")).sort();
const benchYamls = readdirSync(BENCH_DIR).filter((f) => f.endsWith(".yaml")).sort();

/** config/kubernetes.yaml is a Kubernetes manifest: its dojang config is the ConfigMap's dojang.yaml. */
function dojangConfigIn(file: string): string {
  const text = read(join(CONFIG_DIR, file));
  if (file !== "kubernetes.yaml") return text;
  for (const d of parseAllDocuments(text)) {
    const m = d.toJS() as { kind?: string; data?: Record<string, string> } | null;
    if (m?.kind === "ConfigMap" && typeof m.data?.["dojang.yaml"] === "string") return m.data["dojang.yaml"];
  }
  throw new Error("no ConfigMap with dojang.yaml in config/kubernetes.yaml");
}

describe("every YAML example", () => {
  it("finds them all", () => {
    expect(configYamls).toEqual(expect.arrayContaining(["dojang.yaml", "example-full.yaml", "sidecar.yaml", "kubernetes.yaml"]));
    expect(benchYamls.length).toBeGreaterThanOrEqual(4);
  });

  it.each(configYamls.filter((f) => f !== "kubernetes.yaml"))("config/%s names the schema on its first line, so editors check it", (file) => {
    expect(read(join(CONFIG_DIR, file)).split("\n")[0]).toBe("# yaml-language-server: $schema=./dojang.schema.json");
  });

  it.each(benchYamls)("bench/examples/%s names the fragment schema on its first line", (file) => {
    expect(read(join(BENCH_DIR, file)).split("\n")[0]).toBe("# yaml-language-server: $schema=../../config/dojang.fragment.schema.json");
  });

  it.each(configYamls)("config/%s validates against the schema, as written (before ${VAR} expansion)", (file) => {
    const text = dojangConfigIn(file);
    expect(check(parseYaml(text))).toEqual([]);
    // and dojang itself takes it (no environment: every ${VAR} has a default in the examples)
    const r = parseConfigText(text, {});
    expect(r.ok ? [] : r.issues).toEqual([]);
  });

  it.each(benchYamls)("bench/examples/%s validates against the fragment schema", (file) => {
    expect(check(parseYaml(read(join(BENCH_DIR, file))), FRAGMENT)).toEqual([]);
    // A fragment is not a whole config: the full schema says so.
    expect(check(parseYaml(read(join(BENCH_DIR, file)))).some((e) => e.endsWith("is required"))).toBe(true);
  });
});

// === the schema refuses what dojang refuses, where a schema can say it ===

describe("the schema and dojang agree", () => {
  const base = () => ({
    listeners: [{ name: "main", address: "127.0.0.1:0", routes: [{ match: { prefix: "/" }, cluster: "backend", timeout: "5s" }] }],
    clusters: [{ name: "backend", endpoints: ["127.0.0.1:50051"] }],
  });
  type Doc = ReturnType<typeof base> & Record<string, unknown>;
  const cases: [string, (d: Doc) => void, RegExp][] = [
    ["an unknown top-level key", (d) => (d["logLevle"] = "info"), /^logLevle: unknown key$/],
    ["an unknown route key", (d) => ((d.listeners[0]!.routes[0] as Record<string, unknown>)["timout"] = "1s"), /routes\[0\]\.timout: unknown key/],
    ["a missing cluster list", (d) => delete (d as Partial<Doc>).clusters, /^clusters: is required$/],
    ["a missing route cluster", (d) => delete (d.listeners[0]!.routes[0] as Partial<{ cluster: string }>).cluster, /routes\[0\]\.cluster: is required/],
    ["a duration with a made-up unit", (d) => (d.listeners[0]!.routes[0]!.timeout = "5 sec"), /routes\[0\]\.timeout/],
    ["a duration without a unit (YAML number)", (d) => ((d.listeners[0]!.routes[0] as Record<string, unknown>)["timeout"] = 30), /routes\[0\]\.timeout: expected string or null, got integer/],
    ["a duration without a unit (text)", (d) => (d.listeners[0]!.routes[0]!.timeout = "30"), /routes\[0\]\.timeout: "30" does not match/],
    ["a duration without a unit where 0 is allowed", (d) => (d["drainTimeout"] = 30), /^drainTimeout: above 0$/],
    ["a fault delay without a unit", (d) => ((d.listeners[0] as Record<string, unknown>)["faults"] = [{ action: { kind: "delay", delay: "250" } }]), /faults\[0\]\.action/],
    ["a size with a made-up unit", (d) => ((d.listeners[0]!.routes[0] as Record<string, unknown>)["maxRequestMessageBytes"] = "4 megs"), /maxRequestMessageBytes/],
    ["an unknown log level", (d) => (d["logLevel"] = "loud"), /^logLevel/],
    ["a flag that is not true or false", (d) => (d["accessLog"] = "yes"), /^accessLog/],
    ["too many workers", (d) => (d["workers"] = 65), /^workers: above 64$/],
    ["an address without a port", (d) => (d.clusters[0]!.endpoints[0] = "127.0.0.1"), /endpoints\[0\]/],
    ["an admin token shorter than 16 characters", (d) => (d["admin"] = { address: "127.0.0.1:0", token: "short" }), /admin\.token: "short" does not match/],
    ["an empty listener list", (d) => (d.listeners = []), /listeners: fewer than 1 items/],
    ["an unknown fault kind", (d) => ((d.listeners[0] as Record<string, unknown>)["faults"] = [{ action: { kind: "explode" } }]), /faults\[0\]\.action: matches none/],
    ["a fault rule with an unknown key", (d) => ((d.listeners[0] as Record<string, unknown>)["faults"] = [{ action: { kind: "blackhole" }, when: 1 }]), /faults\[0\]\.when: unknown key/],
    ["an abort without its code", (d) => ((d.listeners[0] as Record<string, unknown>)["faults"] = [{ action: { kind: "abort" } }]), /faults\[0\]\.action/],
    ["a reset point that does not exist", (d) => ((d.listeners[0] as Record<string, unknown>)["faults"] = [{ action: { kind: "reset", code: "CANCEL", at: "later" } }]), /faults\[0\]\.action/],
  ];

  it("takes the base config", () => {
    expect(check(base())).toEqual([]);
    expect(parseConfigValue(base())).toEqual([]);
  });

  it.each(cases)("refuses %s, as dojang does", (_what, change, expected) => {
    const d = base() as Doc;
    change(d);
    const errs = check(d);
    expect(errs.some((e) => expected.test(e)), errs.join("\n")).toBe(true);
    expect(parseConfigValue(d).length).toBeGreaterThan(0);
  });

  it("accepts what dojang accepts: units, ${VAR} references, faults of every shape", () => {
    const d = base() as Doc;
    Object.assign(d, { admin: { address: "127.0.0.1:0", mutations: true, token: "${DOJANG_ADMIN_TOKEN}" }, workers: "${WORKERS:-2}", logLevel: "${LOG_LEVEL:-debug}", accessLog: "false", drainTimeout: "1m30s", faultInjection: { seed: 7, maxActiveFaults: null } });
    Object.assign(d.listeners[0]!, {
      address: "[::1]:8080",
      maxHeaderListSize: "64KiB",
      faultHeaders: true,
      faults: [
        { id: "a", match: { service: "pkg.Svc", metadata: [{ name: "x-user", equals: "alice" }] }, fire: { percentage: "12.5%", calls: "1-2,5" }, action: { kind: "abort", code: "UNAVAILABLE" } },
        { action: { kind: "delay", at: "message", message: 2, direction: "response", jitter: { uniform: ["100ms", "300ms"] } } },
        { action: { kind: "reset", code: 8, at: "after_messages", messages: 1 } },
        { action: { kind: "deadline", mode: "shrink", factor: 0.5 } },
      ],
    });
    Object.assign(d.listeners[0]!.routes[0]!, { timeout: "none", maxRequestMessageBytes: 1024, streamIdleTimeout: null });
    expect(check(d)).toEqual([]);
    expect(parseConfigValue(d, { WORKERS: "2", DOJANG_ADMIN_TOKEN: "0123456789abcdef" })).toEqual([]);
  });
});

function parseConfigValue(d: unknown, env: Record<string, string> = {}): readonly unknown[] {
  const r = parseConfigText(JSON.stringify(d), env, { format: "json" });
  return r.ok ? [] : r.issues;
}
