// The access log: dojang in-process with a pino logger writing into a stream the test owns;
// exactly one JSON line per finished call, with the documented fields.
import { Writable } from "node:stream";
import * as grpc from "@grpc/grpc-js";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { startDojang, type DojangHandle } from "../../src/index.js";
import { echoClient, frame, rawCall, startGrpcServer, statusOf, unary, type EchoClient, type GrpcServer } from "../helpers/peers.js";

type Line = Record<string, unknown>;

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

/** A Writable that keeps every line pino writes, parsed. */
function sink(): { stream: Writable; lines: Line[]; raw: string[] } {
  const lines: Line[] = [];
  const raw: string[] = [];
  let buf = "";
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      buf += chunk.toString("utf8");
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const l = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        raw.push(l);
        lines.push(JSON.parse(l) as Line);
      }
      cb();
    },
  });
  return { stream, lines, raw };
}

/** Upstream ids seen (x-request-id per call), and the Echo behaviours the tests need. */
const seenIds: string[] = [];
async function upstream(): Promise<GrpcServer> {
  seenIds.length = 0;
  return startGrpcServer({
    Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      seenIds.push(String(call.metadata.get("x-request-id")[0] ?? ""));
      const req = call.request.toString();
      if (req === "fail") return cb({ code: grpc.status.NOT_FOUND, details: "no such thing" });
      if (req === "slow") {
        const t = setTimeout(() => cb(null, Buffer.from("late")), 3000);
        call.on("cancelled", () => clearTimeout(t));
        return;
      }
      cb(null, Buffer.concat([Buffer.from("echo:"), call.request]));
    },
    ServerStream: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
      for (const s of ["one", "two", "three"]) call.write(Buffer.from(s));
      call.end();
    },
  });
}

async function start(o: { accessLog?: boolean; level?: string; route?: Record<string, unknown> } = {}): Promise<{ px: DojangHandle; lines: Line[]; raw: string[] }> {
  up = await upstream();
  const s = sink();
  const logger = pino({ level: o.level ?? "info" }, s.stream);
  px = await startDojang({
    logger,
    config: {
      listeners: [{ name: "main", address: "127.0.0.1:0", routes: [{ match: { service: "test.Echo" }, cluster: "backend", timeout: "30s", ...o.route }] }],
      clusters: [{ name: "backend", endpoints: [up.address] }],
      accessLog: o.accessLog ?? true,
    },
  });
  return { px, lines: s.lines, raw: s.raw };
}

function client(address: string): EchoClient {
  const c = echoClient(address);
  clients.push(c);
  return c;
}

const md = (id?: string): grpc.Metadata => {
  const m = new grpc.Metadata();
  if (id !== undefined) m.set("x-request-id", id);
  return m;
};

const accessLines = (lines: Line[]): Line[] => lines.filter((l) => l["msg"] === "call");

/** Waits for `n` access lines, then a little longer so a duplicate would show up too. */
async function settle(lines: Line[], n: number): Promise<Line[]> {
  const until = Date.now() + 5000;
  while (accessLines(lines).length < n) {
    if (Date.now() > until) throw new Error(`only ${accessLines(lines).length} of ${n} access lines arrived: ${JSON.stringify(lines)}`);
    await new Promise((r) => setTimeout(r, 10));
  }
  await new Promise((r) => setTimeout(r, 150));
  return accessLines(lines);
}

describe("access log", () => {
  it("writes exactly one JSON line for an OK call and one for a failing call, with every field", async () => {
    const s = await start();
    const c = client(s.px.address);
    const ok = await unary(c, Buffer.from("hello"), md("req-ok-1"), { deadline: Date.now() + 10_000 });
    expect(ok.err).toBeNull();
    const bad = await unary(c, Buffer.from("fail"), md("req-fail-1"), { deadline: Date.now() + 10_000 });
    expect(bad.err?.code).toBe(grpc.status.NOT_FOUND);

    const lines = await settle(s.lines, 2);
    expect(lines).toHaveLength(2);
    // Every line pino wrote is one JSON object on one line.
    for (const r of s.raw) expect(() => JSON.parse(r)).not.toThrow();

    const okLine = lines.find((l) => l["request_id"] === "req-ok-1")!;
    const badLine = lines.find((l) => l["request_id"] === "req-fail-1")!;
    expect(okLine).toBeDefined();
    expect(badLine).toBeDefined();
    expect(seenIds).toEqual(["req-ok-1", "req-fail-1"]);

    expect(okLine).toMatchObject({
      level: 30,
      msg: "call",
      request_id: "req-ok-1",
      path: "/test.Echo/Unary",
      grpc_code: 0,
      grpc_status: "OK",
      decided_by: "upstream",
      route: "service:test.Echo",
      upstream: up!.address,
      req_messages: 1,
      req_bytes: 5 + "hello".length,
      resp_messages: 1,
      resp_bytes: 5 + "echo:hello".length,
    });
    expect(okLine["authority"]).toBe(s.px.address);
    expect(badLine).toMatchObject({
      request_id: "req-fail-1",
      path: "/test.Echo/Unary",
      grpc_code: 5,
      grpc_status: "NOT_FOUND",
      decided_by: "upstream",
      upstream: up!.address,
      req_messages: 1,
      req_bytes: 5 + "fail".length,
      resp_messages: 0,
      resp_bytes: 0,
    });
    for (const l of [okLine, badLine]) {
      // The client's 10 s, and what went upstream (at most that, and under the route's 30 s).
      expect(l["budget_in_ms"]).toBeGreaterThan(9000);
      expect(l["budget_in_ms"]).toBeLessThanOrEqual(10_000);
      expect(l["budget_out_ms"]).toBeGreaterThan(9000);
      expect(l["budget_out_ms"]).toBeLessThanOrEqual(l["budget_in_ms"] as number);
      expect(typeof l["duration_ms"]).toBe("number");
      expect(l["duration_ms"]).toBeGreaterThanOrEqual(0);
      expect(l["duration_ms"]).toBeLessThan(5000);
    }
  });

  it("logs an upstream's grpc-message as the client read it, decoded like dojang's own messages", async () => {
    const s = await start();
    const bad = await unary(client(s.px.address), Buffer.from("fail"), md("req-msg"));
    expect(bad.err?.details).toBe("no such thing");
    const [line] = await settle(s.lines, 1);
    // On the wire it is percent-encoded ("no%20such%20thing"); the log field is "the final
    // status the client got", and dojang's own messages are logged as plain text.
    expect(line?.["grpc_message"]).toBe("no such thing");
  });

  it("makes a distinct request_id for each call whose client sends none, and passes the same id upstream", async () => {
    const s = await start();
    const c = client(s.px.address);
    expect((await unary(c, Buffer.from("x"), md())).err).toBeNull();
    expect((await unary(c, Buffer.from("y"), md())).err).toBeNull();
    const lines = await settle(s.lines, 2);
    expect(lines).toHaveLength(2);
    const ids = lines.map((l) => l["request_id"]);
    for (const id of ids) expect(id).toMatch(/^\S{8,}$/);
    expect(new Set(ids).size).toBe(2);
    expect(seenIds).toEqual(ids);
    const line = lines[0];
    // No client deadline: the route's 30 s is the budget out, and there is no budget in.
    expect(line?.["budget_in_ms"] ?? null).toBeNull();
    expect(line?.["budget_out_ms"]).toBeGreaterThan(29_000);
    expect(line?.["budget_out_ms"]).toBeLessThanOrEqual(30_000);
  });

  it("logs dojang's own decisions: a deadline with the upstream it tried, a missing route with no upstream", async () => {
    const s = await start();
    const dl = await unary(client(s.px.address), Buffer.from("slow"), md("req-deadline"), { deadline: Date.now() + 200 });
    expect(dl.err?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    const nr = await rawCall(s.px.address, { ":path": "/other.Svc/Nope", "x-request-id": "req-noroute" }, frame(Buffer.from("abc")));
    expect(statusOf(nr)).toBe("12");

    const lines = await settle(s.lines, 2);
    expect(lines).toHaveLength(2);
    const d = lines.find((l) => l["request_id"] === "req-deadline")!;
    expect(d).toMatchObject({ path: "/test.Echo/Unary", grpc_code: 4, grpc_status: "DEADLINE_EXCEEDED", decided_by: "deadline", upstream: up!.address, req_messages: 1, resp_messages: 0 });
    expect(d["budget_in_ms"]).toBeLessThanOrEqual(200);
    expect(d["duration_ms"]).toBeGreaterThanOrEqual(100);
    const n = lines.find((l) => l["request_id"] === "req-noroute")!;
    expect(n).toMatchObject({ path: "/other.Svc/Nope", grpc_code: 12, grpc_status: "UNIMPLEMENTED", decided_by: "no_route", resp_messages: 0, resp_bytes: 0 });
    // dojang's own message is logged as text, the way a client reads it (not percent-encoded).
    expect(n["grpc_message"]).toBe("no route for /other.Svc/Nope on listener main");
    expect(n["upstream"] ?? null).toBeNull();
    expect(n["route"] ?? null).toBeNull();
  });

  it("counts only what was forwarded when a message is refused at its prefix, and what was dropped in req_/resp_refused_bytes", async () => {
    const s = await start({ route: { maxRequestMessageBytes: 16, maxResponseMessageBytes: 4 } });
    // Request side: a lone prefix declaring 1000 bytes; nothing reaches the upstream.
    const prefix = Buffer.from([0, 0, 0, 0x03, 0xe8]);
    const r1 = await rawCall(s.px.address, { "x-request-id": "req-refused-prefix" }, prefix);
    expect(statusOf(r1)).toBe("8");
    // A whole small message and the refused prefix in one DATA frame: the chunk is dropped whole.
    const both = Buffer.concat([frame(Buffer.from("ok")), prefix]);
    const r2 = await rawCall(s.px.address, { "x-request-id": "req-refused-chunk" }, both);
    expect(statusOf(r2)).toBe("8");
    // Response side: "one" and "two" (3 bytes each) are forwarded, "three" (5 > 4) is refused.
    const stream = client(s.px.address).ServerStream(Buffer.from("go"), md("req-refused-resp"), {});
    const got: string[] = [];
    const code = await new Promise<number>((resolve) => {
      stream.on("data", (d: Buffer) => got.push(d.toString()));
      stream.on("error", (e: grpc.ServiceError) => resolve(e.code));
      stream.on("status", (st: grpc.StatusObject) => resolve(st.code));
    });
    expect(code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(got).toEqual(["one", "two"]);
    expect(seenIds).toEqual([]); // no unary call reached the upstream's handler

    const lines = await settle(s.lines, 3);
    const byId = (id: string): Line => lines.find((l) => l["request_id"] === id)!;
    expect(byId("req-refused-prefix")).toMatchObject({ decided_by: "message_too_large", req_messages: 0, req_bytes: 0, req_refused_bytes: 5, resp_refused_bytes: 0 });
    expect(byId("req-refused-chunk")).toMatchObject({ decided_by: "message_too_large", req_messages: 0, req_bytes: 0, req_refused_bytes: both.length });
    expect(byId("req-refused-resp")).toMatchObject({
      decided_by: "message_too_large",
      req_messages: 1,
      req_bytes: 5 + 2,
      req_refused_bytes: 0,
      resp_messages: 2,
      resp_bytes: 2 * (5 + 3),
      resp_refused_bytes: 5 + "three".length,
    });
  });

  it("counts every message of a streaming call on its one line", async () => {
    const s = await start();
    const stream = client(s.px.address).ServerStream(Buffer.from("go"), md("req-stream"), {});
    const got: string[] = [];
    await new Promise<void>((resolve, reject) => {
      stream.on("data", (d: Buffer) => got.push(d.toString()));
      stream.on("error", reject);
      stream.on("status", () => resolve());
    });
    expect(got).toEqual(["one", "two", "three"]);
    const [line] = await settle(s.lines, 1);
    expect(line).toMatchObject({
      request_id: "req-stream",
      path: "/test.Echo/ServerStream",
      grpc_status: "OK",
      req_messages: 1,
      req_bytes: 5 + 2,
      resp_messages: 3,
      resp_bytes: 3 * 5 + "onetwothree".length,
    });
  });

  it("writes one line per call under concurrency, each request id exactly once", async () => {
    const s = await start();
    const c = client(s.px.address);
    const ids = Array.from({ length: 40 }, (_, i) => `req-many-${i}`);
    const rs = await Promise.all(ids.map((id, i) => unary(c, Buffer.from(i % 4 === 0 ? "fail" : "ok"), md(id))));
    expect(rs.filter((r) => r.err === null)).toHaveLength(30);
    const lines = await settle(s.lines, ids.length);
    expect(lines.map((l) => l["request_id"]).sort()).toEqual([...ids].sort());
  });

  it("writes no access lines when accessLog is false", async () => {
    const s = await start({ accessLog: false });
    expect((await unary(client(s.px.address), Buffer.from("x"), md("req-quiet"))).err).toBeNull();
    await new Promise((r) => setTimeout(r, 200));
    expect(accessLines(s.lines)).toEqual([]);
  });
});
