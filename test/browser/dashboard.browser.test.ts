// The admin dashboard, GET /ui (issue "dojang 0.6: what an operator sees", item 4), in headless
// Chromium (test/helpers/browser.ts): dojang serves the page itself; it renders, it updates while
// calls run (the figures move, the charts grow), a failing method's row turns red, the fault rules,
// the endpoints' health and the decided_by breakdown show; with admin.token the page asks for the
// token and then shows the same. A screenshot of each state goes to .test-output/dashboard/.
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDojang, type DojangHandle } from "../../src/index.js";
import { launchChromium } from "../helpers/browser.js";
import { artifactDir, updateDocsImage } from "../helpers/artifacts.js";
import { startBackend, type Backend } from "../helpers/backends.js";
import { echoClient, rawCall, unary, type EchoClient } from "../helpers/peers.js";

let browser: Browser;
let backend: Backend;
const shots = artifactDir("dashboard");
const TOKEN = "dashboard-token-0123456789";

beforeAll(async () => {
  browser = (await launchChromium()).browser;
  backend = await startBackend("backend");
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await backend?.close();
});

async function proxy(admin: Record<string, unknown> = {}): Promise<DojangHandle> {
  return startDojang({
    logLevel: "silent",
    config: {
      admin: { address: "127.0.0.1:0", ...admin },
      listeners: [{ name: "main", address: "127.0.0.1:0", routes: [{ match: { service: "test.Echo" }, cluster: "backend" }, { match: { prefix: "/shop.Cart/" }, cluster: "backend" }] }],
      clusters: [{ name: "backend", endpoints: [backend.address] }],
    },
  });
}

/** Calls every 20 ms until stop(): healthy Unary calls, and (with `failing`) calls to a method the upstream lacks and to one a fault rule aborts. */
function traffic(px: DojangHandle, failing: { on: boolean }): { stop(): Promise<void> } {
  const c: EchoClient = echoClient(px.address);
  let run = true;
  const loop = (async () => {
    while (run) {
      await unary(c, Buffer.from("x"));
      if (failing.on) {
        await rawCall(px.address, { ":path": "/shop.Cart/Put" }, Buffer.alloc(5));
        await rawCall(px.address, { ":path": "/shop.Cart/Get" }, Buffer.alloc(5));
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  return {
    stop: async () => {
      run = false;
      await loop;
      c.close();
    },
  };
}

function watchErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text());
  });
  return errors;
}

/**
 * The page's window, as functions Playwright runs in the page see it (functions, not strings: the
 * page's Content-Security-Policy forbids evaluating strings), typed without the DOM library. The
 * functions are sent as their text, so they name nothing of this module but types.
 */
interface El {
  getAttribute(n: string): string | null;
  readonly textContent: string | null;
}
interface Win {
  readonly document: { querySelector(s: string): El | null };
  getComputedStyle(e: El | null): { readonly color: string };
}

const cellText = (page: Page, table: string, name: string, col: number): Promise<string> => page.locator(`#${table} tr[data-name="${name}"] td`).nth(col).innerText();

describe("GET /ui: the dashboard", () => {
  it("renders, updates while calls run, and shows a failing method in red, with the fault rules, endpoints and decided_by", { timeout: 90_000 }, async () => {
    const px = await proxy();
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const errors = watchErrors(page);
    const failing = { on: false };
    const t = traffic(px, failing);
    try {
      // the page's own files, with a policy that allows nothing else
      const res = await page.goto(`http://${px.adminAddress}/ui?every=0.5`);
      expect(res?.status()).toBe(200);
      expect(res?.headers()["content-security-policy"]).toContain("default-src 'none'");
      await page.locator('#methods tr[data-name="test.Echo/Unary"]').waitFor({ timeout: 15_000 });
      await page.screenshot({ path: join(shots, "1-calls.png"), fullPage: true });
      expect(await page.locator('#methods tr[data-name="test.Echo/Unary"]').getAttribute("class")).toBe("ok");
      expect(await cellText(page, "methods", "test.Echo/Unary", 3)).toBe("100 %");

      // it updates: the calls/s figure and the charts' history grow between polls
      const points = async (): Promise<number> => ((await page.locator('#methods tr[data-name="test.Echo/Unary"] svg polyline').first().getAttribute("points")) ?? "").split(" ").length;
      const before = await points();
      await page.waitForFunction((n) => ((globalThis as unknown as Win).document.querySelector('#methods tr[data-name="test.Echo/Unary"] svg polyline')?.getAttribute("points") ?? "").split(" ").length >= n, before + 3, { timeout: 15_000 });
      expect(Number(await cellText(page, "methods", "test.Echo/Unary", 1))).toBeGreaterThan(0);

      // a method that fails every call turns red; the breakdown names who decided (the upstream
      // for the method it lacks, the fault for the one a rule aborts)
      await px.faults.add({ id: "cart-get-down", match: { service: "shop.Cart", method: "Get" }, action: { kind: "abort", code: "UNAVAILABLE", message: "injected" } });
      failing.on = true;
      await page.locator('#methods tr[data-name="shop.Cart/Put"].bad').waitFor({ timeout: 15_000 });
      // (read at once: the page redraws its tables at each poll)
      const red = await page.evaluate(() => {
        const w = globalThis as unknown as Win;
        return w.getComputedStyle(w.document.querySelector('#methods tr[data-name="shop.Cart/Put"] td')).color;
      });
      expect(red).toBe("rgb(192, 57, 43)");
      expect(await cellText(page, "methods", "shop.Cart/Put", 3)).toBe("0.00 %");
      await page.locator('#decided [data-decided-by="upstream"]').first().waitFor();
      await page.locator('#decided [data-decided-by="fault"]').first().waitFor();
      expect(await page.locator('#methods tr[data-name="shop.Cart/Get"]').getAttribute("class")).toBe("bad");
      // the fault rule, the endpoint's health, the route rows
      await page.locator('#faults tr[data-rule="cart-get-down"]').waitFor();
      expect(await page.locator('#faults tr[data-rule="cart-get-down"] td').nth(1).innerText()).toBe("abort");
      const ep = `backend/${backend.address}`;
      await page.locator(`#endpoints tr[data-name="${ep}"]`).waitFor();
      expect(await page.locator(`#endpoints tr[data-name="${ep}"] td`).nth(10).innerText()).toBe("healthy");
      expect(await page.locator("#routes tr[data-name]").count()).toBeGreaterThanOrEqual(2);
      expect(await page.locator("#xds").innerText()).toContain("no xDS");
      await page.screenshot({ path: join(shots, "2-failing-method.png"), fullPage: true });
      updateDocsImage(join(shots, "2-failing-method.png"), "dashboard.png");

      // the window buttons change what is read
      await page.locator('nav button[data-window="10m"]').click();
      await page.waitForFunction(() => (globalThis as unknown as Win).document.querySelector("#total small")?.textContent?.includes("10m") === true, undefined, { timeout: 10_000 });
      expect(errors).toEqual([]);
    } finally {
      await t.stop();
      await page.close();
      await px.close(0);
    }
  });

  it("with admin.token, asks for the token, then shows the calls (the token is sent, never put in the address)", { timeout: 60_000 }, async () => {
    const px = await proxy({ token: TOKEN });
    const page = await browser.newPage({ viewport: { width: 1280, height: 700 } });
    const errors = watchErrors(page);
    const seen: string[] = [];
    page.on("request", (r) => seen.push(r.url()));
    try {
      await page.goto(`http://${px.adminAddress}/ui?every=0.5`);
      await page.locator("#login").waitFor({ state: "visible", timeout: 15_000 });
      expect(await page.locator("#main").isHidden()).toBe(true);
      await page.screenshot({ path: join(shots, "3-token.png"), fullPage: true });
      await page.fill("#token", TOKEN);
      await page.click("#login button");
      await page.locator("#main").waitFor({ state: "visible", timeout: 15_000 });
      expect(await page.locator("#methods").innerText()).toContain("no calls in the last 1m");
      expect(seen.some((u) => u.includes(TOKEN))).toBe(false);
      // (the 401s before the token was given are the browser's own console lines)
      expect(errors.filter((e) => !e.includes("401"))).toEqual([]);
    } finally {
      await page.close();
      await px.close(0);
    }
  });
});
