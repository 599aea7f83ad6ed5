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
  //
  // The documented rule (docs/concepts/status-decisions.md) is a slack of 10 ms: a client reset
  // that reaches dojang at most 10 ms before dojang's own deadline (its arrival time plus the
  // grpc-timeout the client sent) is the deadline. On a loaded machine the request headers can
  // reach dojang's handler far later than grpc-js stamped grpc-timeout (measured here: up to
  // 114 ms, the process descheduled in between), while the reset arrives at once: the reset then
  // lands before the slack, and the rule says client_cancel. The old test expected "deadline" for
  // five calls whatever their timing, and failed under load. So each call's timing as dojang saw
  // it is measured from outside, bracketed by listeners before and after dojang's own ('stream'
  // for the arrival, the stream's 'close' for the reset), and its decision is checked against
  // the rule: deadline when the whole bracket is past the slack, client_cancel when it is wholly
  // before it (a bracket across the boundary is not judged). Five calls must land in the window.
  const SLACK_MS = 10; // docs/concepts/status-decisions.md: "except within 10 ms of the call's deadline"
  it("counts a grpc-js call that hits its deadline on a silent upstream as DEADLINE_EXCEEDED, decided_by deadline", async () => {
    const up = await rawUpstream(() => {
      /* never answers */
    });
    const px = await proxyFor(up.address);
    interface Seen {
      budgetMs: number;
      arrBefore: number;
      arrAfter?: number;
      rstBefore?: number;
      rstAfter?: number;
    }
    const seen: Seen[] = [];
    let sessions = 0;
    const server = px.instance.listeners[0]!.server;
    server.on("session", () => sessions++);
    server.prependListener("stream", (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => {
      const m = /^(\d+)m$/.exec(String(headers["grpc-timeout"]));
      const s: Seen = { budgetMs: m === null ? NaN : Number(m[1]), arrBefore: performance.now() };
      seen.push(s);
      stream.prependListener("close", () => (s.rstBefore = performance.now()));
    });
    server.on("stream", (stream: http2.ServerHttp2Stream) => {
      const s = seen.at(-1)!;
      s.arrAfter = performance.now();
      stream.on("close", () => (s.rstAfter = performance.now()));
    });
    // One channel, connected (and taken by dojang) before the calls: a new channel per call spent
    // part of the 150 ms connecting, and under load the deadline passed before the call was sent.
    const c = client(px.address);
    await new Promise<void>((ok, fail) => c.waitForReady(Date.now() + 5000, (e) => (e ? fail(e) : ok())));
    await waitFor("dojang to take the connection", () => sessions === 1);

    let inWindow = 0;
    const judged: { expected: string; got: string | undefined }[] = [];
    for (let i = 0; i < 40 && inWindow < 5; i++) {
      const err = await new Promise<grpc.ServiceError | null>((r) =>
        c.Unary(Buffer.from("q"), new grpc.Metadata(), { deadline: Date.now() + 150 }, (e: grpc.ServiceError | null) => r(e)),
      );
      expect(err?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
      await waitFor("the call's record", () => px.calls.length === i + 1 && seen[i]?.rstAfter !== undefined);
      const s = seen[i]!;
      // the headers carried grpc-js's remaining budget, in ms (0 when grpc-js was late sending it:
      // dojang then ends the call at once, decided_by deadline, as the rule below expects)
      expect(s.budgetMs).toBeGreaterThanOrEqual(0);
      const earliest = s.rstBefore! - s.arrAfter!; // the least time dojang can have counted from t0 to the reset
      const latest = s.rstAfter! - s.arrBefore!;
      const got = px.calls[i]!.decided_by;
      if (earliest >= s.budgetMs - SLACK_MS) {
        inWindow++;
        judged.push({ expected: "deadline", got });
      } else if (latest < s.budgetMs - SLACK_MS) judged.push({ expected: "client_cancel", got });
    }
    expect(inWindow).toBe(5);
    expect(judged.filter((j) => j.got !== j.expected)).toEqual([]);
    // and the metric agrees with the calls' records
    const deadlines = px.calls.filter((r) => r.decided_by === "deadline").length;
    await waitForMetric(px, "dojang_calls_total", { grpc_code: "DEADLINE_EXCEEDED", decided_by: "deadline" }, deadlines);
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
