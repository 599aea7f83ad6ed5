// Contract (issue 12, gRPC-Web): a gRPC-Web client side beside the native one — application/grpc-web,
// +proto, -text (base64 both ways) over HTTP/1.1 (http1Address) and HTTP/2 (the h2c port),
// translated to a native gRPC call upstream and back; trailers become the trailer frame (0x80);
// Trailers-Only and every status dojang decides reach the client with HTTP 200 as a readable
// status; CORS preflight answered by dojang, refused origins get no CORS headers. Real peers: a
// @grpc/grpc-js upstream, undici and node:http as HTTP/1.1 clients, node:http2 for HTTP/2.
import * as grpc from "@grpc/grpc-js";
import http from "node:http";
import http2 from "node:http2";
import { Agent, request } from "undici";
import { afterAll, describe, expect, it } from "vitest";
import { fileURLToPath } from "node:url";
import { loadConfigFile } from "../../src/config/load.js";
import { configFromText, parseConfigText } from "../../src/config/parse.js";
import type { DojangHandle } from "../../src/index.js";
import { trailerParse } from "@connectrpc/connect/protocol-grpc-web";
import { useFixtures, waitFor } from "../helpers/fixtures.js";
import { frame } from "../helpers/peers.js";

const fx = useFixtures();
const agent = new Agent({ connections: 4 });
afterAll(() => agent.close());

const NON_ASCII = "잘못된 요청: ✓ ünïcode";

const impl: grpc.UntypedServiceImplementation = {
  Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
    const s = call.request.toString();
    // (no headers before this error: grpc-js then answers Trailers-Only)
    if (s === "fail") return cb({ code: grpc.status.INVALID_ARGUMENT, details: NON_ASCII });
    const md = new grpc.Metadata();
    md.set("x-echo", "yes");
    call.sendMetadata(md);
    if (s === "slow") return void setTimeout(() => cb(null, Buffer.from("late")), 3000);
    cb(null, call.request);
  },
  ServerStream: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
    for (let i = 0; i < 3; i++) call.write(Buffer.concat([call.request, Buffer.from(`#${i}`)]));
    call.end();
  },
  ClientStream: (_c: unknown, cb: grpc.sendUnaryData<Buffer>) => cb({ code: grpc.status.UNIMPLEMENTED }),
  Bidi: (c: grpc.ServerDuplexStream<Buffer, Buffer>) => c.end(),
};

async function proxy(listener: Record<string, unknown> = {}, route: Record<string, unknown> = {}): Promise<{ px: DojangHandle; h1: string }> {
  const up = await fx.grpcServer(impl);
  const px = await fx.proxyFor(up.address, {
    listener: { grpcWeb: true, http1Address: "127.0.0.1:0", cors: { allowOrigins: ["http://app.example.com", "*.trusted.test"] }, ...listener },
    route: { match: { service: "test.Echo" }, ...route },
  });
  return { px, h1: px.instance.http1Address() };
}

/** Splits a gRPC-Web body into its message frames and the trailer frame's fields. */
function parseBody(body: Buffer): { messages: string[]; trailers: Record<string, string> | undefined; rest: number } {
  const messages: string[] = [];
  let trailers: Record<string, string> | undefined;
  let i = 0;
  while (i + 5 <= body.length) {
    const flag = body[i]!;
    const len = body.readUInt32BE(i + 1);
    if (i + 5 + len > body.length) break;
    const payload = body.subarray(i + 5, i + 5 + len);
    if ((flag & 0x80) !== 0) trailers = Object.fromEntries(trailerParse(payload));
    else messages.push(payload.toString());
    i += 5 + len;
  }
  return { messages, trailers, rest: body.length - i };
}

const decodeMsg = (m: string | undefined): string => decodeURIComponent(m ?? "");

describe("gRPC-Web over HTTP/1.1 (http1Address)", () => {
  it("forwards a unary call: HTTP 200, the gRPC-Web content type, metadata in the head, the message, then the trailer frame with grpc-status 0", async () => {
    const { px, h1 } = await proxy();
    const res = await request(`http://${h1}/test.Echo/Unary`, {
      method: "POST",
      dispatcher: agent,
      headers: { "content-type": "application/grpc-web+proto", "x-grpc-web": "1", "x-user-agent": "test" },
      body: frame(Buffer.from("hello")),
    });
    const body = Buffer.from(await res.body.arrayBuffer());
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toBe("application/grpc-web+proto");
    expect(res.headers["x-echo"]).toBe("yes");
    const p = parseBody(body);
    expect(p.messages).toEqual(["hello"]);
    expect(p.trailers?.["grpc-status"]).toBe("0");
    expect(p.rest).toBe(0);
    await waitFor("the access record", () => px.calls.length === 1);
    expect(px.calls[0]).toMatchObject({ path: "/test.Echo/Unary", grpc_code: 0, protocol: "grpc-web", decided_by: "upstream" });
  });

  it("decodes a -text request sent in odd-sized chunks with padding mid-body, and answers a server stream in base64 with the trailer frame", async () => {
    const { h1 } = await proxy();
    const payload = frame(Buffer.from("ab")); // 7 bytes → base64 with padding
    // each 4-character group padded on its own is legal: "AAAAAmFi" + a padded trailing group
    const b64 = Buffer.from(payload.subarray(0, 6).toString("base64") + payload.subarray(6).toString("base64"));
    const { status, headers, body } = await new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
      const req = http.request(`http://${h1}/test.Echo/ServerStream`, { method: "POST", headers: { "content-type": "application/grpc-web-text", "x-grpc-web": "1" } }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
      });
      req.on("error", reject);
      // 1, 2, 3 ... characters at a time, so groups are split across chunks
      let at = 0;
      for (let n = 1; at < b64.length; n++) {
        req.write(b64.subarray(at, at + n));
        at += n;
      }
      req.end();
    });
    expect(status).toBe(200);
    expect(headers["content-type"]).toBe("application/grpc-web-text+proto");
    expect(/^[A-Za-z0-9+/]*=*$/.test(body.toString()), "the body is base64").toBe(true);
    const p = parseBody(Buffer.from(body.toString(), "base64"));
    expect(p.messages).toEqual(["ab#0", "ab#1", "ab#2"]);
    expect(p.trailers?.["grpc-status"]).toBe("0");
  });

  it("turns an upstream Trailers-Only error with a non-ASCII message into HTTP 200 with grpc-status/grpc-message headers and the same status in a trailer frame", async () => {
    const { h1 } = await proxy();
    const res = await request(`http://${h1}/test.Echo/Unary`, {
      method: "POST",
      dispatcher: agent,
      headers: { "content-type": "application/grpc-web", origin: "http://app.example.com" },
      body: frame(Buffer.from("fail")),
    });
    const body = Buffer.from(await res.body.arrayBuffer());
    expect(res.statusCode).toBe(200);
    expect(res.headers["grpc-status"]).toBe("3");
    expect(decodeMsg(res.headers["grpc-message"] as string)).toBe(NON_ASCII);
    expect(res.headers["access-control-allow-origin"]).toBe("http://app.example.com");
    expect(String(res.headers["access-control-expose-headers"])).toContain("grpc-message");
    const p = parseBody(body);
    expect(p.messages).toEqual([]);
    expect(p.trailers?.["grpc-status"]).toBe("3");
    expect(decodeMsg(p.trailers?.["grpc-message"])).toBe(NON_ASCII);
  });

  it("answers statuses dojang decides (no route, deadline) with HTTP 200 and a readable status, and names who decided", async () => {
    const { px, h1 } = await proxy();
    const noRoute = await request(`http://${h1}/other.Svc/Do`, { method: "POST", dispatcher: agent, headers: { "content-type": "application/grpc-web+proto" }, body: frame(Buffer.from("x")) });
    const nb = parseBody(Buffer.from(await noRoute.body.arrayBuffer()));
    expect(noRoute.statusCode).toBe(200);
    expect(noRoute.headers["grpc-status"]).toBe("12");
    expect(nb.trailers?.["grpc-status"]).toBe("12");

    // the upstream sent its headers, then is slow: the deadline's status comes as the trailer frame
    const t0 = performance.now();
    const late = await request(`http://${h1}/test.Echo/Unary`, {
      method: "POST",
      dispatcher: agent,
      headers: { "content-type": "application/grpc-web+proto", "grpc-timeout": "300m" },
      body: frame(Buffer.from("slow")),
    });
    const lb = parseBody(Buffer.from(await late.body.arrayBuffer()));
    expect(performance.now() - t0).toBeLessThan(2500);
    expect(late.statusCode).toBe(200);
    expect(late.headers["x-echo"]).toBe("yes");
    expect(lb.trailers?.["grpc-status"]).toBe("4");
    await waitFor("both access records", () => px.calls.length === 2);
    expect(px.calls.map((c) => c.decided_by).sort()).toEqual(["deadline", "no_route"]);
  });

  it("refuses a malformed -text body with 13 (bad_request), readable", async () => {
    const { h1 } = await proxy();
    const res = await request(`http://${h1}/test.Echo/Unary`, { method: "POST", dispatcher: agent, headers: { "content-type": "application/grpc-web-text" }, body: "AAAA!AAA" });
    const text = await res.body.text();
    expect(res.statusCode).toBe(200);
    const p = parseBody(Buffer.from(text, "base64"));
    expect(p.trailers?.["grpc-status"]).toBe("13");
    expect(decodeMsg(p.trailers?.["grpc-message"])).toContain("illegal base64 character");
  });

  it("answers a CORS preflight for an allowed origin (exact and wildcard) and none for a refused one", async () => {
    const { h1 } = await proxy();
    const ask = (origin: string) =>
      request(`http://${h1}/test.Echo/Unary`, {
        method: "OPTIONS",
        dispatcher: agent,
        headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "content-type,x-grpc-web,x-custom-md" },
      });
    const ok = await ask("https://a.b.trusted.test");
    await ok.body.dump();
    expect(ok.statusCode).toBe(204);
    expect(ok.headers["access-control-allow-origin"]).toBe("https://a.b.trusted.test");
    expect(ok.headers["access-control-allow-methods"]).toBe("POST");
    expect(String(ok.headers["access-control-allow-headers"]).split(",")).toEqual(expect.arrayContaining(["content-type", "x-grpc-web", "x-user-agent", "grpc-timeout", "x-custom-md"]));
    const exact = await ask("http://app.example.com");
    await exact.body.dump();
    expect(exact.headers["access-control-allow-origin"]).toBe("http://app.example.com");
    for (const bad of ["http://evil.example.com", "https://trusted.test.evil.com", "http://app.example.com.evil.com"]) {
      const no = await ask(bad);
      await no.body.dump();
      expect(no.statusCode, bad).toBe(403);
      expect(no.headers["access-control-allow-origin"], bad).toBeUndefined();
    }
    // the actual response to a refused origin carries no CORS header either
    const res = await request(`http://${h1}/test.Echo/Unary`, { method: "POST", dispatcher: agent, headers: { "content-type": "application/grpc-web", origin: "http://evil.example.com" }, body: frame(Buffer.from("hi")) });
    await res.body.dump();
    expect(res.headers["access-control-allow-origin"]).toBeUndefined();
  });

  it("refuses what is not gRPC-Web on the HTTP/1.1 socket without making a call", async () => {
    const { px, h1 } = await proxy();
    const res = await request(`http://${h1}/test.Echo/Unary`, { method: "POST", dispatcher: agent, headers: { "content-type": "application/json" }, body: "{}" });
    await res.body.dump();
    expect(res.statusCode).toBe(415);
    expect(px.calls.length).toBe(0);
  });
});

describe("gRPC-Web over HTTP/2 (the h2c port)", () => {
  it("forwards a server stream and ends it with the trailer frame in the body (no HTTP/2 trailers)", async () => {
    const { px } = await proxy();
    const s = fx.track(http2.connect(`http://${px.address}`), (c) => c.close());
    s.on("error", () => {});
    const out = await new Promise<{ headers: http2.IncomingHttpHeaders; body: Buffer; trailers: boolean }>((resolve) => {
      const req = s.request({ ":method": "POST", ":path": "/test.Echo/ServerStream", "content-type": "application/grpc-web+proto", "x-grpc-web": "1" });
      let headers: http2.IncomingHttpHeaders = {};
      let trailers = false;
      const chunks: Buffer[] = [];
      req.on("response", (h) => (headers = h));
      req.on("trailers", () => (trailers = true));
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => resolve({ headers, body: Buffer.concat(chunks), trailers }));
      req.end(frame(Buffer.from("h2")));
    });
    expect(out.headers[":status"]).toBe(200);
    expect(out.headers["content-type"]).toBe("application/grpc-web+proto");
    expect(out.trailers).toBe(false);
    const p = parseBody(out.body);
    expect(p.messages).toEqual(["h2#0", "h2#1", "h2#2"]);
    expect(p.trailers?.["grpc-status"]).toBe("0");
  });

  it("leaves native gRPC on the same port as it was", async () => {
    const { px } = await proxy();
    const c = fx.client(px.address) as unknown as { Unary: (r: Buffer, md: grpc.Metadata, o: grpc.CallOptions, cb: (e: grpc.ServiceError | null, r?: Buffer) => void) => void };
    const r = await new Promise<Buffer | undefined>((resolve, reject) => c.Unary(Buffer.from("native"), new grpc.Metadata(), {}, (e, res) => (e ? reject(e) : resolve(res))));
    expect(r?.toString()).toBe("native");
    await waitFor("the access record", () => px.calls.length === 1);
    expect(px.calls[0]!.protocol).toBeUndefined();
  });
});

describe("config/edge.yaml", () => {
  it("configures gRPC-Web, CORS and the HTTP/1.1 socket on its edge listener", () => {
    const c = loadConfigFile(fileURLToPath(new URL("../../config/edge.yaml", import.meta.url)), {});
    const l = c.listeners.find((x) => x.grpcWeb);
    expect(l?.cors?.allowOrigins.length).toBeGreaterThan(0);
    expect(l?.http1Address).not.toBeNull();
  });

  it("refuses cors and http1Address without grpcWeb, naming the key", () => {
    const issues = (extra: string): string => {
      const r = parseConfigText(`listeners:\n  - name: a\n    address: 127.0.0.1:0\n${extra}    routes: [{ match: { prefix: "/" }, cluster: b }]\nclusters: [{ name: b, endpoints: ["127.0.0.1:1"] }]\n`);
      return r.ok ? "ok" : JSON.stringify(r.issues);
    };
    expect(issues(`    cors: { allowOrigins: ["*"] }\n`)).toMatch(/listeners\[0\]\.cors.*needs grpcWeb/);
    expect(issues(`    http1Address: 127.0.0.1:0\n`)).toMatch(/listeners\[0\]\.http1Address.*needs grpcWeb/);
    expect(issues(`    grpcWeb: true\n    cors: { allowOrigins: ["https://exa mple.com"] }\n`)).toMatch(/listeners\[0\]\.cors\.allowOrigins\[0\]/);
    expect(issues(`    grpcWeb: true\n    http1Address: 127.0.0.1:0\n    cors: { allowOrigins: ["*", "https://*.example.com:8443"] }\n`)).toBe("ok");
  });
});

describe("gRPC-Web settings on reload", () => {
  const yaml = (up: string, origin: string, h1: string) =>
    `listeners:\n  - name: main\n    address: 127.0.0.1:0\n    grpcWeb: true\n    http1Address: ${h1}\n    cors: { allowOrigins: ["${origin}"] }\n    routes: [{ match: { prefix: "/" }, cluster: backend }]\nclusters: [{ name: backend, endpoints: ["${up}"] }]\n`;
  const preflight = async (h1: string, origin: string): Promise<number> => {
    const r = await request(`http://${h1}/test.Echo/Unary`, { method: "OPTIONS", dispatcher: agent, headers: { origin, "access-control-request-method": "POST" } });
    await r.body.dump();
    return r.statusCode;
  };

  it("takes new allowOrigins on the same sockets, and a moved http1Address binds the new socket and closes the old", async () => {
    const up = await fx.grpcServer(impl);
    const px = await fx.proxyFor(up.address, { listener: { grpcWeb: true, http1Address: "127.0.0.1:0", cors: { allowOrigins: ["http://a.test"] } } });
    const d = px.instance;
    const h1 = d.http1Address();
    expect(await preflight(h1, "http://b.test")).toBe(403);
    const listener = d.listeners[0]!;
    let r = await d.reload(configFromText(yaml(up.address, "http://b.test", "127.0.0.1:0"), "<test>"));
    expect(r.ok).toBe(true);
    expect(d.listeners[0]).toBe(listener);
    expect(d.http1Address()).toBe(h1);
    expect(await preflight(h1, "http://b.test")).toBe(204);
    expect(await preflight(h1, "http://a.test")).toBe(403);

    const port = await new Promise<number>((resolve) => {
      const s = http.createServer().listen(0, "127.0.0.1", () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    r = await d.reload(configFromText(yaml(up.address, "http://b.test", `127.0.0.1:${port}`), "<test>"));
    expect(r.ok).toBe(true);
    expect(d.http1Address()).toBe(`127.0.0.1:${port}`);
    expect(await preflight(`127.0.0.1:${port}`, "http://b.test")).toBe(204);
    await waitFor("the old HTTP/1.1 socket closed", () => !listener.http1!.listening, 5000);
  });
});
