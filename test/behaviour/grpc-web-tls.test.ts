// Contract (issue 12): "ALPN (h2, and http/1.1 for gRPC-Web over HTTP/1.1 on the same TLS port)":
// a TLS listener with grpcWeb answers gRPC-Web over HTTPS/1.1 and native gRPC over h2 on one port.
// Real peers: undici (HTTP/1.1 over TLS), a @grpc/grpc-js client and server, test-time certificates.
import * as grpc from "@grpc/grpc-js";
import { Agent, request } from "undici";
import { describe, expect, it } from "vitest";
import { trailerParse } from "@connectrpc/connect/protocol-grpc-web";
import { CertDir } from "../helpers/certs.js";
import { useFixtures } from "../helpers/fixtures.js";
import { frame } from "../helpers/peers.js";

const fx = useFixtures();

const impl: grpc.UntypedServiceImplementation = {
  Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, call.request),
  ServerStream: (call: grpc.ServerWritableStream<Buffer, Buffer>) => call.end(),
  ClientStream: (_c: unknown, cb: grpc.sendUnaryData<Buffer>) => cb({ code: grpc.status.UNIMPLEMENTED }),
  Bidi: (c: grpc.ServerDuplexStream<Buffer, Buffer>) => c.end(),
};

function parseBody(body: Buffer): { messages: string[]; trailers: Record<string, string> | undefined } {
  const messages: string[] = [];
  let trailers: Record<string, string> | undefined;
  for (let i = 0; i + 5 <= body.length; ) {
    const len = body.readUInt32BE(i + 1);
    const payload = body.subarray(i + 5, i + 5 + len);
    if ((body[i]! & 0x80) !== 0) trailers = Object.fromEntries(trailerParse(payload));
    else messages.push(payload.toString());
    i += 5 + len;
  }
  return { messages, trailers };
}

describe("gRPC-Web over HTTP/1.1 on a TLS listener (ALPN http/1.1 beside h2)", () => {
  it("serves gRPC-Web over HTTPS/1.1 and native gRPC over h2 on the same TLS port", async () => {
    const certs = fx.track(new CertDir(), (d) => d.remove());
    const ca = certs.ca("web-ca");
    const leaf = certs.leaf(ca, "server", { cn: "localhost", ip: ["127.0.0.1"], dns: ["localhost"] });
    const up = await fx.grpcServer(impl);
    const px = await fx.proxyFor(up.address, { listener: { grpcWeb: true, tls: { certFile: leaf.certFile, keyFile: leaf.keyFile } } });
    const tlsAgent = fx.track(new Agent({ connect: { ca: ca.cert } }), (a) => a.close());
    const res = await request(`https://${px.address}/test.Echo/Unary`, {
      method: "POST",
      dispatcher: tlsAgent,
      headers: { "content-type": "application/grpc-web+proto" },
      body: frame(Buffer.from("over tls")),
    });
    const p = parseBody(Buffer.from(await res.body.arrayBuffer()));
    expect(res.statusCode).toBe(200);
    expect(p.messages).toEqual(["over tls"]);
    expect(p.trailers?.["grpc-status"]).toBe("0");
    // the same port still speaks HTTP/2 with a native gRPC client (core API, not node's compat layer)
    const c = fx.track(new (grpc.makeGenericClientConstructor({}, "X"))(px.address, grpc.credentials.createSsl(ca.cert)), (x) => x.close());
    const r = await new Promise<Buffer>((resolve, reject) =>
      c.makeUnaryRequest("/test.Echo/Unary", (b: Buffer) => b, (b: Buffer) => b, Buffer.from("native tls"), new grpc.Metadata(), {}, (e, v) => (e ? reject(e) : resolve(v!))),
    );
    expect(r.toString()).toBe("native tls");
  });
});
