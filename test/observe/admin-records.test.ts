// The admin's record reads (GET /calls, /stats, /tap: what calls did and who made them), over real
// HTTP: open on a loopback admin without a token (as before); with `admin.token` set they need
// `Authorization: Bearer <token>` (401 + WWW-Authenticate otherwise); on an admin other machines
// reach, they are refused (403 naming admin.token) until a token is set. /metrics and the /ui
// page's static files stay open (Prometheus scrapes; the page asks for the token itself).
import * as grpc from "@grpc/grpc-js";
import http from "node:http";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { AdminServer, type AdminState } from "../../src/proxy/admin/admin.js";
import { startDojang, type DojangHandle } from "../../src/index.js";
import { startGrpcServer, type GrpcServer } from "../helpers/peers.js";

const TOKEN = "admin-records-token-0123456789";
const RECORD_READS = ["/calls", "/calls?failed", "/stats", "/stats?window=10s", "/tap"];
let up: GrpcServer;
const closers: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  up = await startGrpcServer({ Unary: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, c.request) });
});
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});
afterAll(async () => {
  await up.close();
});

async function get(admin: string, path: string, auth?: string): Promise<{ status: number; headers: Headers; text: string }> {
  const ac = new AbortController();
  const res = await fetch(`http://${admin}${path}`, { headers: auth === undefined ? {} : { authorization: auth }, signal: ac.signal });
  // (GET /tap streams: its status is all this needs)
  const text = path.startsWith("/tap") && res.status === 200 ? "" : await res.text();
  ac.abort();
  return { status: res.status, headers: res.headers, text };
}

async function library(admin: Record<string, unknown>): Promise<DojangHandle> {
  const px = await startDojang({
    logLevel: "silent",
    config: { admin, listeners: [{ name: "main", address: "127.0.0.1:0", routes: [{ match: { prefix: "/" }, cluster: "backend" }] }], clusters: [{ name: "backend", endpoints: [up.address] }] },
  });
  closers.push(() => px.close(0));
  return px;
}

/**
 * An admin configured for `host` (so its rules are the ones for that address) but bound on
 * loopback: the tests never open a port other machines reach. Its state is a real instance's.
 */
async function adminFor(host: string, token: string | null, state: AdminState): Promise<string> {
  const a = new AdminServer({ address: { host, port: 0 }, mutations: false, token }, state);
  await new Promise<void>((r) => a.server.listen(0, "127.0.0.1", () => r()));
  closers.push(() => a.close());
  return `127.0.0.1:${(a.server.address() as { port: number }).port}`;
}

/** An admin state reading a real instance (its journal, failed calls, stats and tap). */
function stateOf(px: DojangHandle): AdminState {
  const d = px.instance;
  return {
    metrics: async () => ({ contentType: d.metrics.registry.contentType, body: await d.metrics.registry.metrics() }),
    ready: () => true,
    config: () => d.config,
    calls: (q) => d.calls(q),
    stats: (w) => d.stats!.read(w),
    tap: (_q, f, sink) => d.tap.subscribe(f, sink),
  };
}

describe("record reads: /calls, /stats, /tap", () => {
  it("are open on a loopback admin without a token", async () => {
    const px = await library({ address: "127.0.0.1:0" });
    for (const p of RECORD_READS) expect((await get(px.adminAddress!, p)).status, p).toBe(200);
  });

  it("need the token once admin.token is set (401 with WWW-Authenticate without it or with a wrong one); /metrics and /ui stay open", async () => {
    const px = await library({ address: "127.0.0.1:0", token: TOKEN });
    const a = px.adminAddress!;
    for (const p of RECORD_READS) {
      for (const auth of [undefined, `Bearer ${TOKEN}x`, `Basic ${TOKEN}`]) {
        const r = await get(a, p, auth);
        expect(r.status, `${p} ${String(auth)}`).toBe(401);
        expect(r.headers.get("www-authenticate")).toMatch(/^Bearer realm="dojang admin"/);
        expect(r.text).not.toContain(TOKEN);
      }
      expect((await get(a, p, `Bearer ${TOKEN}`)).status, p).toBe(200);
    }
    expect((await get(a, "/metrics")).status).toBe(200);
    expect((await get(a, "/ui")).status).toBe(200);
    expect((await get(a, "/config")).status).toBe(200);
  });

  it("are refused (403, naming admin.token) on an admin other machines reach without a token; with one, they need it", async () => {
    const px = await library({ address: "127.0.0.1:0" });
    const open = await adminFor("0.0.0.0", null, stateOf(px));
    for (const p of RECORD_READS) {
      const r = await get(open, p);
      expect(r.status, p).toBe(403);
      expect(JSON.parse(r.text)).toMatchObject({ enable: "admin.token" });
    }
    expect((await get(open, "/metrics")).status).toBe(200);
    const guarded = await adminFor("::", TOKEN, stateOf(px));
    for (const p of RECORD_READS) {
      expect((await get(guarded, p)).status, p).toBe(401);
      expect((await get(guarded, p, `Bearer ${TOKEN}`)).status, p).toBe(200);
    }
  });

  it("on a loopback admin without a token, refuses a Host that names neither an address nor localhost (DNS rebinding), for every record read", async () => {
    const px = await library({ address: "127.0.0.1:0" });
    const [host, port] = px.adminAddress!.split(":") as [string, string];
    const withHost = (path: string, h: string): Promise<number> =>
      new Promise((resolve, reject) => {
        const req = http.get({ host, port: Number(port), path, headers: { host: h }, agent: false }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
          res.destroy();
        });
        req.on("error", reject);
      });
    for (const p of RECORD_READS) {
      expect(await withHost(p, `rebound.example.com:${port}`), p).toBe(403);
      expect(await withHost(p, "rebound.example.com"), p).toBe(403);
      expect(await withHost(p, `127.0.0.1:${port}`), p).toBe(200);
      expect(await withHost(p, `localhost:${port}`), p).toBe(200);
      expect(await withHost(p, `[::1]:${port}`), p).toBe(200);
    }
    // the other reads are as before (Prometheus scrapes by whatever name it was given)
    expect(await withHost("/metrics", "dojang.internal:9901")).toBe(200);
  });
});
