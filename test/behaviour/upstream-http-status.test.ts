// How dojang classifies an upstream's response HEADERS (spec sheet §5, §11.5, §11.6): real
// grpc-js and raw node:http2 clients, a raw node:http2 upstream that answers like a web server.
import { afterEach, describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import type http2 from "node:http2";
import { echoClient, frame, rawCall, startProxy, startRawUpstream, statusOf, unary } from "../helpers/peers.js";
import { Cleanup, GRPC_RESPONSE_HEADERS, hasEndStream, sampleReaching } from "../helpers/scripted-upstream.js";
import type { DojangHandle } from "../../src/index.js";

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

const HTML = "<html><head><title>Error</title></head><body><h1>Something went wrong</h1></body></html>";
const REQUEST = Buffer.from("ping");

/** A raw upstream scripted by `onStream`, dojang in front of it, and a grpc-js client on dojang. */
async function setup(onStream: (s: http2.ServerHttp2Stream) => void): Promise<{ px: DojangHandle; client: ReturnType<typeof echoClient> }> {
  const up = cleanup.add(await startRawUpstream((s) => onStream(s)), (u) => u.close());
  const px = cleanup.add(await startProxy(up.address), (p) => p.close(0));
  const client = cleanup.add(echoClient(px.address), (c) => c.close());
  return { px, client };
}

function calls(px: DojangHandle, code: string, decidedBy: string, want: number): Promise<number> {
  return sampleReaching(px.adminAddress, "dojang_calls_total", { grpc_method: "Unary", grpc_code: code, decided_by: decidedBy }, want);
}

/** grpc-go HTTPStatusConvTab (spec §5.1), Go StatusText, and the status name for the metric label. */
const CONV_TAB: readonly [http: number, code: number, text: string, name: string][] = [
  [400, 13, "Bad Request", "INTERNAL"],
  [401, 16, "Unauthorized", "UNAUTHENTICATED"],
  [403, 7, "Forbidden", "PERMISSION_DENIED"],
  [404, 12, "Not Found", "UNIMPLEMENTED"],
  [429, 14, "Too Many Requests", "UNAVAILABLE"],
  [502, 14, "Bad Gateway", "UNAVAILABLE"],
  [503, 14, "Service Unavailable", "UNAVAILABLE"],
  [504, 14, "Gateway Timeout", "UNAVAILABLE"],
  // Fallback rows: anything else is 2 UNKNOWN (431 included, unlike SMAP; 501 unlike grpc-web).
  [500, 2, "Internal Server Error", "UNKNOWN"],
  [431, 2, "Request Header Fields Too Large", "UNKNOWN"],
  [418, 2, "I'm a teapot", "UNKNOWN"],
  [501, 2, "Not Implemented", "UNKNOWN"],
  [409, 2, "Conflict", "UNKNOWN"],
];

describe('spec §11.5: ":status is not 200 and there is no grpc-status: HTTPStatusConvTab (400→13, 401→16, 403→7, 404→12, 429/502/503/504→14, any other→2) … The upstream body is never forwarded as DATA."', () => {
  describe.each([
    ["with END_STREAM on its HEADERS", true],
    ["followed by an HTML body", false],
  ] as const)("an upstream answering text/html %s", (_label, endStream) => {
    it.each(CONV_TAB)("maps HTTP %i to gRPC status %i, sent as Trailers-Only with grpc-go's message and without the HTML", async (http, code, text, name) => {
      const { px, client } = await setup((s) => {
        s.respond({ ":status": http, "content-type": "text/html" }, { endStream });
        if (!endStream) s.end(HTML);
      });
      const message = `unexpected HTTP status code received from server: ${http} (${text}); transport: received unexpected content-type "text/html"`;

      const r = await unary(client, REQUEST);
      expect(r.status?.code).toBe(code);
      expect(r.status?.details).toBe(message);
      expect(r.res).toBeUndefined();

      const raw = await rawCall(px.address, {}, frame(REQUEST));
      expect(raw.headers?.[":status"]).toBe(200);
      expect(raw.headers?.["content-type"]).toBe("application/grpc");
      expect(raw.headers?.["grpc-status"]).toBe(String(code));
      expect(raw.headers?.["grpc-message"]).toBe(message);
      expect(hasEndStream(raw.headersFlags)).toBe(true);
      expect(raw.trailers).toBeUndefined();
      expect(raw.data.length).toBe(0);

      expect(await calls(px, name, "upstream_http", 2)).toBe(2);
    });
  });

  it("maps a 404 without any content-type to 12 UNIMPLEMENTED, naming the missing content-type", async () => {
    const { px, client } = await setup((s) => s.respond({ ":status": 404 }, { endStream: true }));
    const message = "unexpected HTTP status code received from server: 404 (Not Found); malformed header: missing HTTP content-type";

    const r = await unary(client, REQUEST);
    expect(r.status?.code).toBe(grpc.status.UNIMPLEMENTED);
    expect(r.status?.details).toBe(message);

    const raw = await rawCall(px.address, {}, frame(REQUEST));
    expect(raw.headers?.[":status"]).toBe(200);
    expect(raw.headers?.["content-type"]).toBe("application/grpc");
    expect(statusOf(raw)).toBe("12");
    expect(hasEndStream(raw.headersFlags)).toBe(true);
    expect(raw.data.length).toBe(0);
    expect(await calls(px, "UNIMPLEMENTED", "upstream_http", 2)).toBe(2);
  });
});

describe('spec §11.5: ":status is not 200 and there is no grpc-status: HTTPStatusConvTab … whatever the content-type (this follows the status-mapping doc and grpc-js; grpc-go would say 2 when the content-type is gRPC)"', () => {
  it("maps a 503 with a gRPC content-type but no grpc-status to 14 UNAVAILABLE, without a content-type complaint", async () => {
    const { px, client } = await setup((s) => s.respond({ ":status": 503, "content-type": "application/grpc" }, { endStream: true }));
    const message = "unexpected HTTP status code received from server: 503 (Service Unavailable)";

    const r = await unary(client, REQUEST);
    expect(r.status?.code).toBe(grpc.status.UNAVAILABLE);
    expect(r.status?.details).toBe(message);

    const raw = await rawCall(px.address, {}, frame(REQUEST));
    expect(raw.headers?.[":status"]).toBe(200);
    expect(raw.headers?.["grpc-status"]).toBe("14");
    expect(raw.headers?.["grpc-message"]).toBe(message);
    expect(hasEndStream(raw.headersFlags)).toBe(true);
    expect(await calls(px, "UNAVAILABLE", "upstream_http", 2)).toBe(2);
  });
});

describe('spec §11.5: "grpc-status present and content-type is gRPC: forward the upstream\'s status as received, whatever :status says; downstream :status is 200."', () => {
  it("keeps the upstream's own grpc-status and grpc-message from a 503 Trailers-Only with a gRPC content-type", async () => {
    const { px, client } = await setup((s) =>
      s.respond({ ":status": 503, "content-type": "application/grpc", "grpc-status": "14", "grpc-message": "upstream's own" }, { endStream: true }),
    );

    const r = await unary(client, REQUEST);
    expect(r.status?.code).toBe(grpc.status.UNAVAILABLE);
    expect(r.status?.details).toBe("upstream's own");

    const raw = await rawCall(px.address, {}, frame(REQUEST));
    expect(raw.headers?.[":status"]).toBe(200);
    expect(raw.headers?.["content-type"]).toBe("application/grpc");
    expect(raw.headers?.["grpc-status"]).toBe("14");
    expect(raw.headers?.["grpc-message"]).toBe("upstream's own");
    expect(hasEndStream(raw.headersFlags)).toBe(true);
    expect(raw.data.length).toBe(0);
    expect(await calls(px, "UNAVAILABLE", "upstream", 2)).toBe(2);
    expect(await calls(px, "UNAVAILABLE", "upstream_http", 0)).toBe(0);
  });

  it("forwards an upstream Trailers-Only response as Trailers-Only, with its status, message and custom metadata", async () => {
    const blob = Buffer.from([0, 1, 2, 250, 255]);
    const { px, client } = await setup((s) =>
      s.respond(
        { ...GRPC_RESPONSE_HEADERS, "grpc-status": "5", "grpc-message": "no such thing", "x-custom": "kept", "x-blob-bin": blob.toString("base64") },
        { endStream: true },
      ),
    );

    const r = await unary(client, REQUEST);
    expect(r.status?.code).toBe(grpc.status.NOT_FOUND);
    expect(r.status?.details).toBe("no such thing");
    expect(r.status?.metadata.get("x-custom")).toEqual(["kept"]);
    expect(r.status?.metadata.get("x-blob-bin")).toEqual([blob]);

    const raw = await rawCall(px.address, {}, frame(REQUEST));
    expect(raw.headers?.[":status"]).toBe(200);
    expect(raw.headers?.["grpc-status"]).toBe("5");
    expect(raw.headers?.["grpc-message"]).toBe("no such thing");
    expect(raw.headers?.["x-custom"]).toBe("kept");
    expect(hasEndStream(raw.headersFlags)).toBe(true);
    expect(raw.trailers).toBeUndefined();
    expect(raw.data.length).toBe(0);
    expect(await calls(px, "NOT_FOUND", "upstream", 2)).toBe(2);
  });
});

describe('spec §11.5: ":status 200 with a missing or non-gRPC content-type: 2 UNKNOWN"', () => {
  it("maps a 200 text/html answer to 2 UNKNOWN as Trailers-Only without forwarding the HTML", async () => {
    const { px, client } = await setup((s) => {
      s.respond({ ":status": 200, "content-type": "text/html" });
      s.end(HTML);
    });
    const message = 'unexpected HTTP status code received from server: 200 (OK); transport: received unexpected content-type "text/html"';

    const r = await unary(client, REQUEST);
    expect(r.status?.code).toBe(grpc.status.UNKNOWN);
    expect(r.status?.details).toBe(message);

    const raw = await rawCall(px.address, {}, frame(REQUEST));
    expect(raw.headers?.[":status"]).toBe(200);
    expect(raw.headers?.["content-type"]).toBe("application/grpc");
    expect(raw.headers?.["grpc-status"]).toBe("2");
    expect(raw.headers?.["grpc-message"]).toBe(message);
    expect(hasEndStream(raw.headersFlags)).toBe(true);
    expect(raw.data.length).toBe(0);
    expect(await calls(px, "UNKNOWN", "upstream_protocol", 2)).toBe(2);
  });
});

describe('outcome.ts classifyResponseHead rule 6: ":status 200, gRPC, no grpc-status, END_STREAM → 2, upstream_protocol"', () => {
  it("answers 2 UNKNOWN as Trailers-Only when the upstream's Trailers-Only carries no grpc-status", async () => {
    const { px, client } = await setup((s) => s.respond({ ...GRPC_RESPONSE_HEADERS, "x-extra": "1" }, { endStream: true }));

    const r = await unary(client, REQUEST);
    expect(r.status?.code).toBe(grpc.status.UNKNOWN);

    const raw = await rawCall(px.address, {}, frame(REQUEST));
    expect(raw.headers?.[":status"]).toBe(200);
    expect(raw.headers?.["content-type"]).toBe("application/grpc");
    expect(raw.headers?.["grpc-status"]).toBe("2");
    expect(hasEndStream(raw.headersFlags)).toBe(true);
    expect(raw.data.length).toBe(0);
    expect(await calls(px, "UNKNOWN", "upstream_protocol", 2)).toBe(2);
  });
});

describe('spec §11.5: "trailers without grpc-status: 2"', () => {
  it("answers 2 UNKNOWN in the trailers after forwarding the message when the upstream's trailers carry no grpc-status", async () => {
    const { px, client } = await setup((s) => {
      s.respond(GRPC_RESPONSE_HEADERS, { waitForTrailers: true });
      s.once("wantTrailers", () => s.sendTrailers({ "x-not-a-status": "1" }));
      s.end(frame(Buffer.from("pong")));
    });

    const r = await unary(client, REQUEST);
    expect(r.status?.code).toBe(grpc.status.UNKNOWN);
    expect(r.status?.details).not.toBe("");

    const raw = await rawCall(px.address, {}, frame(REQUEST));
    expect(raw.headers?.[":status"]).toBe(200);
    expect(hasEndStream(raw.headersFlags)).toBe(false);
    expect(raw.data).toEqual(frame(Buffer.from("pong")));
    expect(raw.trailers?.["grpc-status"]).toBe("2");
    expect(await calls(px, "UNKNOWN", "upstream_protocol", 2)).toBe(2);
  });
});

describe('spec §11.5: "ended without trailers (END_STREAM on DATA): 13 server closed the stream without sending trailers"', () => {
  it("answers 13 INTERNAL in the trailers after forwarding the message when the upstream ends its DATA without trailers", async () => {
    const { px, client } = await setup((s) => {
      s.respond(GRPC_RESPONSE_HEADERS);
      s.end(frame(Buffer.from("pong")));
    });

    const r = await unary(client, REQUEST);
    expect(r.status?.code).toBe(grpc.status.INTERNAL);
    expect(r.status?.details).toBe("server closed the stream without sending trailers");

    const raw = await rawCall(px.address, {}, frame(REQUEST));
    expect(raw.headers?.[":status"]).toBe(200);
    expect(hasEndStream(raw.headersFlags)).toBe(false);
    expect(raw.data).toEqual(frame(Buffer.from("pong")));
    expect(raw.trailers?.["grpc-status"]).toBe("13");
    expect(raw.trailers?.["grpc-message"]).toBe("server closed the stream without sending trailers");
    expect(await calls(px, "INTERNAL", "upstream_protocol", 2)).toBe(2);
  });
});
