// GET /stats (issue "dojang 0.6: what an operator sees", item 1): real calls from a grpc-js client
// through dojang to grpc-js upstreams, some failed by the upstream, some by dojang itself; the
// answer has one row per method, route and upstream endpoint with the calls, the success rate,
// latency quantiles and who decided the failed ones. Config keys: stats (null = off),
// stats.maxRows.
import * as grpc from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { rawCall, unary } from "../helpers/peers.js";
import { useFixtures } from "../helpers/fixtures.js";
import { startBackend } from "../helpers/backends.js";

const fx = useFixtures();

interface Row {
  name: string;
  calls: number;
  rps: number;
  success: number | null;
  failed: number;
  p50_ms: number | null;
  p99_ms: number | null;
  failed_by: Record<string, number>;
  outcomes: { grpc_code: number; grpc_status: string; decided_by: string; calls: number }[];
}
interface View {
  window: string;
  window_s: number;
  methods: Row[];
  routes: Row[];
  endpoints: Row[];
  total: Row;
  folded: Record<string, number>;
}

async function stats(admin: string | undefined, window = "1m"): Promise<View> {
  const res = await fetch(`http://${admin}/stats?window=${window}`);
  expect(res.status).toBe(200);
  return (await res.json()) as View;
}

/** /stats once it counts `n` calls in total (a call is counted when its client stream has closed, just after the client has its answer). */
async function statsWith(admin: string | undefined, n: number, window = "1m"): Promise<View> {
  const end = performance.now() + 5000;
  for (;;) {
    const v = await stats(admin, window);
    if (v.total.calls >= n || performance.now() > end) return v;
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("GET /stats: calls per method, route and endpoint over a window", () => {
  it("counts each call in its method's, route's and endpoint's row, by status and who decided it", async () => {
    const ok = fx.track(await startBackend("ok"), (b) => b.close());
    ok.delayMs = 30;
    const bad = fx.track(await startBackend("bad"), (b) => b.close());
    const px = await fx.proxyFor(ok.address, {
      listener: {
        routes: [
          { match: { path: "/test.Echo/Unary" }, cluster: "good" },
          { match: { path: "/test.Echo/ServerStream" }, cluster: "failing" },
        ],
      },
      top: {
        clusters: [
          { name: "good", endpoints: [ok.address] },
          { name: "failing", endpoints: [bad.address] },
        ],
      },
    });
    const c = fx.client(px.address);
    for (let i = 0; i < 4; i++) expect((await unary(c, Buffer.from("x"))).err).toBeNull();
    for (let i = 0; i < 3; i++) {
      const s = c.ServerStream(Buffer.from("x"), new grpc.Metadata(), {});
      s.on("data", () => {});
      await new Promise<void>((r) => s.on("status", () => r()).on("error", () => {}));
    }
    // no route: dojang decides (12 UNIMPLEMENTED, no_route), no route row, no endpoint row
    expect((await rawCall(px.address, { ":path": "/other.Svc/Nope" }, Buffer.alloc(5))).trailers?.["grpc-status"] ?? "12").toBe("12");
    const v = await statsWith(px.adminAddress, 8);
    expect(v.window).toBe("1m");
    expect(v.window_s).toBe(60);
    expect(v.total).toMatchObject({ calls: 8, failed: 4, failed_by: { upstream: 3, no_route: 1 } });

    const unaryRow = v.methods.find((r) => r.name === "test.Echo/Unary")!;
    expect(unaryRow).toMatchObject({ calls: 4, success: 1, failed: 0, failed_by: {} });
    expect(unaryRow.outcomes).toEqual([{ grpc_code: 0, grpc_status: "OK", decided_by: "upstream", calls: 4 }]);
    // the upstream answers after 30 ms: the median is 30 ms and a little more (one bin: under 25 % above)
    expect(unaryRow.p50_ms).toBeGreaterThanOrEqual(30);
    expect(unaryRow.p50_ms).toBeLessThan(60);
    const streamRow = v.methods.find((r) => r.name === "test.Echo/ServerStream")!;
    expect(streamRow).toMatchObject({ calls: 3, success: 0, failed: 3, failed_by: { upstream: 3 } });
    // (the upstream has no ServerStream: its own 12, forwarded)
    expect(streamRow.outcomes).toEqual([{ grpc_code: 12, grpc_status: "UNIMPLEMENTED", decided_by: "upstream", calls: 3 }]);
    expect(v.methods.find((r) => r.name === "other.Svc/Nope")).toMatchObject({ calls: 1, failed_by: { no_route: 1 } });

    expect(v.routes.map((r) => [r.name, r.calls, r.failed])).toEqual([
      ["main path:/test.Echo/Unary", 4, 0],
      ["main path:/test.Echo/ServerStream", 3, 3],
    ]);
    expect(v.endpoints.map((r) => [r.name, r.calls, r.success])).toEqual([
      [`good/${ok.address}`, 4, 1],
      [`failing/${bad.address}`, 3, 0],
    ]);
    // 8 calls within the process's first seconds: the rate is over its age, so above 8/60
    expect(v.total.rps).toBeGreaterThan(8 / 60);
    // the same calls in every window
    expect((await stats(px.adminAddress, "10s")).total.calls).toBe(8);
    expect((await stats(px.adminAddress, "10m")).total.calls).toBe(8);
  });

  it("counts a call dojang ended on the upstream endpoint it tried (14 upstream_unreachable, decided by dojang)", async () => {
    const dead = "127.0.0.1:1";
    const px = await fx.proxyFor(dead, { cluster: { connectTimeout: "500ms" } });
    const c = fx.client(px.address);
    expect((await unary(c, Buffer.from("x"))).err?.code).toBe(grpc.status.UNAVAILABLE);
    const v = await statsWith(px.adminAddress, 1);
    expect(v.endpoints).toHaveLength(1);
    expect(v.endpoints[0]).toMatchObject({ name: `backend/${dead}`, calls: 1, success: 0, failed_by: { upstream_unreachable: 1 } });
  });

  it("stats.maxRows: 2 keeps two method rows; the others count in one row named other, and GET /stats says how many were folded", async () => {
    const b = fx.track(await startBackend("b"), (x) => x.close());
    const px = await fx.proxyFor(b.address, { top: { stats: { maxRows: 2 } } });
    for (const p of ["/a.S/One", "/a.S/Two", "/a.S/Three", "/a.S/Four", "/a.S/Three"]) await rawCall(px.address, { ":path": p }, Buffer.alloc(5));
    const v = await statsWith(px.adminAddress, 5);
    expect(v.methods.map((r) => [r.name, r.calls])).toEqual([
      ["other", 3],
      ["a.S/One", 1],
      ["a.S/Two", 1],
    ]);
    expect(v.folded["method"]).toBe(2);
  });

  it("stats: null turns the windows off: GET /stats and /ui are not served", async () => {
    const b = fx.track(await startBackend("b"), (x) => x.close());
    const px = await fx.proxyFor(b.address, { top: { stats: null } });
    expect((await unary(fx.client(px.address), Buffer.from("x"))).err).toBeNull();
    expect(px.instance.stats).toBeNull();
    expect((await fetch(`http://${px.adminAddress}/stats`)).status).toBe(404);
    expect((await fetch(`http://${px.adminAddress}/ui`)).status).toBe(404);
  });

  it("refuses a window it does not keep (400, naming the ones it does)", async () => {
    const b = fx.track(await startBackend("b"), (x) => x.close());
    const px = await fx.proxyFor(b.address);
    const res = await fetch(`http://${px.adminAddress}/stats?window=5m`);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toBe('window must be one of 10s, 1m, 10m, got "5m"');
  });
});
