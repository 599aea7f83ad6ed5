// The contributor docs against the code (issue 30.5): docs/contributing/architecture.md's layout
// names every folder under src/, and the filter order it states is the registry's
// (src/proxy/filters/index.ts), so the page cannot fall behind the tree again (it had left out
// filters/auth/ and protos/ and stated an old filter order). extending.md names files that exist.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { FILTERS } from "../../src/proxy/filters/index.js";
import { REPO_ROOT } from "../helpers/process.js";

const SRC = join(REPO_ROOT, "src");
const architecture = readFileSync(join(REPO_ROOT, "docs", "contributing", "architecture.md"), "utf8");
const extending = readFileSync(join(REPO_ROOT, "docs", "contributing", "extending.md"), "utf8");

function folders(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .flatMap((e) => [join(dir, e.name), ...folders(join(dir, e.name))]);
}

/** The code block under "## Layout". */
export function layoutBlock(page: string): string {
  const m = /^## Layout\n+```[^\n]*\n([\s\S]*?)\n```/m.exec(page);
  return m?.[1] ?? "";
}

/**
 * The folders under src/ the layout does not name. A top folder is named as `src/<name>/`; a
 * nested one as `<name>/` (its parent's entry describes it).
 */
export function unnamedFolders(layout: string, paths: readonly string[]): string[] {
  return paths.filter((p) => {
    const parts = p.split("/");
    const name = parts.at(-1)!;
    if (parts.length === 1) return !layout.includes(`src/${name}/`);
    return !new RegExp(`(^|[\\s(;,·])${name.replace(/[.-]/g, "\\$&")}/`).test(layout);
  });
}

/** The filter names listed (`- \`name\``) under item 3, **Filters.**, of "## A call's life". */
export function documentedFilterOrder(page: string): string[] {
  const life = page.slice(page.indexOf("## A call's life"));
  const item = /^3\. \*\*Filters\.\*\*[\s\S]*?(?=^\d+\. \*\*)/m.exec(life)?.[0] ?? "";
  return [...item.matchAll(/^\s+- `([a-z_]+)`/gm)].map((m) => m[1]!);
}

describe("docs/contributing/architecture.md", () => {
  const paths = folders(SRC).map((f) => relative(SRC, f).split("\\").join("/"));

  it("finds the layout and the folders", () => {
    expect(layoutBlock(architecture)).toContain("src/translate/");
    expect(paths).toEqual(expect.arrayContaining(["translate", "proxy/filters/auth", "protos"]));
  });

  it("names every folder under src/ in its layout", () => {
    expect(unnamedFolders(layoutBlock(architecture), paths)).toEqual([]);
  });

  it("flags a folder the layout leaves out (a check that the rule can fail)", () => {
    const layout = "src/translate/   pure\nsrc/proxy/       filters/ (fault/: the rules; headers/)";
    expect(unnamedFolders(layout, ["translate", "protos", "proxy", "proxy/filters", "proxy/filters/fault", "proxy/filters/auth"])).toEqual(["protos", "proxy/filters/auth"]);
  });

  it("states the filter order of the registry (src/proxy/filters/index.ts)", () => {
    expect(documentedFilterOrder(architecture)).toEqual(FILTERS.map((f) => f.name));
  });

  it("reads an order from a call's life (a check that the reader finds what it must)", () => {
    const page = "## A call's life\n\n3. **Filters.** In order:\n   - `b`: one;\n   - `a`: two.\n4. **Attempt.** …";
    expect(documentedFilterOrder(page)).toEqual(["b", "a"]);
  });
});

describe("docs/contributing/extending.md", () => {
  it("names files and folders that exist", () => {
    const named = [...extending.matchAll(/`((?:src|test|scripts|config|docs)\/[A-Za-z0-9_./-]+)`/g)].map((m) => m[1]!);
    expect(named.length).toBeGreaterThan(15);
    // a pattern (`<name>`, `*`) names a kind of file, not one
    const concrete = named.filter((p) => !/[<*]/.test(p));
    expect(concrete.filter((p) => !existsSync(join(REPO_ROOT, p)))).toEqual([]);
  });
});
