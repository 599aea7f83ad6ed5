// Issue 19: `npm ci && npm test` passes on a fresh machine with nothing installed by hand. The
// browser tests take Debian's chromium where the machine has it, else the Chromium that the pinned
// devDependency @sparticuz/chromium ships inside its npm tarball (test/helpers/browser.ts). This
// file starts the npm-shipped one whatever the machine has, so every run proves the fresh-machine
// path even where the other browser tests take Debian's: it unpacks, starts, and a page's script
// fetches from a server on loopback.
import { existsSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { BROWSER_ENV, SYSTEM_CHROMIUM, bundledPackage, chosenBrowser, launchChromium, type LaunchedBrowser } from "../helpers/browser.js";

describe("the headless Chromium the browser tests drive", () => {
  let launched: LaunchedBrowser | undefined;
  let server: http.Server | undefined;

  afterAll(async () => {
    await launched?.browser.close();
    if (server !== undefined) await new Promise<void>((r) => server!.close(() => r()));
  });

  it(`${BROWSER_ENV} picks it: system, bundled, or (unset, auto) Debian's only where it is installed`, () => {
    expect(chosenBrowser("system")).toBe("system");
    expect(chosenBrowser("bundled")).toBe("bundled");
    const auto = existsSync(SYSTEM_CHROMIUM) ? "system" : "bundled";
    expect(chosenBrowser(undefined)).toBe(auto);
    expect(chosenBrowser("")).toBe(auto);
    expect(chosenBrowser("auto")).toBe(auto);
    expect(() => chosenBrowser("firefox")).toThrow(`${BROWSER_ENV}="firefox": expected "auto" (or unset), "system"`);
  });

  it("the one @sparticuz/chromium ships starts here and runs a page that fetches from loopback", { timeout: 120_000 }, async () => {
    server = http.createServer((req, res) => {
      if (req.url === "/data") {
        res.writeHead(200, { "content-type": "text/plain" });
        res.end("from the loopback server");
      } else {
        res.writeHead(200, { "content-type": "text/html" });
        res.end('<!doctype html><html><head><meta charset="utf-8"></head><body>page</body></html>');
      }
    });
    await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    launched = await launchChromium("bundled");
    expect(launched.source).toBe("bundled");
    expect(launched.executablePath).not.toBe(SYSTEM_CHROMIUM);
    // @sparticuz/chromium's major version is its Chromium's: the binary started is the package's.
    expect(launched.browser.version().split(".")[0]).toBe(bundledPackage().version.split(".")[0]);

    const ctx = await launched.browser.newContext();
    try {
      const page = await ctx.newPage();
      page.setDefaultTimeout(10_000);
      await page.goto(`${origin}/`);
      expect(await page.evaluate(async () => (await fetch("/data")).text())).toBe("from the loopback server");
    } finally {
      await ctx.close();
    }
  });
});
