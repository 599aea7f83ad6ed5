// The admin listener in-process: /live, /ready, /config (the effective, normalized config) and
// /metrics in Prometheus text, including the bound on per-method series.
import http2 from "node:http2";
import { randomBytes } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import { afterEach, describe, expect, it } from "vitest";
import { echoClient, rawCall, frame, sample, scrape, startGrpcServer, startProxy, statusOf, unary, type EchoClient, type GrpcServer } from "../helpers/peers.js";
import type { DojangHandle } from "../../src/index.js";

let up: GrpcServer | undefined;
let px: DojangHandle | undefined;
const clients: EchoClient[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  await px?.close(0);
  await up?.close();
  px = undefined;
  up = undefined;
});

const get = async (px: DojangHandle, path: string, init?: RequestInit) => {
  const res = await fetch(`http://${px.adminAddress}${path}`, { signal: AbortSignal.timeout(3000), ...init });
  return { status: res.status, type: res.headers.get("content-type"), body: await res.text() };
};

/** Upstream: Unary echoes; a payload "fail" answers NOT_FOUND; "slow:<ms>" answers after ms. */
async function upstream(): Promise<GrpcServer> {
  return startGrpcServer({
    Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      const req = call.request.toString();
      if (req === "fail") return cb({ code: grpc.status.NOT_FOUND, details: "no such thing" });
      const m = /^slow:(\d+)$/.exec(req);
      if (m !== null) {
        const t = setTimeout(() => cb(null, Buffer.from("slow done")), Number(m[1]));
        call.on("cancelled", () => clearTimeout(t));
        return;
      }
      cb(null, Buffer.concat([Buffer.from("echo:"), call.request]));
    },
  });
}

function client(address: string): EchoClient {
  const c = echoClient(address);
  clients.push(c);
  return c;
}

/** Every sample line of `name` (exact metric name, labels parsed). */
function series(text: string, name: string): { labels: Record<string, string>; value: number }[] {
  const out: { labels: Record<string, string>; value: number }[] = [];
  for (const line of text.split("\n")) {
    if (!line.startsWith(name + "{") && !line.startsWith(name + " ")) continue;
    const labels: Record<string, string> = {};
    const brace = line.indexOf("{");
    if (line.startsWith(name + "{")) {
      const body = line.slice(brace + 1, line.lastIndexOf("}"));
      for (const m of body.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]!] = m[2]!;
    }
    out.push({ labels, value: Number(line.slice(line.lastIndexOf(" ") + 1)) });
  }
  return out;
}

describe("health endpoints", () => {
  it("answers /live 200 and /ready 200 while running", async () => {
    up = await upstream();
    px = await startProxy(up.address);
    expect(await get(px, "/live")).toMatchObject({ status: 200, body: "live\n" });
    expect(await get(px, "/ready")).toMatchObject({ status: 200, body: "ready\n" });
  });

  it("turns /ready 503 while draining and keeps /live 200", async () => {
    up = await upstream();
    px = await startProxy(up.address);
    const c = client(px.address);
    const slow = unary(c, Buffer.from("slow:600"), new grpc.Metadata(), { deadline: Date.now() + 5000 });
    await waitActive(px, 1);
    const closing = px.close(5000);
    expect(await get(px, "/ready")).toMatchObject({ status: 503, body: "draining\n" });
    expect((await get(px, "/live")).status).toBe(200);
    expect((await slow).err).toBeNull();
    await closing;
  });

  it("answers 404 for an unknown path, naming the paths it has, and 405 for a POST", async () => {
    up = await upstream();
    px = await startProxy(up.address);
    expect(await get(px, "/nope")).toMatchObject({ status: 404, body: "not found: try /metrics /ready /live /config /faults /drain /calls /stats /tap /ui /clusters\n" });
    expect((await get(px, "/metrics", { method: "POST" })).status).toBe(405);
  });
});

describe("/config", () => {
  it("returns the effective config as JSON, normalized (timeoutMs, bytes, host/port objects, defaults filled in)", async () => {
    up = await upstream();
    px = await startProxy(up.address, { route: { timeout: "2s", maxRequestMessageBytes: "1MiB" }, top: { drainTimeout: "1.5s" } });
    const r = await get(px, "/config");
    expect(r.status).toBe(200);
    expect(r.type).toMatch(/^application\/json/);
    const cfg = JSON.parse(r.body) as Record<string, any>;
    const [host, port] = up.address.split(":");
    expect(cfg["drainTimeoutMs"]).toBe(1500);
    expect(cfg["accessLog"]).toBe(true);
    expect(cfg["workers"]).toBe(1);
    // The library (a test harness) turns admin mutations on; the CLI leaves them off.
    expect(cfg["admin"]).toEqual({ address: { host: "127.0.0.1", port: 0 }, mutations: true, token: null, readyClusters: [] });
    expect(cfg["listeners"][0]).toMatchObject({ name: "main", address: { host: "127.0.0.1", port: 0 }, maxConcurrentStreams: 1000 });
    expect(cfg["listeners"][0]["routes"]).toEqual([
      { match: { prefix: "/" }, cluster: "backend", timeoutMs: 2000, maxRequestMessageBytes: 1048576, maxResponseMessageBytes: 4194304, faults: [], streamIdleTimeoutMs: null, retry: null, rateLimit: null, headers: null, rewriteAuthority: null, rewritePrefix: null, jwt: null, rbac: null, extAuthz: null },
    ]);
    expect(cfg["clusters"][0]).toMatchObject({ name: "backend", endpoints: [{ host, port: Number(port) }], connectTimeoutMs: 5000 });
    // Normalized, not the raw text: no "timeout" or "drainTimeout" keys.
    expect(r.body).not.toMatch(/"timeout"|"drainTimeout"/);
  });
});

async function waitActive(px: DojangHandle, n: number): Promise<void> {
  const until = Date.now() + 5000;
  while (sample(await scrape(px.adminAddress), "dojang_active_calls") !== n) {
    if (Date.now() > until) throw new Error(`dojang_active_calls never reached ${n}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("/metrics", () => {
  it("is Prometheus text with every documented metric family and its type", async () => {
    up = await upstream();
    px = await startProxy(up.address);
    const r = await get(px, "/metrics");
    expect(r.status).toBe(200);
    expect(r.type).toMatch(/^text\/plain; version=0\.0\.4/);
    for (const [name, type] of [
      ["dojang_calls_total", "counter"],
      ["dojang_call_duration_seconds", "histogram"],
      ["dojang_messages_total", "counter"],
      ["dojang_budget_in_seconds", "histogram"],
      ["dojang_budget_out_seconds", "histogram"],
      ["dojang_active_calls", "gauge"],
      ["dojang_upstream_sessions", "gauge"],
    ]) {
      expect(r.body).toContain(`# TYPE ${name} ${type}`);
      expect(r.body).toMatch(new RegExp(`^# HELP ${name} \\S`, "m"));
    }
    // prom-client's defaults under the standard names stock dashboards query (issue 18 item 7)
    for (const [name, type] of [
      ["process_cpu_seconds_total", "counter"],
      ["process_resident_memory_bytes", "gauge"],
      ["nodejs_eventloop_lag_seconds", "gauge"],
      ["nodejs_heap_size_used_bytes", "gauge"],
    ]) expect(r.body).toContain(`# TYPE ${name} ${type}`);
    expect(sample(r.body, "process_resident_memory_bytes")).toBeGreaterThan(1_000_000);
    expect(r.body).not.toContain("dojang_process_");
  });

  it("counts calls by service, method, code and decided_by, with durations and messages by direction", async () => {
    up = await upstream();
    px = await startProxy(up.address);
    const c = client(px.address);
    expect((await unary(c, Buffer.from("a"))).err).toBeNull();
    expect((await unary(c, Buffer.from("b"))).err).toBeNull();
    expect((await unary(c, Buffer.from("fail"))).err?.code).toBe(grpc.status.NOT_FOUND);
    await waitActive(px, 0);
    const m = await scrape(px.adminAddress);
    const calls = series(m, "dojang_calls_total");
    expect(calls).toContainEqual({ labels: { grpc_service: "test.Echo", grpc_method: "Unary", grpc_code: "OK", decided_by: "upstream", fault_rule: "" }, value: 2 });
    expect(calls).toContainEqual({ labels: { grpc_service: "test.Echo", grpc_method: "Unary", grpc_code: "NOT_FOUND", decided_by: "upstream", fault_rule: "" }, value: 1 });
    expect(calls.reduce((s, x) => s + x.value, 0)).toBe(3);

    const lbl = { grpc_service: "test.Echo", grpc_method: "Unary" };
    expect(sample(m, "dojang_call_duration_seconds_count", lbl)).toBe(3);
    expect(sample(m, "dojang_call_duration_seconds_sum", lbl)).toBeGreaterThan(0);
    expect(sample(m, "dojang_call_duration_seconds_bucket", { ...lbl, le: "+Inf" })).toBe(3);
    // Buckets are cumulative.
    const buckets = series(m, "dojang_call_duration_seconds_bucket").filter((b) => b.labels["grpc_method"] === "Unary").map((b) => b.value);
    expect(buckets.length).toBeGreaterThan(5);
    expect([...buckets].sort((a, b) => a - b)).toEqual(buckets);

    expect(sample(m, "dojang_messages_total", { ...lbl, direction: "request" })).toBe(3);
    expect(sample(m, "dojang_messages_total", { ...lbl, direction: "response" })).toBe(2);
  });

  it("counts dojang's own decisions under their reason (no_route, deadline)", async () => {
    up = await upstream();
    px = await startProxy(up.address, { route: { match: { service: "test.Echo" } } });
    const r = await rawCall(px.address, { ":path": "/other.Svc/M" }, frame(Buffer.from("x")));
    expect(statusOf(r)).toBe(String(grpc.status.UNIMPLEMENTED));
    const c = client(px.address);
    expect((await unary(c, Buffer.from("slow:2000"), new grpc.Metadata(), { deadline: Date.now() + 150 })).err?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    await waitActive(px, 0);
    const m = await scrape(px.adminAddress);
    expect(sample(m, "dojang_calls_total", { grpc_service: "other.Svc", grpc_method: "M", grpc_code: "UNIMPLEMENTED", decided_by: "no_route" })).toBe(1);
    expect(sample(m, "dojang_calls_total", { grpc_service: "test.Echo", grpc_method: "Unary", grpc_code: "DEADLINE_EXCEEDED", decided_by: "deadline" })).toBe(1);
  });

  it("observes budgets in and out: a client deadline is budget in, the capped remainder budget out", async () => {
    up = await upstream();
    px = await startProxy(up.address, { route: { timeout: "2s" } });
    const c = client(px.address);
    // No client deadline: only the route's 2 s goes out.
    expect((await unary(c, Buffer.from("a"))).err).toBeNull();
    let m = await scrape(px.adminAddress);
    expect(sample(m, "dojang_budget_in_seconds_count")).toBe(0);
    expect(sample(m, "dojang_budget_out_seconds_count")).toBe(1);
    expect(sample(m, "dojang_budget_out_seconds_sum")).toBeGreaterThan(1.9);
    expect(sample(m, "dojang_budget_out_seconds_sum")).toBeLessThanOrEqual(2);
    // A 60 s client deadline: 60 s in, capped to at most 2 s out.
    expect((await unary(c, Buffer.from("b"), new grpc.Metadata(), { deadline: Date.now() + 60_000 })).err).toBeNull();
    m = await scrape(px.adminAddress);
    expect(sample(m, "dojang_budget_in_seconds_count")).toBe(1);
    expect(sample(m, "dojang_budget_in_seconds_sum")).toBeGreaterThan(55);
    expect(sample(m, "dojang_budget_in_seconds_sum")).toBeLessThanOrEqual(60);
    expect(sample(m, "dojang_budget_out_seconds_count")).toBe(2);
    expect(sample(m, "dojang_budget_out_seconds_sum")).toBeLessThanOrEqual(4);
    expect(sample(m, "dojang_budget_in_seconds_bucket", { le: "60" })).toBe(1);
    expect(sample(m, "dojang_budget_out_seconds_bucket", { le: "5" })).toBe(2);
  });

  it("shows calls in flight in dojang_active_calls and open upstream sessions in dojang_upstream_sessions", async () => {
    up = await upstream();
    px = await startProxy(up.address);
    let m = await scrape(px.adminAddress);
    expect(sample(m, "dojang_active_calls")).toBe(0);
    expect(sample(m, "dojang_upstream_sessions")).toBe(0);
    const c = client(px.address);
    const slow = [1, 2].map(() => unary(c, Buffer.from("slow:500"), new grpc.Metadata(), { deadline: Date.now() + 5000 }));
    await waitActive(px, 2);
    m = await scrape(px.adminAddress);
    expect(sample(m, "dojang_upstream_sessions")).toBe(1);
    for (const r of await Promise.all(slow)) expect(r.err).toBeNull();
    await waitActive(px, 0);
    // The session stays open for the next call.
    expect(sample(await scrape(px.adminAddress), "dojang_upstream_sessions")).toBe(1);
  });

  // 500: "at most 500 distinct (grpc_service, grpc_method) pairs" (docs/reference/metrics.md),
  // written out rather than read from dojang's own constant
  const MAX_METHOD_SERIES = 500;
  it(`keeps distinct grpc_method values at most ${MAX_METHOD_SERIES} + 1 ("other") after 600 random method names`, async () => {
    up = await upstream();
    px = await startProxy(up.address);
    const session = http2.connect(`http://${px.address}`);
    session.on("error", () => {});
    session.setMaxListeners(0); // rawCall adds an error listener per call on a shared session
    try {
      const names = Array.from({ length: 600 }, () => `M${randomBytes(8).toString("hex")}`);
      for (let i = 0; i < names.length; i += 50) {
        const batch = names.slice(i, i + 50).map((n) => rawCall(px!.address, { ":path": `/test.Echo/${n}` }, frame(Buffer.from("x")), { session }));
        for (const r of await Promise.all(batch)) expect(statusOf(r)).toBe(String(grpc.status.UNIMPLEMENTED));
      }
      await waitActive(px, 0);
      const m = await scrape(px.adminAddress);
      for (const family of ["dojang_calls_total", "dojang_call_duration_seconds_count", "dojang_messages_total"]) {
        const methods = new Set(series(m, family).map((s) => s.labels["grpc_method"]));
        expect(methods.size, family).toBeLessThanOrEqual(MAX_METHOD_SERIES + 1);
        expect(methods.size, family).toBeGreaterThanOrEqual(MAX_METHOD_SERIES);
      }
      // Nothing is lost: every call is still counted, the overflow under "other".
      const calls = series(m, "dojang_calls_total");
      expect(calls.reduce((s, x) => s + x.value, 0)).toBe(600);
      expect(sample(m, "dojang_calls_total", { grpc_service: "other", grpc_method: "other" })).toBe(600 - MAX_METHOD_SERIES);
    } finally {
      session.close();
    }
  });
});
