// Who decided an upstream's DEADLINE_EXCEEDED (src/proxy/call/respond.ts forwardUpstreamStatus):
// once the call's own deadline has passed it is the deadline, whichever timer node ran first; before
// it, the upstream (its own, shorter deadline). A loaded clean-clone run read the upstream's
// trailers in the same loop turn as dojang's late deadline timer and logged decided_by "upstream"
// for a call the 200 ms client deadline ended (test/observe/access-log.test.ts).
import { describe, expect, it } from "vitest";
import { forwardUpstreamStatus, type RespondHost } from "../../../src/proxy/call/respond.js";

interface Settled {
  code: number;
  message: string | undefined;
  by: string;
}

/** A call whose client stream is gone (so nothing is written), with its clock at `now` ms and its deadline at `deadlineAt`. */
function callAt(now: number, deadlineAt: number): { host: RespondHost; settled: Settled[] } {
  const settled: Settled[] = [];
  const host = {
    ctx: { now: () => now },
    deadlineAt,
    down: { destroyed: true, closed: true },
    attempt: { status: -1 },
    settle(code: number, message: string | undefined, by: string) {
      settled.push({ code, message, by });
      return true;
    },
  } as unknown as RespondHost;
  return { host, settled };
}

describe("an upstream's DEADLINE_EXCEEDED", () => {
  it("is the deadline's decision once the call's deadline has passed, and the upstream's before it", () => {
    const late = callAt(1_000, 1_000);
    forwardUpstreamStatus(late.host, { "grpc-status": "4", "grpc-message": "Deadline exceeded" }, true);
    expect(late.settled).toEqual([{ code: 4, message: "Deadline exceeded", by: "deadline" }]);

    // a timer's lateness either way: 1 ms before the deadline is still the deadline
    const justBefore = callAt(999, 1_000);
    forwardUpstreamStatus(justBefore.host, { "grpc-status": "4" }, false);
    expect(justBefore.settled[0]?.by).toBe("deadline");

    // 50 ms before it the upstream had a deadline of its own
    const early = callAt(950, 1_000);
    forwardUpstreamStatus(early.host, { "grpc-status": "4" }, true);
    expect(early.settled[0]?.by).toBe("upstream");

    // a call without a deadline
    const none = callAt(1_000_000, Infinity);
    forwardUpstreamStatus(none.host, { "grpc-status": "4" }, true);
    expect(none.settled[0]?.by).toBe("upstream");
  });

  it("leaves every other upstream status the upstream's, past the deadline too", () => {
    for (const gs of ["0", "1", "13", "14"]) {
      const late = callAt(2_000, 1_000);
      forwardUpstreamStatus(late.host, { "grpc-status": gs }, true);
      expect(late.settled).toEqual([{ code: Number(gs), message: undefined, by: "upstream" }]);
    }
  });
});
