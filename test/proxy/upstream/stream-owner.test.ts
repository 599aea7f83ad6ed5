// Every upstream stream dojang opens carries one slot of its own, the same symbol whatever drives
// it: a proxied call's attempt (call/attempt.ts) or a side call (unary.ts: ext_authz, the
// rate-limit service, OTLP/gRPC's exports). Two symbols gave two hidden classes of
// ClientHttp2Stream, and node's stream code, which every call runs, went megamorphic in each
// process that made a side call or an export (docs/contributing/benchmarks.md, ninth stop).
// The streams are node's own, seen through its diagnostics channel as they are made.
import dc from "node:diagnostics_channel";
import type { ClientHttp2Stream } from "node:http2";
import { afterEach, describe, expect, it } from "vitest";
import { echoClient, okWithMessage, startProxy, startRawUpstream, unary } from "../../helpers/peers.js";
import { waitFor } from "../../helpers/process.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => {});
});

/** The descriptions of the symbol-keyed slots dojang put on a stream. */
function dojangSlots(s: ClientHttp2Stream): string[] {
  return Object.getOwnPropertySymbols(s)
    .map((k) => k.description ?? "")
    .filter((d) => d.startsWith("dojang."));
}

describe("an upstream stream's one dojang slot", () => {
  it("a proxied call's attempt and an OTLP/gRPC export (a side call) put the same one symbol on their streams", async () => {
    // each stream with the port its session is connected to (grpc-js's own streams, the test's
    // client to the proxy, are seen too)
    const made: { s: ClientHttp2Stream; port: number | undefined }[] = [];
    const onStream = (m: unknown): void => {
      const s = (m as { stream: ClientHttp2Stream }).stream;
      made.push({ s, port: s.session?.socket?.remotePort });
    };
    dc.subscribe("http2.client.stream.created", onStream);
    cleanups.push(async () => dc.unsubscribe("http2.client.stream.created", onStream));
    const collector = await startRawUpstream((s) => okWithMessage(s));
    cleanups.push(() => collector.close());
    const up = await startRawUpstream((s) => okWithMessage(s));
    cleanups.push(() => up.close());
    const proxy = await startProxy(up.address, { top: { tracing: { endpoint: `http://${collector.address}`, protocol: "grpc", sampleRatio: 1, exportInterval: "20ms" } } });
    cleanups.push(() => proxy.close(0));
    const client = echoClient(proxy.address);
    cleanups.push(async () => client.close());
    expect((await unary(client, Buffer.from("x"))).err).toBeNull();
    await waitFor("the export", () => (collector.seen.length > 0 ? true : undefined), 10_000, 20);
    const to = (address: string): ClientHttp2Stream[] => made.filter((m) => m.port === Number(address.split(":")[1])).map((m) => m.s);
    const attempts = to(up.address);
    const exports = to(collector.address);
    expect(attempts.length).toBe(1);
    expect(exports.length).toBeGreaterThanOrEqual(1);
    for (const s of [...attempts, ...exports]) expect(dojangSlots(s)).toEqual(["dojang.streamOwner"]);
  }, 30_000);
});
