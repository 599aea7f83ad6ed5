// upstream/side-call.ts: a side call settles exactly once, within its timeout, whatever order its
// I/O's reports, the timer and the caller's cancel come in; the I/O is stopped when the timer or
// the cancel ends it (and only then); `done` never runs inside sideCall() itself. Fake timers drive
// the clock; fast-check draws the orders.
import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { failureOfGrpcCode, failureOfNodeError, sideCall, type Settle, type SideOutcome } from "../../../src/proxy/upstream/side-call.js";

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

interface Run {
  outcomes: SideOutcome<string>[];
  aborts: number;
  settle: Settle<string>;
  handle: { cancel(): void };
}

function run(timeoutMs: number): Run {
  const r = { outcomes: [] as SideOutcome<string>[], aborts: 0 } as Run;
  r.handle = sideCall<string>(
    timeoutMs,
    (settle) => {
      r.settle = settle;
      return () => r.aborts++;
    },
    (o) => r.outcomes.push(o),
  );
  return r;
}

describe("sideCall()", () => {
  it("an answer before the timeout settles ok; the timer and later reports do nothing; the I/O is not stopped", () => {
    const r = run(50);
    vi.advanceTimersByTime(49);
    r.settle({ result: "ok", value: "yes" });
    vi.advanceTimersByTime(100);
    r.settle({ result: "error", detail: "late" });
    r.handle.cancel();
    expect(r.outcomes).toEqual([{ result: "ok", value: "yes" }]);
    expect(r.aborts).toBe(0);
  });

  it("no report at all: the timer settles timeout at the timeout and stops the I/O; what the I/O says after is dropped", () => {
    const r = run(50);
    vi.advanceTimersByTime(49);
    expect(r.outcomes).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(r.outcomes).toEqual([{ result: "timeout", detail: "no answer in 50 ms" }]);
    expect(r.aborts).toBe(1);
    r.settle({ result: "error", detail: "code 1" }); // grpc-js reporting the cancel it was asked for
    expect(r.outcomes.length).toBe(1);
  });

  it("cancel settles cancelled and stops the I/O; the timer does nothing after", () => {
    const r = run(50);
    r.handle.cancel();
    vi.advanceTimersByTime(100);
    expect(r.outcomes).toEqual([{ result: "cancelled", detail: "the call ended first" }]);
    expect(r.aborts).toBe(1);
  });

  it("a report made while starting, or a start that throws, settles on the next microtask, not inside sideCall()", async () => {
    const got: SideOutcome<string>[] = [];
    sideCall<string>(
      50,
      (settle) => {
        settle({ result: "unavailable", detail: "ECONNREFUSED" });
        settle({ result: "ok", value: "second" });
        return () => {};
      },
      (o) => got.push(o),
    );
    expect(got).toEqual([]);
    await Promise.resolve();
    expect(got).toEqual([{ result: "unavailable", detail: "ECONNREFUSED" }]);
    const thrown: SideOutcome<string>[] = [];
    sideCall<string>(
      50,
      () => {
        throw new Error("no such service");
      },
      (o) => thrown.push(o),
    );
    expect(thrown).toEqual([]);
    await Promise.resolve();
    vi.advanceTimersByTime(100);
    expect(thrown).toEqual([{ result: "error", detail: "no such service" }]);
  });

  it("property: in any order of reports, timer and cancel, done runs exactly once, by the first of them, and the I/O is stopped only by the timer or the cancel", () => {
    type Ev = { kind: "report"; o: SideOutcome<string> } | { kind: "cancel" } | { kind: "wait"; ms: number };
    const report = fc.oneof(
      fc.constant<SideOutcome<string>>({ result: "ok", value: "v" }),
      fc.constantFrom<SideOutcome<string>>({ result: "error", detail: "code 1" }, { result: "unavailable", detail: "code 14" }, { result: "timeout", detail: "code 4" }),
    );
    const ev = fc.oneof(
      report.map((o): Ev => ({ kind: "report", o })),
      fc.constant<Ev>({ kind: "cancel" }),
      fc.integer({ min: 1, max: 40 }).map((ms): Ev => ({ kind: "wait", ms })),
    );
    fc.assert(
      fc.property(fc.array(ev, { maxLength: 12 }), (evs) => {
        const r = run(50);
        let clock = 0;
        let first: SideOutcome<string> | undefined;
        let stopped = false;
        for (const e of evs) {
          if (e.kind === "wait") {
            clock += e.ms;
            vi.advanceTimersByTime(e.ms);
            if (first === undefined && clock >= 50) {
              first = { result: "timeout", detail: "no answer in 50 ms" };
              stopped = true;
            }
          } else if (e.kind === "cancel") {
            r.handle.cancel();
            if (first === undefined) {
              first = { result: "cancelled", detail: "the call ended first" };
              stopped = true;
            }
          } else {
            r.settle(e.o);
            first ??= e.o;
          }
        }
        vi.advanceTimersByTime(100); // the timer has long passed: anything unsettled is a timeout
        if (first === undefined) {
          first = { result: "timeout", detail: "no answer in 50 ms" };
          stopped = true;
        }
        expect(r.outcomes).toEqual([first]);
        expect(r.aborts).toBe(stopped ? 1 : 0);
      }),
    );
  });
});

describe("failure kinds", () => {
  it("gRPC codes: 4 is a timeout, 14 unavailable, every other an error (1 CANCELLED included: a service's RST_STREAM(CANCEL))", () => {
    expect([0, 1, 2, 3, 4, 5, 7, 8, 12, 13, 14, 16].map(failureOfGrpcCode)).toEqual(["error", "error", "error", "error", "timeout", "error", "error", "error", "error", "error", "unavailable", "error"]);
  });
  it("node errors: a connection not made or dropped is unavailable, anything else an error, named by its code", () => {
    expect(failureOfNodeError(Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }))).toEqual({ result: "unavailable", detail: "ECONNREFUSED" });
    expect(failureOfNodeError(Object.assign(new Error("socket hang up"), { code: "ECONNRESET" }))).toEqual({ result: "unavailable", detail: "ECONNRESET" });
    expect(failureOfNodeError(Object.assign(new Error("bad cert"), { code: "UNABLE_TO_VERIFY_LEAF_SIGNATURE" }))).toEqual({ result: "error", detail: "UNABLE_TO_VERIFY_LEAF_SIGNATURE" });
    expect(failureOfNodeError(new Error("wrong version number"))).toEqual({ result: "error", detail: "wrong version number" });
  });
});
