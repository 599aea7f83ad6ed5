// The access log: dojang in-process with a pino logger writing into a stream the test owns;
// exactly one JSON line per finished call, with the documented fields.
import { Writable } from "node:stream";
import http2 from "node:http2";
import net from "node:net";
import tls from "node:tls";
import * as grpc from "@grpc/grpc-js";
import pino from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startDojang, type DojangHandle } from "../../src/index.js";
import { configFromText } from "../../src/config/index.js";
import { echoClient, frame, rawCall, sample, startGrpcServer, statusOf, unary, type EchoClient, type GrpcServer } from "../helpers/peers.js";
import { CertDir, type Ca, type CertFiles } from "../helpers/certs.js";

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

async function start(o: { accessLog?: boolean; level?: string; route?: Record<string, unknown>; listener?: Record<string, unknown>; top?: Record<string, unknown> } = {}): Promise<{ px: DojangHandle; lines: Line[]; raw: string[] }> {
  up = await upstream();
  const s = sink();
  const logger = pino({ level: o.level ?? "info" }, s.stream);
  px = await startDojang({
    logger,
    config: {
      listeners: [{ name: "main", address: "127.0.0.1:0", routes: [{ match: { service: "test.Echo" }, cluster: "backend", timeout: "30s", ...o.route }], ...o.listener }],
      clusters: [{ name: "backend", endpoints: [up.address] }],
      accessLog: o.accessLog ?? true,
      ...o.top,
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

// Issue 18 item 5: who the client was. Real plaintext, TLS and mTLS clients (certificates made by
// openssl at test time), native gRPC over h2 and gRPC-Web over HTTP/1.1; the fields asserted on
// the line pino wrote.
describe("access log: who the client was", () => {
  let certs: CertDir;
  let ca: Ca;
  let clientCa: Ca;
  let server: CertFiles;
  let spiffe: CertFiles;
  let plainCert: CertFiles;
  beforeAll(() => {
    certs = new CertDir();
    ca = certs.ca("server-ca");
    clientCa = certs.ca("client-ca");
    server = certs.leaf(ca, "server", { cn: "default.test", dns: ["default.test", "api.example.com"], ip: ["127.0.0.1"] });
    spiffe = certs.leaf(clientCa, "spiffe", { cn: "client-one", o: "Acme", uri: ["spiffe://acme.test/ns/web/sa/client-one"], dns: ["client-one.acme.test"] });
    plainCert = certs.leaf(clientCa, "plain", { cn: "client-two" });
  });
  afterAll(() => certs.remove());
  const tlsListener = (mtls: boolean): Record<string, unknown> => ({
    tls: { certFile: server.certFile, keyFile: server.keyFile, ...(mtls ? { caFile: clientCa.certFile, requireClientCert: true } : {}) },
  });

  /** One unary call over a connection of its own from `localAddress`; the connection's local port. */
  function h2Call(address: string, id: string, o: { localAddress?: string; tls?: tls.ConnectionOptions } = {}): Promise<{ port: number; status: string | undefined }> {
    const [host, port] = address.split(":") as [string, string];
    return new Promise((resolve, reject) => {
      const session =
        o.tls === undefined
          ? http2.connect(`http://${address}`, { createConnection: () => net.connect({ host, port: Number(port), localAddress: o.localAddress ?? "127.0.0.1" }) })
          : http2.connect(`https://${address}`, { ...o.tls, ALPNProtocols: ["h2"] } as http2.SecureClientSessionOptions);
      session.on("error", reject);
      const req = session.request({ ":method": "POST", ":path": "/test.Echo/Unary", "content-type": "application/grpc", te: "trailers", "x-request-id": id });
      let status: string | undefined;
      req.on("response", (h) => (status ??= h["grpc-status"] as string | undefined));
      req.on("trailers", (t) => (status = t["grpc-status"] as string | undefined));
      req.on("error", reject);
      req.resume();
      req.on("close", () => {
        const localPort = session.socket?.localPort ?? -1;
        session.close();
        resolve({ port: localPort, status });
      });
      req.end(frame(Buffer.from("hi")));
    });
  }

  /** One gRPC-Web call over HTTP/1.1 (plaintext, or TLS with ALPN http/1.1); its local port and grpc-status. */
  function webCall(address: string, id: string, o: { localAddress?: string; tls?: tls.ConnectionOptions } = {}): Promise<{ port: number; status: string }> {
    const [host, port] = address.split(":") as [string, string];
    return new Promise((resolve, reject) => {
      const sock: net.Socket =
        o.tls === undefined
          ? net.connect({ host, port: Number(port), localAddress: o.localAddress ?? "127.0.0.1" })
          : tls.connect({ host, port: Number(port), ALPNProtocols: ["http/1.1"], ...o.tls });
      let got = "";
      let localPort = -1;
      sock.on(o.tls === undefined ? "connect" : "secureConnect", () => {
        localPort = sock.localPort ?? -1;
        const body = frame(Buffer.from("hi"));
        sock.write(`POST /test.Echo/Unary HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/grpc-web+proto\r\nx-request-id: ${id}\r\nconnection: close\r\ncontent-length: ${body.length}\r\n\r\n`);
        sock.write(body);
      });
      sock.on("data", (d: Buffer) => (got += d.toString("latin1")));
      sock.on("error", reject);
      sock.on("close", () => resolve({ port: localPort, status: /grpc-status:\s*(\d+)/.exec(got)?.[1] ?? got }));
    });
  }

  const lineOf = async (lines: Line[], id: string): Promise<Line> => {
    const until = Date.now() + 5000;
    for (;;) {
      const l = accessLines(lines).find((x) => x["request_id"] === id);
      if (l !== undefined) return l;
      if (Date.now() > until) throw new Error(`no access line for ${id}: ${JSON.stringify(lines)}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  };

  it("plaintext: the client's address and port, and no tls_* field, for native gRPC and gRPC-Web over HTTP/1.1", async () => {
    const s = await start({ listener: { grpcWeb: true, http1Address: "127.0.0.1:0" } });
    const h2 = await h2Call(s.px.address, "who-plain-h2", { localAddress: "127.0.0.2" });
    expect(h2.status).toBe("0");
    const web = await webCall(s.px.instance.http1Address(), "who-plain-web", { localAddress: "127.0.0.3" });
    expect(web.status).toBe("0");
    const a = await lineOf(s.lines, "who-plain-h2");
    expect(a).toMatchObject({ client_address: "127.0.0.2", client_port: h2.port, decided_by: "upstream" });
    const b = await lineOf(s.lines, "who-plain-web");
    expect(b).toMatchObject({ client_address: "127.0.0.3", client_port: web.port, protocol: "grpc-web", decided_by: "upstream" });
    for (const l of [a, b]) for (const k of ["tls_identity", "tls_sni", "tls_version"]) expect(l).not.toHaveProperty(k);
  });

  it("TLS: SNI and version with a grpc-js client; no tls_identity without client certificates", async () => {
    const s = await start({ listener: tlsListener(false) });
    const creds = grpc.credentials.createSsl(ca.cert);
    const c = new (grpc.makeGenericClientConstructor({}, "X"))(s.px.address, creds, { "grpc.ssl_target_name_override": "api.example.com", "grpc.default_authority": "api.example.com" });
    try {
      const got = await new Promise<grpc.ServiceError | null>((resolve) =>
        c.makeUnaryRequest("/test.Echo/Unary", (b: Buffer) => b, (b: Buffer) => b, Buffer.from("x"), md("who-tls"), {}, (e) => resolve(e)),
      );
      expect(got).toBeNull();
    } finally {
      c.close();
    }
    const l = await lineOf(s.lines, "who-tls");
    expect(l).toMatchObject({ client_address: "127.0.0.1", tls_sni: "api.example.com", tls_version: "TLSv1.3", decided_by: "upstream" });
    expect(typeof l["client_port"]).toBe("number");
    expect(l).not.toHaveProperty("tls_identity");
  });

  it("mTLS: the verified identity (URI SAN, else the subject), SNI and version, over h2 and over HTTPS/1.1 gRPC-Web; TLSv1.2 when the client caps it", async () => {
    const s = await start({ listener: { ...tlsListener(true), grpcWeb: true } });
    const base = { ca: ca.cert, servername: "default.test" };
    const a = await h2Call(s.px.address, "who-mtls-uri", { tls: { ...base, cert: spiffe.cert, key: spiffe.key } });
    expect(a.status).toBe("0");
    const b = await h2Call(s.px.address, "who-mtls-subject", { tls: { ...base, cert: plainCert.cert, key: plainCert.key, maxVersion: "TLSv1.2" } });
    expect(b.status).toBe("0");
    const w = await webCall(s.px.address, "who-mtls-web", { tls: { ...base, cert: spiffe.cert, key: spiffe.key } });
    expect(w.status).toBe("0");
    expect(await lineOf(s.lines, "who-mtls-uri")).toMatchObject({
      client_address: "127.0.0.1",
      client_port: a.port,
      tls_identity: "spiffe://acme.test/ns/web/sa/client-one",
      tls_sni: "default.test",
      tls_version: "TLSv1.3",
    });
    expect(await lineOf(s.lines, "who-mtls-subject")).toMatchObject({ client_port: b.port, tls_identity: "CN=client-two,O=dojang test", tls_version: "TLSv1.2" });
    expect(await lineOf(s.lines, "who-mtls-web")).toMatchObject({
      protocol: "grpc-web",
      client_port: w.port,
      tls_identity: "spiffe://acme.test/ns/web/sa/client-one",
      tls_sni: "default.test",
      tls_version: "TLSv1.3",
    });
  });

  it("a rate-limited call names its client and has no budget_out_ms (it never went upstream); nor has a call with no route", async () => {
    const s = await start({ route: { rateLimit: { callsPerSecond: 0.1, burst: 1 } } });
    const c = client(s.px.address);
    const deadline = (): grpc.CallOptions => ({ deadline: Date.now() + 10_000 });
    expect((await unary(c, Buffer.from("x"), md("who-admitted"), deadline())).err).toBeNull();
    expect((await unary(c, Buffer.from("x"), md("who-limited"), deadline())).err?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    const nr = await rawCall(s.px.address, { ":path": "/other.Svc/Nope", "x-request-id": "who-noroute", "grpc-timeout": "10S" }, frame(Buffer.from("abc")));
    expect(statusOf(nr)).toBe("12");
    const ok = await lineOf(s.lines, "who-admitted");
    expect(ok["budget_out_ms"]).toBeGreaterThan(5000);
    const limited = await lineOf(s.lines, "who-limited");
    expect(limited).toMatchObject({ decided_by: "rate_limited", grpc_code: 8, client_address: "127.0.0.1", attempts: 0 });
    expect(typeof limited["client_port"]).toBe("number");
    expect(limited["budget_in_ms"]).toBeGreaterThan(5000);
    expect(limited).not.toHaveProperty("budget_out_ms");
    const noRoute = await lineOf(s.lines, "who-noroute");
    expect(noRoute).toMatchObject({ decided_by: "no_route", client_address: "127.0.0.1" });
    expect(noRoute["budget_in_ms"]).toBeGreaterThan(5000);
    expect(noRoute).not.toHaveProperty("budget_out_ms");
    // the budget-out histogram counts only what went upstream, as the line does
    expect(sample(await s.px.instance.metrics.registry.metrics(), "dojang_budget_out_seconds_count")).toBe(1);
  });
});

// Issue 0.5.1 item 3: a token in a query string (?access_token=…) reached the access log and
// GET /calls, since the record's path was the client's raw :path. Now the record's path is the
// call's canonical method name (src/translate/grpc-path.ts); a :path that is not one is shown with
// its query redacted; and the operator may name more fields to redact (accessLogRedact).
describe("access log: no credential in a record", () => {
  /** One HTTP/1.1 request (connection: close) with the target as given; the whole answer. */
  function h1(address: string, head: string, body: Buffer): Promise<string> {
    const [host, port] = address.split(":") as [string, string];
    return new Promise((resolve, reject) => {
      const sock = net.connect(Number(port), host);
      let got = "";
      sock.on("connect", () => sock.write(Buffer.concat([Buffer.from(`${head}\r\nhost: localhost\r\nconnection: close\r\ncontent-length: ${body.length}\r\n\r\n`), body])));
      sock.on("data", (d: Buffer) => (got += d.toString("latin1")));
      sock.on("error", reject);
      sock.on("close", () => resolve(got));
    });
  }

  it("a query string's token reaches neither the access log, GET /calls nor a status message, whatever the protocol", async () => {
    const s = await start({ listener: { grpcWeb: true, connect: true, http1Address: "127.0.0.1:0" }, top: { admin: { address: "127.0.0.1:0" }, journal: 100 } });
    const h1addr = s.px.instance.http1Address();
    // native gRPC and gRPC-Web over HTTP/1.1: refused (not a method path), the query not echoed;
    // Connect takes a URL: served, the query dropped (never sent upstream either); a fragment:
    // refused, and not shown either
    const g = await rawCall(s.px.address, { ":path": "/test.Echo/Unary?access_token=S3CRET-grpc", "x-request-id": "q-grpc" }, frame(Buffer.from("hi")));
    const w = await h1(h1addr, "POST /test.Echo/Unary?access_token=S3CRET-web HTTP/1.1\r\ncontent-type: application/grpc-web+proto\r\nx-request-id: q-web", frame(Buffer.from("hi")));
    const c = await h1(h1addr, "POST /test.Echo/Unary?access_token=S3CRET-connect HTTP/1.1\r\ncontent-type: application/proto\r\nx-request-id: q-connect", Buffer.from("hi"));
    const f = await rawCall(s.px.address, { ":path": "/test.Echo/Unary#S3CRET-fragment", "x-request-id": "q-fragment" }, frame(Buffer.from("hi")));
    await settle(s.lines, 4);
    expect(s.raw.filter((l) => l.includes("S3CRET"))).toEqual([]);
    const calls = await (await fetch(`http://${s.px.adminAddress}/calls`)).text();
    expect(calls).not.toContain("S3CRET");
    expect([g.headers?.["grpc-message"], g.trailers?.["grpc-message"]].join(" ")).not.toContain("S3CRET");
    expect([statusOf(g), /grpc-status: (\d+)/.exec(w)?.[1], statusOf(f)]).toEqual(["12", "12", "12"]);
    expect(c).toMatch(/^HTTP\/1\.1 200/);
    expect(c).toContain("echo:hi");
    const byId = (id: string): Line => accessLines(s.lines).find((l) => l["request_id"] === id)!;
    expect(byId("q-grpc")).toMatchObject({ path: "/test.Echo/Unary?<redacted>", grpc_code: 12, decided_by: "no_route", grpc_message: 'malformed method name: "/test.Echo/Unary?<redacted>"' });
    expect(byId("q-web")).toMatchObject({ path: "/test.Echo/Unary?<redacted>", grpc_code: 12, protocol: "grpc-web" });
    expect(byId("q-connect")).toMatchObject({ path: "/test.Echo/Unary", grpc_code: 0, protocol: "connect" });
    expect(byId("q-fragment")).toMatchObject({ path: "/test.Echo/Unary#<redacted>", grpc_code: 12 });
  });

  it("accessLogRedact: the fields the operator names are <redacted> in the access log and GET /calls; the others are shown", async () => {
    const s = await start({ top: { admin: { address: "127.0.0.1:0" }, journal: 100, accessLogRedact: ["request_id", "authority", "client_address", "grpc_message"] } });
    const c = client(s.px.address);
    const bad = await unary(c, Buffer.from("fail"), md("rid-S3CRET"), { deadline: Date.now() + 10_000 });
    // (the client itself still gets the upstream's message: only records are redacted)
    expect(bad.err?.details).toBe("no such thing");
    const [line] = await settle(s.lines, 1);
    expect(line).toMatchObject({ request_id: "<redacted>", authority: "<redacted>", client_address: "<redacted>", grpc_message: "<redacted>", path: "/test.Echo/Unary", grpc_code: 5, decided_by: "upstream" });
    expect(typeof line!["client_port"]).toBe("number");
    expect(s.raw.join("\n")).not.toContain("rid-S3CRET");
    expect(s.raw.join("\n")).not.toContain("no such thing");
    const calls = JSON.parse(await (await fetch(`http://${s.px.adminAddress}/calls`)).text()) as Line[];
    expect(calls[0]).toMatchObject({ request_id: "<redacted>", authority: "<redacted>", client_address: "<redacted>", grpc_message: "<redacted>" });
    // the request id still went upstream as the client sent it: redaction is of records only
    expect(seenIds).toEqual(["rid-S3CRET"]);
    // a reload applies a new list to the calls that start after it
    const next = {
      admin: { address: "127.0.0.1:0" },
      journal: 100,
      accessLogRedact: ["authority"],
      listeners: [{ name: "main", address: "127.0.0.1:0", routes: [{ match: { service: "test.Echo" }, cluster: "backend", timeout: "30s" }] }],
      clusters: [{ name: "backend", endpoints: [up!.address] }],
    };
    expect((await s.px.instance.reload(configFromText(JSON.stringify(next), "<test>"))).ok).toBe(true);
    expect((await unary(c, Buffer.from("fail"), md("rid-after-reload"), { deadline: Date.now() + 10_000 })).err?.code).toBe(grpc.status.NOT_FOUND);
    const after = (await settle(s.lines, 2)).find((l) => l["request_id"] === "rid-after-reload");
    expect(after).toMatchObject({ authority: "<redacted>", client_address: "127.0.0.1", grpc_message: "no such thing" });
  });
});
