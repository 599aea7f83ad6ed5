// The edge gateway guide's browser example (docs/guides/edge-gateway.md, gRPC-Web and CORS, "A
// browser page, without a bundler"; in the README until issue 19) runs as
// written (issue 18, item 11): docs/examples/grpc-web-browser/index.html served by the guide's
// one-liner (after <!-- grpc-web:page-server -->), dojang started from the example's dojang.yaml,
// the quick start's echo upstream one-liner, with only their fixed ports moved to free ones; the
// page loaded in headless Chromium (test/helpers/browser.ts, as grpc-web.browser does) on its
// own origin, so the call is cross-origin and CORS must let it through. With the upstream not yet
// running the page shows dojang's 14 from the trailer frame; with it, the echo.
import type { ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../helpers/browser.js";
import { REPO_ROOT, assertDistBuilt, spawnGroup, freePort, killSpawned, logLines, spawnDojang, tempDir, waitFor } from "../helpers/process.js";
import { DOC_PAGES, blockAfterMarker, readDoc } from "../helpers/readme.js";

const EXAMPLE = join(REPO_ROOT, "docs", "examples", "grpc-web-browser");
const readme = readDoc(DOC_PAGES.edgeGateway);
const quickStart = readDoc(DOC_PAGES.quickStart);

/** The program of the `node -e '...'` one-liner in the sh block after `<!-- marker -->` (in the guide, or the README's quick start). */
function oneLiner(marker: string, page = readme): string {
  const block = blockAfterMarker(page, marker, "sh");
  const m = /^node -e '([^'\n]+)'$/.exec(block);
  if (m === null) throw new Error(`the block after <!-- ${marker} --> is not one node -e line: ${block}`);
  return m[1]!;
}

const tmp = tempDir();
const children = new Set<ChildProcess>();

/** `node -e program` in the repository (as the docs run it), its output collected. */
function node(program: string): { out: () => string } {
  const child = spawnGroup(process.execPath, ["-e", program], { cwd: REPO_ROOT, stdio: ["ignore", "pipe", "pipe"] });
  children.add(child);
  let out = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (out += d));
  return { out: () => out };
}

describe("the edge gateway guide's gRPC-Web browser example (no bundler)", () => {
  let browser: Browser | undefined;

  beforeAll(async () => {
    assertDistBuilt();
    browser = (await launchChromium()).browser;
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
    await killSpawned();
    tmp.remove();
  });

  it("shows dojang's UNAVAILABLE while the upstream is down, then the echo, called cross-origin from the page", { timeout: 60_000 }, async () => {
    const [h2c, web, up, pagePort] = [await freePort(), await freePort(), await freePort(), await freePort()];
    const move = (text: string) =>
      text
        .replaceAll("127.0.0.1:8080", `127.0.0.1:${h2c}`)
        .replaceAll("127.0.0.1:8081", `127.0.0.1:${web}`)
        .replaceAll("127.0.0.1:50051", `127.0.0.1:${up}`)
        .replaceAll("127.0.0.1:8000", `127.0.0.1:${pagePort}`)
        .replaceAll("listen(8000,", `listen(${pagePort},`);
    const config = readFileSync(join(EXAMPLE, "dojang.yaml"), "utf8");
    expect(move(config)).toContain(`allowOrigins: ["http://127.0.0.1:${pagePort}"]`);
    const pageServer = move(oneLiner("grpc-web:page-server"));
    expect(pageServer).toContain(`listen(${pagePort},`);

    const page = node(pageServer);
    await waitFor("the page server", () => (page.out().includes("page on") ? true : undefined), 15_000);
    expect(page.out().trim()).toBe(`page on http://127.0.0.1:${pagePort}`);

    const d = spawnDojang(["--config", tmp.write("grpc-web-browser.yaml", move(config))]);
    await waitFor("dojang started", () => {
      if (d.hasExited) throw new Error(`dojang exited:\n${d.stdout()}\n${d.stderr()}`);
      return d.stdout().includes("dojang started") ? true : undefined;
    }, 15_000);

    const ctx = await browser!.newContext();
    try {
      const tab = await ctx.newPage();
      tab.setDefaultTimeout(15_000);
      const result = async (): Promise<string> => {
        await tab.goto(`http://127.0.0.1:${pagePort}/?dojang=http://127.0.0.1:${web}`);
        await tab.waitForSelector("#result:not(:text-is('…'))");
        return (await tab.textContent("#result")) ?? "";
      };

      expect(await result()).toBe(`UNAVAILABLE (14): connection refused by 127.0.0.1:${up}`);

      const echo = node(move(oneLiner("quick-start:upstream", quickStart)));
      await waitFor("the echo upstream", () => (echo.out().includes("echo upstream on") ? true : undefined), 15_000);
      expect(await result()).toBe("OK: hello from the browser");
    } finally {
      await ctx.close();
    }

    const calls = await waitFor("two access log lines", () => {
      const c = logLines(d).filter((l) => l["path"] === "/demo.Echo/Echo");
      return c.length >= 2 ? c : undefined;
    });
    expect(calls.map((c) => [c["protocol"], c["grpc_code"], c["decided_by"]])).toEqual([
      ["grpc-web", 14, "upstream_unreachable"],
      ["grpc-web", 0, "upstream"],
    ]);
  });
});
