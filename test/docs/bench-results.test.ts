// bench/results/ keeps the runs a page cites, and only those (issue 30): every path a page cites
// exists, every run kept is cited, and bench/results/README.md lists every run kept. A page cites a
// run by its path (`bench/results/<run>/…`, a link, or a glob such as `bench/results/mem-*`) or by
// its name in the `run` column of a table.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../helpers/process.js";

const RESULTS = join(REPO_ROOT, "bench", "results");

function files(dir: string, keep: (name: string) => boolean): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    if (n === "node_modules" || n.startsWith(".") || n === "dist" || p === RESULTS) return [];
    return statSync(p).isDirectory() ? files(p, keep) : keep(n) ? [p] : [];
  });
}

/** The pages that may cite a run: README.md, docs/, bench/ (not the results themselves), config/. */
const pages = [
  join(REPO_ROOT, "README.md"),
  ...files(join(REPO_ROOT, "docs"), (n) => n.endsWith(".md")),
  ...files(join(REPO_ROOT, "bench"), (n) => n.endsWith(".md")),
  ...files(join(REPO_ROOT, "config"), (n) => n.endsWith(".yaml")),
];

/** A path under bench/results/ written on a page, "<run>[/<file>]", or a run named in a `run` column. */
export function citations(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/bench\/results\/([A-Za-z0-9._*-]+(?:\/[A-Za-z0-9._*-]+)*)/g)) out.push(m[1]!);
  // bench/README.md links its own folder relatively
  for (const m of text.matchAll(/\]\(results\/([A-Za-z0-9._*-]+(?:\/[A-Za-z0-9._*-]+)*)\)/g)) out.push(m[1]!);
  // tables whose last column is "run": its first `name` is a run
  const lines = text.split("\n");
  let runColumn = false;
  for (const line of lines) {
    if (!/^\s*\|/.test(line)) {
      runColumn = false;
      continue;
    }
    const cells = line.split("|").slice(1, -1).map((c) => c.trim());
    if (/^run$/.test(cells.at(-1) ?? "")) runColumn = true;
    else if (runColumn && !/^-+$/.test(cells.at(-1) ?? "")) {
      const name = /`([A-Za-z0-9._-]+)`/.exec(cells.at(-1)!)?.[1];
      if (name !== undefined) out.push(name);
    }
  }
  return out;
}

/** A citation's paths, a glob matched against the folder ("" for a file or folder that is not there). */
function resolveCitation(c: string, entries: readonly string[]): string[] {
  // `<date>` and the like are patterns in prose, tmp/ is ignored by git
  if (c.startsWith("tmp/") || c === "tmp") return ["tmp"];
  if (c.includes("*")) {
    const re = new RegExp("^" + c.split("*").map((s) => s.replace(/[.+?^${}()|[\]\\]/g, "\\$&")).join(".*") + "$");
    return entries.filter((e) => re.test(e) || e.split("/").some((_, i, a) => re.test(a.slice(0, i + 1).join("/"))));
  }
  return existsSync(join(RESULTS, c)) ? [c] : [];
}

/** The files git tracks under bench/results/ (a local run's untracked output is not the tree's). */
function trackedEntries(): string[] {
  let listed: string[];
  try {
    listed = execFileSync("git", ["ls-files", "bench/results"], { cwd: REPO_ROOT, encoding: "utf8" }).split("\n").filter(Boolean);
  } catch {
    listed = files(RESULTS, () => true).map((f) => relative(REPO_ROOT, f));
  }
  return listed.map((f) => f.slice("bench/results/".length)).filter((f) => f !== "README.md");
}

const cited = new Map<string, string[]>();
for (const p of pages) {
  for (const c of citations(readFileSync(p, "utf8"))) cited.set(c, [...(cited.get(c) ?? []), relative(REPO_ROOT, p)]);
}
const tracked = trackedEntries();
/** top-level names: a run folder, or a file such as latest.md */
const runs = [...new Set(tracked.map((f) => f.split("/")[0]!))].sort();

describe("bench/results/ holds the runs the docs cite", () => {
  it("reads citations of every form (a check that the reader finds what it must)", () => {
    const page = [
      "see [bench/results/a-run](../../bench/results/a-run/latest.md) and `bench/results/mem-*`",
      "[results/auth/latest.md](results/auth/latest.md)",
      "",
      "| setting | RSS | run |",
      "|---|---:|---|",
      "| semi 1 | 135 | `mem-semi1` |",
      "| semi 2 | 167 | `mem-ab-today-2` (quiet) |",
      "",
      "| other | `not-a-run` |",
    ].join("\n");
    expect(citations(page)).toEqual(["a-run", "a-run/latest.md", "mem-*", "auth/latest.md", "mem-semi1", "mem-ab-today-2"]);
  });

  it("finds the pages and their citations", () => {
    expect(pages.length).toBeGreaterThan(20);
    expect(cited.size).toBeGreaterThan(40);
    expect(runs.length).toBeGreaterThan(40);
  });

  it("has every path a page cites", () => {
    const missing = [...cited].filter(([c]) => !c.includes("<") && resolveCitation(c, tracked).length === 0);
    expect(missing.map(([c, by]) => `${c} (cited by ${by.join(", ")})`)).toEqual([]);
  });

  it("keeps no run that no page cites", () => {
    const covered = new Set<string>();
    for (const c of cited.keys()) for (const r of resolveCitation(c, tracked)) covered.add(r.split("/")[0]!);
    expect(runs.filter((r) => !covered.has(r))).toEqual([]);
  });

  it("lists every run kept in bench/results/README.md, and no other", () => {
    const index = readFileSync(join(RESULTS, "README.md"), "utf8");
    const listed = new Set<string>();
    for (const line of index.split("\n")) {
      if (!/^\|/.test(line)) continue;
      const first = line.split("|")[1] ?? "";
      for (const m of first.matchAll(/`([A-Za-z0-9._-]+)`/g)) listed.add(m[1]!);
    }
    expect([...listed].sort()).toEqual(runs);
  });
});
