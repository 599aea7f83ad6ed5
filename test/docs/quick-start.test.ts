// The README's quick start runs as written: its first-call and echo-upstream one-liners are taken
// from the README (the blocks after <!-- quick-start:call --> and <!-- quick-start:upstream -->),
// run with `node -e` against a real dojang started from config/dojang.yaml, with only the three
// fixed ports of that file moved to free ones. Also the command line reference's usage
// (docs/reference/cli.md, the README's Command line section until issue 19): every option it lists is run through the real CLI (with --check, or as `dojang health` where nothing
// listens) and must be accepted; --help and --version.
import type { ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_CONFIG } from "../../src/config/index.js";
import { REPO_ROOT, assertDistBuilt, freePort, killSpawned, runCli, spawnDojang, spawnGroup, tempDir, waitFor, waitReady } from "../helpers/process.js";
import { DOC_PAGES, readDoc } from "../helpers/readme.js";

const readme = readDoc(DOC_PAGES.quickStart);
const tmp = tempDir();

beforeAll(() => assertDistBuilt());
// dojang and the `node -e` programs each run in a process group of their own, killed (and waited
// for) when the test ends whatever happened (helpers/process.ts spawnGroup)
afterEach(async () => {
  await killSpawned();
});
afterAll(() => tmp.remove());

/** The `node -e '...'` program in the sh block after `marker`. */
function oneLiner(marker: string): string {
  const at = readme.indexOf(`<!-- ${marker} -->`);
  expect(at, `README has <!-- ${marker} -->`).toBeGreaterThanOrEqual(0);
  const m = /```sh\nnode -e '([^'\n]+)'\n```/.exec(readme.slice(at));
  expect(m, `a node -e one-liner follows <!-- ${marker} -->`).not.toBeNull();
  return m![1]!;
}

/** Runs `node -e program` in the repository (where @grpc/grpc-js resolves), in its own process group, collecting stdout. */
function node(program: string): { child: ChildProcess; out: () => string; done: Promise<number | null> } {
  const child = spawnGroup(process.execPath, ["-e", program], { cwd: REPO_ROOT, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (out += d));
  const done = new Promise<number | null>((r) => child.once("close", (code) => r(code)));
  return { child, out: () => out, done };
}

async function runToEnd(program: string, ms = 15_000): Promise<string> {
  const p = node(program);
  const t = setTimeout(() => process.kill(-p.child.pid!, "SIGKILL"), ms); // its group
  const code = await p.done;
  clearTimeout(t);
  expect(code, p.out()).toBe(0);
  return p.out().trim();
}

describe("README quick start", () => {
  it("config/dojang.yaml is what the quick start says: 127.0.0.1:8080 → 127.0.0.1:50051, admin 127.0.0.1:9901", () => {
    expect(DEFAULT_CONFIG.listeners[0]?.address).toEqual({ host: "127.0.0.1", port: 8080 });
    expect(DEFAULT_CONFIG.clusters[0]?.endpoints).toEqual([{ host: "127.0.0.1", port: 50051 }]);
    expect(DEFAULT_CONFIG.admin?.address).toEqual({ host: "127.0.0.1", port: 9901 });
  });

  it("the first call fails with 14 decided by dojang, then succeeds through the echo upstream, as the README says", async () => {
    const [listen, up, admin] = [await freePort(), await freePort(), await freePort()];
    const move = (text: string) => text.replaceAll("127.0.0.1:8080", `127.0.0.1:${listen}`).replaceAll("127.0.0.1:50051", `127.0.0.1:${up}`).replaceAll("127.0.0.1:9901", `127.0.0.1:${admin}`);
    const config = readFileSync(new URL("../../config/dojang.yaml", import.meta.url), "utf8");
    const file = tmp.write("quick-start.yaml", move(config));
    const call = move(oneLiner("quick-start:call"));
    const upstream = move(oneLiner("quick-start:upstream"));
    expect(call).toContain(`127.0.0.1:${listen}`);
    expect(upstream).toContain(`127.0.0.1:${up}`);

    const d = spawnDojang(["--config", file]);
    await waitReady(d, `127.0.0.1:${admin}`);

    expect(await runToEnd(call)).toBe(`UNAVAILABLE (14): connection refused by 127.0.0.1:${up}`);

    const echo = node(upstream);
    await waitFor("the echo upstream", () => (echo.out().includes("echo upstream on") ? true : undefined), 15_000);
    expect(echo.out().trim()).toBe(`echo upstream on 127.0.0.1:${up}`);
    expect(await runToEnd(call)).toBe("OK: hello dojang");

    const lines = () => d.stdout().trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    const calls = await waitFor("two access log lines", () => {
      const c = lines().filter((l) => l["path"] === "/demo.Echo/Echo");
      return c.length >= 2 ? c : undefined;
    });
    expect(calls.map((c) => [c["grpc_code"], c["decided_by"]])).toEqual([[14, "upstream_unreachable"], [0, "upstream"]]);
    expect(lines().find((l) => l["msg"] === "dojang started")).toMatchObject({ clusters: [{ name: "backend", endpoints: [`127.0.0.1:${up}`] }] });
  });
});

describe("the command line reference (docs/reference/cli.md)", () => {
  const section = readDoc(DOC_PAGES.cli);
  it("is the command line page", () => {
    expect(section.startsWith("# Command line\n")).toBe(true);
  });
  const flags = (text: string) => new Set([...text.matchAll(/(?<![\w-])--[a-z][a-z-]*/g)].map((m) => m[0]));

  it("--help exits 0 and every option it prints is in the reference's usage", async () => {
    const r = await runCli(["--help"]);
    expect(r.code).toBe(0);
    const printed = flags(r.stdout + r.stderr);
    expect(printed.size).toBeGreaterThanOrEqual(4);
    for (const f of printed) expect(section, `docs/reference/cli.md lists ${f}`).toContain(f);
    if ((r.stdout + r.stderr).includes("dojang health")) expect(section).toContain("dojang health");
  });

  // one real CLI start per option, one after another: on a loaded 2-core machine each takes
  // seconds, and the default 30 s ran out (the test asserts nothing about time)
  it("every option the reference's usage lists is run through the real CLI and accepted; an unknown one exits 2", { timeout: 120_000 }, async () => {
    const usage = section.slice(section.indexOf("```"), section.indexOf("```", section.indexOf("```") + 3));
    const lines = usage.split("\n");
    // a subcommand's lines: its usage line (`dojang health ...`) and its description (`  health  ...`)
    const of = (sub: string) => (l: string) => new RegExp(`dojang ${sub}\\b|^\\s+${sub}\\s`).test(l);
    // the views' line (`dojang stat | top | tap [...]`) and their descriptions
    const isView = (l: string): boolean => of("stat")(l) || of("top")(l) || of("tap")(l);
    const main = flags(lines.filter((l) => !of("health")(l) && !of("reload")(l) && !of("upgrade")(l) && !isView(l)).join("\n"));
    const health = flags(lines.filter(of("health")).join("\n"));
    const reload = flags(lines.filter(of("reload")).join("\n"));
    const upgrade = flags(lines.filter(of("upgrade")).join("\n"));
    const views = flags(lines.filter(isView).join("\n"));
    const listed = new Set([...main, ...health, ...reload, ...upgrade, ...views]);
    expect([...listed]).toEqual(expect.arrayContaining(["--config", "--check", "--log-level", "--help", "--version", "--timeout"]));
    // a value for each placeholder the usage names after an option
    const nobody = `127.0.0.1:${await freePort()}`;
    const SAMPLE: Record<string, string> = { DIR: "dist", BOOTSTRAP: "config/xds/bootstrap.yaml", FILE: "config/dojang.yaml", LEVEL: "warn", L: "warn", DURATION: "1s", PATH: `${tmp.dir}/dojang.pid`, HOST: nobody };
    const valueOf = (f: string): string[] => {
      const m = new RegExp(`${f}[ =]([A-Z]+)\\b`).exec(usage);
      if (m === null) return [];
      expect(SAMPLE[m[1]!], `a sample value for ${f} ${m[1]}`).toBeDefined();
      return [SAMPLE[m[1]!]!];
    };
    // `dojang health` asks an admin address where nothing listens: "not ready" (1), not a usage error
    const quiet = tmp.write("health.yaml", readFileSync(new URL("../../config/dojang.yaml", import.meta.url), "utf8").replace("127.0.0.1:9901", `127.0.0.1:${await freePort()}`));
    const ran: string[] = [];
    for (const f of listed) {
      let args: string[];
      let code: number;
      if (f === "--help" || f === "--version") [args, code] = [[f], 0];
      else if (main.has(f)) [args, code] = [[...new Set(["--check", "--config", "config/dojang.yaml", f])].concat(valueOf(f).filter(() => f !== "--config")), 0];
      else if (health.has(f)) [args, code] = [["health", "--config", quiet, f, ...valueOf(f)], 1];
      // `dojang reload` with a pid file nobody holds: "no running dojang" (3), not a usage error
      else if (reload.has(f)) [args, code] = [["reload", "--config", quiet, "--pid-file", `${tmp.dir}/nobody.pid`, f, ...valueOf(f)], 3];
      // `dojang upgrade` the same: its options are checked first (a usage error is 2), then 3
      else if (upgrade.has(f)) [args, code] = [["upgrade", "--pid-file", `${tmp.dir}/nobody.pid`, f, ...valueOf(f)], 3];
      // `dojang stat` where nothing listens (or no dojang holds the pid file): no answer (1), not a usage error
      else if (views.has(f)) [args, code] = [["stat", f, ...(f === "--config" ? [quiet] : f === "--pid-file" ? [`${tmp.dir}/nobody.pid`] : valueOf(f))], 1];
      else throw new Error(`${f} is in no usage line`);
      const r = await runCli(args);
      expect(r.code, `dojang ${args.join(" ")}\n${r.stdout}${r.stderr}`).toBe(code);
      if (code !== 0 || f !== args[0]) expect(r.stderr, `dojang ${args.join(" ")}`).not.toMatch(/unknown option|usage:/i);
      ran.push(args.join(" "));
    }
    expect(ran.length).toBe(listed.size);
    if (usage.includes("-h,")) expect((await runCli(["-h"])).code).toBe(0);
    const unknown = await runCli(["--no-such-option"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown option/i);
  });

  it("--version prints package.json's version", async () => {
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
    const r = await runCli(["--version"]);
    expect(r.code).toBe(0);
    expect((r.stdout + r.stderr).trim()).toBe(pkg.version);
  });
});
