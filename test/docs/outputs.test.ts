// Every command output the README and docs/ show is the real one (issue 18, item 10): the demo's,
// `dojang --help`'s, the invalid-config examples. A block marked `<!-- output-of: COMMAND -->`,
// or a terminal block of `$ command` lines and their output (test/helpers/readme.ts), is compared
// with what COMMAND prints now, run with sh in the repository, `dojang` being `node
// dist/cli.js` and `npm run X` the script's command after its build step (this test never
// builds; the suite builds first). Ports, pids, times and measured milliseconds are normalized; a
// shown line ending in "..." stands for any line that starts the same. Output is stdout and
// stderr together, as a terminal shows it (so --help compares the same whichever stream it uses).
// And no command output goes unchecked: every untyped block in the docs is one of the two forms,
// or on the short list below of blocks that are not output.
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLI, REPO_ROOT, assertDistBuilt, childEnv, runGroup } from "../helpers/process.js";
import { alignEllipses, fencesOf, normalizeOutput, shownOutputs } from "../helpers/readme.js";

/** Untyped blocks that show no command's output, by their first line. */
const NOT_OUTPUT = new Set([
  "src/translate/   pure gRPC semantics, no I/O (property-tested): codes, the HTTP status and RST_STREAM", // docs/contributing/architecture.md: Layout
]);

const docs = [
  { file: "README.md", text: readFileSync(join(REPO_ROOT, "README.md"), "utf8") },
  ...readdirSync(join(REPO_ROOT, "docs"), { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".md"))
    .map((f) => ({ file: `docs/${f}`, text: readFileSync(join(REPO_ROOT, "docs", f), "utf8") })),
];
const shown = docs.flatMap((d) => shownOutputs(d.text, d.file));

let bin = "";
beforeAll(() => {
  assertDistBuilt();
  // `dojang` and `node` as the docs mean them: this build, on this test's Node
  bin = mkdtempSync(join(tmpdir(), "dojang-docs-bin-"));
  writeFileSync(join(bin, "dojang"), `#!/bin/sh\nexec "${process.execPath}" "${CLI}" "$@"\n`);
  chmodSync(join(bin, "dojang"), 0o755);
  symlinkSync(process.execPath, join(bin, "node"));
});
afterAll(() => {
  if (bin !== "") rmSync(bin, { recursive: true, force: true });
});

const scripts = (JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;

/** The command line sh runs for a command the docs show. */
function runnable(command: string): string {
  const npmRun = /^npm run (\S+)$/.exec(command);
  if (npmRun === null) return command;
  const script = scripts[npmRun[1]!];
  expect(script, `package.json has the script ${npmRun[1]}`).toBeDefined();
  return script!.replace(/^npm run build && /, "");
}

/** Runs `command` with sh (bounded), stdout and stderr in one stream as a terminal shows them. */
async function run(command: string, cwd: string, ms = 30_000): Promise<string> {
  const env = childEnv({ PATH: `${bin}:${process.env["PATH"] ?? ""}`, NO_COLOR: "1", FORCE_COLOR: undefined });
  return (await runGroup("sh", ["-c", `exec 2>&1; ${runnable(command)}`], { cwd: join(REPO_ROOT, cwd), env }, ms)).stdout;
}

describe("command outputs in the docs are the real ones", () => {
  it("finds the outputs the docs show (the demo, --help, the invalid-config examples)", () => {
    expect(shown.map((s) => s.command)).toEqual(
      expect.arrayContaining(["npm run demo", "dojang --help", "CALL_TIMEOUT=abc dojang --check --config config/sidecar.yaml"]),
    );
  });

  it("every untyped block in the README and docs/ is a checked output, or listed here as none", () => {
    const unchecked = docs.flatMap((d) =>
      fencesOf(d.text)
        .filter((f) => f.lang === "" && !f.before.startsWith("<!-- output-of: ") && !f.body.startsWith("$ "))
        .filter((f) => !NOT_OUTPUT.has(f.body.split("\n")[0]!))
        .map((f) => `${d.file}:${f.line}: ${f.body.split("\n")[0]}`),
    );
    expect(unchecked).toEqual([]);
  });

  it.each(shown.map((s) => [`${s.where}: ${s.command}`, s] as const))("%s", { timeout: 60_000 }, async (_, s) => {
    const expected = normalizeOutput(s.expected);
    const actual = normalizeOutput(await run(s.command, s.cwd));
    expect(alignEllipses(expected, actual)).toBe(expected);
  });
});

describe("the output comparison", () => {
  it("reads both forms, normalizes what varies and honours a cut-short line", () => {
    const md = [
      "<!-- output-of: dojang --check --config bad.yaml; in test/docs/fixtures -->",
      "```",
      "a on 127.0.0.1:4242, took 1.5 ms",
      "```",
      "```",
      "$ echo one",
      "one",
      "$ echo two",
      "two",
      "```",
      "```yaml",
      "$ not: output",
      "```",
    ].join("\n");
    expect(shownOutputs(md, "x.md")).toEqual([
      { where: "x.md:2", command: "dojang --check --config bad.yaml", cwd: "test/docs/fixtures", expected: "a on 127.0.0.1:4242, took 1.5 ms" },
      { where: "x.md:6", command: "echo one", cwd: "", expected: "one" },
      { where: "x.md:8", command: "echo two", cwd: "", expected: "two" },
    ]);
    expect(normalizeOutput("a on 127.0.0.1:4242, took 1.5 ms  \n\n")).toBe(normalizeOutput("a on 127.0.0.1:39001, took 0.25ms"));
    expect(normalizeOutput('timeout "1.5s"')).not.toBe(normalizeOutput('timeout "2.5s"'));
    expect(alignEllipses("x: invalid ...\ny", "x: invalid duration\ny")).toBe("x: invalid ...\ny");
    expect(alignEllipses("x: invalid ...\ny", "x: valid\ny")).toBe("x: valid\ny");
    expect(alignEllipses("a\nb", "a\nb\nc")).toBe("a\nb\nc");
  });
});
