// GET /tap (issue "dojang 0.6: what an operator sees", item 2): live access records of the calls
// that end while a client reads, NDJSON, filtered by method, code, failed, decided_by, route and
// client; a reader that does not keep up costs dojang a bounded buffer (records dropped and
// counted, the count sent as {"tap_dropped":N}); with nobody tapping, nobody is subscribed.
import http2 from "node:http2";
import net from "node:net";
import * as grpc from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { TAP_BUFFER_BYTES } from "../../src/proxy/admin/admin.js";
import { useFixtures } from "../helpers/fixtures.js";
import { runCalls, startBackend } from "../helpers/backends.js";
import { rawCall, unary } from "../helpers/peers.js";

const fx = useFixtures();

/** Reads GET /tap?query: the records so far in `lines`, until close(). */
async function tap(admin: string | undefined, query: string): Promise<{ status: number; lines: Record<string, unknown>[]; close(): void; body: string }> {
  const ac = new AbortController();
  const res = await fetch(`http://${admin}/tap${query}`, { signal: ac.signal });
  const out = { status: res.status, lines: [] as Record<string, unknown>[], body: "", close: () => ac.abort() };
  if (res.status !== 200) {
    out.body = await res.text();
    return out;
  }
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  let rest = "";
  void (async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        rest += dec.decode(value, { stream: true });
        let nl: number;
        while ((nl = rest.indexOf("\n")) >= 0) {
          out.lines.push(JSON.parse(rest.slice(0, nl)) as Record<string, unknown>);
          rest = rest.slice(nl + 1);
        }
      }
    } catch {
      /* aborted */
    }
  })();
  return out;
}

async function until(what: string, pred: () => boolean, ms = 5000): Promise<void> {
  const end = performance.now() + ms;
  while (!pred()) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("GET /tap: the calls as they end", () => {
  it("streams each ended call's access record, and only those that pass the filter", async () => {
    const b = fx.track(await startBackend("b"), (x) => x.close());
    const px = await fx.proxyFor(b.address, { route: { match: { service: "test.Echo" } } });
    const everything = await tap(px.adminAddress, "");
    const failedUnary = await tap(px.adminAddress, "?failed&method=test.Echo/Unary");
    const notFound = await tap(px.adminAddress, "?code=NOT_FOUND,13");
    const byRoute = await tap(px.adminAddress, "?route=service:test.Echo&decided_by=upstream");
    const noRoute = await tap(px.adminAddress, "?decided_by=no_route&method=other.Svc/*");
    const lan = await tap(px.adminAddress, "?client=10.0.0.0/8");
    const local = await tap(px.adminAddress, "?client=127.0.0.1&failed");
    for (const t of [everything, failedUnary, notFound, byRoute, noRoute, lan, local]) fx.track(t, (x) => x.close());
    expect(px.instance.tap.size).toBe(7);
    const c = fx.client(px.address);
    expect((await unary(c, Buffer.from("a"))).err).toBeNull();
    b.failWith = grpc.status.NOT_FOUND;
    expect((await unary(c, Buffer.from("b"))).err?.code).toBe(grpc.status.NOT_FOUND);
    b.failWith = undefined;
    await rawCall(px.address, { ":path": "/other.Svc/Nope" }, Buffer.alloc(5));
    await until("three records", () => everything.lines.length === 3);
    await new Promise((r) => setTimeout(r, 200));
    const codes = (t: { lines: Record<string, unknown>[] }): unknown[] => t.lines.map((l) => [l["path"], l["grpc_code"], l["decided_by"]]);
    expect(codes(everything)).toEqual([
      ["/test.Echo/Unary", 0, "upstream"],
      ["/test.Echo/Unary", 5, "upstream"],
      ["/other.Svc/Nope", 12, "no_route"],
    ]);
    expect(codes(failedUnary)).toEqual([["/test.Echo/Unary", 5, "upstream"]]);
    expect(codes(notFound)).toEqual([["/test.Echo/Unary", 5, "upstream"]]);
    expect(codes(byRoute)).toEqual([
      ["/test.Echo/Unary", 0, "upstream"],
      ["/test.Echo/Unary", 5, "upstream"],
    ]);
    expect(codes(noRoute)).toEqual([["/other.Svc/Nope", 12, "no_route"]]);
    expect(codes(lan)).toEqual([]);
    expect(codes(local)).toEqual([
      ["/test.Echo/Unary", 5, "upstream"],
      ["/other.Svc/Nope", 12, "no_route"],
    ]);
    // each line is the whole access record
    expect(everything.lines[1]).toMatchObject({ grpc_status: "NOT_FOUND", route: "service:test.Echo", upstream: b.address, client_address: "127.0.0.1" });
  });

  it("unsubscribes when the reader goes: nobody tapping, nothing subscribed", async () => {
    const b = fx.track(await startBackend("b"), (x) => x.close());
    const px = await fx.proxyFor(b.address);
    const t = await tap(px.adminAddress, "");
    expect(px.instance.tap.size).toBe(1);
    t.close();
    await until("the subscription to end", () => px.instance.tap.size === 0);
  });

  it("refuses a filter it does not know, and a bad value, with 400 naming it", async () => {
    const b = fx.track(await startBackend("b"), (x) => x.close());
    const px = await fx.proxyFor(b.address);
    for (const [q, msg] of [
      ["?status=14", 'unknown filter "status"'],
      ["?code=FINE", 'code "FINE"'],
      ["?decided_by=someone", 'decided_by "someone"'],
      ["?client=10.0.0.0/99", 'client "10.0.0.0/99"'],
    ] as const) {
      const r = await tap(px.adminAddress, q);
      expect(r.status, q).toBe(400);
      expect((JSON.parse(r.body) as { error: string }).error, q).toContain(msg);
    }
    expect(px.instance.tap.size).toBe(0);
  });

  it("a reader that stops reading costs a bounded buffer: records are dropped and counted, none lost silently", { timeout: 90_000 }, async () => {
    // each record carries the upstream's 4 KiB grpc-message: 2,000 calls are 8 MB of records,
    // more than the tap's buffer and the kernel's socket buffers together
    const message = "x".repeat(4096);
    const up = await fx.rawUpstream((s) => {
      s.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": "14", "grpc-message": message }, { endStream: true });
    });
    const px = await fx.proxyFor(up.address);
    const [host, port] = px.adminAddress!.split(":") as [string, string];
    const sock = fx.track(net.connect(Number(port), host), (s) => s.destroy());
    await new Promise<void>((r) => sock.once("connect", () => r()));
    sock.write(`GET /tap HTTP/1.1\r\nhost: ${px.adminAddress}\r\n\r\n`);
    sock.pause();
    await until("the subscription", () => px.instance.tap.size === 1);
    const N = 2000;
    const session = fx.track(http2.connect(`http://${px.address}`), (x) => x.close());
    session.on("error", () => {});
    await runCalls(N, 50, () => rawCall(px.address, {}, Buffer.alloc(5), { session }));
    // now read everything: the records that fit, then the count of those that did not
    let text = "";
    sock.setEncoding("utf8");
    sock.on("data", (d: string) => (text += d));
    sock.resume();
    const count = (): { records: number; dropped: number } => {
      let records = 0;
      let dropped = 0;
      for (const m of text.matchAll(/^(\{.*\})$/gm)) {
        const o = JSON.parse(m[1]!) as Record<string, unknown>;
        if (typeof o["tap_dropped"] === "number") dropped += o["tap_dropped"];
        else if (o["grpc_code"] === 14) records++;
      }
      return { records, dropped };
    };
    await until("every call accounted for", () => {
      const c = count();
      return c.records + c.dropped === N;
    }, 30_000);
    const { records, dropped } = count();
    expect(dropped).toBeGreaterThan(0);
    // what reached the reader is at most the tap's budget plus what the kernel buffered: far from all 8 MB
    expect(records).toBeLessThan(N);
    expect(TAP_BUFFER_BYTES).toBe(262_144);
  });
});
