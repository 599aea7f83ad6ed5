// The harness library as a user gets it: `npm pack` in a fresh clone (its `prepare` builds
// dist/, which git does not hold), the tarball installed into a new project beside @grpc/grpc-js
// and vitest, and that project type-checking and running the test harness guide's example
// (docs/guides/test-harness.md) against
// the INSTALLED package (import from "dojang"). Slow by nature (an npm install), so bounded
// generously; offline-first, from npm's cache when it has the packages.
import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freshClone, npm, type Clone } from "../helpers/clone.js";
import { REPO_ROOT, childEnv } from "../helpers/process.js";
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

function run(cmd: string, args: readonly string[], cwd: string, ms: number): Promise<{ code: number | null; out: string }> {
  const child = spawn(cmd, [...args], { cwd, env: cleanEnv(), stdio: ["ignore", "pipe", "pipe"], detached: true });
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr.setEncoding("utf8").on("data", (d: string) => (out += d));
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
      reject(new Error(`${cmd} ${args.join(" ")} did not finish within ${ms}ms:\n${out}`));
    }, ms);
    child.once("close", (code) => {
      clearTimeout(t);
      resolve({ code, out });
    });
  });
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
  it("npm pack builds dist/ (prepare) and packs what the library and the command need, without sources or tests", { timeout: 200_000 }, async () => {
    expect(existsSync(join(clone.dir, "dist"))).toBe(false);
    const r = await npm(["pack", "--pack-destination", packDir], clone.dir, 180_000);
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

  it("installs into a new project, whose tsc accepts the guide's example and refuses a wrong rule, and whose vitest runs the example against the installed package", { timeout: 300_000 }, async () => {
    expect(tarball, "the pack step ran").not.toBe("");
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "harness-user", private: true, type: "module" }, null, 2));
    const install = await npm(
      ["install", "--prefer-offline", "--no-audit", "--no-fund", "--save-dev", tarball, `@grpc/grpc-js@${version("@grpc/grpc-js")}`, `vitest@${version("vitest")}`],
      project,
      240_000,
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
    const tsc = await run(process.execPath, [join(REPO_ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json"], project, 120_000);
    expect(tsc.out).toBe("");
    expect(tsc.code).toBe(0);

    const vitest = await run(process.execPath, [join(project, "node_modules", "vitest", "vitest.mjs"), "run", "harness.test.ts"], project, 120_000);
    expect(vitest.out.replace(/\x1b\[[0-9;]*m/g, "")).toMatch(/Tests\s+2 passed \(2\)/);
    expect(vitest.code, vitest.out).toBe(0);

    const bin = await run(join(project, "node_modules", ".bin", "dojang"), ["--version"], project, 30_000);
    expect(bin.out.trim()).toBe((JSON.parse(readFileSync(join(clone.dir, "package.json"), "utf8")) as { version: string }).version);
  });
});
