// Contract (issue 21 part 3): Connect "tested with connect-es in headless Chromium, as the gRPC-Web
// test does": the same browser (test/helpers/browser.ts), a page served on 127.0.0.1 whose script
// (connect-page.ts, bundled here with esbuild) calls a @grpc/grpc-js upstream through a dojang
// listener with `connect: true` using connect-web's Connect transport: unary in binary and JSON,
// GET for the idempotent method, a server stream, an error with details, a timeout, and a
// CORS-refused origin. Never skipped: when no browser starts, it fails, saying why.
import { build } from "esbuild";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DojangHandle } from "../../src/index.js";
import { startGrpcServer, startProxy, type GrpcServer } from "../helpers/peers.js";
import { launchChromium } from "../helpers/browser.js";
import { waitFor } from "../helpers/fixtures.js";
import { NON_ASCII, echoImpl } from "../helpers/connect-echo.js";

interface PageServer {
  readonly origin: string;
  close(): Promise<void>;
}

async function servePage(script: string): Promise<PageServer> {
  const server = http.createServer((req, res) => {
    if (req.url === "/client.js") {
      res.writeHead(200, { "content-type": "text/javascript" });
      res.end(script);
    } else {
      res.writeHead(200, { "content-type": "text/html" });
      res.end('<!doctype html><html><head><meta charset="utf-8"><script src="/client.js"></script></head><body>dojang Connect</body></html>');
    }
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return { origin: `http://127.0.0.1:${port}`, close: () => new Promise<void>((r) => server.close(() => r())) };
}

type Result = { ok: true; value?: string; values?: string[] } | { ok: false; code: number; message: string; details?: number };

describe("Connect from a real browser (headless Chromium, connect-web's Connect transport)", () => {
  let browser: Browser | undefined;
  let upstream: GrpcServer | undefined;
  let px: DojangHandle | undefined;
  let page: PageServer | undefined;
  let refusedPage: PageServer | undefined;
  let dojangUrl = "";

  beforeAll(async () => {
    const bundle = await build({
      entryPoints: [fileURLToPath(new URL("./connect-page.ts", import.meta.url))],
      bundle: true,
      format: "iife",
      platform: "browser",
      target: "es2022",
      write: false,
      logLevel: "silent",
    });
    const script = bundle.outputFiles[0]!.text;
    page = await servePage(script);
    refusedPage = await servePage(script);
    upstream = await startGrpcServer(echoImpl);
    px = await startProxy(upstream.address, {
      listener: { connect: true, http1Address: "127.0.0.1:0", cors: { allowOrigins: [page.origin] } },
      route: { match: { service: "test.Echo" } },
    });
    dojangUrl = `http://${px.instance.http1Address()}`;
    browser = (await launchChromium()).browser;
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await px?.close(0);
    await upstream?.close();
    await page?.close();
    await refusedPage?.close();
  });

  async function run(origin: string, scenario: string): Promise<Result> {
    const ctx = await browser!.newContext();
    try {
      const p = await ctx.newPage();
      p.setDefaultTimeout(10_000);
      await p.goto(`${origin}/`);
      return await p.evaluate(([url, name]) => (globalThis as unknown as { runScenario: (u: string, n: string) => Promise<Result> }).runScenario(url!, name!), [dojangUrl, scenario]);
    } finally {
      await ctx.close();
    }
  }

  it("unary, binary and JSON (POST)", async () => {
    expect(await run(page!.origin, "unary")).toEqual({ ok: true, value: "echo: hello from the browser (unary)" });
    expect(await run(page!.origin, "unary-json")).toEqual({ ok: true, value: "echo: hello from the browser (unary-json)" });
    await waitFor("the access record", () => px!.calls.filter((c) => c.protocol === "connect" && c.grpc_code === 0).length >= 2);
  });

  it("unary by GET (the idempotent method), binary and JSON", async () => {
    expect(await run(page!.origin, "get")).toEqual({ ok: true, value: "echo: hello from the browser (get)" });
    expect(await run(page!.origin, "get-json")).toEqual({ ok: true, value: "echo: hello from the browser (get-json)" });
  });

  it("a server stream, read to its end-of-stream message", async () => {
    expect(await run(page!.origin, "stream")).toEqual({ ok: true, values: ["tick 0", "tick 1", "tick 2"] });
    expect(await run(page!.origin, "stream-json")).toEqual({ ok: true, values: ["tick 0", "tick 1", "tick 2"] });
  });

  it("an error: the code, the non-ASCII message and the details", async () => {
    expect(await run(page!.origin, "error")).toEqual({ ok: false, code: 3, message: NON_ASCII, details: 1 });
  });

  it("a timeout: deadline_exceeded", async () => {
    expect(await run(page!.origin, "timeout")).toMatchObject({ ok: false, code: 4 });
  });

  it("is refused by the browser from an origin not in allowOrigins", async () => {
    const r = await run(refusedPage!.origin, "unary");
    expect(r).toMatchObject({ ok: false });
    expect((r as { message: string }).message).toMatch(/fetch/i);
  });
});
