// The filter registry (src/proxy/filters/index.ts, issue 30.3) against the tables it names: every
// decided_by reason only a filter decides belongs to exactly one filter, and every metric a
// filter names is one dojang registers, claimed once. The chain order itself is checked by the
// behaviour tests of each pair (auth before the limits: auth-stage-composition; the local limit
// before the global one: rate-limit-global) and against the docs by test/docs/contributing.test.ts.
import { describe, expect, it } from "vitest";
import { FILTERS } from "../../../src/proxy/filters/index.js";
import { Metrics } from "../../../src/proxy/observe/metrics.js";
import { DECIDED_BY, FILTER_DECIDED_BY } from "../../../src/translate/index.js";

describe("the filter registry", () => {
  it("lists the filters in the chain's order, each once, with its reason for sitting there", () => {
    expect(FILTERS.map((f) => f.name)).toEqual(["auth", "rate_limit", "rate_limit_global", "header_rules", "fault"]);
    for (const f of FILTERS) expect(f.why.length, f.name).toBeGreaterThan(20);
  });

  it("gives every reason only a filter decides to exactly one filter", () => {
    const claimed = FILTERS.flatMap((f) => f.decidedBy);
    expect([...claimed].sort()).toEqual(Object.keys(FILTER_DECIDED_BY).sort());
    expect(new Set(claimed).size).toBe(claimed.length);
    // and those reasons are part of the one decided_by list
    for (const r of claimed) expect(DECIDED_BY[r]).toBe(FILTER_DECIDED_BY[r]);
  });

  it("names metrics dojang registers, each claimed by one filter", async () => {
    const m = new Metrics();
    const claimed = FILTERS.flatMap((f) => f.metrics);
    expect(new Set(claimed).size).toBe(claimed.length);
    expect(claimed.filter((name) => m.registry.getSingleMetric(name) === undefined)).toEqual([]);
    // a name that is not registered is found (a check that the lookup can fail)
    expect(m.registry.getSingleMetric("dojang_no_such_metric_total")).toBeUndefined();
  });
});
