// Issue 12: the gRPC-Web HTTP/1.1 socket (http1Address) is under the listener's limits too, so a
// slowloris or a connection flood on it costs what it costs on the HTTP/2 port: connections that
// never finish their request headers are closed after requestHeadersTimeout, header blocks over
// maxHeaderListSize are refused (431), and maxConnections caps the sockets. Real peers: node:net
// clients writing partial HTTP/1.1 requests, and a gRPC-Web request over the same socket that
// must still be served.
import net from "node:net";
import { describe, expect, it } from "vitest";
import { useFixtures } from "../helpers/fixtures.js";
import { echoOr } from "../helpers/bystander.js";
import { frame } from "../helpers/peers.js";
import { sleep } from "../helpers/process.js";

const fx = useFixtures();

function connect(address: string): Promise<{ sock: net.Socket; closedAt: () => number | undefined; data: () => string }> {
  const [host, port] = address.split(":") as [string, string];
  return new Promise((resolve, reject) => {
    const sock = net.connect(Number(port), host);
    let closedAt: number | undefined;
    let data = "";
    sock.on("data", (d) => (data += d.toString("latin1")));
    sock.on("close", () => (closedAt = performance.now()));
    sock.on("error", () => {});
    sock.once("connect", () => resolve({ sock, closedAt: () => closedAt, data: () => data }));
    sock.once("error", reject);
  });
}

/** One gRPC-Web unary call over its own HTTP/1.1 connection; the status from its trailer frame. */
async function webCall(address: string): Promise<string> {
  const c = await connect(address);
  const body = frame(Buffer.from("hi"));
  c.sock.write(`POST /test.Echo/Unary HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/grpc-web+proto\r\nx-grpc-web: 1\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n`);
  c.sock.write(body);
  const t0 = performance.now();
  while (c.closedAt() === undefined && performance.now() - t0 < 5000) await sleep(10);
  c.sock.destroy();
  return /grpc-status:\s*(\d+)/.exec(c.data())?.[1] ?? `none in ${JSON.stringify(c.data().slice(0, 200))}`;
}

describe("attack: gRPC-Web HTTP/1.1 socket", () => {
  it("200 connections that send part of their request headers are closed after requestHeadersTimeout 1s; a gRPC-Web call meanwhile succeeds", { timeout: 30_000 }, async () => {
    const up = await fx.rawUpstream(echoOr());
    const px = await fx.proxyFor(up.address, { listener: { grpcWeb: true, http1Address: "127.0.0.1:0", requestHeadersTimeout: "1s" } });
    const h1 = px.instance.http1Address();
    const t0 = performance.now();
    const slow = await Promise.all(Array.from({ length: 200 }, () => connect(h1)));
    for (const c of slow) c.sock.write("POST /test.Echo/Unary HTTP/1.1\r\nhost: localhost\r\n");
    expect(await webCall(h1)).toBe("0");
    while (slow.some((c) => c.closedAt() === undefined) && performance.now() - t0 < 10_000) await sleep(50);
    const closed = slow.map((c) => c.closedAt()).filter((t): t is number => t !== undefined);
    const last = Math.max(...closed) - t0;
    console.log(`http1 slowloris: ${closed.length}/200 closed, the last ${Math.round(last)} ms after they opened`);
    expect(closed.length).toBe(200);
    // node checks every HTTP1_CHECK_MS (1 s): closed between the timeout and timeout + 2 checks (+ slack)
    expect(Math.min(...closed) - t0).toBeGreaterThanOrEqual(900);
    expect(last).toBeLessThan(5000);
    for (const c of slow) c.sock.destroy();
  });

  it("a header block over maxHeaderListSize gets 431 and the connection is closed; maxConnections caps the sockets", { timeout: 30_000 }, async () => {
    const up = await fx.rawUpstream(echoOr());
    const px = await fx.proxyFor(up.address, { listener: { grpcWeb: true, http1Address: "127.0.0.1:0", maxHeaderListSize: 4096, maxConnections: 5 } });
    const h1 = px.instance.http1Address();
    const big = await connect(h1);
    big.sock.write(`POST /test.Echo/Unary HTTP/1.1\r\nhost: localhost\r\nx-big: ${"a".repeat(8192)}\r\n\r\n`);
    const t0 = performance.now();
    while (big.closedAt() === undefined && performance.now() - t0 < 5000) await sleep(10);
    expect(big.data()).toMatch(/^HTTP\/1\.1 431/);
    expect(big.closedAt()).toBeDefined();
    // 5 held connections, the 6th is closed as it is accepted
    const held = await Promise.all(Array.from({ length: 5 }, () => connect(h1)));
    await sleep(100);
    const extra = await connect(h1);
    const t1 = performance.now();
    while (extra.closedAt() === undefined && performance.now() - t1 < 3000) await sleep(10);
    expect(extra.closedAt()).toBeDefined();
    expect(held.every((c) => c.closedAt() === undefined)).toBe(true);
    for (const c of held) c.sock.destroy();
    await sleep(100);
    expect(await webCall(h1)).toBe("0");
  });
});
