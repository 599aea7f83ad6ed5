// Contract (issue 12): "memory follows the slowest reader" holds for gRPC-Web clients too: an
// HTTP/1.1 gRPC-Web client that stops reading a server stream makes dojang stop reading the
// upstream (the adapter's write() returns false, 'drain' resumes it), so what the upstream can push
// is bounded by the windows, not by what it has to send; once the client reads again the whole
// stream arrives, ending with the trailer frame. Real peers: a raw node:http2 upstream that writes
// as fast as its flow control lets it, and a node:net client speaking HTTP/1.1 that pauses. The
// stalled call counts in the response-buffer guard by the bytes it holds (writableLength).
import net from "node:net";
import { describe, expect, it } from "vitest";
import { responseBuffers } from "../../src/proxy/observe/overload.js";
import { useFixtures, waitFor } from "../helpers/fixtures.js";
import { frame } from "../helpers/peers.js";

const fx = useFixtures();
const CHUNK = frame(Buffer.alloc(64 * 1024 - 5, 0x61)); // one 64 KiB message per write
const TOTAL_MESSAGES = 1024; // 64 MiB if nothing held the upstream back

describe("gRPC-Web backpressure over HTTP/1.1", () => {
  it("stops reading the upstream while the client does not read, and delivers the whole stream when it does", async () => {
    let written = 0;
    const up = await fx.rawUpstream((s) => {
      s.on("error", () => {});
      s.resume();
      s.on("end", () => {
        s.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
        s.on("wantTrailers", () => s.sendTrailers({ "grpc-status": "0" }));
        const pump = (): void => {
          while (written < TOTAL_MESSAGES) {
            written++;
            if (!s.write(CHUNK)) return void s.once("drain", pump);
          }
          s.end();
        };
        pump();
      });
    });
    const px = await fx.proxyFor(up.address, { listener: { grpcWeb: true, http1Address: "127.0.0.1:0" } });
    const [host, port] = px.instance.http1Address().split(":") as [string, string];
    const sock = fx.track(net.connect(Number(port), host), (s) => s.destroy());
    sock.on("error", () => {});
    await new Promise<void>((r) => sock.once("connect", () => r()));
    const req = frame(Buffer.from("go"));
    sock.write(`POST /test.Echo/ServerStream HTTP/1.1\r\nhost: ${host}\r\ncontent-type: application/grpc-web+proto\r\ncontent-length: ${req.length}\r\n\r\n`);
    sock.write(req);
    sock.pause(); // the client reads nothing from here on
    await waitFor("the upstream to start", () => written > 0);
    await new Promise((r) => setTimeout(r, 1500));
    const held = written;
    // windows (1 MiB stream, 16 MiB connection by default) and socket buffers, not 64 MiB
    expect(held * 64 * 1024).toBeLessThan(24 * 1024 * 1024);
    expect(held).toBeLessThan(TOTAL_MESSAGES);
    // the stalled call counts in the response-buffer guard (observe/overload.ts) by what it holds
    expect(responseBuffers.stalledCalls).toBeGreaterThan(0);
    expect(Number.isFinite(responseBuffers.lastTotal) && responseBuffers.lastTotal > 0).toBe(true);

    // reading again: every message, then the trailer frame, in HTTP/1.1 chunked encoding
    const chunks: Buffer[] = [];
    let tail = "";
    const done = new Promise<void>((resolve) => {
      sock.on("data", (d: Buffer) => {
        chunks.push(d);
        tail = (tail + d.subarray(-5).toString("latin1")).slice(-5);
        if (tail === "0\r\n\r\n") resolve();
      });
    });
    sock.resume();
    await done;
    const got = Buffer.concat(chunks);
    expect(written).toBe(TOTAL_MESSAGES);
    const text = got.toString("latin1");
    expect(text.startsWith("HTTP/1.1 200")).toBe(true);
    expect(text).toContain("grpc-status: 0");
    // the body (de-chunked) holds every message
    const bodyStart = got.indexOf("\r\n\r\n") + 4;
    let body = 0;
    for (let i = bodyStart; i < got.length; ) {
      const eol = got.indexOf("\r\n", i);
      const n = Number.parseInt(got.subarray(i, eol).toString(), 16);
      if (n === 0) break;
      body += n;
      i = eol + 2 + n + 2;
    }
    expect(body).toBeGreaterThanOrEqual(TOTAL_MESSAGES * CHUNK.length);
  }, 30_000);
});
