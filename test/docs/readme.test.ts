// The reference pages are what users read: the decided_by table and the metrics table must say
// exactly what the code does, in both directions (fastify checks its errors doc the same way). They
// moved from the README to docs/reference/ (issue 19); the checks moved with them.
import { registerXdsMetrics } from "../../src/xds/client.js";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { DECIDED_BY } from "../../src/translate/index.js";
import { Metrics } from "../../src/proxy/observe/metrics.js";
import { FAULT_KINDS_DOC } from "../../src/proxy/filters/fault/doc.js";

const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
const doc = (path: string) => readFileSync(new URL(`../../docs/${path}`, import.meta.url), "utf8");

/** The rows (without header and separator) of the first table after `heading` in `text`. */
function tableAfter(text: string, heading: string): string[][] {
  const start = text.indexOf(heading);
  expect(start, `the page has "${heading}"`).toBeGreaterThanOrEqual(0);
  const rows: string[][] = [];
  let inTable = false;
  for (const line of text.slice(start).split("\n").slice(1)) {
    if (line.startsWith("|")) {
      inTable = true;
      rows.push(line.split("|").slice(1, -1).map((c) => c.trim()));
    } else if (inTable) break;
  }
  return rows.slice(2); // header and separator
}

describe("the reference tables in docs/reference/ match the code", () => {
  it("lists every decided_by reason with the code's description, and no other", () => {
    const rows = tableAfter(doc("reference/decided-by.md"), "# `decided_by`");
    const documented = Object.fromEntries(rows.map(([k, v]) => [k!.replaceAll("`", ""), v]));
    expect(documented).toEqual({ ...DECIDED_BY });
  });

  it("lists every dojang_* metric the registry exports, and no other", async () => {
    const m = new Metrics();
    // the xDS client's, registered on the same registry when the config has xds
    registerXdsMetrics(m.registry);
    const all = (await m.registry.getMetricsAsJSON()).map((x) => x.name);
    const names = all.filter((n) => n.startsWith("dojang_"));
    const rows = tableAfter(doc("reference/metrics.md"), "# Metrics");
    const wildcards = rows.map((r) => r[0]!.replaceAll("`", "")).filter((n) => n.endsWith("*"));
    const documented = rows.map((r) => r[0]!.replaceAll("`", "")).filter((n) => !n.endsWith("*"));
    expect(documented.sort()).toEqual(names.sort());
    // the rest are prom-client's defaults under their standard names, each covered by a wildcard row
    expect(wildcards.sort()).toEqual(["nodejs_*", "process_*"]);
    for (const n of all.filter((x) => !x.startsWith("dojang_"))) expect(wildcards.some((w) => n.startsWith(w.slice(0, -1))), n).toBe(true);
  });

  it("carries the fault-kind reference from src/proxy/filters/fault/doc.ts word for word", () => {
    const body = FAULT_KINDS_DOC.slice(FAULT_KINDS_DOC.indexOf("\n")).trim();
    expect(doc("reference/faults.md")).toContain(body);
  });
});

// === the README and docs/ stand on their own ===

const ROOT = new URL("../../", import.meta.url);
const docsDir = new URL("docs/", ROOT);
/** Every .md and .txt file under docs/, in every subfolder. */
const docs = readdirSync(docsDir, { recursive: true, encoding: "utf8" })
  .filter((f) => /\.(md|txt)$/.test(f))
  .sort()
  .map((f) => ({ name: `docs/${f}`, url: new URL(f, docsDir), text: readFileSync(new URL(f, docsDir), "utf8") }));
const benchReadme = { name: "bench/README.md", url: new URL("bench/README.md", ROOT), text: readFileSync(new URL("bench/README.md", ROOT), "utf8") };

/**
 * GitHub's heading anchors: lower-case, punctuation dropped (not "-" or "_"), spaces as "-"; a
 * slug that came before gets "-1", "-2" … (GitHub's rule for repeated headings).
 */
function anchorsOf(markdown: string): Set<string> {
  const out = new Set<string>();
  let fenced = false;
  for (const line of markdown.split("\n")) {
    if (line.startsWith("```")) fenced = !fenced;
    const m = fenced ? null : /^#{1,6}\s+(.*)$/.exec(line);
    if (m === null) continue;
    const slug = m[1]!.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-");
    let unique = slug;
    for (let n = 1; out.has(unique); n++) unique = `${slug}-${n}`;
    out.add(unique);
  }
  return out;
}

/** Markdown links `[text](target)` outside code, with their targets. */
function linksOf(markdown: string): string[] {
  const prose = markdown.replace(/```[\s\S]*?```/g, "").replace(/`[^`\n]*`/g, "");
  return [...prose.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
}

function brokenLinks(markdown: string, base: URL): string[] {
  const broken: string[] = [];
  for (const target of linksOf(markdown)) {
    if (/^[a-z]+:/i.test(target)) continue; // https:, mailto:
    const [file, anchor] = target.split("#", 2) as [string, string | undefined];
    const url = file === "" ? base : new URL(file, base);
    if (!url.href.startsWith(ROOT.href)) {
      broken.push(`${target} (outside the repository)`);
      continue;
    }
    if (!existsSync(url)) {
      broken.push(`${target} (no such file)`);
      continue;
    }
    if (anchor !== undefined && url.pathname.endsWith(".md") && !anchorsOf(readFileSync(url, "utf8")).has(anchor)) {
      broken.push(`${target} (no such heading)`);
    }
  }
  return broken;
}

describe("the README and docs/ point only inside the repository", () => {
  it("never mention ../shared (the workspace's spec sheet and probe live outside the repository)", () => {
    for (const { name, text } of [{ name: "README.md", text: readme }, ...docs]) {
      expect(text.includes("../shared"), `${name} mentions ../shared`).toBe(false);
      expect(/shared\/(spec|tools)/.test(text), `${name} mentions shared/spec or shared/tools`).toBe(false);
    }
  });

  it("every relative link in the README resolves to a file in the repository (and a heading, for #anchors)", () => {
    expect(linksOf(readme).length).toBeGreaterThan(3);
    expect(brokenLinks(readme, new URL("README.md", ROOT))).toEqual([]);
  });

  it("every relative link in docs/, in every subfolder, and in bench/README.md resolves too", () => {
    const pages = docs.filter((x) => x.name.endsWith(".md"));
    // the subfolders are read: guides, concepts, reference and contributing each have pages
    for (const dir of ["guides", "concepts", "reference", "contributing"]) expect(pages.some((p) => p.name.startsWith(`docs/${dir}/`)), dir).toBe(true);
    for (const d of [...pages, benchReadme]) expect(brokenLinks(d.text, d.url), d.name).toEqual([]);
  });

  it("the link checker catches a missing file, a missing heading and a way out of the repository", () => {
    const base = new URL("README.md", ROOT);
    expect(brokenLinks("[a](docs/nope.md) [b](#no-such-heading) [c](../shared/spec/x.md) [d](https://example.com)", base)).toEqual([
      "docs/nope.md (no such file)",
      "#no-such-heading (no such heading)",
      "../shared/spec/x.md (outside the repository)",
    ]);
    // from a page in a subfolder: relative to that page, headings of the page it names
    const nested = new URL("docs/guides/sidecar.md", ROOT);
    expect(brokenLinks("[a](../reference/metrics.md) [b](../reference/metrics.md#nope) [c](reference/metrics.md) [d](../../../x.md)", nested)).toEqual([
      "../reference/metrics.md#nope (no such heading)",
      "reference/metrics.md (no such file)",
      "../../../x.md (outside the repository)",
    ]);
  });

  it("slugs headings as GitHub does, repeated ones with -1, -2", () => {
    expect([...anchorsOf("# `decided_by`\n## HTTP status → gRPC status (grpc-go `HTTPStatusConvTab`)\n## Tests\n## Tests\n```\n# not a heading\n```\n### Tests")]).toEqual([
      "decided_by",
      "http-status--grpc-status-grpc-go-httpstatusconvtab",
      "tests",
      "tests-1",
      "tests-2",
    ]);
  });

  it("links the gRPC rules and the probe findings that used to live outside it", () => {
    expect(linksOf(readme)).toEqual(expect.arrayContaining(["docs/concepts/grpc-over-h2.md", "docs/concepts/node-http2-probe.md"]));
  });
});

describe("the README is a front page; docs/ holds the rest (issue 19)", () => {
  it("is at most 150 lines", () => {
    expect(readme.trimEnd().split("\n").length).toBeLessThanOrEqual(150);
  });

  it("keeps the quick start, the test command, the docs index and the three uses as links", () => {
    expect(readme).toContain("## Quick start");
    expect(readme).toContain("<!-- quick-start:call -->");
    expect(readme).toContain("<!-- quick-start:upstream -->");
    expect(readme).toContain("npm ci && npm test");
    expect(linksOf(readme)).toEqual(
      expect.arrayContaining(["docs/README.md", "docs/guides/sidecar.md", "docs/guides/edge-gateway.md", "docs/guides/test-harness.md"]),
    );
  });

  it("every page under docs/ is linked from the index, docs/README.md", () => {
    const index = docs.find((d) => d.name === "docs/README.md");
    expect(index, "docs/README.md exists").toBeDefined();
    const linked = new Set(linksOf(index!.text).map((t) => new URL(t.split("#")[0]!, index!.url).href));
    const pages = docs.filter((d) => d.name !== "docs/README.md" && d.name.endsWith(".md"));
    expect(pages.length).toBeGreaterThanOrEqual(15);
    expect(pages.filter((d) => !linked.has(d.url.href)).map((d) => d.name)).toEqual([]);
  });
});

describe("the example configs say what the schema accepts", () => {
  it("no config/*.yaml calls a key 'reserved for later' (tls, per-route faults and rate limits exist)", () => {
    const dir = new URL("config/", ROOT);
    const files = readdirSync(dir).filter((f) => f.endsWith(".yaml"));
    expect(files).toContain("example-full.yaml");
    for (const f of files) expect(readFileSync(new URL(f, dir), "utf8"), `config/${f}`).not.toMatch(/reserved for later/i);
  });
});
