// NumberHistogram (src/proxy/observe/metrics.ts) stands in for prom-client's Histogram on the
// per-call path: the same observations must come out the same on /metrics, and summed the same
// by the primary's AggregatorRegistry with `workers: N`.
import client from "prom-client";
import { describe, expect, it } from "vitest";
import { NumberHistogram } from "../../src/proxy/observe/metrics.js";

const BOUNDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const VALUES = [0.0001, 0.0005, 0.0007, 0.003, 0.2, 70, 1, 60, 0];

function both(labelNames: string[]): { ours: client.Registry; theirs: client.Registry; observe: (labels: Record<string, string>, v: number) => void } {
  const ours = new client.Registry();
  const theirs = new client.Registry();
  const h = new NumberHistogram("h_seconds", "help text", labelNames, BOUNDS, ours);
  const p = new client.Histogram({ name: "h_seconds", help: "help text", labelNames, buckets: BOUNDS, registers: [theirs] });
  const cells = new Map<string, ReturnType<NumberHistogram["cell"]>>();
  return {
    ours,
    theirs,
    observe(labels, v) {
      const k = JSON.stringify(labels);
      let c = cells.get(k);
      if (c === undefined) cells.set(k, (c = h.cell(labels)));
      c.observe(v);
      if (labelNames.length === 0) p.observe(v);
      else p.observe(labels, v);
    },
  };
}

describe("NumberHistogram", () => {
  it("exposes the same text and the same aggregated sums as prom-client's Histogram, with labels and without", async () => {
    for (const labelNames of [["grpc_service", "grpc_method"], []]) {
      const { ours, theirs, observe } = both(labelNames);
      // (a label set never observed does not appear; with no labels the one set always does)
      expect(await ours.metrics()).toBe(await theirs.metrics());
      for (const v of VALUES) {
        observe(labelNames.length === 0 ? {} : { grpc_service: "pkg.Svc", grpc_method: "A" }, v);
        if (labelNames.length > 0) observe({ grpc_service: "pkg.Svc", grpc_method: "B" }, v * 2);
      }
      expect(await ours.metrics()).toBe(await theirs.metrics());
      const ourJson = await ours.getMetricsAsJSON();
      const theirJson = await theirs.getMetricsAsJSON();
      expect(await client.AggregatorRegistry.aggregate([ourJson, ourJson]).metrics()).toBe(await client.AggregatorRegistry.aggregate([theirJson, theirJson]).metrics());
      ours.resetMetrics();
      theirs.resetMetrics();
      expect(await ours.metrics()).toBe(await theirs.metrics());
    }
  });
});
