// Contract (issue 11, step 1): "A config snapshot: the compiled routes, clusters and filter chains,
// immutable; each call keeps the snapshot it started with until it ends". A reload swaps the
// snapshot (Dojang.swapSnapshot); these tests swap one in a running instance and watch where calls go.
import * as grpc from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { resolveConfig } from "../../src/index.js";
import { unary } from "../helpers/peers.js";
import { useFixtures, waitFor } from "../helpers/fixtures.js";

const fx = useFixtures();

/** An upstream that answers every unary call with its own name, and counts them. */
async function named(name: string) {
  let calls = 0;
  const s = await fx.grpcServer({
    Unary: (_c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      calls++;
      cb(null, Buffer.from(name));
    },
  });
  return { address: s.address, calls: () => calls };
}

function configTo(upstream: string) {
  return resolveConfig({
    config: {
      listeners: [{ name: "main", address: "127.0.0.1:0", faultHeaders: true, routes: [{ match: { prefix: "/" }, cluster: "backend" }] }],
      clusters: [{ name: "backend", endpoints: [upstream] }],
    },
  });
}

describe('"each call keeps the snapshot it started with until it ends; reload swaps the snapshot"', () => {
  it("sends calls that start after a swap to the new snapshot's cluster", async () => {
    const a = await named("a");
    const b = await named("b");
    const px = await fx.proxyFor(a.address, { listener: { faultHeaders: true } });
    const c = fx.client(px.address);
    expect((await unary(c, Buffer.from("x"))).res?.toString()).toBe("a");

    const d = px.instance;
    const before = d.snapshot;
    const next = d.compileSnapshot(configTo(b.address));
    expect(next.version).toBe(before.version + 1);
    expect(Object.isFrozen(next)).toBe(true);
    d.swapSnapshot(next);
    expect(d.snapshot).toBe(next);

    expect((await unary(c, Buffer.from("x"))).res?.toString()).toBe("b");
    expect([a.calls(), b.calls()]).toEqual([1, 1]);
  });

  it("keeps a call that started before the swap on its own snapshot, even when it picks its endpoint after it", async () => {
    const a = await named("a");
    const b = await named("b");
    const px = await fx.proxyFor(a.address, { listener: { faultHeaders: true } });
    const c = fx.client(px.address);
    // A request delay holds the call before it picks an endpoint: the swap happens in between.
    const md = new grpc.Metadata();
    md.set("x-envoy-fault-delay-request", "300");
    const early = unary(c, Buffer.from("x"), md);
    await waitFor("the delayed call to be in flight", () => px.instance.metrics.live.activeCalls === 1);
    px.instance.swapSnapshot(px.instance.compileSnapshot(configTo(b.address)));
    const late = await unary(c, Buffer.from("x"));
    expect(late.res?.toString()).toBe("b");
    expect(a.calls()).toBe(0);

    const r = await early;
    expect(r.err).toBeNull();
    expect(r.res?.toString()).toBe("a");
    expect([a.calls(), b.calls()]).toEqual([1, 1]);
  });
});
