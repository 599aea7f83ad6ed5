// `npm ci && npm start` on a fresh clone: dist/ is not in git, so `npm start`'s prestart
// (scripts/ensure-built.mjs) builds it when it is missing or older than src/, and only then. Run
// for real in a copy of the tracked files with node_modules linked (npm ci's result) and no dist/.
import { statSync, utimesSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freshClone, npm, type Clone } from "../helpers/clone.js";
import { childEnv, configYaml, freePort, httpGet, spawnGroup, tempDir, waitFor } from "../helpers/process.js";

let clone: Clone;
const tmp = tempDir();

beforeAll(() => {
  clone = freshClone();
});
afterAll(() => {
  clone?.remove();
  tmp.remove();
});

const BUILD_MS = 180_000;

describe("npm start on a fresh clone", () => {
  it("builds dist/ first when it is missing, then starts (npm start -- --check)", { timeout: BUILD_MS + 10_000 }, async () => {
    const r = await npm(["start", "--", "--check"], clone.dir, BUILD_MS);
    expect(r.stderr).toContain("dojang: building dist/ (dist/cli.js is missing): npm run build");
    expect(r.stdout).toContain("dojang: config config/dojang.yaml is valid");
    expect(r.code).toBe(0);
  });

  it("does not build again when dist/ is current (and says so)", { timeout: 60_000 }, async () => {
    const before = statSync(join(clone.dir, "dist", "dojang.mjs")).mtimeMs;
    const r = await npm(["start", "--", "--check"], clone.dir, 50_000);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain("dojang: dist/ is up to date");
    expect(r.stderr).not.toContain("building");
    expect(statSync(join(clone.dir, "dist", "dojang.mjs")).mtimeMs).toBe(before);
  });

  it("builds again when a source is newer than dist/", { timeout: BUILD_MS + 10_000 }, async () => {
    // just after the newest output: newer than dist/, yet in the past, so the rebuild makes it current
    const newest = Math.max(...["cli.js", "dojang.mjs", "index.js"].map((f) => statSync(join(clone.dir, "dist", f)).mtimeMs));
    const later = new Date(Math.min(newest + 1, Date.now()));
    utimesSync(join(clone.dir, "src", "errors.ts"), later, later);
    const r = await npm(["start", "--", "--check"], clone.dir, BUILD_MS);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain("dojang: building dist/ (src/errors.ts is newer than dist/)");
  });

  it("serves: npm start with a config of free ports answers /ready, and stops on SIGTERM", { timeout: 60_000 }, async () => {
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const file = tmp.write("fresh.yaml", configYaml({ listenPort, adminPort }));
    // npm and the dojang under it in their own process group, so the test can end both; whatever
    // happens below (a failed wait included), the group is SIGKILLed when the test ends
    const child = spawnGroup("npm", ["start", "--", "--config", file], { cwd: clone.dir, env: childEnv(), stdio: ["ignore", "pipe", "pipe"] });
    let err = "";
    let out = "";
    child.stderr!.setEncoding("utf8").on("data", (d: string) => (err += d));
    child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
    const closed = new Promise<string>((r) => child.once("close", (code, signal) => r(signal ?? String(code))));
    try {
      await waitFor("/ready 200", async () => ((await httpGet(`127.0.0.1:${adminPort}`, "/ready", 500)).status === 200 ? true : undefined), 30_000, 100);
      expect(err).toContain("dojang: dist/ is up to date");
    } finally {
      if (child.pid !== undefined) process.kill(-child.pid, "SIGTERM");
    }
    const end = await Promise.race([closed, new Promise<string>((r) => setTimeout(() => r("timeout"), 15_000))]);
    if (end === "timeout" && child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
    // npm re-raises the signal it got; dojang under it drained and stopped
    expect(["0", "SIGTERM"]).toContain(end);
    expect(out).toContain('"msg":"signal received, draining"');
  });
});
