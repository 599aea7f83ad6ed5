// Fault rule keys the key-coverage test (test/architecture/key-coverage.test.ts, issue 23) found no
// behaviour test for (docs/harness.md, "Fault rules"), checked from outside: what the grpc-js
// client gets, when the upstream sees the call.
//   match.direction: "not a filter: the default direction of bandwidth, stall and delay-at-message
//     actions"
//   match.metadata[].regex (named before only by a unit test of the selection): "a JavaScript
//     regular expression that must match the whole value (it is anchored) and never matches an
//     absent header"
//   action.jitter.normal { mean, stddev }: a delay drawn from a normal distribution (seeded: a rule
//     with a `seed` draws the same delays every run, so the test below is deterministic)
import * as grpc from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { startGrpcServer, unary } from "../helpers/peers.js";
import { useFixtures } from "../helpers/fixtures.js";

const fx = useFixtures();

/** grpc-js Echo upstream recording when each Unary call reached it. */
async function upstream(): Promise<{ address: string; arrivals: number[] }> {
  const arrivals: number[] = [];
  const srv = fx.track(
    await startGrpcServer({
      Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        arrivals.push(performance.now());
        cb(null, call.request);
      },
    }),
    (s) => s.close(),
  );
  return { address: srv.address, arrivals };
}

describe("<faultRule>.match.direction: the default direction of a stall (or bandwidth, delay at message)", () => {
  it("a stall with match.direction response lets the request through (the upstream answers) and holds the answer until the deadline", async () => {
    const up = await upstream();
    const px = await fx.proxyFor(up.address);
    px.faults.add({ id: "stuck", match: { direction: "response" }, action: { kind: "stall" } });
    const c = fx.client(px.address);
    const r = await unary(c, Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 2000 });
    expect(r.err?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    // a stall's own default is the request: then the upstream would never have seen the call
    expect(up.arrivals).toHaveLength(1);
  });

  it("match.direction request: the upstream never sees the call", async () => {
    const up = await upstream();
    const px = await fx.proxyFor(up.address);
    px.faults.add({ id: "stuck", match: { direction: "request" }, action: { kind: "bandwidth", bytesPerSecond: 1 } });
    const c = fx.client(px.address);
    // a bandwidth action's own default is the response; on the request, 1 byte a second holds
    // the call's 6 bytes beyond its deadline
    const r = await unary(c, Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 1500 });
    expect(r.err?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(up.arrivals).toHaveLength(0);
  });
});

describe("<faultRule>.action.jitter.normal: a delay drawn from normal(mean, stddev)", () => {
  it("with mean 800ms and stddev 400ms (seeded) the waits spread on both sides of the mean", async () => {
    const up = await upstream();
    const px = await fx.proxyFor(up.address);
    px.faults.add({ id: "jitter", seed: 7, action: { kind: "delay", at: "request", jitter: { normal: { mean: "800ms", stddev: "400ms" } } } });
    const c = fx.client(px.address);
    const waits: number[] = [];
    for (let i = 0; i < 10; i++) {
      const t0 = performance.now();
      const r = await unary(c, Buffer.from(`n${i}`));
      expect(r.err).toBeNull();
      waits.push(up.arrivals[i]! - t0);
    }
    // A loaded machine only adds to a wait. Seed 7's draws are about mean + (0.05, 0.8, 1.75,
    // 1.65, 1.4, 0.5, 0.65, -0.5, -1, -0.15) × stddev: the lowest (400 ms) is 300 ms below the
    // "below" bound, so stddev is used (with none every wait would be at least 800 ms), and several
    // are far above 900 ms, so the mean is (around 0 the draws would be clamped to 0 and ≤ 700 ms).
    const below = waits.filter((w) => w < 700).length;
    const above = waits.filter((w) => w > 900).length;
    expect({ below: below > 0, above: above > 0 }, `waits ${waits.map((w) => Math.round(w)).join(", ")} ms`).toEqual({ below: true, above: true });
    expect(Math.min(...waits)).toBeGreaterThan(20);
  });
});

describe("<faultRule>.match.metadata[].regex: the rule applies to calls whose metadata value matches the whole regex", () => {
  it("x-region eu-west-1 and eu-north-2 get the abort; us-east-1, a value with the match inside it, and no header reach the upstream", async () => {
    const up = await upstream();
    const px = await fx.proxyFor(up.address);
    px.faults.add({ id: "eu", match: { metadata: [{ name: "x-region", regex: "eu-(west|north)-[0-9]" }] }, action: { kind: "abort", code: "UNAVAILABLE", message: "eu down" } });
    const c = fx.client(px.address);
    const call = async (region: string | undefined): Promise<string> => {
      const md = new grpc.Metadata();
      if (region !== undefined) md.set("x-region", region);
      const r = await unary(c, Buffer.from("x"), md);
      return r.err === null ? "ok" : `${r.err.code} ${r.err.details}`;
    };
    expect(await call("eu-west-1")).toBe("14 eu down");
    expect(await call("eu-north-2")).toBe("14 eu down");
    expect(await call("us-east-1")).toBe("ok");
    expect(await call("xeu-west-1")).toBe("ok");
    expect(await call("eu-west-12")).toBe("ok");
    expect(await call(undefined)).toBe("ok");
    expect(up.arrivals).toHaveLength(4);
  });
});
