// The README is the reference users read: its decided_by table and its metrics table must say
// exactly what the code does, in both directions (fastify checks its errors doc the same way).
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { DECIDED_BY } from "../../src/translate/index.js";
import { Metrics } from "../../src/proxy/observe/metrics.js";
import { FAULT_KINDS_DOC } from "../../src/proxy/filters/fault/doc.js";

const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");

function tableAfter(heading: string): string[][] {
  const start = readme.indexOf(heading);
  expect(start, `README has "${heading}"`).toBeGreaterThanOrEqual(0);
  const rows: string[][] = [];
  let inTable = false;
  for (const line of readme.slice(start).split("\n").slice(1)) {
    if (line.startsWith("|")) {
      inTable = true;
      rows.push(line.split("|").slice(1, -1).map((c) => c.trim()));
    } else if (inTable) break;
  }
  return rows.slice(2); // header and separator
}

describe("README reference tables match the code", () => {
  it("lists every decided_by reason with the code's description, and no other", () => {
    const rows = tableAfter("### `decided_by`");
    const documented = Object.fromEntries(rows.map(([k, v]) => [k!.replaceAll("`", ""), v]));
    expect(documented).toEqual({ ...DECIDED_BY });
  });

  it("lists every dojang_* metric the registry exports, and no other", async () => {
    const m = new Metrics();
    const names = (await m.registry.getMetricsAsJSON()).map((x) => x.name).filter((n) => !n.startsWith("dojang_process_"));
    const rows = tableAfter("### Metrics");
    const documented = rows.map((r) => r[0]!.replaceAll("`", "")).filter((n) => n !== "dojang_process_*");
    expect(documented.sort()).toEqual(names.sort());
  });

  it("carries the fault-kind reference from src/proxy/filters/fault/doc.ts word for word", () => {
    const body = FAULT_KINDS_DOC.slice(FAULT_KINDS_DOC.indexOf("\n")).trim();
    expect(readme).toContain(body);
  });
});
