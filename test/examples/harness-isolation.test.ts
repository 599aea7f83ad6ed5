// The test harness guide's example (docs/guides/test-harness.md) clears its faults in afterEach, so a test that fails halfway does
// not leak its fault into the next test (issue 18, item 9: a user's test 2 failed with test 1's
// RST). Checked by running the guide's block in a child vitest with the client's retries switched
// off: its first test then fails with the "flaky" rule still in force (one of its two firings
// left), and the second test must still pass. And, so this test can fail: the same block without
// its afterEach line fails both tests (the second one with the first one's UNAVAILABLE).
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT, assertDistBuilt, childEnv, runGroup } from "../helpers/process.js";
import { DOC_PAGES, HARNESS_MARKER, readDoc, readmeBlockAfter } from "../helpers/readme.js";

const block = readmeBlockAfter(readDoc(DOC_PAGES.testHarness), HARNESS_MARKER);
const RETRIES_ON = '"grpc.enable_retries": 1';
const AFTER_EACH = /^afterEach\(.*faults\.reset\(\).*\);\n/m;
const dirs: string[] = [];

beforeAll(() => assertDistBuilt());
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A project in a temp dir whose node_modules point at this repository (dojang) and its packages. */
function project(testFile: string): string {
  const dir = mkdtempSync(join(tmpdir(), "dojang-isolation-"));
  dirs.push(dir);
  mkdirSync(join(dir, "node_modules", "@grpc"), { recursive: true });
  symlinkSync(REPO_ROOT, join(dir, "node_modules", "dojang"), "dir");
  symlinkSync(join(REPO_ROOT, "node_modules", "@grpc", "grpc-js"), join(dir, "node_modules", "@grpc", "grpc-js"), "dir");
  symlinkSync(join(REPO_ROOT, "node_modules", "vitest"), join(dir, "node_modules", "vitest"), "dir");
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "harness-user", private: true, type: "module" }));
  writeFileSync(join(dir, "harness.test.ts"), testFile);
  return dir;
}

type Outcome = Record<string, "passed" | "failed" | string>;

/** Runs vitest on harness.test.ts in `dir` (bounded); each test's title → its status. */
async function vitest(dir: string): Promise<{ outcome: Outcome; out: string }> {
  const env = childEnv({ NO_COLOR: "1" });
  for (const k of Object.keys(env)) if (k.startsWith("VITEST") || k === "TEST" || k === "NODE_ENV" || k === "FORCE_COLOR") delete env[k];
  const { stdout: out, stderr: err } = await runGroup(process.execPath, [join(REPO_ROOT, "node_modules", "vitest", "vitest.mjs"), "run", "--reporter=json", "harness.test.ts"], { cwd: dir, env }, 60_000);
  const json = JSON.parse(out.slice(out.indexOf("{"))) as { testResults: { assertionResults: { title: string; status: string }[] }[] };
  const outcome: Outcome = {};
  for (const f of json.testResults) for (const a of f.assertionResults) outcome[a.title] = a.status;
  return { outcome, out: out + err };
}

describe("the test harness guide's example keeps a failing test's fault out of the next test", () => {
  it("has the afterEach reset and the retry switch this test turns off", () => {
    expect(block).toMatch(AFTER_EACH);
    expect(block).toContain(RETRIES_ON);
    expect(block).not.toMatch(/faults\.remove\(/);
  });

  it("with retries off its first test fails, and its second test still passes", { timeout: 90_000 }, async () => {
    const r = await vitest(project(block.replace(RETRIES_ON, '"grpc.enable_retries": 0')));
    expect(r.outcome, r.out).toEqual({
      "retries UNAVAILABLE twice and then succeeds": "failed",
      "gives up at the client's deadline when the upstream never answers": "passed",
    });
  });

  it("without the afterEach line the second test fails too (what the README used to show)", { timeout: 90_000 }, async () => {
    const leaky = block.replace(RETRIES_ON, '"grpc.enable_retries": 0').replace(AFTER_EACH, "");
    expect(leaky).not.toContain("faults.reset()");
    const r = await vitest(project(leaky));
    expect(r.outcome, r.out).toEqual({
      "retries UNAVAILABLE twice and then succeeds": "failed",
      "gives up at the client's deadline when the upstream never answers": "failed",
    });
  });
});
