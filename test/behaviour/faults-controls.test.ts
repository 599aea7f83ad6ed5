// Fault injection, end to end: the ways faults are asked for and reported. Config-file lists
// (listener and route), the /faults admin REST API over real HTTP (including bad input), request
// headers (x-envoy-fault-*, x-dojang-fault) only where a listener allows them, the x-dojang-fault
// trailer, the metrics, GET /calls and the library's `calls`, and maxActiveFaults.
import { afterEach, describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { echoClient, frame, rawCall, sample, scrape, startGrpcServer, startProxy, unary, type EchoClient } from "../helpers/peers.js";
import { Cleanup, sampleReaching } from "../helpers/scripted-upstream.js";
import { startDojang, type DojangHandle } from "../../src/index.js";

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

// === peers ===

interface Upstream {
  readonly address: string;
  readonly calls: Record<string, number>;
}

/** grpc-js Echo upstream: Unary echoes; ServerStream "n" sends n messages "m1".."mn". */
async function startUpstream(): Promise<Upstream> {
  const calls: Record<string, number> = { Unary: 0, ServerStream: 0 };
  const srv = await startGrpcServer({
    Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      calls["Unary"]!++;
      cb(null, call.request);
    },
    ServerStream: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
      calls["ServerStream"]!++;
      const n = Number(call.request.toString());
      for (let i = 1; i <= n; i++) call.write(Buffer.from(`m${i}`));
      call.end();
    },
  });
  cleanup.add(srv, (s) => s.close());
  return { address: srv.address, calls };
}

async function proxy(upstream: string, o: Parameters<typeof startProxy>[1] = {}): Promise<DojangHandle> {
  return cleanup.add(await startProxy(upstream, o), (p) => p.close(0));
}

function client(px: DojangHandle): EchoClient {
  return cleanup.add(echoClient(px.address), (c) => c.close());
}

function md(entries: Record<string, string>): grpc.Metadata {
  const m = new grpc.Metadata();
  for (const [k, v] of Object.entries(entries)) m.set(k, v);
  return m;
}

function serverStream(c: EchoClient, req: string, meta = new grpc.Metadata()): Promise<{ messages: string[]; status: grpc.StatusObject }> {
  return new Promise((resolve) => {
    const messages: string[] = [];
    const call = c.ServerStream(Buffer.from(req), meta, {});
    call.on("data", (m: Buffer) => messages.push(m.toString()));
    call.on("error", () => {});
    call.on("status", (status: grpc.StatusObject) => setImmediate(() => resolve({ messages, status })));
  });
}

interface ApiResponse {
  status: number;
  body: any; // parsed JSON, shape checked by each test
  headers: Headers;
}

/** One request to the admin API; the body is sent as given when it is a string, else as JSON. */
async function api(px: DojangHandle, method: string, path: string, body?: unknown): Promise<ApiResponse> {
  const init: RequestInit = { method };
  if (body !== undefined) {
    init.body = typeof body === "string" ? body : JSON.stringify(body);
    init.headers = { "content-type": "application/json" };
  }
  const res = await fetch(`http://${px.adminAddress}${path}`, init);
  const text = await res.text();
  return { status: res.status, body: text === "" ? null : JSON.parse(text), headers: res.headers };
}

/** Waits until the journal holds `n` calls (a call is recorded when its stream closes). */
async function journalHas(px: DojangHandle, n: number): Promise<void> {
  const end = Date.now() + 2000;
  while (px.calls.length < n && Date.now() < end) await new Promise((r) => setTimeout(r, 5));
}

const FLAKY = { id: "flaky", fire: { calls: "1-2" }, action: { kind: "abort", code: "UNAVAILABLE", message: "flaky" } } as const;

// === config ===

describe("config-file faults", () => {
  it("apply a listener list to every route and a route list to its route only, listed as config rules", async () => {
    const up = await startUpstream();
    const dir = mkdtempSync(join(tmpdir(), "dojang-faults-"));
    cleanup.add(dir, (d) => rmSync(d, { recursive: true, force: true }));
    const file = join(dir, "dojang.yaml");
    writeFileSync(
      file,
      `admin:
  address: 127.0.0.1:0
listeners:
  - name: main
    address: 127.0.0.1:0
    faults:
      - id: listener-abort
        match:
          metadata:
            - { name: x-fault, equals: listener }
        action: { kind: abort, code: OUT_OF_RANGE, message: from the listener }
    routes:
      - match: { prefix: /test.Echo/ServerStream }
        cluster: backend
        faults:
          - id: route-abort
            action: { kind: abort, code: NOT_FOUND, message: from the route }
      - match: { prefix: / }
        cluster: backend
clusters:
  - name: backend
    endpoints: [${up.address}]
`,
    );
    const px = cleanup.add(await startDojang({ configFile: file, logLevel: "silent" }), (p) => p.close(0));
    const c = client(px);

    expect((await unary(c, Buffer.from("plain"))).err).toBeNull();
    expect((await unary(c, Buffer.from("l"), md({ "x-fault": "listener" }))).err?.code).toBe(grpc.status.OUT_OF_RANGE);
    const routed = await serverStream(c, "2");
    expect(routed.status.code).toBe(grpc.status.NOT_FOUND);
    expect(routed.status.details).toBe("from the route");
    // both match: listener rules come first in the stacking order, and one terminal fault wins
    expect((await serverStream(c, "2", md({ "x-fault": "listener" }))).status.code).toBe(grpc.status.OUT_OF_RANGE);
    expect(up.calls).toEqual({ Unary: 1, ServerStream: 0 });

    const list = await api(px, "GET", "/faults");
    expect(list.status).toBe(200);
    expect(list.body.faults.map((f: { id: string }) => f.id)).toEqual(["listener-abort", "route-abort"]);
    expect(list.body.faults[0]).toMatchObject({ source: "config", match: { listener: "main" }, matched: 2, fired: 2 });
    expect(list.body.faults[1]).toMatchObject({ source: "config", match: { listener: "main", route: 0 }, matched: 2, fired: 1 });
  });

  it("come back with POST /faults/reset after being deleted, while API rules go away", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address, { listener: { faults: [{ id: "cfg", match: { method: "ServerStream" }, action: { kind: "abort", code: 5 } }] } });
    expect((await api(px, "POST", "/faults", FLAKY)).status).toBe(201);
    expect((await api(px, "DELETE", "/faults/cfg")).status).toBe(204);

    const reset = await api(px, "POST", "/faults/reset");
    expect(reset.status).toBe(200);
    expect(reset.body.faults.map((f: { id: string }) => f.id)).toEqual(["cfg"]);
    const c = client(px);
    expect((await serverStream(c, "1")).status.code).toBe(grpc.status.NOT_FOUND);
    expect((await unary(c, Buffer.from("x"))).err).toBeNull(); // "flaky" is gone
  });
});

// === admin API ===

describe("the /faults admin API", () => {
  it("adds, reads, counts, patches, deletes and resets rules over HTTP", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    const c = client(px);

    const empty = await api(px, "GET", "/faults");
    expect(empty.body).toEqual({ faults: [], seed: 0, maxActiveFaults: null, overflowed: 0 });

    const created = await api(px, "POST", "/faults", FLAKY);
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ id: "flaky", source: "api", matched: 0, fired: 0, fire: { calls: "1-2" }, action: { kind: "abort", code: "UNAVAILABLE", message: "flaky" } });

    const codes: number[] = [];
    for (let i = 0; i < 3; i++) codes.push((await unary(c, Buffer.from(`${i}`))).err?.code ?? 0);
    expect(codes).toEqual([14, 14, 0]);
    expect((await api(px, "GET", "/faults/flaky")).body).toMatchObject({ id: "flaky", matched: 3, fired: 2 });

    const patched = await api(px, "PATCH", "/faults/flaky", { fire: { calls: null }, action: { code: "ABORTED" } });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ id: "flaky", fire: {}, action: { kind: "abort", code: "ABORTED", message: "flaky" }, matched: 3, fired: 2 });
    const p = await unary(c, Buffer.from("p"));
    expect(p.err?.code).toBe(grpc.status.ABORTED);
    expect(p.err?.details).toBe("flaky");

    const disabled = await api(px, "PATCH", "/faults/flaky", { enabled: false });
    expect(disabled.body).toMatchObject({ enabled: false, matched: 4 });
    expect((await unary(c, Buffer.from("off"))).err).toBeNull();
    expect((await api(px, "GET", "/faults/flaky")).body).toMatchObject({ matched: 4, fired: 3 }); // a disabled rule is not counted
    expect((await api(px, "PATCH", "/faults/flaky", { enabled: true })).status).toBe(200);

    expect((await api(px, "DELETE", "/faults/flaky")).status).toBe(204);
    expect((await unary(c, Buffer.from("d"))).err).toBeNull();
    expect((await api(px, "GET", "/faults/flaky")).status).toBe(404);

    const anon = await api(px, "POST", "/faults", { match: { method: "ServerStream" }, action: { kind: "unreachable" } });
    expect(anon.status).toBe(201);
    expect(anon.body.id).toMatch(/^fault-\d+$/);
    expect((await serverStream(c, "1")).status.code).toBe(grpc.status.UNAVAILABLE);
    const reset = await api(px, "POST", "/faults/reset");
    expect(reset.status).toBe(200);
    expect(reset.body).toEqual({ faults: [] });
    expect((await serverStream(c, "1")).status.code).toBe(grpc.status.OK);
  });

  it("rejects bad input with 400 and applies nothing", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    const c = client(px);
    expect((await api(px, "POST", "/faults", { id: "keep", match: { method: "ServerStream" }, action: { kind: "abort", code: 5 } })).status).toBe(201);

    const unknownKind = await api(px, "POST", "/faults", { id: "bad", action: { kind: "explode" } });
    expect(unknownKind.status).toBe(400);
    expect(unknownKind.body.error).toContain("unknown fault kind");
    expect(unknownKind.body.issues[0].path).toBe("action.kind");

    for (const code of [17, -1, "NOPE", 1.5]) {
      const badCode = await api(px, "POST", "/faults", { id: "bad", action: { kind: "abort", code } });
      expect(badCode.status).toBe(400);
      expect(badCode.body.issues[0].path).toBe("action.code");
    }
    const badJson = await api(px, "POST", "/faults", '{"id": "bad", "action": {');
    expect(badJson.status).toBe(400);
    expect(badJson.body.error).toMatch(/^invalid JSON/);
    expect((await api(px, "POST", "/faults", "")).status).toBe(400);
    expect((await api(px, "POST", "/faults", { id: "bad", action: { kind: "abort", code: 14 }, extra: true })).status).toBe(400);
    expect((await api(px, "POST", "/faults", { id: "bad", action: { kind: "reset", code: "CANCEL", at: "after_messages" } })).status).toBe(400);

    // a duration without a unit (250 ms or 250 s?), in a rule and in a PATCH, names the units
    for (const [body, path, shown] of [
      [{ id: "bad", action: { kind: "delay", delay: 250 } }, "action.delay", "250"],
      [{ id: "bad", action: { kind: "delay", delay: "250" } }, "action.delay", '"250"'],
      [{ id: "bad", fire: { after: 250 }, action: { kind: "blackhole" } }, "fire.after", "250"],
    ] as const) {
      const r = await api(px, "POST", "/faults", body);
      expect(r.status).toBe(400);
      expect(r.body.issues).toEqual([{ path, message: `${shown} has no unit: write 250ms, 250s, 250m or 250h` }]);
    }
    const noUnitPatch = await api(px, "PATCH", "/faults/keep", { fire: { for: 30 } });
    expect(noUnitPatch.status).toBe(400);
    expect(noUnitPatch.body.issues).toEqual([{ path: "fire.for", message: "30 has no unit: write 30ms, 30s, 30m or 30h" }]);

    // a bad PATCH leaves the rule as it was
    const badPatch = await api(px, "PATCH", "/faults/keep", { action: { code: "NOPE" } });
    expect(badPatch.status).toBe(400);
    expect((await api(px, "GET", "/faults/keep")).body.action).toEqual({ kind: "abort", code: "NOT_FOUND", message: "injected fault" });

    // nothing was applied: one rule, and calls behave as before
    const list = await api(px, "GET", "/faults");
    expect(list.body.faults.map((f: { id: string }) => f.id)).toEqual(["keep"]);
    expect((await unary(c, Buffer.from("ok"))).err).toBeNull();
    expect((await serverStream(c, "1")).status.code).toBe(grpc.status.NOT_FOUND);
  });

  it("answers 404 for an unknown id, 409 for a duplicate id and 405 for a wrong method", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    for (const m of ["GET", "PATCH", "DELETE"]) {
      const r = await api(px, m, "/faults/nope", m === "PATCH" ? { enabled: false } : undefined);
      expect(r.status).toBe(404);
      expect(r.body.error).toContain("nope");
    }
    expect((await api(px, "POST", "/faults", FLAKY)).status).toBe(201);
    expect((await api(px, "POST", "/faults", FLAKY)).status).toBe(409);
    const put = await api(px, "PUT", "/faults");
    expect(put.status).toBe(405);
    expect(put.headers.get("allow")).toBe("GET, POST");
  });
});

// === request headers ===

describe("fault request headers", () => {
  it("are ignored unless the listener sets faultHeaders: the calls succeed", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    const c = client(px);
    const r1 = await unary(c, Buffer.from("a"), md({ "x-dojang-fault": "abort=UNAVAILABLE;msg=down" }));
    const r2 = await unary(c, Buffer.from("b"), md({ "x-envoy-fault-abort-grpc-request": "14" }));
    const r3 = await unary(c, Buffer.from("c"), md({ "x-envoy-fault-abort-request": "503" }));
    expect([r1.err, r2.err, r3.err]).toEqual([null, null, null]);
    expect(up.calls["Unary"]).toBe(3);
    await journalHas(px, 3);
    expect(px.calls.every((x) => x.faults === undefined && x.decided_by === "upstream")).toBe(true);
  });

  it("x-dojang-fault injects any kind when faultHeaders is on", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address, { listener: { faultHeaders: true } });
    const c = client(px);

    const a = await unary(c, Buffer.from("a"), md({ "x-dojang-fault": "abort=UNAVAILABLE;msg=down%2C%20really" }));
    expect(a.err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(a.err?.details).toBe("down, really");

    const s = await serverStream(c, "4", md({ "x-dojang-fault": "abort=14@after_messages:2" }));
    expect(s.messages).toEqual(["m1", "m2"]);
    expect(s.status.code).toBe(grpc.status.UNAVAILABLE);

    const rst = await rawCall(px.address, { "x-dojang-fault": "reset=FLOW_CONTROL_ERROR" }, frame(Buffer.from("r")));
    expect(rst.rstCode).toBe(3);

    const t0 = performance.now();
    const d = await unary(c, Buffer.from("d"), md({ "x-dojang-fault": "delay=250ms" }));
    expect(d.err).toBeNull();
    expect(performance.now() - t0).toBeGreaterThanOrEqual(240);

    // pct gates a header fault like a rule's percentage
    expect((await unary(c, Buffer.from("p"), md({ "x-dojang-fault": "abort=13;pct=0" }))).err).toBeNull();

    // a bad token is dropped on its own; the call goes on
    const bad = await unary(c, Buffer.from("b"), md({ "x-dojang-fault": "explode=1" }));
    expect(bad.err).toBeNull();

    await journalHas(px, 6);
    expect(px.calls.find((x) => x.grpc_message === "down, really")).toMatchObject({ faults: ["header"], fault_kinds: ["abort"], decided_by: "fault" });
    expect(sample(await scrape(px.adminAddress), "dojang_faults_injected_total", { rule: "header", kind: "abort" })).toBe(2);
  });

  it("accept Envoy's abort headers: a gRPC code, or an HTTP status mapped to its gRPC code", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address, { listener: { faultHeaders: true } });
    const c = client(px);

    const g = await unary(c, Buffer.from("g"), md({ "x-envoy-fault-abort-grpc-request": "14" }));
    expect(g.err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(g.err?.details).toBe("fault filter abort");

    const h = await unary(c, Buffer.from("h"), md({ "x-envoy-fault-abort-request": "503" }));
    expect(h.err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(h.err?.details).toBe("fault filter abort");

    // the HTTP status wins when both are set (Envoy's rule): 404 → 12 UNIMPLEMENTED
    const both = await unary(c, Buffer.from("b"), md({ "x-envoy-fault-abort-request": "404", "x-envoy-fault-abort-grpc-request": "14" }));
    expect(both.err?.code).toBe(grpc.status.UNIMPLEMENTED);

    // Envoy's gRPC abort is Trailers-Only, :status 200
    const raw = await rawCall(px.address, { "x-envoy-fault-abort-grpc-request": "8" }, frame(Buffer.from("r")));
    expect(raw.headers?.[":status"]).toBe(200);
    expect(raw.headers?.["grpc-status"]).toBe("8");
    expect(up.calls["Unary"]).toBe(0);
  });

  it("accept Envoy's delay header, and the -percentage headers gate each fault", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address, { listener: { faultHeaders: true } });
    const c = client(px);

    let t0 = performance.now();
    expect((await unary(c, Buffer.from("d"), md({ "x-envoy-fault-delay-request": "200" }))).err).toBeNull();
    expect(performance.now() - t0).toBeGreaterThanOrEqual(190);

    t0 = performance.now();
    expect((await unary(c, Buffer.from("d0"), md({ "x-envoy-fault-delay-request": "400", "x-envoy-fault-delay-request-percentage": "0" }))).err).toBeNull();
    expect(performance.now() - t0).toBeLessThan(300);

    const off = await unary(c, Buffer.from("a0"), md({ "x-envoy-fault-abort-grpc-request": "14", "x-envoy-fault-abort-request-percentage": "0" }));
    expect(off.err).toBeNull();
    const on = await unary(c, Buffer.from("a100"), md({ "x-envoy-fault-abort-grpc-request": "14", "x-envoy-fault-abort-request-percentage": "100" }));
    expect(on.err?.code).toBe(grpc.status.UNAVAILABLE);

    // 50 %: some calls fail and some do not
    const codes: number[] = [];
    for (let i = 0; i < 24; i++) {
      const r = await unary(c, Buffer.from(`${i}`), md({ "x-envoy-fault-abort-grpc-request": "14", "x-envoy-fault-abort-request-percentage": "50" }));
      codes.push(r.err?.code ?? 0);
    }
    expect(codes.filter((x) => x === 14).length).toBeGreaterThan(2);
    expect(codes.filter((x) => x === 0).length).toBeGreaterThan(2);
  });

  it("accept Envoy's throughput header: the response is throttled to that many KiB/s", { timeout: 15_000 }, async () => {
    const up = await startUpstream();
    const px = await proxy(up.address, { listener: { faultHeaders: true } });
    const payload = Buffer.alloc(32 * 1024, 0x61);
    const t0 = performance.now();
    const r = await unary(client(px), payload, md({ "x-envoy-fault-throughput-response": "16" }));
    const elapsed = performance.now() - t0;
    expect(r.err).toBeNull();
    expect(r.res?.equals(payload)).toBe(true);
    expect(elapsed).toBeGreaterThanOrEqual(1200); // 32 KiB at 16 KiB/s: about 2 s
    expect(elapsed).toBeLessThan(8000);
    await journalHas(px, 1);
    expect(px.calls[0]).toMatchObject({ faults: ["header"], fault_kinds: ["bandwidth"] });
  });

  it("take the terminal slot before any rule: the rule matches but does not fire", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address, { listener: { faultHeaders: true } });
    px.faults.add({ id: "rule", action: { kind: "abort", code: 14 } });
    const r = await unary(client(px), Buffer.from("x"), md({ "x-envoy-fault-abort-grpc-request": "8" }));
    expect(r.err?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(px.faults.list()[0]).toMatchObject({ matched: 1, fired: 0 });
  });

  it("with Envoy's delay and abort headers together delay first, then abort (as Envoy does)", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address, { listener: { faultHeaders: true } });
    const t0 = performance.now();
    const r = await unary(client(px), Buffer.from("x"), md({ "x-envoy-fault-delay-request": "250", "x-envoy-fault-abort-grpc-request": "14" }));
    expect(r.err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(240);
  });
});

// === reporting ===

describe("fault reporting", () => {
  it("faultTrailer names the rule in x-dojang-fault: in Trailers-Only headers and in forwarded trailers", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address, { listener: { faultTrailer: true } });
    px.faults.add({ id: "flaky", match: { method: "Unary" }, action: { kind: "abort", code: 14 } });
    px.faults.add({ id: "slow", match: { method: "ServerStream" }, action: { kind: "delay", at: "trailers", delay: "10ms" } });
    px.faults.add({ id: "cut", match: { method: "ServerStream", metadata: [{ name: "x-cut", present: true }] }, action: { kind: "abort", code: 10, afterMessages: 1 } });
    const c = client(px);

    const a = await unary(c, Buffer.from("a"));
    expect(a.err?.metadata.get("x-dojang-fault")).toEqual(["flaky"]);
    const s = await serverStream(c, "2");
    expect(s.status.code).toBe(grpc.status.OK);
    expect(s.status.metadata.get("x-dojang-fault")).toEqual(["slow"]);
    const both = await serverStream(c, "3", md({ "x-cut": "1" }));
    expect(both.messages).toEqual(["m1"]);
    expect(both.status.code).toBe(grpc.status.ABORTED);
    expect(both.status.metadata.get("x-dojang-fault")).toEqual(["slow,cut"]);
  });

  it("stacks one terminal fault per call: the first rule in order fires, a later one only counts as matched", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "first", action: { kind: "abort", code: "OUT_OF_RANGE" } });
    px.faults.add({ id: "second", action: { kind: "abort", code: "UNAVAILABLE" } });
    px.faults.add({ id: "modifier", action: { kind: "delay", at: "request", delay: "1ms" } });
    const r = await unary(client(px), Buffer.from("x"));
    expect(r.err?.code).toBe(grpc.status.OUT_OF_RANGE);
    expect(px.faults.list().map((s) => [s.rule.id, s.matched, s.fired])).toEqual([
      ["first", 1, 1],
      ["second", 1, 0],
      ["modifier", 1, 1],
    ]);
    await journalHas(px, 1);
    expect(px.calls[0]).toMatchObject({ faults: ["first", "modifier"], fault_kinds: ["abort", "delay"] });
  });

  it("without faultTrailer sends no x-dojang-fault", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "flaky", action: { kind: "abort", code: 14 } });
    const a = await unary(client(px), Buffer.from("a"));
    expect(a.err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(a.err?.metadata.get("x-dojang-fault")).toEqual([]);
  });

  it("counts faulted calls in dojang_calls_total with decided_by and fault_rule, and actions in dojang_faults_injected_total", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    px.faults.add(FLAKY);
    const c = client(px);
    for (let i = 0; i < 3; i++) await unary(c, Buffer.from(`${i}`));

    const faulted = { grpc_service: "test.Echo", grpc_method: "Unary", grpc_code: "UNAVAILABLE", decided_by: "fault", fault_rule: "flaky" };
    expect(await sampleReaching(px.adminAddress, "dojang_calls_total", faulted, 2)).toBe(2);
    const text = await scrape(px.adminAddress);
    expect(sample(text, "dojang_calls_total", { grpc_method: "Unary", grpc_code: "OK", decided_by: "upstream", fault_rule: "" })).toBe(1);
    expect(sample(text, "dojang_faults_injected_total", { rule: "flaky", kind: "abort" })).toBe(2);
  });

  it("GET /calls?last=N and the library's calls show the fault, who decided and the attempt", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    px.faults.add(FLAKY);
    const c = client(px);
    await unary(c, Buffer.from("1"));
    await unary(c, Buffer.from("2"));
    const third = await rawCall(px.address, { "grpc-previous-rpc-attempts": "2" }, frame(Buffer.from("3")));
    expect(third.trailers?.["grpc-status"]).toBe("0");
    await journalHas(px, 3);

    const r = await api(px, "GET", "/calls?last=2");
    expect(r.status).toBe(200);
    expect(r.body).toHaveLength(2);
    expect(r.body[0]).toMatchObject({ path: "/test.Echo/Unary", grpc_code: 14, grpc_status: "UNAVAILABLE", decided_by: "fault", faults: ["flaky"], fault_kinds: ["abort"], attempt: 1 });
    expect(r.body[1]).toMatchObject({ grpc_code: 0, decided_by: "upstream", attempt: 3 });
    expect(r.body[1].faults).toBeUndefined();

    expect(px.calls.map((x) => [x.grpc_code, x.decided_by, x.faults, x.attempt])).toEqual([
      [14, "fault", ["flaky"], 1],
      [14, "fault", ["flaky"], 1],
      [0, "upstream", undefined, 3],
    ]);
    expect((await api(px, "GET", "/calls")).body).toHaveLength(3);
    expect((await api(px, "GET", "/calls?last=abc")).status).toBe(400);
  });

  it("maxActiveFaults caps the calls faulted at once, and /faults counts the overflow", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address, { top: { faultInjection: { seed: 7, maxActiveFaults: 1 } } });
    px.faults.add({ id: "slow", action: { kind: "delay", at: "request", delay: "400ms" } });
    const c = client(px);
    expect((await unary(c, Buffer.from("warm"))).err).toBeNull(); // connect first, so the three below start together

    const t0 = performance.now();
    const times = await Promise.all([0, 1, 2].map((i) => unary(c, Buffer.from(`${i}`)).then(() => performance.now() - t0)));
    times.sort((a, b) => a - b);
    expect(times[0]!).toBeLessThan(300);
    expect(times[1]!).toBeLessThan(300);
    expect(times[2]!).toBeGreaterThanOrEqual(390);
    const list = await api(px, "GET", "/faults");
    expect(list.body).toMatchObject({ seed: 7, maxActiveFaults: 1, overflowed: 2 });
  });
});
