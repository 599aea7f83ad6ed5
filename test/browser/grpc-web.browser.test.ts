// Contract (issue 12): gRPC-Web "tested in a real browser, in npm test and so in CI": headless
// Chromium (Debian's chromium where the machine has it, else the one an npm devDependency ships:
// test/helpers/browser.ts) driven by playwright-core with executablePath set (no browser
// download) loads a page served on 127.0.0.1, whose script (bundled here with esbuild) calls a
// @grpc/grpc-js upstream through dojang with @connectrpc/connect-web's gRPC-Web transport: unary,
// server streaming, an error status with a non-ASCII message, a deadline, and a CORS-refused
// origin (the page on one origin, dojang on another) — each result asserted from the page.
// Never skipped: when no browser starts, it fails, saying why.
import * as grpc from "@grpc/grpc-js";
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

const NON_ASCII = "잘못된 요청: ✓ ünïcode";

/** google.protobuf.StringValue on the wire: field 1, length-delimited (the upstream's codec). */
function readString(b: Buffer): string {
  if (b.length === 0) return "";
  let i = 1;
  let len = 0;
  for (let shift = 0; ; shift += 7) {
    const x = b[i++]!;
    len |= (x & 0x7f) << shift;
    if ((x & 0x80) === 0) break;
  }
  return b.subarray(i, i + len).toString();
}
function writeString(s: string): Buffer {
  const v = Buffer.from(s);
  const len: number[] = [];
  let n = v.length;
  while (n >= 0x80) {
    len.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  len.push(n);
  return Buffer.concat([Buffer.from([0x0a, ...len]), v]);
}

const impl: grpc.UntypedServiceImplementation = {
  Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
    const s = readString(call.request);
    if (s === "fail") return cb({ code: grpc.status.INVALID_ARGUMENT, details: NON_ASCII });
    if (s === "slow") return void setTimeout(() => cb(null, writeString("late")), 5000);
    cb(null, writeString(`echo: ${s}`));
  },
  ServerStream: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
    const s = readString(call.request);
    let i = 0;
    // spaced out, so the browser reads messages as they come, not one buffered body
    const t = setInterval(() => {
      call.write(writeString(`${s} ${i}`));
      if (++i === 3) {
        clearInterval(t);
        call.end();
      }
    }, 30);
  },
  ClientStream: (_c: unknown, cb: grpc.sendUnaryData<Buffer>) => cb({ code: grpc.status.UNIMPLEMENTED }),
  Bidi: (c: grpc.ServerDuplexStream<Buffer, Buffer>) => c.end(),
};

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
      res.end('<!doctype html><html><head><meta charset="utf-8"><script src="/client.js"></script></head><body>dojang gRPC-Web</body></html>');
    }
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return { origin: `http://127.0.0.1:${port}`, close: () => new Promise<void>((r) => server.close(() => r())) };
}

type Result = { ok: true; value?: string; values?: string[] } | { ok: false; code: number; message: string };

describe("gRPC-Web from a real browser (headless Chromium, connect-web's gRPC-Web transport)", () => {
  let browser: Browser | undefined;
  let upstream: GrpcServer | undefined;
  let px: DojangHandle | undefined;
  let page: PageServer | undefined;
  let refusedPage: PageServer | undefined;
  let dojangUrl = "";

  beforeAll(async () => {
    const bundle = await build({
      entryPoints: [fileURLToPath(new URL("./page-client.mjs", import.meta.url))],
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
    upstream = await startGrpcServer(impl);
    px = await startProxy(upstream.address, {
      listener: { grpcWeb: true, http1Address: "127.0.0.1:0", cors: { allowOrigins: [page.origin] } },
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

  it("makes a unary call", async () => {
    expect(await run(page!.origin, "unary")).toEqual({ ok: true, value: "echo: hello from the browser" });
    await waitFor("the access record", () => px!.calls.some((c) => c.path === "/test.Echo/Unary" && c.grpc_code === 0));
    expect(px!.calls.find((c) => c.path === "/test.Echo/Unary")).toMatchObject({ protocol: "grpc-web", decided_by: "upstream" });
  });

  it("reads a server stream to its end (the status in the trailer frame)", async () => {
    expect(await run(page!.origin, "stream")).toEqual({ ok: true, values: ["tick 0", "tick 1", "tick 2"] });
  });

  it("reads an error status with a non-ASCII message", async () => {
    expect(await run(page!.origin, "error")).toEqual({ ok: false, code: 3, message: NON_ASCII });
  });

  it("reads DEADLINE_EXCEEDED when the call's deadline passes at dojang", async () => {
    const t0 = performance.now();
    const r = await run(page!.origin, "deadline");
    expect(r).toMatchObject({ ok: false, code: 4 });
    expect(performance.now() - t0).toBeLessThan(4000);
    await waitFor("the deadline's access record", () => px!.calls.some((c) => c.grpc_code === 4));
    expect(px!.calls.find((c) => c.grpc_code === 4)?.decided_by).toBe("deadline");
  });

  it("is refused by the browser from an origin not in allowOrigins, and the call never reaches dojang", async () => {
    const before = px!.calls.length;
    const r = await run(refusedPage!.origin, "unary");
    expect(r.ok).toBe(false);
    // fetch() rejects (a CORS failure is a network error to the page): no gRPC status was read
    expect(r).toMatchObject({ ok: false });
    expect((r as { message: string }).message).toMatch(/fetch/i);
    await new Promise((res) => setTimeout(res, 100));
    expect(px!.calls.length).toBe(before);
  });
});
