import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { newRetryBudget, recordCall, retriesAllowed, tryWithdraw, DEFAULT_RETRY_BUDGET } from "../../src/translate/retry-budget.js";

describe("retry budget", () => {
  it("allows the floor with no traffic, then percent of the calls in the window", () => {
    const cfg = DEFAULT_RETRY_BUDGET; // 20 %, 10/s, 10 s
    const s = newRetryBudget(0);
    expect(retriesAllowed(s, cfg, 0)).toBe(100);
    for (let i = 0; i < 1000; i++) recordCall(s, cfg, 10);
    expect(retriesAllowed(s, cfg, 10)).toBe(200);
    let granted = 0;
    for (let i = 0; i < 500; i++) if (tryWithdraw(s, cfg, 20)) granted++;
    expect(granted).toBe(200);
    // the window slides: 10 s later the calls and retries have aged out
    expect(retriesAllowed(s, cfg, 10_020)).toBe(100);
    expect(tryWithdraw(s, cfg, 10_020)).toBe(true);
  });

  it("never grants more than the window allows, whatever the sequence", () => {
    fc.assert(
      fc.property(fc.array(fc.record({ dt: fc.integer({ min: 0, max: 3000 }), call: fc.boolean() }), { maxLength: 300 }), fc.integer({ min: 0, max: 100 }), fc.integer({ min: 0, max: 5 }), (ops, pct, floor) => {
        const cfg = { percent: pct, minRetriesPerSecond: floor, windowMs: 10_000 };
        const s = newRetryBudget(0);
        let t = 0;
        for (const op of ops) {
          t += op.dt;
          if (op.call) recordCall(s, cfg, t);
          else {
            const allowed = retriesAllowed(s, cfg, t);
            const before = s.retries.reduce((a, b) => a + b, 0);
            const ok = tryWithdraw(s, cfg, t);
            if (ok) expect(before + 1).toBeLessThanOrEqual(allowed);
          }
        }
      }),
    );
  });
});
