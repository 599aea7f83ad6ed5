// The primary's merging rules for `workers: N`, as pure functions: fault API answers agree but for
// per-worker counters (summed) or become a 500 that shows every answer; GET /calls merges by start;
// the mutation log a replacement worker replays shrinks on reset and is bounded.
import { describe, expect, it } from "vitest";
import { MutationLog, mergeCalls, mergeFaultReplies, mergeStats, type WorkerOp } from "../../../src/proxy/admin/fanout.js";

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

describe("mergeStats (GET /stats over workers)", () => {
  const raw = (calls: number, failed: number, bin: number) => ({
    window: "1m",
    windowSeconds: 60,
    rows: { method: [{ key: "pkg.Svc/M", rps: calls / 60, outcomes: [[0, "upstream", calls - failed], [14, "upstream_reset", failed]], bins: [[bin, calls]] }], route: [], endpoint: [] },
    folded: { method: 0, route: 0, endpoint: 1 },
  });
  const state = (active: number, overloaded: boolean, fired: number) => ({
    active_calls: active,
    taps: 1,
    overload: { overloaded, cuts: 2, refused: 3 },
    faults: [{ id: "f1", kind: "abort", matched: fired, fired }],
    clusters: [{ name: "backend", lb: "round_robin", endpoints: [] }],
    xds: null,
  });

  it("sums the workers' rows (rates, statuses, bins), finishes once, and merges the state", () => {
    const v = mergeStats(
      [
        { worker: 1, status: 200, body: { raw: raw(60, 6, 19), state: state(2, false, 4) } },
        { worker: 2, status: 200, body: { raw: raw(120, 0, 59), state: state(3, true, 5) } },
      ],
      true,
    )!;
    expect(v.workers).toBe(2);
    expect(v.methods[0]).toMatchObject({ name: "pkg.Svc/M", calls: 180, failed: 6, rps: 3, failed_by: { upstream_reset: 6 } });
    // 60 calls in bin 19 (896-1024 µs), 120 in bin 59 (917-1049 ms): the median is in the second worker's bin
    expect(v.methods[0]!.p50_ms).toBeGreaterThan(917);
    expect(v.folded.endpoint).toBe(2);
    expect(v.state).toMatchObject({
      active_calls: 5,
      taps: 1,
      overload: { overloaded: true, cuts: 4, refused: 6 },
      faults: [{ id: "f1", matched: 9, fired: 9 }],
      clusters: [{ name: "backend", workers: [{ worker: 1 }, { worker: 2 }] }],
    });
  });

  it("is null when no worker has stats; a worker that did not answer 200 is left out", () => {
    expect(mergeStats([{ worker: 1, status: 200, body: { raw: null } }], false)).toBeNull();
    expect(mergeStats([{ worker: 1, status: 500, body: { error: "x" } }, { worker: 2, status: 200, body: { raw: raw(6, 0, 19) } }], false)?.total.calls).toBe(6);
  });
});
