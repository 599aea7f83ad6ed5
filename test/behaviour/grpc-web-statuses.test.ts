// Contract (issue 12): "Trailers-Only and every status dojang decides (HTTP-status and reset
// translation, deadline, limits, retries exhausted) reach the browser as a readable gRPC-Web
// status with HTTP 200". Each case: a raw node:http2 upstream scripted to misbehave, dojang with
// grpcWeb and http1Address, undici as the HTTP/1.1 gRPC-Web client; the status is read from the
// trailer frame (and from the head for Trailers-Only), and the access record names who decided.
import http2 from "node:http2";
import { Agent, request } from "undici";
import { afterAll, describe, expect, it } from "vitest";
import type { DojangHandle } from "../../src/index.js";
import { trailerParse } from "@connectrpc/connect/protocol-grpc-web";
import { useFixtures, waitFor } from "../helpers/fixtures.js";
import { frame, type RawUpstream } from "../helpers/peers.js";

const fx = useFixtures();
const agent = new Agent({ connections: 4 });
afterAll(() => agent.close());

async function setup(script: (s: http2.ServerHttp2Stream, h: http2.IncomingHttpHeaders) => void, route: Record<string, unknown> = {}): Promise<{ up: RawUpstream; px: DojangHandle; h1: string }> {
  const up = await fx.rawUpstream((s, h) => {
    s.on("error", () => {});
    // the request is read to its end first (as a real server would)
    s.resume();
    s.on("end", () => script(s, h));
  });
  const px = await fx.proxyFor(up.address, { listener: { grpcWeb: true, http1Address: "127.0.0.1:0" }, route });
  return { up, px, h1: px.instance.http1Address() };
}

interface WebResult {
  status: number;
  head: Record<string, string | string[] | undefined>;
  messages: number;
  trailers: Record<string, string> | undefined;
}

async function webCall(h1: string, headers: Record<string, string> = {}): Promise<WebResult> {
  const res = await request(`http://${h1}/test.Echo/Unary`, {
    method: "POST",
    dispatcher: agent,
    headers: { "content-type": "application/grpc-web+proto", ...headers },
    body: frame(Buffer.from("ping")),
  });
  const body = Buffer.from(await res.body.arrayBuffer());
  let messages = 0;
  let trailers: Record<string, string> | undefined;
  for (let i = 0; i + 5 <= body.length; ) {
    const len = body.readUInt32BE(i + 1);
    if ((body[i]! & 0x80) !== 0) trailers = Object.fromEntries(trailerParse(body.subarray(i + 5, i + 5 + len)));
    else messages++;
    i += 5 + len;
  }
  return { status: res.statusCode, head: res.headers, messages, trailers };
}

async function decidedBy(px: DojangHandle): Promise<string> {
  await waitFor("the access record", () => px.calls.length > 0);
  return px.calls[px.calls.length - 1]!.decided_by;
}

describe("statuses dojang decides reach a gRPC-Web client as HTTP 200 with a readable status", () => {
  it("an upstream reset (INTERNAL_ERROR) before any response: 13 INTERNAL in the head and the trailer frame", async () => {
    const { px, h1 } = await setup((s) => s.close(http2.constants.NGHTTP2_INTERNAL_ERROR));
    const r = await webCall(h1);
    expect(r.status).toBe(200);
    expect(r.head["grpc-status"]).toBe("13");
    expect(r.trailers?.["grpc-status"]).toBe("13");
    expect(await decidedBy(px)).toBe("upstream_reset");
  });

  it("an upstream HTTP 503 (not gRPC): translated to 14 UNAVAILABLE, readable", async () => {
    const { px, h1 } = await setup((s) => s.respond({ ":status": 503, "content-type": "text/html" }, { endStream: true }));
    const r = await webCall(h1);
    expect(r.status).toBe(200);
    expect(r.head["content-type"]).toBe("application/grpc-web+proto");
    expect(r.trailers?.["grpc-status"]).toBe("14");
    expect(await decidedBy(px)).toBe("upstream_http");
  });

  it("a response message over maxResponseMessageBytes after headers: 8 RESOURCE_EXHAUSTED as the trailer frame", async () => {
    const { px, h1 } = await setup(
      (s) => {
        s.respond({ ":status": 200, "content-type": "application/grpc" });
        s.write(frame(Buffer.alloc(2048, 0x61)));
      },
      { maxResponseMessageBytes: 1024 },
    );
    const r = await webCall(h1);
    expect(r.status).toBe(200);
    expect(r.head["grpc-status"]).toBeUndefined(); // headers went out first: the status is in the body
    expect(r.messages).toBe(0);
    expect(r.trailers?.["grpc-status"]).toBe("8");
    expect(await decidedBy(px)).toBe("message_too_large");
  });

  it("retries exhausted: the last attempt's 14 reaches the client, readable, after the policy's attempts", async () => {
    const { up, px, h1 } = await setup(
      (s) => s.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": "14", "grpc-message": "try again" }, { endStream: true }),
      { retry: { retryOn: ["UNAVAILABLE"], maxAttempts: 3, backoff: { base: "5ms", max: "20ms" } } },
    );
    const r = await webCall(h1);
    expect(r.status).toBe(200);
    expect(r.head["grpc-status"]).toBe("14");
    expect(r.trailers?.["grpc-status"]).toBe("14");
    expect(r.trailers?.["grpc-message"]).toBe("try again");
    expect(up.seen.length).toBe(3);
    await waitFor("the access record", () => px.calls.length > 0);
    expect(px.calls[0]!.attempts).toBe(3);
  });

  it("a client that goes away mid-call cancels the upstream stream (client_cancel)", async () => {
    const { up, px, h1 } = await setup((s) => s.respond({ ":status": 200, "content-type": "application/grpc" }));
    const ac = new AbortController();
    const res = await request(`http://${h1}/test.Echo/Unary`, {
      method: "POST",
      dispatcher: agent,
      headers: { "content-type": "application/grpc-web+proto" },
      body: frame(Buffer.from("ping")),
      signal: ac.signal,
    });
    expect(res.statusCode).toBe(200);
    ac.abort();
    await waitFor("the upstream stream's reset", () => up.seen[0]?.rstCode === http2.constants.NGHTTP2_CANCEL);
    expect(await decidedBy(px)).toBe("client_cancel");
  });
});
