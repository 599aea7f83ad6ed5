// Fault injection, end to end: faults that change timing, throughput or deadlines. `delay` at each
// point (fixed and jittered), `bandwidth`, `blackhole`, `stall` and `deadline` tampering, with
// real grpc-js clients; a raw node:http2 upstream records the grpc-timeout dojang sends. Timing
// bounds are generous (a loaded CI machine), and only where the behaviour is timing.
import { afterEach, describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import type http2 from "node:http2";
import { echoClient, frame, rawCall, startGrpcServer, startProxy, startRawUpstream, unary, type EchoClient, type RawUpstream } from "../helpers/peers.js";
import { Cleanup, GRPC_RESPONSE_HEADERS, afterRequest } from "../helpers/scripted-upstream.js";
import type { DojangHandle } from "../../src/index.js";
import { connections } from "../helpers/fixtures.js";

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

// === peers ===

interface Upstream {
  readonly address: string;
  /** performance.now() when each handler ran, per method */
  readonly arrivals: Record<string, number[]>;
  /** request messages the ClientStream handler has read */
  clientStreamMessages: number;
}

/** grpc-js Echo upstream: Unary echoes; ServerStream "n,size" sends n messages of size bytes; ClientStream counts. */
async function startUpstream(): Promise<Upstream> {
  const u: Upstream = { address: "", arrivals: { Unary: [], ServerStream: [], ClientStream: [] }, clientStreamMessages: 0 };
  const srv = await startGrpcServer({
    Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      u.arrivals["Unary"]!.push(performance.now());
      cb(null, call.request);
    },
    ServerStream: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
      u.arrivals["ServerStream"]!.push(performance.now());
      const [n = 0, size = 8] = call.request.toString().split(",").map(Number);
      for (let i = 1; i <= n; i++) call.write(Buffer.alloc(size, 0x30 + (i % 10)));
      call.end();
    },
    ClientStream: (call: grpc.ServerReadableStream<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      u.arrivals["ClientStream"]!.push(performance.now());
      call.on("data", () => u.clientStreamMessages++);
      call.on("end", () => cb(null, Buffer.from("done")));
      call.on("error", () => {});
    },
  });
  cleanup.add(srv, (s) => s.close());
  return Object.assign(u, { address: srv.address });
}

async function proxy(upstream: string, o: Parameters<typeof startProxy>[1] = {}): Promise<DojangHandle> {
  return cleanup.add(await startProxy(upstream, o), (p) => p.close(0));
}

function client(px: DojangHandle): EchoClient {
  return cleanup.add(echoClient(px.address), (c) => c.close());
}


function md(entries: Record<string, string>): grpc.Metadata {
  const m = new grpc.Metadata();
  for (const [k, v] of Object.entries(entries)) m.set(k, v);
  return m;
}

/** A unary call with its timeline (ms from the start): response headers and the end. */
async function timedUnary(c: EchoClient, req: string, meta = new grpc.Metadata(), opts: grpc.CallOptions = {}) {
  const t0 = performance.now();
  let headersAt: number | undefined;
  const r = await new Promise<{ err: grpc.ServiceError | null; res: Buffer | undefined; metadata: boolean }>((resolve) => {
    let metadata = false;
    const call = c.Unary(Buffer.from(req), meta, opts, (err, res) => resolve({ err, res, metadata }));
    call.on("metadata", () => {
      metadata = true;
      headersAt = performance.now() - t0;
    });
  });
  return { ...r, t0, headersAt, elapsed: performance.now() - t0 };
}

/** A server-streaming call with the arrival time of each message and of the status (ms from the start). */
function timedServerStream(c: EchoClient, req: string, meta = new grpc.Metadata()) {
  const t0 = performance.now();
  return new Promise<{ messages: Buffer[]; times: number[]; status: grpc.StatusObject; statusAt: number }>((resolve) => {
    const messages: Buffer[] = [];
    const times: number[] = [];
    const call = c.ServerStream(Buffer.from(req), meta, {});
    call.on("data", (m: Buffer) => {
      messages.push(m);
      times.push(performance.now() - t0);
    });
    call.on("error", () => {});
    call.on("status", (status: grpc.StatusObject) => resolve({ messages, times, status, statusAt: performance.now() - t0 }));
  });
}

/** grpc-timeout ("123m", "5S", …) in milliseconds. */
function timeoutMs(v: string | string[] | undefined): number | undefined {
  if (typeof v !== "string") return undefined;
  const m = /^(\d{1,8})([HMSmun])$/.exec(v);
  if (m === null) throw new Error(`bad grpc-timeout ${v}`);
  const unit = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 1e-3, n: 1e-6 }[m[2] as "H"]!;
  return Number(m[1]) * unit;
}

/** A raw upstream that answers every call with one message and status 0, recording request headers. */
async function recordingUpstream(): Promise<RawUpstream> {
  return cleanup.add(
    await startRawUpstream((s: http2.ServerHttp2Stream) =>
      afterRequest(s, () => {
        s.respond(GRPC_RESPONSE_HEADERS, { waitForTrailers: true });
        s.once("wantTrailers", () => s.sendTrailers({ "grpc-status": "0" }));
        s.end(frame(Buffer.from("ok")));
      }),
    ),
    (u) => u.close(),
  );
}

// === delay ===

describe("delay", () => {
  it("at request holds the call for the delay before the upstream sees it", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "slow", action: { kind: "delay", at: "request", delay: "300ms" } });

    const r = await timedUnary(client(px), "x");
    expect(r.err).toBeNull();
    expect(r.res?.toString()).toBe("x");
    expect(up.arrivals["Unary"]![0]! - r.t0).toBeGreaterThanOrEqual(280);
    expect(r.elapsed).toBeGreaterThanOrEqual(280);
    expect(r.elapsed).toBeLessThan(3000);
  });

  it("at response_headers holds the response headers, after the upstream already answered", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "slow", action: { kind: "delay", at: "response_headers", delay: "300ms" } });

    const r = await timedUnary(client(px), "x");
    expect(r.err).toBeNull();
    expect(up.arrivals["Unary"]![0]! - r.t0).toBeLessThan(200);
    expect(r.headersAt).toBeGreaterThanOrEqual(280);
    expect(r.elapsed).toBeLessThan(3000);
  });

  it("at message N holds only the N-th response message", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "slow", action: { kind: "delay", at: "message", message: 2, delay: "300ms" } });

    const r = await timedServerStream(client(px), "3,16");
    expect(r.status.code).toBe(grpc.status.OK);
    expect(r.messages).toHaveLength(3);
    expect(r.times[0]!).toBeLessThan(200);
    expect(r.times[1]! - r.times[0]!).toBeGreaterThanOrEqual(280);
    expect(r.times[2]! - r.times[1]!).toBeLessThan(200);
  });

  it("at message N with direction request holds the N-th request message on its way upstream", async () => {
    const arrivals: number[] = [];
    const up = cleanup.add(
      await startRawUpstream((st) => {
        st.on("data", () => arrivals.push(performance.now()));
        afterRequest(st, () => {
          st.respond(GRPC_RESPONSE_HEADERS, { waitForTrailers: true });
          st.once("wantTrailers", () => st.sendTrailers({ "grpc-status": "0" }));
          st.end(frame(Buffer.from("ok")));
        });
      }),
      (u) => u.close(),
    );
    const px = await proxy(up.address);
    px.faults.add({ id: "slow", action: { kind: "delay", at: "message", message: 2, direction: "request", delay: "300ms" } });

    const c = client(px);
    const r = await new Promise<{ err: grpc.ServiceError | null }>((resolve) => {
      const call = c.ClientStream(new grpc.Metadata(), {}, (err) => resolve({ err }));
      call.write(Buffer.from("one"));
      setTimeout(() => {
        call.write(Buffer.from("two"));
        call.end();
      }, 50);
    });
    expect(r.err).toBeNull();
    const body = Buffer.concat(up.seen[0]!.body);
    expect(body.equals(Buffer.concat([frame(Buffer.from("one")), frame(Buffer.from("two"))]))).toBe(true);
    expect(arrivals.length).toBeGreaterThanOrEqual(2);
    expect(arrivals.at(-1)! - arrivals[0]!).toBeGreaterThanOrEqual(280);
  });

  it("at trailers holds the status after every message went out", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "slow", action: { kind: "delay", at: "trailers", delay: "300ms" } });

    const r = await timedServerStream(client(px), "2,16");
    expect(r.status.code).toBe(grpc.status.OK);
    expect(r.messages).toHaveLength(2);
    expect(r.times[1]!).toBeLessThan(200);
    expect(r.statusAt - r.times[1]!).toBeGreaterThanOrEqual(280);
    expect(r.statusAt).toBeLessThan(3000);
  });

  it("with uniform jitter waits a time within the bounds on every call", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "jitter", action: { kind: "delay", at: "request", jitter: { uniform: ["100ms", "250ms"] } } });
    const c = client(px);

    for (let i = 0; i < 5; i++) {
      const r = await timedUnary(c, `j${i}`);
      expect(r.err).toBeNull();
      const waited = up.arrivals["Unary"]![i]! - r.t0;
      expect(waited).toBeGreaterThanOrEqual(95);
      expect(waited).toBeLessThan(250 + 400);
    }
    expect(px.faults.list()[0]).toMatchObject({ matched: 5, fired: 5 });
  });

  it("runs before a terminal fault of the same call: delay, then the abort", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "slow", action: { kind: "delay", at: "request", delay: "300ms" } });
    px.faults.add({ id: "fail", action: { kind: "abort", code: "UNAVAILABLE", message: "late failure" } });

    const r = await timedUnary(client(px), "x");
    expect(r.err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(r.err?.details).toBe("late failure");
    expect(r.elapsed).toBeGreaterThanOrEqual(280);
    expect(r.elapsed).toBeLessThan(3000);
    expect(up.arrivals["Unary"]).toHaveLength(0);
  });

  it("holds only the matched call: another call on the same connection is answered at once", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    const conns = connections(px);
    px.faults.add({ id: "slow", match: { metadata: [{ name: "x-slow", present: true }] }, action: { kind: "delay", at: "request", delay: "600ms" } });
    const c = client(px);
    expect((await unary(c, Buffer.from("warm"))).err).toBeNull();

    const slow = timedUnary(c, "slow", md({ "x-slow": "1" }));
    const fast = await timedUnary(c, "fast");
    expect(fast.err).toBeNull();
    expect(fast.elapsed).toBeLessThan(400);
    const s = await slow;
    expect(s.err).toBeNull();
    expect(s.elapsed).toBeGreaterThanOrEqual(580);
    expect(conns()).toBe(1);
  });
});

// === bandwidth ===

describe("bandwidth", () => {
  it("throttles a 256 KiB response to 128 KiB/s: it takes about two seconds and arrives intact", { timeout: 20_000 }, async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "thin", match: { method: "ServerStream" }, action: { kind: "bandwidth", bytesPerSecond: "128KiB" } });
    const c = client(px);

    const big = timedServerStream(c, `1,${256 * 1024}`);
    // another call on the same connection is not held behind the throttled stream
    await new Promise((r) => setTimeout(r, 200));
    const other = await timedUnary(c, "meanwhile");
    expect(other.err).toBeNull();
    expect(other.elapsed).toBeLessThan(500);

    const r = await big;
    expect(r.status.code).toBe(grpc.status.OK);
    expect(r.messages).toHaveLength(1);
    expect(r.messages[0]!.equals(Buffer.alloc(256 * 1024, 0x31))).toBe(true);
    expect(r.statusAt).toBeGreaterThanOrEqual(1500);
    expect(r.statusAt).toBeLessThan(10_000);
  });
});

// === blackhole and stall ===

describe("blackhole", () => {
  it("never answers: the client's own deadline ends the call with 4, and the upstream is never called", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "hole", match: { method: "Unary" }, action: { kind: "blackhole" } });
    const c = client(px);

    const [r, other] = await Promise.all([timedUnary(c, "x", new grpc.Metadata(), { deadline: Date.now() + 300 }), timedServerStream(c, "2,4")]);
    expect(r.err?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(r.metadata).toBe(false);
    expect(r.elapsed).toBeGreaterThanOrEqual(290);
    expect(r.elapsed).toBeLessThan(2000);
    expect(up.arrivals["Unary"]).toHaveLength(0);
    // the other method on the same connection is untouched
    expect(other.status.code).toBe(grpc.status.OK);
    expect(other.messages).toHaveLength(2);
  });
});

describe("stall", () => {
  it("on the response: the upstream answers, the client gets no message before its deadline", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "stuck", action: { kind: "stall", direction: "response" } });

    const r = await timedUnary(client(px), "x", new grpc.Metadata(), { deadline: Date.now() + 400 });
    expect(r.err?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(r.res).toBeUndefined();
    expect(r.elapsed).toBeGreaterThanOrEqual(390);
    expect(r.elapsed).toBeLessThan(2000);
    expect(up.arrivals["Unary"]).toHaveLength(1); // the upstream did answer

    // on the wire: response headers, then nothing until dojang's own deadline for the call
    const raw = await rawCall(px.address, { "grpc-timeout": "400m" }, frame(Buffer.from("x")));
    expect(raw.headers?.[":status"]).toBe(200);
    expect(raw.data.length).toBe(0);
    expect(raw.trailers?.["grpc-status"]).toBe("4");
  });

  it("on the request (the default): the upstream never reads a message, and the client waits for its deadline", async () => {
    const up = await startUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "stuck", match: { method: "ClientStream" }, action: { kind: "stall" } });
    const c = client(px);

    const t0 = performance.now();
    const r = await new Promise<{ err: grpc.ServiceError | null }>((resolve) => {
      const call = c.ClientStream(new grpc.Metadata(), { deadline: Date.now() + 400 }, (err) => resolve({ err }));
      call.write(Buffer.from("one"));
      call.write(Buffer.from("two"));
      call.end();
    });
    const elapsed = performance.now() - t0;
    expect(r.err?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(elapsed).toBeGreaterThanOrEqual(390);
    expect(up.clientStreamMessages).toBe(0);
    // an unmatched method on the same connection goes through
    expect((await unary(c, Buffer.from("u"))).err).toBeNull();
  });
});

// === deadline ===

describe("deadline", () => {
  it("drop sends no grpc-timeout upstream, while an unfaulted call carries one", async () => {
    const up = await recordingUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "nodl", match: { metadata: [{ name: "x-fault", equals: "drop" }] }, action: { kind: "deadline", mode: "drop" } });
    const c = client(px);

    const a = await unary(c, Buffer.from("a"), md({ "x-fault": "drop" }), { deadline: Date.now() + 5000 });
    const b = await unary(c, Buffer.from("b"), new grpc.Metadata(), { deadline: Date.now() + 5000 });
    expect(a.err).toBeNull();
    expect(b.err).toBeNull();
    expect(up.seen).toHaveLength(2);
    expect(up.seen[0]!.headers["grpc-timeout"]).toBeUndefined();
    expect(timeoutMs(up.seen[1]!.headers["grpc-timeout"])).toBeGreaterThan(4000);
  });

  it("shrink with factor 0.5 sends about half the client's budget upstream", async () => {
    const up = await recordingUpstream();
    const px = await proxy(up.address);
    px.faults.add({ id: "half", action: { kind: "deadline", mode: "shrink", factor: 0.5 } });

    const r = await rawCall(px.address, { "grpc-timeout": "10S" }, frame(Buffer.from("x")));
    expect(r.trailers?.["grpc-status"]).toBe("0");
    const sent = timeoutMs(up.seen[0]!.headers["grpc-timeout"]);
    expect(sent).toBeGreaterThan(4800);
    expect(sent).toBeLessThanOrEqual(5000);
  });

  it("grow by 2s sends more upstream, but the client's own deadline still ends the call at its time", async () => {
    const up = cleanup.add(await startRawUpstream(() => {}), (u) => u.close()); // never answers
    const px = await proxy(up.address);
    px.faults.add({ id: "more", action: { kind: "deadline", mode: "grow", by: "2s" } });

    const r = await timedUnary(client(px), "x", new grpc.Metadata(), { deadline: Date.now() + 400 });
    expect(r.err?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(r.elapsed).toBeLessThan(2000);
    const sent = timeoutMs(up.seen[0]!.headers["grpc-timeout"]);
    expect(sent).toBeGreaterThan(2200);
    expect(sent).toBeLessThanOrEqual(2400);
  });
});
