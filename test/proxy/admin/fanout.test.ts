// The primary's merging rules for `workers: N`, as pure functions: fault API answers agree but for
// per-worker counters (summed) or become a 500 that shows every answer; GET /calls merges by start;
// the mutation log a replacement worker replays shrinks on reset and is bounded.
import { describe, expect, it } from "vitest";
import { MutationLog, mergeCalls, mergeFaultReplies, type WorkerOp } from "../../../src/proxy/admin/fanout.js";

const rule = (matched: number, fired: number, code = 14) => ({ id: "r", action: { kind: "abort", code }, source: "api", matched, fired });

describe("mergeFaultReplies", () => {
  it("answers with the agreed reply, every matched/fired/overflowed summed over the workers", () => {
    const r = mergeFaultReplies([
      { worker: 1, status: 200, body: { faults: [rule(3, 1)], seed: 7, maxActiveFaults: null, overflowed: 1 } },
      { worker: 2, status: 200, body: { faults: [rule(4, 2)], seed: 7, maxActiveFaults: null, overflowed: 0 } },
    ]);
    expect(r).toEqual({ status: 200, body: { faults: [rule(7, 3)], seed: 7, maxActiveFaults: null, overflowed: 1 } });
    expect(mergeFaultReplies([{ worker: 1, status: 204, body: null }, { worker: 2, status: 204, body: null }])).toEqual({ status: 204, body: null });
  });

  it("answers 500 with each worker's answer when the status or the rule differs", () => {
    const a = { worker: 1, status: 201, body: rule(0, 0) };
    const statusDiffers = mergeFaultReplies([a, { worker: 2, status: 409, body: { error: "exists" } }]);
    expect(statusDiffers.status).toBe(500);
    expect((statusDiffers.body as { replies: unknown[] }).replies).toHaveLength(2);
    expect((statusDiffers.body as { error: string }).error).toContain("disagree");
    expect(mergeFaultReplies([a, { worker: 2, status: 201, body: rule(0, 0, 13) }]).status).toBe(500);
  });

  it("answers 500 naming a worker that did not answer, and 503 when no worker serves", () => {
    const r = mergeFaultReplies([{ worker: 1, status: 200, body: { faults: [] } }], [2]);
    expect(r.status).toBe(500);
    expect((r.body as { error: string }).error).toContain("worker(s) 2 did not answer");
    expect(mergeFaultReplies([]).status).toBe(503);
  });
});

describe("mergeCalls", () => {
  const rec = (start: number) => ({ request_id: `r${start}`, start_ms: start });
  it("interleaves the journals by start_ms, tags each record with its worker, and keeps the last N overall", () => {
    const replies = [
      { worker: 1, status: 200, body: [rec(10), rec(30), rec(50)] },
      { worker: 2, status: 200, body: [rec(20), rec(40)] },
    ];
    const all = mergeCalls(replies, undefined) as { start_ms: number; worker: number }[];
    expect(all.map((c) => [c.start_ms, c.worker])).toEqual([[10, 1], [20, 2], [30, 1], [40, 2], [50, 1]]);
    expect((mergeCalls(replies, 2) as { start_ms: number }[]).map((c) => c.start_ms)).toEqual([40, 50]);
    expect(mergeCalls(replies, 0)).toEqual([]);
  });
});

describe("MutationLog", () => {
  const post = (id: string): WorkerOp => ({ op: "faults", method: "POST", path: "/faults", body: JSON.stringify({ id }) });
  it("keeps changes and reloads in order, never reads, and shrinks to the last reload on POST /faults/reset", () => {
    const log = new MutationLog();
    const reload: WorkerOp = { op: "reload", text: "x", source: "f.yaml" };
    log.record(reload);
    log.record(post("a"));
    log.record({ op: "calls", last: undefined, failed: false, sinceMs: undefined });
    log.record({ op: "stats", window: "1m", state: true });
    log.record({ op: "tap", id: 1, query: "" });
    log.record({ op: "untap", id: 1 });
    log.record({ op: "faults", method: "DELETE", path: "/faults/a", body: "" });
    expect(log.ops.map((o) => o.op)).toEqual(["reload", "faults", "faults"]);
    log.record({ op: "faults", method: "POST", path: "/faults/reset", body: "" });
    expect(log.ops).toEqual([reload]);
    log.record(post("b"));
    expect(log.ops).toHaveLength(2);
  });

  it(`is bounded at ${MutationLog.MAX_LOG} ops and says when it dropped some`, () => {
    const log = new MutationLog();
    for (let i = 0; i < MutationLog.MAX_LOG; i++) log.record(post(`r${i}`));
    expect(log.complete).toBe(true);
    log.record(post("one-more"));
    expect(log.ops).toHaveLength(MutationLog.MAX_LOG);
    expect(log.complete).toBe(false);
    log.record({ op: "faults", method: "POST", path: "/faults/reset", body: "" });
    expect(log.complete).toBe(true);
  });
});
