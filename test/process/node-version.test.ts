// The Node.js floor (src/version.ts): on a node older than NODE_RANGE, node:http2 refuses the flat
// header lists dojang passes on every call, so dojang would start and fail every call (13
// INTERNAL, blamed on the client). The CLI refuses to start, in one line, exit 2; startDojang()
// rejects with that line. Run with a real older node when this machine has one: the first `node`
// on PATH outside node_modules (the machine's own), or $DOJANG_TEST_OLD_NODE.
import { execFileSync } from "node:child_process";
import { accessSync, constants, readFileSync } from "node:fs";
import { delimiter, dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { NODE_RANGE, VERSION, nodeSupported, nodeVersionProblem } from "../../src/version.js";
import { CLI, REPO_ROOT, assertDistBuilt, canConnect, childEnv, configYaml, freePort, killSpawned, runGroup, tempDir, type GroupRun } from "../helpers/process.js";

/** An executable `node` that is not the one running the tests and is too old for dojang, with its version. */
function findOldNode(): { path: string; version: string } | undefined {
  const candidates = [
    ...(process.env["DOJANG_TEST_OLD_NODE"] ? [process.env["DOJANG_TEST_OLD_NODE"]] : []),
    ...(process.env["PATH"] ?? "").split(delimiter).filter((d) => d !== "" && !d.includes("node_modules")).map((d) => join(d, "node")),
  ];
  for (const path of candidates) {
    try {
      accessSync(path, constants.X_OK);
      const version = execFileSync(path, ["-p", "process.versions.node"], { encoding: "utf8", timeout: 10_000 }).trim();
      if (!nodeSupported(version)) return { path, version };
    } catch {
      /* not there, or not a node */
    }
  }
  return undefined;
}

const old = findOldNode();
const tmp = tempDir();
beforeAll(() => assertDistBuilt());
afterEach(async () => {
  await killSpawned();
});
afterAll(() => tmp.remove());

/** Runs `node args` with the old node to completion, bounded (its process group is killed on timeout). */
function runOld(args: readonly string[], ms = 15_000): Promise<GroupRun> {
  return runGroup(old!.path, args, { cwd: REPO_ROOT, env: childEnv() }, ms);
}

describe("which Node.js versions dojang accepts", () => {
  it.each([
    ["20.20.2", false],
    ["22.17.0", false],
    ["22.19.0", false],
    ["22.20.0", true],
    ["22.21.1", true],
    ["23.11.1", false],
    ["24.0.0", false],
    ["24.6.0", false],
    ["24.7.0", true],
    ["24.21.0", true],
    ["25.0.0", true],
  ])("%s: %s", (v, ok) => {
    expect(nodeSupported(v)).toBe(ok);
    expect(nodeVersionProblem(v, "node") === undefined).toBe(ok);
  });

  it("package.json's engines says the same range, and the message says what to do in one line", () => {
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { engines: { node: string } };
    expect(pkg.engines.node).toBe(NODE_RANGE);
    const line = nodeVersionProblem("20.20.2", "/x/node")!;
    expect(line).not.toContain("\n");
    expect(line).toContain(`needs Node.js ${NODE_RANGE}`);
    expect(line).toContain("this is Node.js 20.20.2 (/x/node)");
    expect(line).toContain("npm i -D node@24");
    // a clone has its own Node 24 (the `node` dev dependency): the advice for it is npx
    expect(line).toContain("In a clone of dojang (after npm install): npx node dist/cli.js");
  });
});

describe.runIf(old !== undefined)(`on an older node (${old?.path} ${old?.version})`, () => {
  it("dojang refuses to start: exit 2, one line on stderr naming the range and npm i -D node@24, no stack, nothing listening", async () => {
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const file = tmp.write("old-node.yaml", configYaml({ listenPort, adminPort }));
    const r = await runOld([CLI, "--config", file]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    const lines = r.stderr.trimEnd().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`dojang needs Node.js ${NODE_RANGE}`);
    expect(lines[0]).toContain(`this is Node.js ${old!.version}`);
    expect(lines[0]).toContain("npm i -D node@24");
    expect(lines[0]).toContain("npx node dist/cli.js");
    expect(await canConnect(listenPort)).toBe(false);
    expect(await canConnect(adminPort)).toBe(false);
  });

  it("the advice for a clone works: with the old node first on PATH, npx node dist/cli.js runs dojang (--check passes, --version prints it)", async () => {
    // the shell of someone in a clone: the old node's folder first, nothing of node_modules on PATH
    const path = [dirname(old!.path), ...(process.env["PATH"] ?? "").split(delimiter).filter((d) => d !== "" && !d.includes("node_modules"))].join(delimiter);
    const env = childEnv({ PATH: path });
    const refused = await runGroup(old!.path, [CLI, "--version"], { cwd: REPO_ROOT, env }, 15_000);
    expect(refused.stderr).toContain("npx node dist/cli.js");
    const version = await runGroup("npx", ["node", "dist/cli.js", "--version"], { cwd: REPO_ROOT, env }, 60_000);
    expect(version.stderr).toBe("");
    expect(version.stdout).toBe(`${VERSION}\n`);
    const check = await runGroup("npx", ["node", "dist/cli.js", "--check", "--config", "config/dojang.yaml"], { cwd: REPO_ROOT, env }, 60_000);
    expect(check.code, check.stderr).toBe(0);
  });

  it("--check and --version refuse the same way (the check comes before anything else)", async () => {
    for (const args of [["--check", "--config", "config/dojang.yaml"], ["--version"]]) {
      const r = await runOld([CLI, ...args]);
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stderr).toContain(`dojang needs Node.js ${NODE_RANGE}`);
    }
  });

  it("startDojang() from dist/index.js rejects with DOJANG_ERR_NODE_VERSION and the one line, before it listens", async () => {
    const listenPort = await freePort();
    const script = tmp.write(
      "old-node-lib.mjs",
      [
        `import { startDojang } from ${JSON.stringify(pathToFileURL(join(REPO_ROOT, "dist", "index.js")).href)};`,
        `const config = ${JSON.stringify(configYaml({ listenPort }))};`,
        "try {",
        "  const h = await startDojang({ config });",
        "  await h.close(0);",
        '  console.log(JSON.stringify({ started: true }));',
        "} catch (err) {",
        "  console.log(JSON.stringify({ name: err.name, code: err.code, message: err.message }));",
        "}",
      ].join("\n"),
    );
    const r = await runOld([script]);
    expect(r.code, r.stderr).toBe(0);
    const got = JSON.parse(r.stdout) as { name: string; code: string; message: string };
    expect(got).toMatchObject({ name: "DojangError", code: "DOJANG_ERR_NODE_VERSION" });
    expect(got.message).not.toContain("\n");
    expect(got.message).toContain(`dojang needs Node.js ${NODE_RANGE}`);
    expect(got.message).toContain("npm i -D node@24");
  });
});
