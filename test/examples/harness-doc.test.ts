// docs/reference/harness.md shows every fault kind and every `at` value as YAML rules; they must be valid
// (parsed by dojang's own rule parser) and cover every kind and point the code has.
import { readFileSync } from "node:fs";
import { parse } from "yaml";
import { describe, expect, it } from "vitest";
import { DELAY_POINTS, FAULT_KINDS, RESET_POINTS, parseFaultList, type FaultRule } from "../../src/proxy/filters/fault/index.js";

const doc = readFileSync(new URL("../../docs/reference/harness.md", import.meta.url), "utf8");
const blocks = [...doc.matchAll(/```yaml\n([\s\S]*?)\n```/g)].map((m) => m[1]!);

describe("docs/reference/harness.md", () => {
  const rules: FaultRule[] = [];

  it("has YAML rule lists that dojang's parser accepts", () => {
    expect(blocks.length).toBeGreaterThanOrEqual(2);
    blocks.forEach((b, i) => {
      const r = parseFaultList((parse(b) as { faults: unknown }).faults, `block ${i}`);
      expect(r.ok ? [] : r.issues).toEqual([]);
      if (r.ok) rules.push(...r.rules);
    });
  });

  it("shows every fault kind, every reset point and every delay point", () => {
    const kinds = new Set(rules.map((r) => r.action.kind));
    expect([...FAULT_KINDS].filter((k) => !kinds.has(k))).toEqual([]);
    const resets = new Set(rules.flatMap((r) => (r.action.kind === "reset" ? [r.action.at] : [])));
    expect([...RESET_POINTS].filter((p) => !resets.has(p))).toEqual([]);
    const delays = new Set(rules.flatMap((r) => (r.action.kind === "delay" ? [r.action.at] : [])));
    expect([...DELAY_POINTS].filter((p) => !delays.has(p))).toEqual([]);
  });

  it("shows match.metadata as a list of { name, equals | present | regex }", () => {
    const tests = rules.flatMap((r) => r.match.metadata);
    expect(tests).toEqual([
      { name: "x-user", equals: "alice" },
      { name: "x-canary", present: false },
      { name: "x-region", regex: "eu-(west|north)-[0-9]" },
    ]);
  });
});
