// Issue 12, header rules per route: request and response fields added and removed, the
// :authority and the matched :path prefix rewritten. A grpc-js client through an in-process dojang
// to a raw upstream that records each request head and answers with headers of its own.
import * as grpc from "@grpc/grpc-js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { echoClient, startProxy, startRawUpstream, unary, type EchoClient, type RawUpstream } from "../helpers/peers.js";
import { parseConfigText } from "../../src/config/parse.js";
import type { DojangHandle } from "../../src/index.js";

let upstream: RawUpstream;
const clients: EchoClient[] = [];
const proxies: DojangHandle[] = [];
beforeAll(async () => {
  // echoes any path, with response headers the rules can act on; Trailers-Only (5) when asked by x-fail
  upstream = await startRawUpstream((stream, headers) => {
    const body: Buffer[] = [];
    stream.on("data", (d: Buffer) => body.push(d));
    stream.on("end", () => {
      if (stream.destroyed || stream.closed) return;
      if (headers["x-fail"] !== undefined) {
        stream.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": "5", "x-internal": "secret", "x-kept": "1" }, { endStream: true });
        return;
      }
      stream.respond({ ":status": 200, "content-type": "application/grpc", "x-internal": "secret", "x-kept": "1" }, { waitForTrailers: true });
      stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(Buffer.concat(body));
    });
  });
});
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const px of proxies.splice(0)) await px.close(0);
});
afterAll(async () => {
  await upstream.close();
});

async function proxy(route: Record<string, unknown>): Promise<EchoClient> {
  const px = await startProxy(upstream.address, { route });
  proxies.push(px);
  const c = echoClient(px.address);
  clients.push(c);
  return c;
}

describe("route header rules", () => {
  it("adds and removes request headers, rewrites :authority and the matched service prefix; adds and removes response headers", { timeout: 30_000 }, async () => {
    const c = await proxy({
      match: { service: "test.Echo" },
      headers: { request: { add: { "x-tenant": "shop", "x-replaced": "by-dojang" }, remove: ["x-debug"] }, response: { add: { "x-served-by": "dojang" }, remove: ["x-internal"] } },
      rewriteAuthority: "echo.internal:50051",
      rewritePrefix: "/test.v2.Echo/",
    });
    const md = new grpc.Metadata();
    md.set("x-debug", "1");
    md.set("x-replaced", "client");
    md.set("x-other", "kept");
    const before = upstream.seen.length;
    const r = await unary(c, Buffer.from("hello"), md);
    expect(r.err).toBeNull();
    expect(r.res?.toString()).toContain("hello");
    const h = upstream.seen[before]!.headers;
    expect(h[":path"]).toBe("/test.v2.Echo/Unary");
    expect(h[":authority"]).toBe("echo.internal:50051");
    expect(h["x-tenant"]).toBe("shop");
    expect(h["x-replaced"]).toBe("by-dojang");
    expect(h["x-debug"]).toBeUndefined();
    expect(h["x-other"]).toBe("kept");
    expect(r.metadata?.get("x-served-by")).toEqual(["dojang"]);
    expect(r.metadata?.get("x-internal")).toEqual([]);
    expect(r.metadata?.get("x-kept")).toEqual(["1"]);
  });

  it("response rules apply to a Trailers-Only answer too; a route without rules passes headers as they are", { timeout: 30_000 }, async () => {
    const c = await proxy({ match: { path: "/test.Echo/Unary" }, headers: { response: { add: { "x-served-by": "dojang" }, remove: ["x-internal"] } } });
    const md = new grpc.Metadata();
    md.set("x-fail", "1");
    const r = await unary(c, Buffer.from("x"), md);
    expect(r.err?.code).toBe(5);
    expect(r.status?.metadata.get("x-served-by")).toEqual(["dojang"]);
    expect(r.status?.metadata.get("x-internal")).toEqual([]);
    expect(r.status?.metadata.get("x-kept")).toEqual(["1"]);
    // no rules: the upstream's headers as they are
    const plain = await proxy({});
    const r2 = await unary(plain, Buffer.from("y"));
    expect(r2.err).toBeNull();
    expect(r2.metadata?.get("x-internal")).toEqual(["secret"]);
    expect(r2.metadata?.get("x-served-by")).toEqual([]);
  });

  it("config errors name the key path", () => {
    const base = (extra: string): string =>
      `listeners:\n  - name: main\n    address: 127.0.0.1:0\n    routes:\n      - match: { prefix: "/" }\n        cluster: b\n${extra}clusters:\n  - name: b\n    endpoints: ["127.0.0.1:1"]\n`;
    const issues = (extra: string): string[] => {
      const r = parseConfigText(base(extra), {});
      return r.ok ? [] : r.issues.map((i) => `${i.path}: ${i.message}`);
    };
    expect(issues("        headers: { request: { remove: [content-type] } }\n")).toEqual(["listeners[0].routes[0].headers.request.remove[0]: is owned by HTTP/2 or gRPC framing and cannot be changed by a rule"]);
    expect(issues('        headers: { response: { add: { ":status": "500" } } }\n')[0]).toMatch(/^listeners\[0\]\.routes\[0\]\.headers\.response\.add/);
    expect(issues("        rewritePrefix: v2/\n")).toEqual(['listeners[0].routes[0].rewritePrefix: must start with "/"']);
  });
});
