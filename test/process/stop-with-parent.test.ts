// --stop-with-parent from the first instruction (issue "a fleet operator's first hour", item 6): a
// parent that exits while dojang is still starting (50-300 ms after it spawned dojang: before
// dojang listens, often before node has run dojang's first line on a loaded machine) must not
// leave dojang running, adopted by init. Real processes: a node parent that spawns
// `node dist/cli.js --stop-with-parent` and exits after a delay, in a process group of its own
// (dojang inherits it), so nothing can outlive the test.
import { execSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CLI, REPO_ROOT, assertDistBuilt, canConnect, childEnv, configYaml, freePort, httpGet, killSpawned, sleep, spawnGroup, tempDir, waitFor } from "../helpers/process.js";

const tmp = tempDir();
beforeAll(() => assertDistBuilt());
afterEach(async () => {
  await killSpawned();
});
afterAll(() => tmp.remove());

/** Whether pid exists and is not a zombie. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0] !== "Z";
  } catch {
    return false;
  }
}

/** Live (not zombie) processes of process group `pgid`, from /proc. */
function groupMembers(pgid: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const fields = readFileSync(`/proc/${name}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
      if (fields[0] !== "Z" && Number(fields[2]) === pgid) out.push(Number(name));
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

// The parent: spawns dojang (its output to a file, so nothing of dojang's depends on the parent's
// pipes), prints dojang's pid, and exits `delay` ms after the spawn (or stays, for delay -1).
const PARENT = `
import { spawn } from "node:child_process";
import { openSync } from "node:fs";
const [cli, config, log, delay] = process.argv.slice(2);
const fd = openSync(log, "a");
const child = spawn(process.execPath, [cli, "--config", config, "--stop-with-parent"], { stdio: ["ignore", fd, fd] });
process.stdout.write(child.pid + "\\n");
if (Number(delay) >= 0) setTimeout(() => process.exit(0), Number(delay));
else setInterval(() => {}, 1000);
`;

/** Starts the parent; resolves with dojang's pid, the parent, the group and the ports once the parent said the pid. */
async function startParent(delay: number) {
  const [listenPort, adminPort] = [await freePort(), await freePort()];
  const config = tmp.write(`swp-${listenPort}.yaml`, configYaml({ listenPort, adminPort }));
  const log = join(tmp.dir, `swp-${listenPort}.log`);
  const script = tmp.write("parent.mjs", PARENT);
  const parent = spawnGroup(process.execPath, [script, CLI, config, log, String(delay)], { cwd: REPO_ROOT, env: childEnv(), stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  parent.stdout!.setEncoding("utf8").on("data", (c: string) => (out += c));
  const pid = await waitFor("the parent to say dojang's pid", () => (/^\d+\n/.test(out) ? Number(out.trim()) : undefined), 20_000);
  return { parent, pid, pgid: parent.pid!, listenPort, adminPort, log: () => (existsSync(log) ? readFileSync(log, "utf8") : "") };
}

describe.runIf(process.platform === "linux")("--stop-with-parent", () => {
  it.each([50, 120, 200, 300])("a parent that exits %d ms after spawning dojang does not leave it running: dojang exits, nothing of the group is left, nothing listens", { timeout: 60_000 }, async (delay) => {
    const s = await startParent(delay);
    await waitFor("the parent to exit", () => (s.parent.exitCode !== null ? true : undefined), 20_000);
    await waitFor(`dojang (pid ${s.pid}) to exit after its parent`, () => (alive(s.pid) ? undefined : true), 30_000, 50).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}\ndojang's output:\n${s.log()}`);
    });
    expect(s.log()).toContain("the process that started dojang exited (--stop-with-parent)");
    expect(groupMembers(s.pgid)).toEqual([]);
    for (const port of [s.listenPort, s.adminPort]) {
      if (await canConnect(port)) throw new Error(`port ${port} answers:\n${execSync("ss -ltnp").toString()}\n${s.log()}`);
    }
  });

  it("while the parent lives, dojang serves (and goes when the parent does)", { timeout: 60_000 }, async () => {
    const s = await startParent(-1);
    const admin = `127.0.0.1:${s.adminPort}`;
    await waitFor("dojang ready", async () => ((await httpGet(admin, "/ready").catch(() => undefined))?.status === 200 ? true : undefined), 30_000);
    await sleep(2500); // more than the parent check's period: still serving
    expect((await httpGet(admin, "/ready")).status).toBe(200);
    expect(alive(s.pid)).toBe(true);
    s.parent.kill("SIGKILL");
    await waitFor("dojang to exit after its parent", () => (alive(s.pid) ? undefined : true), 30_000, 50);
    expect(groupMembers(s.pgid)).toEqual([]);
  });
});
