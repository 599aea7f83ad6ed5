// The Cluster's bookkeeping without traffic: setEndpoints and applyEndpointDelta keep the
// endpoints that stay (same objects, new weights, their ejections and in-flight counts) and
// retire the rest; outlier ejection by the injected clock, capped by
// maxEjectionPercent, and the return when the time is up; stop() takes the cluster off the
// metrics. Attempt results are fed as Endpoint.attemptEnded would be called.
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import { applyEndpointDelta, type Address } from "../../../src/translate/endpoint-set.js";
import { createLogger } from "../../../src/proxy/observe/log.js";
import { Metrics } from "../../../src/proxy/observe/metrics.js";
import { Cluster } from "../../../src/proxy/upstream/cluster.js";
import { waitFor } from "../../helpers/fixtures.js";
import { clusterCfg } from "./peer.js";

const clusters: Cluster[] = [];
afterEach(() => {
  for (const c of clusters.splice(0)) c.close(true);
});

function make(extra: string, now: () => number = () => 0): { c: Cluster; metrics: Metrics } {
  const metrics = new Metrics();
  const c = new Cluster(clusterCfg(extra), metrics, createLogger({ level: "silent" }), { now, rand: () => 0 });
  clusters.push(c);
  return { c, metrics };
}

const hp = (port: number) => ({ host: "127.0.0.1", port });

describe("Cluster.setEndpoints()", () => {
  it("keeps the endpoints that stay (same objects, weights updated), adds new ones, retires removed ones", () => {
    const { c } = make('endpoints: ["127.0.0.1:1001", "127.0.0.1:1002"]');
    const [a, b] = c.endpoints;
    c.setEndpoints([hp(1002), hp(1003)], [4, 1]);
    // (the new endpoint takes the removed one's place: applyEndpointDelta's rule)
    expect(c.endpoints.map((e) => e.label)).toEqual(["127.0.0.1:1003", "127.0.0.1:1002"]);
    expect(c.endpoints[1]).toBe(b);
    expect(b!.weight).toBe(4);
    expect(a!.retired).toBe(true);
    expect(c.picker.endpoints).toEqual(c.endpoints);
    // a removed endpoint's late results change nothing in the cluster
    a!.attemptStarted();
    a!.attemptEnded("reset");
    expect(c.endpoints.some((e) => e.ejected)).toBe(false);
  });

  it("a list that only reorders is no change: the endpoints and the picker stay the same objects", () => {
    const { c } = make('endpoints: ["127.0.0.1:1001", "127.0.0.1:1002", "127.0.0.1:1003"]');
    const [eps, picker] = [c.endpoints, c.picker];
    expect(c.setEndpoints([hp(1003), hp(1001), hp(1002)], [])).toBe(false);
    expect(c.endpoints).toBe(eps);
    expect(c.picker).toBe(picker);
  });

  it("an empty list leaves no endpoint: pick() is undefined", () => {
    const { c } = make('endpoints: ["127.0.0.1:1001"]');
    c.setEndpoints([], []);
    expect(c.pick()).toBeUndefined();
    expect(c.hasHealthyEndpoint()).toBe(false);
  });
});

describe("Cluster.applyEndpointDelta()", () => {
  it("changes only what the delta names: kept endpoints keep their state (ejection, in-flight count, failures), a new one takes a removed one's place, removed ones are retired", () => {
    const { c } = make('endpoints: ["127.0.0.1:1001", "127.0.0.1:1002", "127.0.0.1:1003"]\noutlierDetection: { consecutiveFailures: 1, baseEjection: 60s, maxEjectionPercent: 50 }', () => 1000);
    const [a, b, x] = c.endpoints as [NonNullable<(typeof c.endpoints)[0]>, NonNullable<(typeof c.endpoints)[0]>, NonNullable<(typeof c.endpoints)[0]>];
    b.attemptStarted();
    b.attemptEnded("reset");
    expect(b.ejected).toBe(true);
    a.attemptStarted(); // one attempt in flight on a
    expect(c.applyEndpointDelta({ remove: [{ host: "127.0.0.1", port: 1003 }], upsert: [{ host: "127.0.0.1", port: 1004, weight: 3 }] })).toBe(true);
    // (the new one takes the removed one's place)
    expect(c.endpoints.map((e) => e.label)).toEqual(["127.0.0.1:1001", "127.0.0.1:1002", "127.0.0.1:1004"]);
    expect(c.endpoints[0]).toBe(a);
    expect(c.endpoints[1]).toBe(b);
    expect(a.active).toBe(1);
    expect(b.ejected).toBe(true);
    expect(b.outlier.timesEjected).toBe(1);
    expect(c.picker.eligible).not.toContain(b);
    expect(c.endpoints[2]!.weight).toBe(3);
    expect(x.retired).toBe(true);
    a.attemptEnded("ok");
    expect(a.active).toBe(0);
  });

  it("reweights a kept endpoint in place, and says false for a delta that changes nothing", () => {
    const { c } = make('endpoints: ["127.0.0.1:1001", "127.0.0.1:1002"]');
    const [a] = c.endpoints;
    const picker = c.picker;
    expect(c.applyEndpointDelta({ remove: [], upsert: [] })).toBe(false);
    expect(c.applyEndpointDelta({ remove: [{ host: "127.0.0.1", port: 9 }], upsert: [{ host: "127.0.0.1", port: 1001, weight: 1 }] })).toBe(false);
    expect(c.picker).toBe(picker);
    expect(c.applyEndpointDelta({ remove: [], upsert: [{ host: "127.0.0.1", port: 1001, weight: 5 }] })).toBe(true);
    expect(c.endpoints[0]).toBe(a);
    expect(a!.weight).toBe(5);
    expect(c.picker).not.toBe(picker);
  });
});

// The cluster keeps each endpoint's place (an index by address) and the picker's rotation across
// changes, patching them rather than rebuilding them; after every step of a random sequence of
// deltas and ejections, they must be what a whole recomputation gives: the list as the pure
// applyEndpointDelta makes it, the eligible endpoints as the cluster's state says.
describe("Cluster: the endpoint index and the picker kept across changes (property)", () => {
  it("matches a whole recomputation after each delta or ejection of a random sequence", () => {
    const addr = fc.integer({ min: 1001, max: 1012 }).map(hp);
    // (an address once per delta's upsert, as diffEndpoints makes them)
    const step = fc.oneof(
      fc.record({ remove: fc.array(addr, { maxLength: 3 }), upsert: fc.uniqueArray(fc.record({ host: fc.constant("127.0.0.1"), port: fc.integer({ min: 1001, max: 1012 }), weight: fc.integer({ min: 1, max: 3 }) }), { maxLength: 3, selector: (u) => u.port }) }),
      fc.nat().map((k) => ({ eject: k })),
    );
    fc.assert(
      fc.property(fc.array(step, { maxLength: 20 }), (steps) => {
        const { c } = make('endpoints: ["127.0.0.1:1001", "127.0.0.1:1002", "127.0.0.1:1003"]\noutlierDetection: { consecutiveFailures: 1, baseEjection: 600s, maxEjectionPercent: 100 }', () => 1000);
        let list: readonly Address[] = c.endpoints.map((e) => ({ host: e.host, port: e.port }));
        let weights: readonly number[] = list.map(() => 1);
        for (const s of steps) {
          if ("eject" in s) {
            if (c.endpoints.length === 0) continue;
            const e = c.endpoints[s.eject % c.endpoints.length]!;
            e.attemptStarted();
            e.attemptEnded("reset");
          } else {
            c.applyEndpointDelta(s);
            ({ endpoints: list, weights } = applyEndpointDelta(list, weights, s));
          }
          expect(c.endpoints.map((e) => e.label)).toEqual(list.map((a) => `${a.host}:${a.port}`));
          expect(c.endpoints.map((e) => e.weight)).toEqual(weights);
          const usable = c.endpoints.filter((e) => e.healthy && !e.ejected);
          const panic = usable.length === 0 && c.endpoints.length > 0;
          expect(c.picker.panic).toBe(panic);
          expect([...c.picker.eligible]).toEqual(panic ? [...c.endpoints] : usable);
          for (let k = 0; k < 4; k++) {
            const e = c.pick();
            if (c.endpoints.length === 0) expect(e).toBeUndefined();
            else expect(c.picker.eligible).toContain(e);
          }
        }
        c.close(true);
      }),
      { numRuns: 150 },
    );
  });
});

describe("outlier ejection in the Cluster", () => {
  it("ejects after consecutiveFailures, at most maxEjectionPercent, and brings it back when the time is up", async () => {
    let t = 1000;
    const { c, metrics } = make(
      'endpoints: ["127.0.0.1:1001", "127.0.0.1:1002", "127.0.0.1:1003", "127.0.0.1:1004"]\noutlierDetection: { consecutiveFailures: 2, baseEjection: 50ms, maxEjectionPercent: 25 }',
      () => t,
    );
    const [a, b] = c.endpoints as [NonNullable<(typeof c.endpoints)[0]>, NonNullable<(typeof c.endpoints)[0]>];
    const fail = (e: typeof a, result: "reset" | "unreachable" | "status" = "reset", status = 14) => {
      e.attemptStarted();
      e.attemptEnded(result, status);
    };
    fail(a);
    expect(a.ejected).toBe(false);
    fail(a, "status", 14);
    expect(a.ejected).toBe(true);
    expect(c.picker.eligible).not.toContain(a);
    // 25 % of 4 = 1: b cannot be ejected while a is
    fail(b, "unreachable");
    fail(b, "unreachable");
    fail(b, "unreachable");
    expect(b.ejected).toBe(false);
    expect((await metrics.registry.getSingleMetricAsString("dojang_upstream_ejections_total")).includes('endpoint="127.0.0.1:1001"} 1')).toBe(true);
    // the timer (real, base × 1 = 50 ms) brings it back
    await waitFor("a back", () => !a.ejected, 2000);
    expect(c.picker.eligible).toContain(a);
    expect(a.outlier.timesEjected).toBe(1);
    // now b may go
    fail(b, "reset");
    fail(b, "reset");
    expect(b.ejected).toBe(true);
    t += 10;
    expect(b.outlier.ejectedUntil - t).toBe(40);
  });

  it("refused and local results neither count nor end a run; a non-failing status ends it", () => {
    const { c } = make('endpoints: ["127.0.0.1:1001", "127.0.0.1:1002"]\noutlierDetection: { consecutiveFailures: 3, baseEjection: 1s }');
    const a = c.endpoints[0]!;
    const end = (r: "reset" | "refused" | "local" | "status" | "ok", status = -1) => {
      a.attemptStarted();
      a.attemptEnded(r, status);
    };
    end("reset");
    end("refused");
    end("local");
    end("reset");
    expect(a.consecutiveFailures).toBe(2);
    end("status", 5); // NOT_FOUND: the endpoint answered
    expect(a.consecutiveFailures).toBe(0);
    end("reset");
    end("status", 13);
    end("status", 2);
    expect(a.ejected).toBe(true);
  });
});

describe("Cluster.stop()", () => {
  it("takes the cluster off the per-endpoint gauges", async () => {
    const { c, metrics } = make('endpoints: ["127.0.0.1:1001"]');
    expect(await metrics.registry.getSingleMetricAsString("dojang_upstream_endpoint_healthy")).toContain('endpoint="127.0.0.1:1001"} 1');
    c.stop();
    expect(await metrics.registry.getSingleMetricAsString("dojang_upstream_endpoint_healthy")).not.toContain("127.0.0.1:1001");
  });
});
