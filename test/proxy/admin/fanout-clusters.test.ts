// GET /clusters over workers, the merge alone: each cluster once (in the first answer's order),
// each worker's view under `workers` with its id, failed answers left out.
import { describe, expect, it } from "vitest";
import { mergeClusters, MutationLog } from "../../../src/proxy/admin/fanout.js";

describe("mergeClusters()", () => {
  it("lists each cluster once with every worker's view, by worker id", () => {
    const view = (sessions: number) => [
      { name: "a", lb: "round_robin", sessions, endpoints: [] },
      { name: "b", lb: "random", sessions: 0, endpoints: [] },
    ];
    const merged = mergeClusters([
      { worker: 2, status: 200, body: view(5) },
      { worker: 1, status: 200, body: view(3) },
      { worker: 3, status: 500, body: { error: "x" } },
    ]);
    expect(merged).toEqual([
      { name: "a", lb: "round_robin", workers: [{ worker: 1, sessions: 3, endpoints: [] }, { worker: 2, sessions: 5, endpoints: [] }] },
      { name: "b", lb: "random", workers: [{ worker: 1, sessions: 0, endpoints: [] }, { worker: 2, sessions: 0, endpoints: [] }] },
    ]);
  });

  it("is empty with no answers, and the read is never kept for replay", () => {
    expect(mergeClusters([])).toEqual([]);
    const log = new MutationLog();
    log.record({ op: "clusters" });
    expect(log.ops).toEqual([]);
  });
});
