// `dojang top` in a real terminal (issue "dojang 0.6: what an operator sees", item 2): tmux runs it
// in a pane of its own server (a private socket, killed after the test), keys are sent as a person
// types them, and the pane is read back (capture-pane; -e keeps the colours). The picture of the
// screen goes to the test's output (.test-output/top-terminal/top.png, through headless Chromium).
import { spawnSync } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../helpers/browser.js";
import { artifactDir, terminalHtml, updateDocsImage } from "../helpers/artifacts.js";
import { systemBinary } from "../helpers/engines.js";
import { rawCall, unary } from "../helpers/peers.js";
import { CLI, configYaml, freePort, httpGet, ownConnectionClient, processTestKit, spawnDojang, waitFor, waitReady } from "../helpers/process.js";

const kit = processTestKit();
const SOCKET = `dojang-top-${process.pid}`;
let tmux: string;

function tm(...args: string[]): string {
  const r = spawnSync(tmux, ["-L", SOCKET, "-f", "/dev/null", ...args], { encoding: "utf8", timeout: 10_000 });
  if (r.status !== 0) throw new Error(`tmux ${args.join(" ")}: ${r.stderr}`);
  return r.stdout;
}

/** The pane's screen, as text (or with its SGR escapes). */
function pane(name: string, escapes = false): string {
  return tm("capture-pane", "-p", ...(escapes ? ["-e"] : []), "-t", name);
}

async function paneShows(name: string, what: string | RegExp, ms = 20_000): Promise<string> {
  return waitFor(`the pane to show ${String(what)}`, () => {
    const s = pane(name);
    return (typeof what === "string" ? s.includes(what) : what.test(s)) ? s : undefined;
  }, ms, 100);
}

/**
 * The pane once it shows `what` and a table under its header: after a key that changes the
 * window or the rows, top redraws its header at once and the table when the new /stats answer is
 * in, so a screen caught in between has the new header and no table yet.
 */
async function tableShows(name: string, what: string): Promise<string> {
  return paneShows(name, new RegExp(`${what}[^]*^(METHOD|ROUTE|ENDPOINT)\\s`, "m"));
}

/** The table rows' first cells, in the order on screen. */
function rowNames(screen: string): string[] {
  const lines = screen.split("\n");
  const head = lines.findIndex((l) => /^(METHOD|ROUTE|ENDPOINT)\s/.test(l));
  const out: string[] = [];
  for (const l of lines.slice(head + 1)) {
    if (l.trim() === "" || l.startsWith("(")) break;
    out.push(l.split(/\s{2,}/)[0]!);
  }
  return out;
}

beforeAll(() => {
  tmux = systemBinary("tmux");
});
afterAll(() => {
  // the server's socket file too (tmux leaves it behind when its server is killed)
  const path = spawnSync(tmux, ["-L", SOCKET, "display-message", "-p", "#{socket_path}"], { encoding: "utf8", timeout: 10_000 }).stdout.trim();
  spawnSync(tmux, ["-L", SOCKET, "kill-server"], { timeout: 10_000 });
  if (path.endsWith(SOCKET)) rmSync(path, { force: true });
});

async function dojangWithCalls(): Promise<string> {
  const b = await kit.backend("b");
  const [listenPort, adminPort] = [await freePort(), await freePort()];
  const file = kit.dir().write("dojang.yaml", configYaml({ listenPort, adminPort, upstream: b.address, extraTop: "accessLog: false" }));
  const p = spawnDojang(["--config", file]);
  const admin = `127.0.0.1:${adminPort}`;
  await waitReady(p, admin);
  const c = ownConnectionClient(`127.0.0.1:${listenPort}`, kit.clients);
  for (let i = 0; i < 5; i++) expect((await unary(c, Buffer.from("ok"))).err).toBeNull();
  // a method the upstream does not have: its own 12, every time (a failing method)
  for (let i = 0; i < 2; i++) await rawCall(`127.0.0.1:${listenPort}`, { ":path": "/shop.Cart/Put" }, Buffer.alloc(5));
  await waitFor("the calls counted", async () => ((await httpGet(admin, "/stats")).body.includes('"calls": 7') ? true : undefined), 5000);
  return admin;
}

function startTop(name: string, admin: string): void {
  // the shell prints the exit code and keeps the pane open, so the test can read both
  const cmd = `'${process.execPath}' '${CLI}' top --admin ${admin} --interval 300ms --sort calls; echo "EXITED $?"; sleep 600`;
  tm("new-session", "-d", "-s", name, "-x", "110", "-y", "24", cmd);
}

describe("dojang top in a terminal (tmux)", () => {
  it("shows the sorted table, red for a failing method, and follows the keys: sort, window, rows by; q leaves and gives the screen back", { timeout: 120_000 }, async () => {
    const admin = await dojangWithCalls();
    startTop("keys", admin);
    let s = await paneShows("keys", "shop.Cart/Put");
    expect(s.split("\n")[0]).toMatch(new RegExp(`^dojang top · http://${admin.replaceAll(".", "\\.")} · window 1m · by method · sort calls · `));
    expect(rowNames(s)).toEqual(["test.Echo/Unary", "shop.Cart/Put"]);
    expect(s).toMatch(/all calls: [\d.]+\/s {2}success 71\.43%/);
    // the failing method's line is red (SGR 31), the healthy one is not
    const colours = pane("keys", true).split("\n");
    expect(colours.find((l) => l.includes("shop.Cart/Put"))).toMatch(/^\x1b\[31m/);
    expect(colours.find((l) => l.includes("test.Echo/Unary"))).not.toMatch(/\x1b\[31m/);

    // a picture of the screen, for a person (and for the operate guide)
    const dir = artifactDir("top-terminal");
    const html = join(dir, "top.html");
    writeFileSync(html, terminalHtml(pane("keys", true), "dojang top"));
    const { browser } = await launchChromium();
    try {
      const page = await browser.newPage({ viewport: { width: 900, height: 420 } });
      await page.goto(`file://${html}`);
      await page.screenshot({ path: join(dir, "top.png"), fullPage: true });
    } finally {
      await browser.close();
    }
    updateDocsImage(join(dir, "top.png"), "dojang-top.png");

    tm("send-keys", "-t", "keys", "s");
    s = await tableShows("keys", "sort success");
    expect(rowNames(s)).toEqual(["shop.Cart/Put", "test.Echo/Unary"]);
    tm("send-keys", "-t", "keys", "c");
    s = await tableShows("keys", "sort calls");
    expect(rowNames(s)).toEqual(["test.Echo/Unary", "shop.Cart/Put"]);
    tm("send-keys", "-t", "keys", "w");
    s = await tableShows("keys", "window 10m");
    expect(rowNames(s)).toEqual(["test.Echo/Unary", "shop.Cart/Put"]);
    tm("send-keys", "-t", "keys", "b");
    s = await tableShows("keys", "by route");
    expect(s).toContain("ROUTE");
    expect(rowNames(s)).toEqual(["main prefix:/"]);
    tm("send-keys", "-t", "keys", "q");
    s = await paneShows("keys", "EXITED 0");
    // the alternate screen is gone: the main screen has only what the shell printed
    expect(s).not.toContain("dojang top ·");
    expect(s.trim()).toBe("EXITED 0");
  });

  it("Ctrl-C leaves cleanly too (exit 0, the terminal given back)", { timeout: 60_000 }, async () => {
    const admin = await dojangWithCalls();
    startTop("ctrlc", admin);
    await paneShows("ctrlc", "test.Echo/Unary");
    tm("send-keys", "-t", "ctrlc", "C-c");
    const s = await paneShows("ctrlc", "EXITED 0");
    expect(s.trim()).toBe("EXITED 0");
    // the alternate screen is off again: the terminal is as it was before top
    expect(tm("display-message", "-p", "-t", "ctrlc", "#{alternate_on}").trim()).toBe("0");
  });
});
