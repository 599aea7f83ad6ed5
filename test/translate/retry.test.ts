import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { Code } from "../../src/translate/codes.js";
import {
  backoffMs,
  codeMask,
  decideRetry,
  parsePushback,
  DEFAULT_RETRY_ON_MASK,
  type AttemptEnd,
  type RetryFacts,
  type RetryPolicy,
} from "../../src/translate/retry.js";

const POLICY: RetryPolicy = {
  retryOnMask: DEFAULT_RETRY_ON_MASK,
  maxAttempts: 3,
  perTryTimeoutMs: null,
  backoffBaseMs: 25,
  backoffMaxMs: 250,
  bufferBytes: 65536,
  retryResetAfterRequest: false,
};

const facts = (over: Partial<RetryFacts>): RetryFacts => ({
  end: "status",
  code: Code.UNAVAILABLE,
  pushback: { kind: "none" },
  attempts: 1,
  transparentUsed: false,
  committed: false,
  budgetLeftMs: Infinity,
  budgetAllows: true,
  breakerAllows: true,
  draw: 0.5,
  ...over,
});

describe("parsePushback()", () => {
  it.each([
    [undefined, { kind: "none" }],
    ["0", { kind: "delay", ms: 0 }],
    ["150", { kind: "delay", ms: 150 }],
    [" 7 ", { kind: "delay", ms: 7 }],
    ["-1", { kind: "stop" }],
    ["abc", { kind: "stop" }],
    ["1.5", { kind: "stop" }],
    ["", { kind: "stop" }],
    ["10,20", { kind: "stop" }],
    ["99999999999", { kind: "stop" }],
  ])("%j → %j", (v, want) => {
    expect(parsePushback(v)).toEqual(want);
  });

  it("never throws, and a delay is always a whole number of ms ≥ 0", () => {
    fc.assert(
      fc.property(fc.string(), (s) => {
        const p = parsePushback(s);
        if (p.kind === "delay") expect(Number.isInteger(p.ms) && p.ms >= 0).toBe(true);
      }),
    );
  });
});

describe("backoffMs()", () => {
  it("is full jitter under an exponential ceiling capped at max", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 80 }), fc.integer({ min: 1, max: 1000 }), fc.integer({ min: 1, max: 60000 }), fc.double({ min: 0, max: 1, noNaN: true }), (n, base, max, draw) => {
        const d = backoffMs(n, base, max, draw);
        const ceiling = Math.min(base * 2 ** (n - 1), max);
        expect(d).toBeGreaterThanOrEqual(0);
        expect(d).toBeLessThan(ceiling + 1e-9 + (draw >= 1 ? 1 : 0));
        expect(Number.isInteger(d)).toBe(true);
      }),
    );
  });

  it("doubles the ceiling per retry: 25, 50, 100, 200, then the max", () => {
    expect([1, 2, 3, 4, 5, 6].map((n) => backoffMs(n, 25, 250, 0.999999) + 1)).toEqual([25, 50, 100, 200, 250, 250]);
  });
});

describe("decideRetry()", () => {
  it("retries UNAVAILABLE under the default policy, with the back-off as delay", () => {
    expect(decideRetry(POLICY, facts({ draw: 0.5 }))).toEqual({ retry: true, reason: "status", delayMs: 12, transparent: false });
  });

  it("does not retry a status outside retryOn", () => {
    expect(decideRetry(POLICY, facts({ code: Code.INTERNAL }))).toEqual({ retry: false, why: "not_retryable" });
    expect(decideRetry({ ...POLICY, retryOnMask: codeMask([Code.INTERNAL]) }, facts({ code: Code.INTERNAL })).retry).toBe(true);
  });

  it("stops at maxAttempts", () => {
    expect(decideRetry(POLICY, facts({ attempts: 2 })).retry).toBe(true);
    expect(decideRetry(POLICY, facts({ attempts: 3 }))).toEqual({ retry: false, why: "attempts_exhausted" });
  });

  it("honours pushback: a delay replaces the back-off, stop ends retrying", () => {
    expect(decideRetry(POLICY, facts({ pushback: { kind: "delay", ms: 70 } }))).toMatchObject({ retry: true, delayMs: 70 });
    expect(decideRetry(POLICY, facts({ pushback: { kind: "stop" } }))).toEqual({ retry: false, why: "pushback_stop" });
  });

  it("never waits past the deadline", () => {
    expect(decideRetry(POLICY, facts({ pushback: { kind: "delay", ms: 70 }, budgetLeftMs: 70 }))).toEqual({ retry: false, why: "deadline" });
    expect(decideRetry(POLICY, facts({ pushback: { kind: "delay", ms: 70 }, budgetLeftMs: 71 })).retry).toBe(true);
  });

  it("retries a reset after the request ended only with retryResetAfterRequest", () => {
    expect(decideRetry(POLICY, facts({ end: "reset_after_request_end" }))).toEqual({ retry: false, why: "reset_after_request" });
    expect(decideRetry({ ...POLICY, retryResetAfterRequest: true }, facts({ end: "reset_after_request_end" }))).toMatchObject({ retry: true, reason: "reset" });
    expect(decideRetry(POLICY, facts({ end: "reset_before_request_end" }))).toMatchObject({ retry: true, reason: "reset" });
  });

  it("retries a refused attempt once, at once, even without a policy", () => {
    expect(decideRetry(null, facts({ end: "refused" }))).toEqual({ retry: true, reason: "refused", delayMs: 0, transparent: true });
    expect(decideRetry(null, facts({ end: "refused", transparentUsed: true }))).toEqual({ retry: false, why: "not_retryable" });
    expect(decideRetry(null, facts({ end: "status" }))).toEqual({ retry: false, why: "not_retryable" });
  });

  it("lets a transparent retry through whatever the budget and the retry breaker say (the upstream did no work)", () => {
    expect(decideRetry(POLICY, facts({ end: "refused", budgetAllows: false, breakerAllows: false }))).toMatchObject({ retry: true, transparent: true });
    expect(decideRetry(null, facts({ end: "refused", budgetAllows: false, breakerAllows: false }))).toMatchObject({ retry: true, transparent: true });
  });

  it("respects the budget and the retry breaker", () => {
    expect(decideRetry(POLICY, facts({ budgetAllows: false }))).toEqual({ retry: false, why: "budget_exhausted" });
    expect(decideRetry(POLICY, facts({ breakerAllows: false }))).toEqual({ retry: false, why: "breaker_open" });
  });

  const end = fc.constantFrom<AttemptEnd>("status", "refused", "reset_before_request_end", "reset_after_request_end", "per_try_timeout");
  const anyFacts = fc.record({
    end,
    code: fc.integer({ min: -1, max: 20 }),
    pushback: fc.oneof(fc.constant({ kind: "none" } as const), fc.constant({ kind: "stop" } as const), fc.integer({ min: 0, max: 5000 }).map((ms) => ({ kind: "delay", ms }) as const)),
    attempts: fc.integer({ min: 1, max: 10 }),
    transparentUsed: fc.boolean(),
    committed: fc.boolean(),
    budgetLeftMs: fc.oneof(fc.constant(Infinity), fc.integer({ min: -10, max: 10000 })),
    budgetAllows: fc.boolean(),
    breakerAllows: fc.boolean(),
    draw: fc.double({ min: 0, max: 0.999, noNaN: true }),
  });
  const anyPolicy = fc.option(
    fc.record({
      retryOnMask: fc.integer({ min: 0, max: (1 << 17) - 1 }),
      maxAttempts: fc.integer({ min: 1, max: 5 }),
      perTryTimeoutMs: fc.constant(null),
      backoffBaseMs: fc.integer({ min: 1, max: 100 }),
      backoffMaxMs: fc.integer({ min: 1, max: 1000 }),
      bufferBytes: fc.constant(65536),
      retryResetAfterRequest: fc.boolean(),
    }),
    { nil: null },
  );

  it("holds its invariants for any facts", () => {
    fc.assert(
      fc.property(anyPolicy, anyFacts, (p, f) => {
        const d = decideRetry(p, f);
        if (!d.retry) return;
        // never after a message reached the client, never past the deadline
        expect(f.committed).toBe(false);
        expect(d.delayMs).toBeLessThan(f.budgetLeftMs);
        if (d.transparent) {
          expect(f.end).toBe("refused");
          expect(f.transparentUsed).toBe(false);
          expect(d.delayMs).toBe(0);
        } else {
          expect(p).not.toBeNull();
          expect(f.attempts).toBeLessThan(p!.maxAttempts);
          expect(f.budgetAllows).toBe(true);
          expect(f.breakerAllows).toBe(true);
          expect(f.pushback.kind).not.toBe("stop");
          if (f.end === "reset_after_request_end") expect(p!.retryResetAfterRequest).toBe(true);
          if (f.end === "status") expect(p!.retryOnMask & (1 << f.code)).not.toBe(0);
        }
      }),
    );
  });
});
