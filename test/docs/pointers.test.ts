// A page that says "the table above" (or below) has that table: docs/reference/access-log.md
// pointed at a "table above" that had moved to decided-by.md (issue "a fleet operator's first
// hour", item 7). Every markdown page of the repository is checked, so the next move is caught.
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../helpers/process.js";

function markdownFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    if (n === "node_modules" || n.startsWith(".") || n === "dist") return [];
    return statSync(p).isDirectory() ? markdownFiles(p) : n.endsWith(".md") ? [p] : [];
  });
}

const isRow = (l: string) => /^\s*\|.*\|\s*$/.test(l);

/** Each "table above/below" pointer of a page that has no table there: "file:line". */
function danglingPointers(text: string, where: string): string[] {
  const lines = text.split("\n");
  const out: string[] = [];
  lines.forEach((line, i) => {
    for (const m of line.matchAll(/\btables? (above|below)\b/gi)) {
      // the table this line sits in, if any: a pointer points past it
      let first = i;
      let last = i;
      if (isRow(line)) {
        while (first > 0 && isRow(lines[first - 1]!)) first--;
        while (last < lines.length - 1 && isRow(lines[last + 1]!)) last++;
      }
      const found = m[1]!.toLowerCase() === "above" ? lines.slice(0, first).some(isRow) : lines.slice(last + 1).some(isRow);
      if (!found) out.push(`${where}:${i + 1}: "${m[0]}"`);
    }
  });
  return out;
}

describe("pointers to a table above or below", () => {
  it("finds the pages (README.md and docs/)", () => {
    expect(markdownFiles(join(REPO_ROOT, "docs")).length).toBeGreaterThan(20);
  });

  it("the check finds a dangling one, and passes a good one", () => {
    expect(danglingPointers("| a | b |\n|---|---|\n| x | see the table above |\n", "t.md")).toEqual(['t.md:3: "table above"']);
    expect(danglingPointers("| a |\n|---|\n\ntext\n\n| b | (table above) |\n", "t.md")).toEqual([]);
    expect(danglingPointers("the table below:\n\n| a |\n|---|\n", "t.md")).toEqual([]);
  });

  it("every page has the table it points at", () => {
    const files = [join(REPO_ROOT, "README.md"), ...markdownFiles(join(REPO_ROOT, "docs"))];
    const dangling = files.flatMap((f) => danglingPointers(readFileSync(f, "utf8"), relative(REPO_ROOT, f)));
    expect(dangling).toEqual([]);
  });
});
