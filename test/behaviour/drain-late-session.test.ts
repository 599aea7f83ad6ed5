// A connection that becomes an HTTP/2 session after the drain began (0.7 item 1: `dojang upgrade`
// drains the old process while new connections keep coming). A TLS connection accepted just
// before the listener stopped accepting finishes its handshake later, and only then does node
// make its session: the drain's GOAWAY to every session has gone out already. Such a session must
// be told at once (GOAWAY, no new streams: its client retries elsewhere, on the process that took
// the socket over), not left open until the drain ends and then cut off with the calls its client
// started on it in the meantime.
import * as grpc from "@grpc/grpc-js";
import http2 from "node:http2";
import net from "node:net";
import tls from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startBackend, type Backend } from "../helpers/backends.js";
import { CertDir, type Ca, type CertFiles } from "../helpers/certs.js";
import { useFixtures } from "../helpers/fixtures.js";

const f = useFixtures();
let certs: CertDir;
let ca: Ca;
let server: CertFiles;
let backend: Backend;

beforeAll(async () => {
  certs = new CertDir();
  ca = certs.ca("drain-ca");
  server = certs.leaf(ca, "server", { cn: "dojang.test", dns: ["dojang.test"] });
  backend = await startBackend("slow");
  backend.delayMs = 3000;
});
afterAll(async () => {
  certs.remove();
  await backend.close();
});

describe("a session made after the drain began", () => {
  it("TLS: the handshake finishes after the drain's GOAWAY went out; its session gets GOAWAY at once, not a cut at the drain's end", { timeout: 30_000 }, async () => {
    const px = await f.proxyFor(backend.address, { listener: { tls: { certFile: server.certFile, keyFile: server.keyFile } } });
    const port = Number(px.address.split(":")[1]);
    // a call in flight, so the drain waits (3 s) instead of ending at once
    const creds = grpc.credentials.createSsl(ca.cert);
    const c = f.track(new grpc.Client(px.address, creds, { "grpc.ssl_target_name_override": "dojang.test" }), (x) => x.close());
    const id = (b: Buffer): Buffer => b;
    const inFlight = new Promise<number>((r) => c.makeUnaryRequest("/test.Echo/Unary", id, id, Buffer.from("x"), (err) => r(err === null ? 0 : err.code)));
    await new Promise((r) => setTimeout(r, 500));
    // accepted by the listener now; its TLS handshake starts only after the drain has begun
    const raw = net.connect(port, "127.0.0.1");
    await new Promise<void>((r) => raw.once("connect", () => r()));
    await new Promise((r) => setTimeout(r, 100));
    const closing = px.instance.close(10_000);
    await new Promise((r) => setTimeout(r, 100));
    const t0 = performance.now();
    const secure = tls.connect({ socket: raw, ca: ca.cert, servername: "dojang.test", ALPNProtocols: ["h2"] });
    const session = http2.connect(`https://127.0.0.1:${port}`, { createConnection: () => secure });
    session.on("error", () => {});
    const goaway = new Promise<{ code: number; ms: number }>((r) => session.once("goaway", (code: number) => r({ code, ms: performance.now() - t0 })));
    const first = await Promise.race([goaway, new Promise<undefined>((r) => setTimeout(() => r(undefined), 2000))]);
    // GOAWAY(NO_ERROR) within 2 s of the handshake, while the drain still waits for the 3 s call
    expect(first?.code, "the late session's GOAWAY").toBe(0);
    expect(first!.ms).toBeLessThan(2000);
    session.destroy();
    expect(await inFlight, "the call in flight through the drain").toBe(0);
    await closing;
  });
});
