// A duration without a unit is refused, everywhere one can be written (issue "a fleet operator's
// first hour", item 5: `CALL_TIMEOUT=30` was taken as 30 ms where the file's header said "default
// 30s"). The duration keys are not listed here: they are found by walking the zod schemas (the
// config document, a fault rule, the fault set's settings) and probing every value schema with
// "30s" and "1m"; whatever turns those into 30000 and 60000 is a duration. So a key added later is
// covered without touching this file, and test/fixtures/config/every-duration.yaml must write it
// (the coverage test says which is missing).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { parseConfigText } from "../../src/config/parse.js";
import { DOCUMENT_SCHEMA } from "../../src/config/schema.js";
import { FAULT_RULE_INPUT_SCHEMA, FAULT_SET_SETTINGS_INPUT_SCHEMA } from "../../src/config/faults/parse.js";
import { parseDuration } from "../../src/config/units.js";

const FIXTURE = readFileSync(join(import.meta.dirname, "..", "fixtures", "config", "every-duration.yaml"), "utf8");

/** One step of a key path: an object key, every item of a list, one tuple slot, or a fault action of one kind. */
type Seg = { key: string } | { each: true } | { index: number } | { kind: string };
interface DurationKey {
  readonly segs: readonly Seg[];
  readonly schema: z.ZodType;
}

const show = (segs: readonly Seg[]): string =>
  segs.map((s) => ("key" in s ? `.${s.key}` : "each" in s ? "[]" : "index" in s ? `[${s.index}]` : `<${s.kind}>`)).join("").replace(/^\./, "");

type Def = { type: string } & Record<string, unknown>;
const defOf = (s: z.ZodType): Def => (s as unknown as { _zod: { def: Def } })._zod.def;

/** Whether `s` reads durations: "30s" is 30000 and "1m" is 60000. */
function isDuration(s: z.ZodType): boolean {
  if (defOf(s).type === "transform") return false; // a pipe's second half: it only ever sees its first half's output
  const a = s.safeParse("30s");
  const b = s.safeParse("1m");
  return a.success && a.data === 30_000 && b.success && b.data === 60_000;
}


/** The literal `kind` of a fault action option (through its transform), if it has one. */
function kindOf(s: z.ZodType): string | undefined {
  let d = defOf(s);
  while (d.type === "pipe") d = defOf(d["in"] as z.ZodType);
  if (d.type !== "object") return undefined;
  const kind = (d["shape"] as Record<string, z.ZodType>)["kind"];
  const values = kind === undefined ? undefined : (defOf(kind)["values"] as unknown[] | undefined);
  return typeof values?.[0] === "string" ? values[0] : undefined;
}

/** Every duration key under `s`, with its path. */
function durationKeys(s: z.ZodType, segs: Seg[] = [], out: DurationKey[] = []): DurationKey[] {
  if (segs.length > 0 && isDuration(s)) {
    out.push({ segs: [...segs], schema: s });
    return out;
  }
  const d = defOf(s);
  const inner = (x: unknown, more: Seg[] = []) => durationKeys(x as z.ZodType, [...segs, ...more], out);
  switch (d.type) {
    case "pipe":
      inner(d["in"]);
      if (defOf(d["out"] as z.ZodType).type !== "transform") inner(d["out"]);
      break;
    case "optional":
    case "nullable":
    case "default":
    case "prefault":
    case "catch":
    case "readonly":
    case "nonoptional":
      inner(d["innerType"]);
      break;
    case "lazy":
      inner((d["getter"] as () => z.ZodType)());
      break;
    case "array":
      inner(d["element"], [{ each: true }]);
      break;
    case "tuple":
      (d["items"] as z.ZodType[]).forEach((x, i) => inner(x, [{ index: i }]));
      break;
    case "record":
      inner(d["valueType"], [{ each: true }]);
      break;
    case "object":
      for (const [k, v] of Object.entries(d["shape"] as Record<string, z.ZodType>)) inner(v, [{ key: k }]);
      break;
    case "union":
      for (const o of d["options"] as z.ZodType[]) {
        const kind = kindOf(o);
        inner(o, kind === undefined ? [] : [{ kind }]);
      }
      break;
    case "intersection":
      inner(d["left"]);
      inner(d["right"]);
      break;
  }
  return out;
}

const CONFIG_KEYS = durationKeys(DOCUMENT_SCHEMA);
const FAULT_KEYS = [...durationKeys(FAULT_RULE_INPUT_SCHEMA), ...durationKeys(FAULT_SET_SETTINGS_INPUT_SCHEMA)];
const ALL_KEYS = [...CONFIG_KEYS, ...FAULT_KEYS];

/** The message a bare number gets: it names the units, with the number written in each. */
const NO_UNIT = (shown: string, n: string) => `${shown} has no unit: write ${n}ms, ${n}s, ${n}m or ${n}h`;

/** Where `segs` lands in `root`: each place's parent, its key, and its concrete path. */
function places(root: unknown, segs: readonly Seg[], at: string): { parent: Record<string | number, unknown>; key: string | number; path: string }[] {
  if (segs.length === 0) return [];
  const [s, ...rest] = segs as [Seg, ...Seg[]];
  if (typeof root !== "object" || root === null) return [];
  const o = root as Record<string | number, unknown>;
  const here = (key: string | number, path: string) => (rest.length === 0 ? (key in o ? [{ parent: o, key, path }] : []) : places(o[key], rest, path));
  if ("key" in s) return here(s.key, at === "" ? s.key : `${at}.${s.key}`);
  if ("index" in s) return here(s.index, `${at}[${s.index}]`);
  if ("kind" in s) return o["kind"] === s.kind ? places(root, rest, at) : [];
  return Array.isArray(root) ? root.flatMap((_, i) => here(i, `${at}[${i}]`)) : Object.keys(o).flatMap((k) => here(k, `${at}.${k}`));
}

/** Every place in the fixture a key is written: config keys from the root, fault keys in each fault rule. */
function placesInFixture(k: DurationKey, doc: Record<string, unknown>) {
  if (CONFIG_KEYS.includes(k)) return places(doc, k.segs, "");
  const listeners = doc["listeners"] as { faults?: unknown[] }[];
  return listeners.flatMap((l, li) => (l.faults ?? []).flatMap((rule, ri) => places(rule, k.segs, `listeners[${li}].faults[${ri}]`)));
}

const issuesOf = (doc: unknown, env: Record<string, string> = {}) => {
  const r = parseConfigText(JSON.stringify(doc), env, { format: "json" });
  return r.ok ? [] : r.issues.map((i) => `${i.path}: ${i.message}`);
};

describe("the duration keys, found in the schemas", () => {
  it("are found: the config's and the fault rules' (so the walk sees through defaults, lists, unions and tuples)", () => {
    const names = ALL_KEYS.map((k) => show(k.segs));
    // a few known ones, as literals: if the walk stopped finding keys, this would say so
    expect(names).toEqual(
      expect.arrayContaining([
        "drainTimeout",
        "listeners[].routes[].timeout",
        "listeners[].routes[].retry.backoff.base",
        "listeners[].routes[].jwt.jwks.refreshInterval",
        "clusters[].connectTimeout",
        "tracing.exportInterval",
        "fire.after",
        "action<delay>.delay",
        "action<delay>.jitter.uniform[1]",
        "action<delay>.jitter.normal.stddev",
        "action<deadline>.by",
      ]),
    );
    expect(CONFIG_KEYS.length).toBe(28);
    expect(FAULT_KEYS.length).toBe(8);
  });

  it("are each written in the fixture, which dojang takes as it is (units accepted everywhere)", () => {
    const doc = parseYaml(FIXTURE) as Record<string, unknown>;
    const missing = ALL_KEYS.filter((k) => placesInFixture(k, doc).length === 0).map((k) => show(k.segs));
    expect(missing, "add these to test/fixtures/config/every-duration.yaml").toEqual([]);
    expect(issuesOf(doc)).toEqual([]);
  });
});

describe.each(ALL_KEYS.map((k) => [show(k.segs), k] as const))("%s", (_name, k) => {
  it("refuses a bare number, as a number or as text, naming the units; takes 30s", () => {
    for (const [input, shown] of [[30, "30"], ["30", '"30"'], [" 30 ", '" 30 "'], [250, "250"]] as const) {
      const r = k.schema.safeParse(input);
      expect(r.success, `${JSON.stringify(input)} was accepted`).toBe(false);
      const n = String(input).trim();
      expect(r.error?.issues.map((i) => i.message)).toEqual([NO_UNIT(shown, n)]);
    }
    const fraction = k.schema.safeParse("1.5");
    expect(fraction.error?.issues.map((i) => i.message)).toEqual(['"1.5" has no unit: write 1.5s, 1.5m or 1.5h']);
    expect(k.schema.safeParse("30s")).toMatchObject({ success: true, data: 30_000 });
    // 0 needs no unit (as in Go's time.ParseDuration): it is taken, or refused for its size only
    const zero = k.schema.safeParse(0);
    if (!zero.success) expect(zero.error.issues.map((i) => i.message).join()).toMatch(/at least|greater than 0/);
  });

  it("in a whole config: a bare number is an issue at its key path, from YAML, JSON and the environment", () => {
    const doc = parseYaml(FIXTURE) as Record<string, unknown>;
    for (const place of placesInFixture(k, doc)) {
      const was = place.parent[place.key];
      place.parent[place.key] = 30;
      expect(issuesOf(doc)).toEqual([`${place.path}: ${NO_UNIT("30", "30")}`]);
      place.parent[place.key] = "${D}";
      expect(issuesOf(doc, { D: "30" })).toEqual([`${place.path}: ${NO_UNIT('"30"', "30")} (from $D)`]);
      place.parent[place.key] = "${D:-30}";
      expect(issuesOf(doc, {})).toEqual([`${place.path}: ${NO_UNIT('"30"', "30")} (from the default of $D, which is unset)`]);
      expect(issuesOf(doc, { D: String(was) })).toEqual([]);
      place.parent[place.key] = was;
    }
  });
});

describe("parseDuration(), the one parser behind every key", () => {
  it("refuses a bare number with the units named, and takes 0 (the same in every unit)", () => {
    expect(parseDuration(30)).toEqual({ ok: false, error: NO_UNIT("30", "30") });
    expect(parseDuration("30")).toEqual({ ok: false, error: NO_UNIT('"30"', "30") });
    expect(parseDuration("30.0")).toEqual({ ok: false, error: NO_UNIT('"30.0"', "30.0") });
    expect(parseDuration(1.5)).toEqual({ ok: false, error: "1.5 has no unit: write 1.5s, 1.5m or 1.5h" });
    expect(parseDuration(0)).toEqual({ ok: true, ms: 0 });
    expect(parseDuration("0")).toEqual({ ok: true, ms: 0 });
    expect(parseDuration("30ms")).toEqual({ ok: true, ms: 30 });
  });
});
