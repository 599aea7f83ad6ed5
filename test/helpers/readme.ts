// Code blocks of the README and docs/, for tests that run what the docs tell users to write.
import { readFileSync } from "node:fs";

/**
 * Where the docs the tests run live (issue 19 moved them out of the README): the quick start stays
 * in README.md; the command line, the TLS recipe and browser page, and the harness example each
 * have a page under docs/.
 */
export const DOC_PAGES = {
  quickStart: "README.md",
  cli: "docs/reference/cli.md",
  edgeGateway: "docs/guides/edge-gateway.md",
  testHarness: "docs/guides/test-harness.md",
  xds: "docs/guides/xds.md",
} as const;

/** The text of a doc page, by its path in the repository (`DOC_PAGES.cli`, "README.md"). */
export function readDoc(path: string): string {
  return readFileSync(new URL(`../../${path}`, import.meta.url), "utf8");
}

/** The first ```ts block after `marker` in `text`, with its trailing newline. */
export function readmeBlockAfter(text: string, marker: string): string {
  const at = text.indexOf(marker);
  if (at < 0) throw new Error(`the page has no "${marker}"`);
  const open = text.indexOf("```ts\n", at);
  const close = text.indexOf("\n```\n", open);
  if (open < 0 || close < 0) throw new Error(`no \`\`\`ts block after "${marker}"`);
  return text.slice(open + "```ts\n".length, close + 1);
}

/** The sentence that introduces the harness example (a vitest file users copy). */
export const HARNESS_MARKER = "A vitest file that tests a @grpc/grpc-js client's retry policy";

/** A command the docs show the output of, and that output as written. */
export interface ShownOutput {
  /** "README.md:42", "docs/reference/cli.md:5" */
  readonly where: string;
  /** a shell command line, as the docs give it (`dojang …`, `npm run demo`, `VAR=x dojang …`) */
  readonly command: string;
  /** the directory it runs in, relative to the repository ("" = its root) */
  readonly cwd: string;
  readonly expected: string;
}

export interface Fence {
  readonly line: number;
  readonly lang: string;
  readonly body: string;
  /** the line just before the opening fence */
  readonly before: string;
}

/** Every fenced code block of a markdown text. */
export function fencesOf(text: string): Fence[] {
  const lines = text.split("\n");
  const out: Fence[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i]!);
    if (open === null) continue;
    let j = i + 1;
    while (j < lines.length && lines[j] !== "```") j++;
    out.push({ line: i + 1, lang: open[1]!, body: lines.slice(i + 1, j).join("\n"), before: i > 0 ? lines[i - 1]! : "" });
    i = j;
  }
  return out;
}

/**
 * The command outputs a markdown file shows, in two forms:
 * - a block right after `<!-- output-of: COMMAND -->` (or `<!-- output-of: COMMAND; in DIR -->`)
 *   is COMMAND's whole output (stdout and stderr as a terminal shows them);
 * - an untyped block whose first line starts with `$ ` is a terminal session: each `$ command`
 *   line, then that command's output.
 */
export function shownOutputs(text: string, file: string): ShownOutput[] {
  const out: ShownOutput[] = [];
  for (const f of fencesOf(text)) {
    const marker = /^<!-- output-of: (.+?)(?:; in (\S+))? -->$/.exec(f.before);
    if (marker !== null) {
      out.push({ where: `${file}:${f.line}`, command: marker[1]!, cwd: marker[2] ?? "", expected: f.body });
      continue;
    }
    if (f.lang !== "" || !f.body.startsWith("$ ")) continue;
    const lines = f.body.split("\n");
    for (let i = 0; i < lines.length; ) {
      const command = lines[i]!.slice(2);
      let j = i + 1;
      while (j < lines.length && !lines[j]!.startsWith("$ ")) j++;
      out.push({ where: `${file}:${f.line + 1 + i}`, command, cwd: "", expected: lines.slice(i + 1, j).join("\n") });
      i = j;
    }
  }
  return out;
}

/**
 * What may differ from run to run, made the same on both sides: loopback ports, pids, epoch
 * times, measured milliseconds (fractional ones, and the access log's duration_ms); trailing
 * blanks and blank lines at the end. Durations a config sets ("1.5s", "500ms") stay as they are.
 */
export function normalizeOutput(text: string): string {
  return text
    .replace(/\b(127\.0\.0\.1|localhost|\[::1\]):\d{2,5}\b/g, "$1:PORT")
    .replace(/("pid":|pid )\d+/g, "$1PID")
    .replace(/"time":\d+/g, '"time":TIME')
    .replace(/\b\d+\.\d+ ?ms\b/g, "N ms")
    .replace(/"duration_ms":[\d.]+/g, '"duration_ms":N')
    .split("\n")
    .map((l) => l.trimEnd())
    .join("\n")
    .replace(/\n+$/, "");
}

/**
 * `actual` in the shape of `expected`: a line of `expected` that ends in "..." or "…" stands
 * for any line that starts with the text before it (the docs may cut a long line short).
 * Compare the result with `expected` (after normalizeOutput on both).
 */
export function alignEllipses(expected: string, actual: string): string {
  const want = expected.split("\n");
  const got = actual.split("\n");
  return got
    .map((line, i) => {
      const w = want[i];
      if (w === undefined) return line;
      const m = /^(.*?)\s*(\.\.\.|…)$/.exec(w);
      return m !== null && line.startsWith(m[1]!) ? w : line;
    })
    .join("\n");
}

/** The body of the first ```lang block after `<!-- marker -->` in `text` (without its last newline). */
export function blockAfterMarker(text: string, marker: string, lang: string): string {
  const at = text.indexOf(`<!-- ${marker} -->`);
  if (at < 0) throw new Error(`no <!-- ${marker} --> in the text`);
  const f = fencesOf(text.slice(at))[0];
  if (f === undefined || f.lang !== lang) throw new Error(`no \`\`\`${lang} block right after <!-- ${marker} -->`);
  return f.body;
}
