// Transparency of the four call shapes through dojang: messages keep their bytes, their order and
// their boundaries; metadata (ASCII and -bin, repeated keys) passes both ways; Trailers-Only stays
// Trailers-Only; x-request-id is kept or generated. Real grpc-js peers, raw node:http2 where
// grpc-js would hide the wire.
import { afterEach, describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import { createHash, type Hash } from "node:crypto";
import type http2 from "node:http2";
import {
  echoClient,
  frame,
  rawCall,
  startGrpcServer,
  startProxy,
  startRawUpstream,
  unary,
  type EchoClient,
  type RawUpstream,
} from "../helpers/peers.js";
import type { DojangHandle } from "../../src/index.js";

// === per-test resources, closed in reverse order ===

const cleanups: (() => unknown)[] = [];
function track<T>(value: T, close: (v: T) => unknown): T {
  cleanups.push(() => close(value));
  return value;
}
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

async function proxyFor(upstream: string, o: Parameters<typeof startProxy>[1] = {}): Promise<DojangHandle> {
  return track(await startProxy(upstream, o), (p) => p.close(0));
}
function client(address: string): EchoClient {
  return track(echoClient(address), (c) => c.close());
}

// === deterministic payloads ===

/** xorshift32: a small deterministic PRNG, so every run moves the same bytes. */
function prng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x;
  };
}

const MiB = 1 << 20;
/** 2 MiB of PRNG bytes; messages are windows into it at PRNG offsets. */
const POOL = (() => {
  const next = prng(0x5eed);
  const b = Buffer.allocUnsafe(2 * MiB);
  for (let i = 0; i < b.length; i += 4) b.writeUInt32LE(next(), i);
  return b;
})();

/** Message sizes from 1 B to 1 MiB: a third tiny, a third medium, a third large. */
function messageAt(next: () => number): Buffer {
  const cls = next() % 3;
  const size = cls === 0 ? 1 + (next() % 256) : cls === 1 ? 257 + (next() % 65_280) : 65_537 + (next() % (MiB - 65_536));
  const off = next() % (POOL.length - size);
  return POOL.subarray(off, off + size);
}

/** Messages totalling at least `bytes`. */
function messagesOf(seed: number, bytes: number): Buffer[] {
  const next = prng(seed);
  const out: Buffer[] = [];
  let total = 0;
  while (total < bytes) {
    const m = messageAt(next);
    out.push(m);
    total += m.length;
  }
  return out;
}

/** Hashes each message with its length, so order and boundaries both count. */
function addMessage(h: Hash, m: Buffer): void {
  const len = Buffer.allocUnsafe(4);
  len.writeUInt32BE(m.length);
  h.update(len);
  h.update(m);
}
function digestOf(ms: readonly Buffer[]): string {
  const h = createHash("sha256");
  for (const m of ms) addMessage(h, m);
  return h.digest("hex");
}

/** Writes every message honouring write()/'drain', then ends. */
async function writeAll(w: grpc.ClientWritableStream<Buffer> | grpc.ClientDuplexStream<Buffer, Buffer>, ms: readonly Buffer[]): Promise<void> {
  for (const m of ms) {
    if (!w.write(m)) await new Promise<void>((r) => w.once("drain", r));
  }
  w.end();
}

function statusOfCall(call: grpc.ClientReadableStream<Buffer> | grpc.ClientDuplexStream<Buffer, Buffer>): Promise<grpc.StatusObject> {
  return new Promise((resolve) => call.on("status", resolve));
}

/** A gRPC OK answer from a raw upstream, once the request has ended. */
function answerOk(stream: http2.ServerHttp2Stream, payload: Buffer, headers: http2.OutgoingHttpHeaders = {}, trailers: http2.OutgoingHttpHeaders = {}): void {
  stream.on("end", () => {
    if (stream.destroyed) return;
    stream.respond({ ":status": 200, "content-type": "application/grpc", ...headers }, { waitForTrailers: true });
    stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0", "grpc-message": "", ...trailers }));
    stream.end(frame(payload));
  });
}
async function rawUpstream(onStream: Parameters<typeof startRawUpstream>[0]): Promise<RawUpstream> {
  return track(await startRawUpstream(onStream), (u) => u.close());
}

/** Every value of `name` in a rawHeaders list, field by field. */
function rawValues(raw: readonly string[], name: string): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) if (raw[i] === name) out.push(raw[i + 1]!);
  return out;
}

// === tests ===

describe('"unary, client-streaming, server-streaming and bidi calls pass through with order and bytes intact"', () => {
  it("forwards a 1 MiB unary request and its response byte for byte", async () => {
    const up = track(
      await startGrpcServer({
        Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.from(call.request).reverse()),
      }),
      (s) => s.close(),
    );
    const px = await proxyFor(up.address);
    const req = POOL.subarray(12_345, 12_345 + MiB);
    const r = await unary(client(px.address), req);
    expect(r.err).toBeNull();
    expect(r.res?.equals(Buffer.from(req).reverse())).toBe(true);
  });

  it("delivers every client-streaming message to the upstream in order with its exact bytes", async () => {
    let received: Buffer[] = [];
    const up = track(
      await startGrpcServer({
        ClientStream: (call: grpc.ServerReadableStream<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
          received = [];
          call.on("data", (m: Buffer) => received.push(m));
          call.on("end", () => cb(null, Buffer.from(digestOf(received))));
        },
      }),
      (s) => s.close(),
    );
    const px = await proxyFor(up.address);
    const sent = messagesOf(7, 8 * MiB);
    const c = client(px.address);
    const res = await new Promise<{ err: grpc.ServiceError | null; res: Buffer | undefined }>((resolve) => {
      const call = c.ClientStream(new grpc.Metadata(), {}, (err, res) => resolve({ err, res }));
      void writeAll(call, sent);
    });
    expect(res.err).toBeNull();
    expect(received.length).toBe(sent.length);
    expect(res.res?.toString()).toBe(digestOf(sent));
  });

  it("delivers every server-streaming message to the client in order with its exact bytes", async () => {
    const up = track(
      await startGrpcServer({
        ServerStream: async (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
          for (const m of messagesOf(call.request.readUInt32BE(0), call.request.readUInt32BE(4))) {
            if (!call.write(m)) await new Promise<void>((r) => call.once("drain", r));
          }
          call.end();
        },
      }),
      (s) => s.close(),
    );
    const px = await proxyFor(up.address);
    const req = Buffer.alloc(8);
    req.writeUInt32BE(11, 0);
    req.writeUInt32BE(8 * MiB, 4);
    const call = client(px.address).ServerStream(req, new grpc.Metadata(), {});
    const got: Buffer[] = [];
    call.on("data", (m: Buffer) => got.push(m));
    const st = await statusOfCall(call);
    expect(st.code).toBe(grpc.status.OK);
    const expected = messagesOf(11, 8 * MiB);
    expect(got.length).toBe(expected.length);
    expect(digestOf(got)).toBe(digestOf(expected));
  });

  it("moves at least 64 MiB each way on one bidi call with matching sha256 on both sides", { timeout: 45_000 }, async () => {
    const serverIn = createHash("sha256");
    let serverInCount = 0;
    let serverInBytes = 0;
    const up = track(
      await startGrpcServer({
        Bidi: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
          // Echo every message back as it arrives, honouring the write side's backpressure.
          call.on("data", (m: Buffer) => {
            addMessage(serverIn, m);
            serverInCount++;
            serverInBytes += m.length;
            if (!call.write(m)) {
              call.pause();
              call.once("drain", () => call.resume());
            }
          });
          call.on("end", () => call.end());
        },
      }),
      (s) => s.close(),
    );
    const px = await proxyFor(up.address);
    const sent = messagesOf(0xb1d1, 64 * MiB);
    const sentBytes = sent.reduce((n, m) => n + m.length, 0);
    expect(sentBytes).toBeGreaterThanOrEqual(64 * MiB);
    expect(new Set(sent.map((m) => m.length)).size).toBeGreaterThan(100);

    const call = client(px.address).Bidi(new grpc.Metadata(), {});
    const clientIn = createHash("sha256");
    let clientInCount = 0;
    let clientInBytes = 0;
    call.on("data", (m: Buffer) => {
      addMessage(clientIn, m);
      clientInCount++;
      clientInBytes += m.length;
    });
    const status = statusOfCall(call);
    await writeAll(call, sent);
    const st = await status;

    expect(st.code).toBe(grpc.status.OK);
    const want = digestOf(sent);
    // request direction: what the upstream read is what the client wrote
    expect(serverInCount).toBe(sent.length);
    expect(serverInBytes).toBe(sentBytes);
    expect(serverIn.digest("hex")).toBe(want);
    // response direction: what the client read is what the upstream wrote (its echo)
    expect(clientInCount).toBe(sent.length);
    expect(clientInBytes).toBe(sentBytes);
    expect(clientIn.digest("hex")).toBe(want);
  });
});

describe('"metadata, including -bin metadata, passes through both ways"', () => {
  it("forwards a repeated request metadata key as two separate fields, not one folded value", async () => {
    const up = await rawUpstream((s) => answerOk(s, Buffer.from("ok")));
    const px = await proxyFor(up.address);
    const md = new grpc.Metadata();
    md.add("x-dup", "first");
    md.add("x-dup", "second");
    const r = await unary(client(px.address), Buffer.from("q"), md);
    expect(r.err).toBeNull();
    expect(up.seen).toHaveLength(1);
    expect(rawValues(up.seen[0]!.raw, "x-dup")).toEqual(["first", "second"]);
  });

  it("forwards request -bin metadata with its exact bytes, including a repeated -bin key", async () => {
    const up = await rawUpstream((s) => answerOk(s, Buffer.from("ok")));
    const px = await proxyFor(up.address);
    const one = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const two = Buffer.from([0x00, 0xff, 0x2c, 0x20, 0x0a]); // includes ',' and ' ' bytes
    const md = new grpc.Metadata();
    md.add("x-blob-bin", one);
    md.add("x-blob-bin", two);
    md.set("x-single-bin", Buffer.from([0xde, 0xad, 0xbe, 0xef, 0x00]));
    const r = await unary(client(px.address), Buffer.from("q"), md);
    expect(r.err).toBeNull();
    const raw = up.seen[0]!.raw;
    expect(rawValues(raw, "x-blob-bin").map((v) => Buffer.from(v, "base64"))).toEqual([one, two]);
    expect(rawValues(raw, "x-single-bin").map((v) => Buffer.from(v, "base64"))).toEqual([Buffer.from([0xde, 0xad, 0xbe, 0xef, 0x00])]);
  });

  it("delivers response initial metadata and trailing metadata to the client, -bin bytes exact", async () => {
    const headBin = Buffer.from(Array.from({ length: 300 }, (_, i) => (i * 7) & 0xff));
    const trailBin = Buffer.from([0x00, 0x01, 0x80, 0xfe, 0xff]);
    const trailBin2 = Buffer.from("second,value");
    const up = track(
      await startGrpcServer({
        Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
          const head = new grpc.Metadata();
          head.set("x-head", "hello");
          head.set("x-head-bin", headBin);
          call.sendMetadata(head);
          const trail = new grpc.Metadata();
          trail.set("x-trail", "bye");
          trail.add("x-trail-bin", trailBin);
          trail.add("x-trail-bin", trailBin2);
          cb(null, Buffer.from("res"), trail);
        },
      }),
      (s) => s.close(),
    );
    const px = await proxyFor(up.address);
    const r = await unary(client(px.address), Buffer.from("q"));
    expect(r.err).toBeNull();
    expect(r.res?.toString()).toBe("res");
    expect(r.metadata?.get("x-head")).toEqual(["hello"]);
    expect(r.metadata?.get("x-head-bin")).toEqual([headBin]);
    expect(r.status?.metadata.get("x-trail")).toEqual(["bye"]);
    expect(r.status?.metadata.get("x-trail-bin")).toEqual([trailBin, trailBin2]);
  });

  it("delivers request metadata to a grpc-js upstream and its -bin bytes exact", async () => {
    let seen: grpc.Metadata | undefined;
    const up = track(
      await startGrpcServer({
        Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
          seen = call.metadata;
          cb(null, Buffer.from("ok"));
        },
      }),
      (s) => s.close(),
    );
    const px = await proxyFor(up.address);
    const bin = Buffer.from([0xc0, 0x80, 0x00, 0x7f, 0x3d]);
    const md = new grpc.Metadata();
    md.set("x-ascii", "plain value");
    md.set("x-key-bin", bin);
    const r = await unary(client(px.address), Buffer.from("q"), md);
    expect(r.err).toBeNull();
    expect(seen?.get("x-ascii")).toEqual(["plain value"]);
    expect(seen?.get("x-key-bin")).toEqual([bin]);
  });
});

describe('"Trailers-Only responses pass through as Trailers-Only"', () => {
  it("forwards an immediate NOT_FOUND as one HEADERS frame with END_STREAM, grpc-status 5, its metadata and no DATA", async () => {
    const up = track(
      await startGrpcServer({
        Unary: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
          const md = new grpc.Metadata();
          md.set("x-why", "gone");
          md.set("x-why-bin", Buffer.from([1, 2, 3, 0xff]));
          cb({ code: grpc.status.NOT_FOUND, details: "no such thing", metadata: md });
        },
      }),
      (s) => s.close(),
    );
    const px = await proxyFor(up.address);
    const r = await rawCall(px.address, {}, frame(Buffer.from("q")));
    expect(r.headers).toBeDefined();
    expect((r.headersFlags ?? 0) & 1).toBe(1); // END_STREAM on the response HEADERS
    expect(r.headers?.[":status"]).toBe(200);
    expect(r.headers?.["content-type"]).toBe("application/grpc+proto"); // grpc-js's own, forwarded as sent
    expect(r.headers?.["grpc-status"]).toBe("5");
    expect(r.headers?.["x-why"]).toBe("gone");
    expect(Buffer.from(String(r.headers?.["x-why-bin"]), "base64")).toEqual(Buffer.from([1, 2, 3, 0xff]));
    expect(r.trailers).toBeUndefined();
    expect(r.data.length).toBe(0);
  });
});

describe('"x-request-id is forwarded unchanged, or generated when absent"', () => {
  it("forwards the client's x-request-id to the upstream unchanged, as a single field", async () => {
    const up = await rawUpstream((s) => answerOk(s, Buffer.from("ok")));
    const px = await proxyFor(up.address);
    const md = new grpc.Metadata();
    md.set("x-request-id", "client-chosen-id.42");
    const r = await unary(client(px.address), Buffer.from("q"), md);
    expect(r.err).toBeNull();
    expect(rawValues(up.seen[0]!.raw, "x-request-id")).toEqual(["client-chosen-id.42"]);
  });

  it("generates a distinct x-request-id for each call that arrives without one", async () => {
    const up = await rawUpstream((s) => answerOk(s, Buffer.from("ok")));
    const px = await proxyFor(up.address);
    const c = client(px.address);
    expect((await unary(c, Buffer.from("a"))).err).toBeNull();
    expect((await unary(c, Buffer.from("b"))).err).toBeNull();
    const ids = up.seen.map((s) => rawValues(s.raw, "x-request-id"));
    expect(ids[0]).toHaveLength(1);
    expect(ids[1]).toHaveLength(1);
    // Any non-trivial token will do (dojang happens to use UUIDs); it must identify the call.
    expect(ids[0]![0]).toMatch(/^[\x21-\x7e]{8,}$/);
    expect(ids[1]![0]).toMatch(/^[\x21-\x7e]{8,}$/);
    expect(ids[0]![0]).not.toBe(ids[1]![0]);
  });
});
