// Contract (house review 3, change 1: one way in for every protocol): a bridged call's request
// head is built once, the same way for gRPC-Web, Connect and JSON transcoding, over HTTP/1.1 and
// HTTP/2, so what the call reads of the client's head does not depend on which bridge took it:
// - a client's grpc-previous-rpc-attempts is the record's `attempt` (gRFC A6) on every bridge;
// - hop-by-hop fields (RFC 9110 §7.6.1: the fixed ones, http2-settings, and every field the
//   Connection header names) never reach the call: not the upstream, not a fault rule's metadata;
// - a client's trace context (W3C traceparent) is continued, as for a native call;
// - a TLS listener with any HTTP/1.1 protocol (JSON transcoding included) offers ALPN http/1.1;
// and the listener asks the protocols in one order on both transports (a JSON rule before a CORS
// preflight), and refuses an HTTP/1.1 call under overload in the form of the protocol that took it.
// Judges: a real grpc-js upstream that records the metadata it receives; connect-go's Connect
// client (test/engines/connect-go-client); raw HTTP/1.1 (node:http) and HTTP/2 (node:http2)
// clients; the access record (`attempt`, `protocol`).
import http from "node:http";
import http2 from "node:http2";
import tls from "node:tls";
import { create, toBinary } from "@bufbuild/protobuf";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DojangHandle } from "../../src/index.js";
import { responseBuffers } from "../../src/proxy/observe/overload.js";
import { CertDir, type CertFiles, type Ca } from "../helpers/certs.js";
import { engineBinary } from "../helpers/engines.js";
import { useFixtures } from "../helpers/fixtures.js";
import { frame, startRawUpstream } from "../helpers/peers.js";
import { freePort, runGroup } from "../helpers/process.js";
import { SHOP_SERVICE, descriptorSet, shopDescriptorSet, shopRegistry, startShopGrpcJs } from "../helpers/transcode.js";

const fx = useFixtures();
type Shop = Awaited<ReturnType<typeof startShopGrpcJs>>;

interface Reply {
  status: number;
  headers: Record<string, unknown>;
  body: Buffer;
}

/** One HTTP/1.1 request, headers exactly as given (node:http sends them as they are). */
function h1(addr: string, method: string, path: string, headers: Record<string, string>, body?: Uint8Array): Promise<Reply> {
  const [host, port] = addr.split(":") as [string, string];
  return new Promise((resolve, reject) => {
    const req = http.request({ host, port: Number(port), method, path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (d: Buffer) => chunks.push(d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body === undefined ? undefined : Buffer.from(body));
  });
}

function h2(addr: string, method: string, path: string, headers: Record<string, string>, body?: Uint8Array): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const c = http2.connect(`http://${addr}`);
    c.on("error", reject);
    const s = c.request({ ":method": method, ":path": path, ...headers }, { endStream: body === undefined });
    if (body !== undefined) s.end(Buffer.from(body));
    let head: Record<string, unknown> = {};
    const chunks: Buffer[] = [];
    s.on("response", (h) => (head = h));
    s.on("data", (d: Buffer) => chunks.push(d));
    s.on("error", reject);
    s.on("close", () => {
      c.close();
      resolve({ status: Number(head[":status"] ?? 0), headers: head, body: Buffer.concat(chunks) });
    });
  });
}

const Item = () => shopRegistry().getMessage("dojang.test.shop.v1.Item")!;
const itemBytes = (id: string): Uint8Array => toBinary(Item(), create(Item(), { id, title: "t" } as never));

/** One unary call of each bridge, on either transport, with `extra` request fields; each is answered 200 by the shop. */
const BRIDGES = {
  "grpc-web": (send: typeof h1, addr: string, extra: Record<string, string>) =>
    send(addr, "POST", `/${SHOP_SERVICE}/UpdateItem`, { "content-type": "application/grpc-web+proto", "x-grpc-web": "1", ...extra }, frame(Buffer.from(itemBytes("w")))),
  connect: (send: typeof h1, addr: string, extra: Record<string, string>) =>
    send(addr, "POST", `/${SHOP_SERVICE}/UpdateItem`, { "content-type": "application/proto", "connect-protocol-version": "1", ...extra }, itemBytes("c")),
  json: (send: typeof h1, addr: string, extra: Record<string, string>) => send(addr, "GET", "/v1/shelves/s1/items/i1", extra),
} as const;
const PROTOCOL = { "grpc-web": "grpc-web", connect: "connect", json: "json" } as const;

async function setup(listener: Record<string, unknown> = {}, top: Record<string, unknown> = {}): Promise<{ up: Shop; px: DojangHandle; h1: string; h2: string }> {
  const up = fx.track(await startShopGrpcJs(), (u) => u.close());
  const px = await fx.proxyFor(up.address, {
    listener: { http1Address: "127.0.0.1:0", grpcWeb: true, connect: true, jsonTranscoding: { descriptorSet: shopDescriptorSet() }, ...listener },
    top,
  });
  return { up, px, h1: px.instance.http1Address(), h2: px.address };
}

async function lastRecord(px: DojangHandle, n: number): Promise<(typeof px.calls)[number]> {
  const end = Date.now() + 5000;
  while (px.calls.length < n && Date.now() < end) await new Promise((r) => setTimeout(r, 5));
  return px.calls[n - 1]!;
}

describe("one request head for every bridge", () => {
  it("a client's grpc-previous-rpc-attempts is the record's attempt on every bridge and transport (JSON's head left it out)", async () => {
    const { up, px, h1: a1, h2: a2 } = await setup();
    let n = 0;
    for (const [name, call] of Object.entries(BRIDGES)) {
      for (const [transport, send, addr] of [["HTTP/1.1", h1, a1], ["HTTP/2", h2, a2]] as const) {
        const r = await call(send, addr, { "grpc-previous-rpc-attempts": "2" });
        expect(r.status, `${name} ${transport}`).toBe(200);
        const rec = await lastRecord(px, ++n);
        expect({ protocol: rec.protocol, attempt: rec.attempt }, `${name} ${transport}`).toEqual({ protocol: PROTOCOL[name as keyof typeof PROTOCOL], attempt: 3 });
        // and it goes upstream as it came
        expect(up.seen.at(-1)!.metadata.get("grpc-previous-rpc-attempts"), `${name} ${transport}`).toEqual(["2"]);
      }
    }
  });

  it("hop-by-hop fields reach neither the upstream nor a fault rule: the fixed list, http2-settings, and what Connection names (RFC 9110 §7.6.1)", async () => {
    const { up, px, h1: a1 } = await setup();
    // a fault rule that a hop-by-hop field would trip if the call read it as metadata
    px.faults.add({ id: "hop", match: { metadata: [{ name: "http2-settings", present: true }] }, action: { kind: "abort", code: "PERMISSION_DENIED", message: "read a hop-by-hop field" } });
    const hop = { connection: "keep-alive, x-hop, HTTP2-Settings", "keep-alive": "timeout=5", "x-hop": "secret", "http2-settings": "AAMAAABkAARAAAAA", "x-kept": "yes" };
    for (const [name, call] of Object.entries(BRIDGES)) {
      const before = up.seen.length;
      const r = await call(h1, a1, hop);
      expect(r.status, name).toBe(200);
      // (gRPC-Web answers 200 with the status inside: it reached the upstream, or a fault would show)
      expect(r.headers["grpc-status"] ?? "0", name).toBe("0");
      expect(up.seen.length, name).toBe(before + 1);
      const md = up.seen.at(-1)!.metadata;
      expect({ hop: md.get("x-hop"), settings: md.get("http2-settings"), keepAlive: md.get("keep-alive"), kept: md.get("x-kept") }, name).toEqual({ hop: [], settings: [], keepAlive: [], kept: ["yes"] });
    }
  });

  it("a client's trace context is continued on every bridge, as on a native call", async () => {
    const closed = await freePort();
    const { up, h1: a1, h2: a2 } = await setup({}, { tracing: { endpoint: `http://127.0.0.1:${closed}/v1/traces`, sampleRatio: 1 } });
    const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    for (const [name, call] of Object.entries(BRIDGES)) {
      for (const [transport, send, addr] of [["HTTP/1.1", h1, a1], ["HTTP/2", h2, a2]] as const) {
        const r = await call(send, addr, { traceparent: parent, tracestate: "rojo=00f067aa0ba902b7" });
        expect(r.status, `${name} ${transport}`).toBe(200);
        const md = up.seen.at(-1)!.metadata;
        // the same trace, dojang's attempt span as the parent
        expect(String(md.get("traceparent")[0]), `${name} ${transport}`).toMatch(/^00-4bf92f3577b34da6a3ce929d0e0e4736-(?!00f067aa0ba902b7)[0-9a-f]{16}-01$/);
        expect(md.get("tracestate"), `${name} ${transport}`).toEqual(["rojo=00f067aa0ba902b7"]);
      }
    }
  });
});

describe("ALPN on a TLS listener offers http/1.1 for every protocol that has an HTTP/1.1 form", () => {
  let certs: CertDir;
  let ca: Ca;
  let server: CertFiles;
  beforeAll(() => {
    certs = new CertDir();
    ca = certs.ca("server-ca");
    server = certs.leaf(ca, "default", { cn: "default.test", dns: ["default.test"], ip: ["127.0.0.1"] });
  });
  afterAll(() => certs.remove());

  /** A GET over TLS with ALPN http/1.1 only: the status line, or the handshake's error. */
  function tlsGet(addr: string, path: string): Promise<string> {
    const [host, port] = addr.split(":") as [string, string];
    return new Promise((resolve) => {
      let data = "";
      let err: string | undefined;
      const s = tls.connect({ host, port: Number(port), servername: "default.test", ca: ca.cert, ALPNProtocols: ["http/1.1"] }, () =>
        s.write(`GET ${path} HTTP/1.1\r\nhost: default.test\r\nconnection: close\r\n\r\n`),
      );
      const t = setTimeout(() => s.destroy(), 5000);
      s.on("data", (d: Buffer) => (data += d.toString("latin1")));
      s.on("error", (e: NodeJS.ErrnoException) => (err ??= e.code ?? e.message));
      s.on("close", () => {
        clearTimeout(t);
        resolve(data.split("\r\n")[0] || `error ${err}`);
      });
    });
  }

  it("jsonTranscoding alone: an HTTP/1.1-only JSON client is served on the TLS port (it was refused in the handshake)", async () => {
    const up = fx.track(await startShopGrpcJs(), (u) => u.close());
    const px = await fx.proxyFor(up.address, { listener: { jsonTranscoding: { descriptorSet: shopDescriptorSet() }, tls: { certFile: server.certFile, keyFile: server.keyFile } } });
    expect(await tlsGet(px.address, "/v1/shelves/s1/items/i1")).toBe("HTTP/1.1 200 OK");
    expect(up.seen.at(-1)!.path).toBe(`/${SHOP_SERVICE}/GetItem`);
  });

  it("a TLS listener with no HTTP/1.1 protocol still refuses http/1.1 in the handshake", async () => {
    const up = await startRawUpstream((s) => s.respond({ ":status": 200 }, { endStream: true }));
    fx.track(up, (u) => u.close());
    const px = await fx.proxyFor(up.address, { listener: { tls: { certFile: server.certFile, keyFile: server.keyFile } } });
    expect(await tlsGet(px.address, "/")).toMatch(/^error /);
  });
});

describe("one order on both transports", () => {
  it("an OPTIONS request a JSON rule names is transcoded on HTTP/1.1 as on HTTP/2; any other OPTIONS is the CORS preflight (HTTP/1.1 answered every OPTIONS as a preflight)", async () => {
    const set = descriptorSet(join(import.meta.dirname, "../fixtures/transcode/options.proto"), "options.binpb");
    // (any method: an empty message, a valid Thing)
    const up = await fx.rawUpstream((s) => {
      s.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      s.on("wantTrailers", () => s.sendTrailers({ "grpc-status": "0" }));
      s.end(frame(Buffer.alloc(0)));
    });
    const px = await fx.proxyFor(up.address, {
      listener: { http1Address: "127.0.0.1:0", grpcWeb: true, cors: { allowOrigins: ["https://app.test"] }, jsonTranscoding: { descriptorSet: set } },
    });
    const a1 = px.instance.http1Address();
    const preflight = { origin: "https://app.test", "access-control-request-method": "POST" };
    for (const [transport, send, addr] of [["HTTP/1.1", h1, a1], ["HTTP/2", h2, px.address]] as const) {
      const r = await send(addr, "OPTIONS", "/v1/things/7", preflight);
      expect([r.status, r.body.toString()], transport).toEqual([200, "{}"]);
      expect(up.seen.at(-1)!.headers[":path"], transport).toBe("/dojang.test.options.v1.Things/Describe");
      const p = await send(addr, "OPTIONS", "/dojang.test.options.v1.Things/Describe", preflight);
      expect([p.status, p.headers["access-control-allow-origin"]], transport).toEqual([204, "https://app.test"]);
    }
    expect(up.seen.length).toBe(2);
  });
});

describe("an HTTP/1.1 call refused under overload is refused in its own protocol's form", () => {
  it("Connect on a listener with JSON transcoding too: Connect's error, read by connect-go (it got JSON transcoding's Status); JSON: 503 and a google.rpc.Status", async () => {
    const { up, h1: a1 } = await setup();
    responseBuffers.overloaded = true;
    try {
      const r = await runGroup(engineBinary("connect-go-client"), ["-url", `http://${a1}`, "-procedure", `/${SHOP_SERVICE}/UpdateItem`, "-codec", "proto", "-protocol", "connect"], {}, 20_000);
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout.trim())).toMatchObject({ code: 14, message: "dojang is overloaded (response-buffer budget or heap): call not started, retry later" });
      const j = await h1(a1, "GET", "/v1/shelves/s1/items/i1", {});
      expect([j.status, JSON.parse(j.body.toString())]).toEqual([503, { code: 14, message: "dojang is overloaded (response-buffer budget or heap): call not started, retry later" }]);
      const w = await BRIDGES["grpc-web"](h1, a1, {});
      expect([w.status, w.headers["grpc-status"]]).toEqual([200, "14"]);
    } finally {
      responseBuffers.overloaded = false;
    }
    expect(up.seen.length).toBe(0);
  });
});
