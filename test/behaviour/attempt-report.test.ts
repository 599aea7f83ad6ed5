// Contract (issue 11, step 1): "calls report each attempt's outcome back to its endpoint" — each
// attempt tells its endpoint once how it ended (ok, status, reset, refused, unreachable, local),
// the counters health checks and outlier ejection will read. Raw node:http2 upstreams put each
// ending on the wire; a grpc-js client makes the calls.
import * as grpc from "@grpc/grpc-js";
import http2 from "node:http2";
import { describe, expect, it } from "vitest";
import type { DojangHandle } from "../../src/index.js";
import { freePort } from "../helpers/process.js";
import { unary } from "../helpers/peers.js";
import { useFixtures, waitFor } from "../helpers/fixtures.js";
import { replyGrpc, resetAfterMessage } from "../helpers/scripted-upstream.js";

const fx = useFixtures();
const { NGHTTP2_INTERNAL_ERROR, NGHTTP2_REFUSED_STREAM } = http2.constants;

function endpointOf(px: DojangHandle) {
  return px.instance.clusters.get("backend")!.endpoints[0]!;
}

/** Waits until no attempt is in flight on the endpoint, then returns its result counters. */
async function settled(px: DojangHandle) {
  const ep = endpointOf(px);
  await waitFor("the endpoint's attempts to end", () => ep.active === 0);
  return { ...ep.results, consecutiveFailures: ep.consecutiveFailures };
}

const ZERO = { ok: 0, status: 0, reset: 0, refused: 0, unreachable: 0, local: 0, consecutiveFailures: 0 };

describe('"calls report each attempt\'s outcome back to its endpoint"', () => {
  it("counts the upstream's own statuses: 0 as ok, anything else as status; UNAVAILABLE is a failure in a row, NOT_FOUND ends the run", async () => {
    const codes = ["0", "14", "5"];
    let n = 0;
    const up = await fx.rawUpstream((s) => replyGrpc(s, [Buffer.from("r")], { "grpc-status": codes[n++]! }));
    const px = await fx.proxyFor(up.address);
    const c = fx.client(px.address);
    expect((await unary(c, Buffer.from("x"))).err).toBeNull();
    expect((await unary(c, Buffer.from("x"))).err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(await settled(px)).toEqual({ ...ZERO, ok: 1, status: 1, consecutiveFailures: 1 });
    expect((await unary(c, Buffer.from("x"))).err?.code).toBe(grpc.status.NOT_FOUND);
    expect(await settled(px)).toEqual({ ...ZERO, ok: 1, status: 2, consecutiveFailures: 0 });
  });

  it("counts a reset after the response started as reset, and resets in a row as consecutive failures", async () => {
    const up = await fx.rawUpstream((s) => resetAfterMessage(s, NGHTTP2_INTERNAL_ERROR, Buffer.from("r")));
    const px = await fx.proxyFor(up.address);
    const c = fx.client(px.address);
    expect((await unary(c, Buffer.from("x"))).err?.code).toBe(grpc.status.INTERNAL);
    expect((await unary(c, Buffer.from("x"))).err?.code).toBe(grpc.status.INTERNAL);
    expect(await settled(px)).toEqual({ ...ZERO, reset: 2, consecutiveFailures: 2 });
  });

  it("counts REFUSED_STREAM as refused (the upstream cannot have processed it), apart from resets", async () => {
    const up = await fx.rawUpstream((s) => s.close(NGHTTP2_REFUSED_STREAM));
    const px = await fx.proxyFor(up.address);
    const c = fx.client(px.address);
    expect((await unary(c, Buffer.from("x"))).err?.code).toBe(grpc.status.UNAVAILABLE);
    // two attempts: the refusal is retried once, transparently (and refused again)
    expect(await settled(px)).toEqual({ ...ZERO, refused: 2 });
  });

  it("counts a connect that failed as unreachable", async () => {
    const port = await freePort(); // nothing listens there
    const px = await fx.proxyFor(`127.0.0.1:${port}`);
    const c = fx.client(px.address);
    expect((await unary(c, Buffer.from("x"))).err?.code).toBe(grpc.status.UNAVAILABLE);
    // two attempts: a failed connect is retried once, transparently
    expect(await settled(px)).toEqual({ ...ZERO, unreachable: 2, consecutiveFailures: 2 });
  });

  it("counts a call dojang ended (the deadline) as local, which says nothing of the endpoint", async () => {
    const up = await fx.rawUpstream(() => {
      /* never answers */
    });
    const px = await fx.proxyFor(up.address);
    const c = fx.client(px.address);
    const r = await unary(c, Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 150 });
    expect(r.err?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(await settled(px)).toEqual({ ...ZERO, local: 1 });
  });
});
