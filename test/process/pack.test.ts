// The harness library as a user gets it: `npm pack` in a fresh clone (its `prepare` builds
// dist/, which git does not hold), the tarball installed into a new project beside @grpc/grpc-js
// and vitest, and that project type-checking and running the test harness guide's example
// (docs/guides/test-harness.md) against
// the INSTALLED package (import from "dojang"). Slow by nature (an npm install), so bounded
// generously; offline-first, from npm's cache when it has the packages. Every child (npm, tsc, the
// project's vitest) runs in a process group of its own with a timer that ends before the test's
// own timeout, and its group is killed when the test ends, whatever happened (process.ts).
import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freshClone, npm, type Clone } from "../helpers/clone.js";
import { REPO_ROOT, childEnv, runGroup } from "../helpers/process.js";
import { DOC_PAGES, HARNESS_MARKER, readDoc, readmeBlockAfter } from "../helpers/readme.js";

let clone: Clone;
let packDir: string;
let project: string;
let tarball = "";

const version = (name: string) => (JSON.parse(readFileSync(join(REPO_ROOT, "node_modules", name, "package.json"), "utf8")) as { version: string }).version;

/** The environment of a child that runs its own vitest: none of this vitest's variables. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env = childEnv();
  for (const k of Object.keys(env)) if (k.startsWith("VITEST") || k === "TEST" || k === "NODE_ENV" || k === "FORCE_COLOR") delete env[k];
  env["NO_COLOR"] = "1";
  return env;
}

async function run(cmd: string, args: readonly string[], cwd: string, ms: number): Promise<{ code: number | null; out: string }> {
  const r = await runGroup(cmd, args, { cwd, env: cleanEnv() }, ms);
  return { code: r.code, out: r.stdout + r.stderr };
}

const PACK_TEST_MS = 200_000;
const INSTALL_TEST_MS = 300_000;
/**
 * A step's own bound, cut to what is left of the test's timeout (`testMs` from `t0`) less 10 s for
 * the test's asserts and cleanup: no child's timer outlives the test that started it.
 */
function within(t0: number, testMs: number, stepMs: number): number {
  const left = t0 + testMs - 10_000 - performance.now();
  if (left < 1000) throw new Error(`no time left in the test's ${testMs} ms for the next step`);
  return Math.min(stepMs, left);
}

beforeAll(() => {
  clone = freshClone("dojang-pack-");
  const base = join(tmpdir(), `dojang-pack-${process.pid}-${Date.now()}`);
  packDir = join(base, "tarball");
  project = join(base, "user-project");
  mkdirSync(packDir, { recursive: true });
  mkdirSync(project, { recursive: true });
});
afterAll(() => {
  clone?.remove();
  if (packDir !== undefined) rmSync(join(packDir, ".."), { recursive: true, force: true });
});

describe("the packed harness library", () => {
  it("npm pack builds dist/ (prepare) and packs what the library and the command need, without sources or tests", { timeout: PACK_TEST_MS }, async () => {
    const t0 = performance.now();
    expect(existsSync(join(clone.dir, "dist"))).toBe(false);
    const r = await npm(["pack", "--pack-destination", packDir], clone.dir, within(t0, PACK_TEST_MS, 180_000));
    expect(r.code, r.stderr).toBe(0);
    const files = readdirSync(packDir).filter((f) => f.endsWith(".tgz"));
    const own = JSON.parse(readFileSync(join(clone.dir, "package.json"), "utf8")) as { version: string };
    expect(files).toEqual([`dojang-${own.version}.tgz`]);
    tarball = join(packDir, files[0]!);
    const listed = execFileSync("tar", ["tzf", tarball], { encoding: "utf8" }).split("\n");
    for (const f of ["package/package.json", "package/dist/index.js", "package/dist/index.d.ts", "package/dist/cli.js", "package/dist/dojang.mjs", "package/dist/proxy/filters/fault/input.d.ts", "package/config/dojang.yaml"]) {
      expect(listed).toContain(f);
    }
    expect(listed.filter((f) => f.startsWith("package/src/") || f.startsWith("package/test/") || f.startsWith("package/node_modules/"))).toEqual([]);
  });

  it("installs into a new project, whose tsc accepts the guide's example and refuses a wrong rule, and whose vitest runs the example against the installed package", { timeout: INSTALL_TEST_MS }, async () => {
    const t0 = performance.now();
    expect(tarball, "the pack step ran").not.toBe("");
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "harness-user", private: true, type: "module" }, null, 2));
    const install = await npm(
      ["install", "--prefer-offline", "--no-audit", "--no-fund", "--save-dev", tarball, `@grpc/grpc-js@${version("@grpc/grpc-js")}`, `vitest@${version("vitest")}`],
      project,
      within(t0, INSTALL_TEST_MS, 240_000),
      cleanEnv(),
    );
    expect(install.code, install.stderr).toBe(0);
    // the installed package, not this repository
    expect(existsSync(join(project, "node_modules", "dojang", "dist", "dojang.mjs"))).toBe(true);
    expect(existsSync(join(project, "node_modules", "dojang", "src"))).toBe(false);

    writeFileSync(join(project, "harness.test.ts"), readmeBlockAfter(readDoc(DOC_PAGES.testHarness), HARNESS_MARKER));
    writeFileSync(
      join(project, "types.test.ts"),
      [
        'import { it } from "vitest";',
        'import { startDojang, type CallRecord, type FaultRuleInput } from "dojang";',
        'const ok: FaultRuleInput = { match: { metadata: [{ name: "x-user", equals: "alice" }] }, action: { kind: "reset", code: "CANCEL", at: "after_messages", messages: 1 } };',
        "export async function use(): Promise<readonly CallRecord[]> {",
        '  const d = await startDojang({ config: "" });',
        "  d.faults.add(ok);",
        "  // @ts-expect-error: a misspelt kind is caught in the editor",
        '  d.faults.add({ action: { kind: "abrot", code: "UNAVAILABLE" } });',
        "  return d.calls;",
        "}",
        'it("compiles", () => {});',
        "",
      ].join("\n"),
    );
    writeFileSync(
      join(project, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "es2023",
          module: "nodenext",
          moduleResolution: "nodenext",
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          types: ["node"],
          // @types/node from this repository (the user project would have its own)
          typeRoots: [join(REPO_ROOT, "node_modules", "@types")],
        },
        include: ["*.ts"],
      }),
    );
    const tsc = await run(process.execPath, [join(REPO_ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json"], project, within(t0, INSTALL_TEST_MS, 120_000));
    expect(tsc.out).toBe("");
    expect(tsc.code).toBe(0);

    const vitest = await run(process.execPath, [join(project, "node_modules", "vitest", "vitest.mjs"), "run", "harness.test.ts"], project, within(t0, INSTALL_TEST_MS, 120_000));
    expect(vitest.out.replace(/\x1b\[[0-9;]*m/g, "")).toMatch(/Tests\s+2 passed \(2\)/);
    expect(vitest.code, vitest.out).toBe(0);

    const bin = await run(join(project, "node_modules", ".bin", "dojang"), ["--version"], project, within(t0, INSTALL_TEST_MS, 30_000));
    expect(bin.out.trim()).toBe((JSON.parse(readFileSync(join(clone.dir, "package.json"), "utf8")) as { version: string }).version);
  });
});
