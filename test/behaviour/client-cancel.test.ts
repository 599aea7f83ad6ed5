// A client that cancels (RST_STREAM CANCEL) or whose connection drops: dojang cancels the
// upstream stream at once with RST_STREAM CANCEL and counts the call as decided_by client_cancel.
import { describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import http2 from "node:http2";
import {
  frame,
} from "../helpers/peers.js";

import { useFixtures, waitFor, waitForMetric } from "../helpers/fixtures.js";

const { proxyFor, rawUpstream, grpcServer, client, track } = useFixtures();

const CLIENT_CANCEL = { grpc_code: "CANCELLED", decided_by: "client_cancel" };
/** "At once": generous for a loaded 2-core machine, far below any timeout in play. */
const AT_ONCE_MS = 1000;

/** Raw upstream that answers with headers and one message, then holds the stream open. */
function headersAndOneMessage(stream: http2.ServerHttp2Stream): void {
  stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
  stream.write(frame(Buffer.from("first")));
}

describe('"a client cancel cancels the upstream stream at once"', () => {
  it("cancels a server-streaming call upstream when the grpc-js client calls cancel(): the grpc-js server sees 'cancelled'", async () => {
    let cancelledAt: number | undefined;
    const up = await grpcServer({
      ServerStream: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
        call.on("cancelled", () => (cancelledAt = performance.now()));
        call.write(Buffer.from("first"));
        // ... and nothing more until the client gives up
      },
    });
    const px = await proxyFor(up.address);
    const call = client(px.address).ServerStream(Buffer.from("q"), new grpc.Metadata(), {});
    call.on("error", () => {});
    let cancelAt = 0;
    call.once("data", () => {
      cancelAt = performance.now();
      call.cancel();
    });
    await waitFor("the upstream handler to see 'cancelled'", () => cancelledAt !== undefined);
    expect(cancelledAt! - cancelAt).toBeLessThan(AT_ONCE_MS);
    await waitForMetric(px, "dojang_calls_total", CLIENT_CANCEL, 1);
  });

  it("resets the upstream stream of a bidi call with RST_STREAM CANCEL when the grpc-js client cancels", async () => {
    const up = await rawUpstream(headersAndOneMessage);
    const px = await proxyFor(up.address);
    const call = client(px.address).Bidi(new grpc.Metadata(), {});
    call.on("error", () => {});
    let cancelAt = 0;
    call.once("data", () => {
      cancelAt = performance.now();
      call.cancel();
    });
    call.write(Buffer.from("hello"));
    await waitFor("the upstream stream to close", () => up.seen[0]?.rstCode !== undefined);
    expect(performance.now() - cancelAt).toBeLessThan(AT_ONCE_MS);
    expect(up.seen[0]!.rstCode).toBe(http2.constants.NGHTTP2_CANCEL);
    expect(Buffer.concat(up.seen[0]!.body).equals(frame(Buffer.from("hello")))).toBe(true);
    await waitForMetric(px, "dojang_calls_total", CLIENT_CANCEL, 1);
  });

  it("resets the upstream stream with RST_STREAM CANCEL when the client cancels before any response", async () => {
    const up = await rawUpstream(() => {
      /* never answers */
    });
    const px = await proxyFor(up.address);
    const call = client(px.address).Unary(Buffer.from("q"), new grpc.Metadata(), {}, () => {});
    await waitFor("the call to reach the upstream", () => up.seen.length === 1);
    const cancelAt = performance.now();
    call.cancel();
    await waitFor("the upstream stream to close", () => up.seen[0]?.rstCode !== undefined);
    expect(performance.now() - cancelAt).toBeLessThan(AT_ONCE_MS);
    expect(up.seen[0]!.rstCode).toBe(http2.constants.NGHTTP2_CANCEL);
    await waitForMetric(px, "dojang_calls_total", CLIENT_CANCEL, 1);
  });
});

describe('"a client whose connection drops has its upstream streams cancelled"', () => {
  it("resets every upstream stream of a destroyed client session with RST_STREAM CANCEL", async () => {
    const up = await rawUpstream(headersAndOneMessage);
    const px = await proxyFor(up.address);
    const session = track(http2.connect(`http://${px.address}`), (s) => s.destroy());
    session.on("error", () => {});
    let firstData = 0;
    for (let i = 0; i < 3; i++) {
      const req = session.request(
        { ":method": "POST", ":path": "/test.Echo/ServerStream", "content-type": "application/grpc", te: "trailers" },
        { endStream: false },
      );
      req.on("error", () => {});
      req.once("data", () => firstData++);
      req.end(frame(Buffer.from(`q${i}`)));
    }
    await waitFor("a message on every stream", () => firstData === 3);
    const dropAt = performance.now();
    session.destroy();
    await waitFor("every upstream stream to close", () => up.seen.length === 3 && up.seen.every((s) => s.rstCode !== undefined));
    expect(performance.now() - dropAt).toBeLessThan(AT_ONCE_MS);
    expect(up.seen.map((s) => s.rstCode)).toEqual([8, 8, 8]);
    await waitForMetric(px, "dojang_calls_total", CLIENT_CANCEL, 3);
    await waitForMetric(px, "dojang_active_calls", {}, 0);
  });

  it("cancels the upstream when the client's TCP socket is cut without any HTTP/2 goodbye", async () => {
    const up = await rawUpstream(headersAndOneMessage);
    const px = await proxyFor(up.address);
    const session = track(http2.connect(`http://${px.address}`), (s) => s.destroy());
    session.on("error", () => {});
    const req = session.request(
      { ":method": "POST", ":path": "/test.Echo/ServerStream", "content-type": "application/grpc", te: "trailers" },
      { endStream: false },
    );
    req.on("error", () => {});
    let got = false;
    req.once("data", () => (got = true));
    req.end(frame(Buffer.from("q")));
    await waitFor("the first message", () => got);
    const dropAt = performance.now();
    session.socket.destroy();
    await waitFor("the upstream stream to close", () => up.seen[0]?.rstCode !== undefined);
    expect(performance.now() - dropAt).toBeLessThan(AT_ONCE_MS);
    expect(up.seen[0]!.rstCode).toBe(http2.constants.NGHTTP2_CANCEL);
    await waitForMetric(px, "dojang_calls_total", CLIENT_CANCEL, 1);
  });
});

describe("a client reset at its own deadline is the deadline deciding", () => {
  // grpc-js's deadline timer starts at its send time, so it resets the stream a transit time
  // before dojang's timer fires; the metric says deadline (4), not client_cancel (1).
  it("counts a grpc-js call that hits its deadline on a silent upstream as DEADLINE_EXCEEDED, decided_by deadline", async () => {
    const up = await rawUpstream(() => {
      /* never answers */
    });
    const px = await proxyFor(up.address);
    for (let i = 0; i < 5; i++) {
      const err = await new Promise<grpc.ServiceError | null>((r) =>
        client(px.address).Unary(Buffer.from("q"), new grpc.Metadata(), { deadline: Date.now() + 150 }, (e: grpc.ServiceError | null) => r(e)),
      );
      expect(err?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    }
    await waitForMetric(px, "dojang_calls_total", { grpc_code: "DEADLINE_EXCEEDED", decided_by: "deadline" }, 5);
  });

  it("still counts a reset well before the deadline as client_cancel", async () => {
    const up = await rawUpstream(() => {
      /* never answers */
    });
    const px = await proxyFor(up.address);
    const call = client(px.address).Unary(Buffer.from("q"), new grpc.Metadata(), { deadline: Date.now() + 10_000 }, () => {});
    await waitFor("the call to reach the upstream", () => up.seen.length === 1);
    call.cancel();
    await waitForMetric(px, "dojang_calls_total", CLIENT_CANCEL, 1);
  });
});
