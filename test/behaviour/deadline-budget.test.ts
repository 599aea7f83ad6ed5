// The deadline budget: what dojang sends upstream as grpc-timeout (re-encoded from the time left,
// capped by the route timeout, in grpc-go EncodeDuration form), and what happens when the budget
// runs out in dojang (4 DEADLINE_EXCEEDED, decided_by deadline, upstream stream RST CANCEL).
import { describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import http2 from "node:http2";
import { Worker } from "node:worker_threads";
import {
  frame,
  rawCall,
  sample,
  scrape,
  statusOf,
  unary,
  type RawUpstream,
} from "../helpers/peers.js";

import { useFixtures, waitFor } from "../helpers/fixtures.js";

const { proxyFor, rawUpstream, client, track } = useFixtures();

// === grpc-timeout, written here from the spec (§2.2, §2.3), independent of src/translate ===

const UNIT_NS: Record<string, bigint> = { n: 1n, u: 1_000n, m: 1_000_000n, S: 1_000_000_000n, M: 60_000_000_000n, H: 3_600_000_000_000n };

/** grpc-go decodeTimeout, for well-formed values (the test fails on anything else). */
function decodeTimeout(v: string): bigint {
  const m = /^(\d{1,8})([HMSmun])$/.exec(v);
  if (m === null) throw new Error(`not a grpc-timeout: ${JSON.stringify(v)}`);
  return BigInt(m[1]!) * UNIT_NS[m[2]!]!;
}

/** grpc-go EncodeDuration: the smallest unit (n, u, m, S, M, then H) whose ceiling fits 8 digits. */
function encodeDuration(ns: bigint): string {
  if (ns <= 0n) return "0n";
  for (const u of ["n", "u", "m", "S", "M"]) {
    const d = UNIT_NS[u]!;
    const v = ns / d + (ns % d === 0n ? 0n : 1n);
    if (v <= 99_999_999n) return `${v}${u}`;
  }
  const h = UNIT_NS["H"]!;
  return `${ns / h + (ns % h === 0n ? 0n : 1n)}H`;
}

/** The grpc-timeout the upstream saw on its only stream; checks it is in EncodeDuration's form. */
function upstreamTimeout(up: RawUpstream): { value: string; ns: bigint } {
  expect(up.seen).toHaveLength(1);
  const raw = up.seen[0]!.raw;
  const values: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) if (raw[i] === "grpc-timeout") values.push(raw[i + 1]!);
  expect(values).toHaveLength(1);
  const value = values[0]!;
  const ns = decodeTimeout(value);
  expect(encodeDuration(ns)).toBe(value);
  return { value, ns };
}

const S = 1_000_000_000n;

/** A raw upstream that answers every call OK once the request ends. */
function answerOk(stream: http2.ServerHttp2Stream): void {
  stream.on("end", () => {
    if (stream.destroyed) return;
    stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
    stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
    stream.end(frame(Buffer.from("ok")));
  });
}

describe('"the grpc-timeout sent upstream is re-encoded from the budget left"', () => {
  it("sends a client's 10S upstream as the time left, above 9 s and at most 10 s, in EncodeDuration form", async () => {
    const up = await rawUpstream(answerOk);
    const px = await proxyFor(up.address);
    const r = await rawCall(px.address, { "grpc-timeout": "10S" }, frame(Buffer.from("q")));
    expect(statusOf(r)).toBe("0");
    const { value, ns } = upstreamTimeout(up);
    expect(ns).toBeLessThanOrEqual(10n * S);
    expect(ns).toBeGreaterThan(9n * S);
    // about 10 s is 1e10 ns: too many digits in n, so grpc-go writes microseconds (e.g. 9999876u)
    expect(value).toMatch(/^\d{7,8}u$/);
  });

  it("re-encodes a client's millisecond timeout as the smallest unit that fits, not as sent", async () => {
    const up = await rawUpstream(answerOk);
    const px = await proxyFor(up.address);
    const r = await rawCall(px.address, { "grpc-timeout": "5000m" }, frame(Buffer.from("q")));
    expect(statusOf(r)).toBe("0");
    const { value, ns } = upstreamTimeout(up);
    expect(ns).toBeLessThanOrEqual(5n * S);
    expect(ns).toBeGreaterThan(4n * S);
    expect(value.endsWith("u")).toBe(true);
  });

  it("caps the budget at the route timeout: client 10S, route 2s gives the upstream at most 2 s", async () => {
    const up = await rawUpstream(answerOk);
    const px = await proxyFor(up.address, { route: { timeout: "2s" } });
    const r = await rawCall(px.address, { "grpc-timeout": "10S" }, frame(Buffer.from("q")));
    expect(statusOf(r)).toBe("0");
    const { ns } = upstreamTimeout(up);
    expect(ns).toBeLessThanOrEqual(2n * S);
    expect(ns).toBeGreaterThan(1n * S);
  });

  it("keeps a client budget shorter than the route timeout: client 1S, route 2s gives at most 1 s", async () => {
    const up = await rawUpstream(answerOk);
    const px = await proxyFor(up.address, { route: { timeout: "2s" } });
    const r = await rawCall(px.address, { "grpc-timeout": "1S" }, frame(Buffer.from("q")));
    expect(statusOf(r)).toBe("0");
    const { ns } = upstreamTimeout(up);
    expect(ns).toBeLessThanOrEqual(1n * S);
    expect(ns).toBeGreaterThan(S / 2n);
  });

  it("applies the route timeout when the client sent no grpc-timeout", async () => {
    const up = await rawUpstream(answerOk);
    const px = await proxyFor(up.address, { route: { timeout: "2s" } });
    const r = await rawCall(px.address, {}, frame(Buffer.from("q")));
    expect(statusOf(r)).toBe("0");
    const { ns } = upstreamTimeout(up);
    expect(ns).toBeLessThanOrEqual(2n * S);
    expect(ns).toBeGreaterThan(1n * S);
  });

  it("sends no grpc-timeout upstream when neither the client nor the route set one", async () => {
    const up = await rawUpstream(answerOk);
    const px = await proxyFor(up.address);
    const r = await rawCall(px.address, {}, frame(Buffer.from("q")));
    expect(statusOf(r)).toBe("0");
    expect(up.seen[0]!.headers["grpc-timeout"]).toBeUndefined();
  });
});

describe('"a budget that runs out in dojang ends the call with 4 DEADLINE_EXCEEDED and cancels the upstream"', () => {
  it("answers 4 decided_by deadline after the 300ms route timeout and resets the silent upstream with RST_STREAM CANCEL", async () => {
    const up = await rawUpstream(() => {
      /* never answers */
    });
    const px = await proxyFor(up.address, { route: { timeout: "300ms" } });
    const t0 = performance.now();
    const r = await unary(client(px.address), Buffer.from("q"));
    const took = performance.now() - t0;
    expect(r.err?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(took).toBeGreaterThanOrEqual(280);
    expect(took).toBeLessThan(2000);
    await waitFor("the upstream stream to close", () => up.seen[0]?.rstCode !== undefined);
    // CANCEL (8): not INTERNAL_ERROR (2, node's default abort) and not NO_ERROR (0, destroy())
    expect(up.seen[0]!.rstCode).toBe(http2.constants.NGHTTP2_CANCEL);
    const m = await scrape(px.adminAddress);
    expect(sample(m, "dojang_calls_total", { grpc_code: "DEADLINE_EXCEEDED", decided_by: "deadline" })).toBe(1);
  });

  it("forwards the messages sent before the deadline, then trailers with grpc-status 4", async () => {
    const m1 = frame(Buffer.from("first message"));
    const m2 = frame(Buffer.alloc(3000, 0x42));
    const up = await rawUpstream((stream) => {
      stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      stream.write(m1);
      stream.write(m2);
      // ... then nothing: no more messages, no trailers
    });
    const px = await proxyFor(up.address, { route: { timeout: "300ms" } });
    const t0 = performance.now();
    const r = await rawCall(px.address, {}, frame(Buffer.from("q")));
    const took = performance.now() - t0;
    expect(took).toBeGreaterThanOrEqual(280);
    expect(took).toBeLessThan(2000);
    expect(r.headers?.[":status"]).toBe(200);
    expect((r.headersFlags ?? 0) & 1).toBe(0); // headers went out before the deadline: not Trailers-Only
    expect(r.data.equals(Buffer.concat([m1, m2]))).toBe(true);
    expect(r.trailers?.["grpc-status"]).toBe("4");
    await waitFor("the upstream stream to close", () => up.seen[0]?.rstCode !== undefined);
    expect(up.seen[0]!.rstCode).toBe(http2.constants.NGHTTP2_CANCEL);
  });

  it("answers 4, not 1, when the upstream's RST_STREAM CANCEL is read after the budget has run out", async () => {
    // The upstream runs in a worker thread, so it can send its CANCEL while this thread (dojang)
    // is blocked. It resets the stream 230 ms after receiving it, before dojang's 300 ms
    // deadline; this thread is busy from 150 ms to 450 ms. When it wakes, the deadline timer is
    // due and the RST is waiting on the socket; node runs the I/O first (the timer phase already
    // passed), so dojang sees an upstream CANCEL with its own budget gone. grpc-go's rule (and
    // spec §11.2): that is DEADLINE_EXCEEDED, not CANCELLED.
    const w = track(new Worker(CANCELLING_UPSTREAM, { eval: true, workerData: { cancelAfterMs: 230 } }), async (wk) => {
      wk.postMessage("close");
      await new Promise((r) => wk.once("exit", r));
    });
    const events: { type: string; after?: number; rstCode?: number; port?: number }[] = [];
    w.on("message", (m: (typeof events)[number]) => events.push(m));
    await waitFor("the worker upstream to listen", () => events.some((e) => e.type === "listening"));
    const port = events.find((e) => e.type === "listening")!.port!;
    const px = await proxyFor(`127.0.0.1:${port}`, { route: { timeout: "300ms" } });
    // warm the upstream session so connect time does not shift the schedule
    const warm = await rawCall(px.address, { ":path": "/test.Echo/Warm" }, frame(Buffer.from("warm")));
    expect(statusOf(warm)).toBe("0");
    events.length = 0;

    const t0 = performance.now();
    let blockedUntil = 0;
    const block = setTimeout(() => {
      while (performance.now() - t0 < 450) {
        /* dojang's thread is busy */
      }
      blockedUntil = performance.now() - t0;
    }, 150);
    track(block, clearTimeout);
    const r = await rawCall(px.address, {}, frame(Buffer.from("q")));
    expect(blockedUntil).toBeGreaterThanOrEqual(450);
    const sent = events.find((e) => e.type === "cancel-sent");
    expect(sent).toBeDefined();
    expect(sent!.after!).toBeLessThan(300); // the upstream's CANCEL left before dojang's deadline
    expect(statusOf(r)).toBe("4");
    expect(r.headers?.["grpc-message"]).toBe("context deadline exceeded");
    const m = await scrape(px.adminAddress);
    expect(sample(m, "dojang_calls_total", { grpc_code: "DEADLINE_EXCEEDED", decided_by: "deadline" })).toBe(1);
    expect(sample(m, "dojang_calls_total", { grpc_code: "CANCELLED" })).toBe(0);
  });

  it("answers grpc-timeout 0S with 4 at once and sends nothing upstream", async () => {
    const up = await rawUpstream(answerOk);
    let sessions = 0;
    up.server.on("session", () => sessions++);
    const px = await proxyFor(up.address);
    const r = await rawCall(px.address, { "grpc-timeout": "0S" }, frame(Buffer.from("q")));
    expect(r.headers?.[":status"]).toBe(200);
    expect((r.headersFlags ?? 0) & 1).toBe(1);
    expect(statusOf(r)).toBe("4");
    expect(r.data.length).toBe(0);
    await new Promise((res) => setTimeout(res, 100));
    expect(up.seen).toHaveLength(0);
    expect(sessions).toBe(0);
    const m = await scrape(px.adminAddress);
    expect(sample(m, "dojang_calls_total", { grpc_code: "DEADLINE_EXCEEDED", decided_by: "deadline" })).toBe(1);
  });
});

/** Worker-thread upstream: answers /test.Echo/Warm OK; resets any other stream with CANCEL `cancelAfterMs` after it arrives. */
const CANCELLING_UPSTREAM = `
const http2 = require("node:http2");
const { parentPort, workerData } = require("node:worker_threads");
const server = http2.createServer();
const sessions = new Set();
server.on("session", (s) => { sessions.add(s); s.on("error", () => {}); s.on("close", () => sessions.delete(s)); });
server.on("stream", (stream, headers) => {
  stream.on("error", () => {});
  stream.resume();
  if (headers[":path"] === "/test.Echo/Warm") {
    stream.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": "0" }, { endStream: true });
    return;
  }
  const t = performance.now();
  const timer = setTimeout(() => {
    stream.close(http2.constants.NGHTTP2_CANCEL);
    parentPort.postMessage({ type: "cancel-sent", after: performance.now() - t });
  }, workerData.cancelAfterMs);
  stream.on("close", () => { clearTimeout(timer); parentPort.postMessage({ type: "closed", rstCode: stream.rstCode }); });
});
server.listen(0, "127.0.0.1", () => parentPort.postMessage({ type: "listening", port: server.address().port }));
parentPort.on("message", () => {
  for (const s of sessions) s.destroy();
  server.close(() => process.exit(0));
});
`;
