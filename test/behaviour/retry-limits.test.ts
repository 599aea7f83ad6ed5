// What bounds retries (issue 11): the cluster's retry budget (retries ≤ percent of the calls in
// a 10 s window, with a floor), the circuit breakers enforced at the call (maxCalls: concurrent
// calls; maxRetries: calls with a retry in flight), both answering 14 decided_by overflow at
// once; and fault rules acting per attempt, so an injected upstream reset exercises retries.
import { afterEach, describe, expect, it } from "vitest";
import http2 from "node:http2";
import { frame, rawCall, sample, scrape, startProxy, startRawUpstream, statusOf, type RawUpstream } from "../helpers/peers.js";
import { Cleanup, GRPC_RESPONSE_HEADERS, afterRequest, replyGrpc } from "../helpers/scripted-upstream.js";
import type { DojangHandle } from "../../src/index.js";

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

const REQUEST = Buffer.from("ping");
const POLICY = { retryOn: ["UNAVAILABLE"], maxAttempts: 3, backoff: { base: "2ms", max: "5ms" } };

/** Polls `pred` every 5 ms for up to 10 s. */
async function waitUntil(pred: () => boolean): Promise<void> {
  for (let i = 0; i < 2000 && !pred(); i++) await new Promise((r) => setTimeout(r, 5));
  expect(pred()).toBe(true);
}

async function upstream(onStream: (s: http2.ServerHttp2Stream, h: http2.IncomingHttpHeaders) => void): Promise<RawUpstream> {
  return cleanup.add(await startRawUpstream((s, h) => onStream(s, h)), (u) => u.close());
}

function unavailable(s: http2.ServerHttp2Stream): void {
  afterRequest(s, () => s.respond({ ...GRPC_RESPONSE_HEADERS, "grpc-status": "14" }, { endStream: true }));
}

async function records(px: DojangHandle, n: number): Promise<void> {
  for (let i = 0; i < 300 && px.calls.length < n; i++) await new Promise((r) => setTimeout(r, 10));
}

describe("the retry budget", () => {
  it("caps a storm: 60 failing calls make at most max(floor, percent × calls) retries", async () => {
    const up = await upstream(unavailable);
    // floor: 1 retry/s over the 10 s window = 10; percent: 10 % of 60 calls = 6 → 10 retries
    const px = cleanup.add(
      await startProxy(up.address, { route: { retry: POLICY }, cluster: { retryBudget: { percent: 10, minRetriesPerSecond: 1 }, circuitBreaker: { maxRetries: 1000 } } }),
      (p) => p.close(0),
    );
    const session = cleanup.add(http2.connect(`http://${px.address}`), (s) => s.close());
    const results = await Promise.all(Array.from({ length: 60 }, () => rawCall(px.address, {}, frame(REQUEST), { session })));
    expect(results.every((r) => r.headers?.["grpc-status"] === "14")).toBe(true);
    await records(px, 60);
    const retries = sample(await scrape(px.adminAddress), "dojang_retries_total", { cluster: "backend" });
    // without the budget: 120 retries (2 per call)
    expect(retries).toBe(10);
    expect(up.seen.length).toBe(70);
    // budget denial ends retrying with the attempt's own status
    expect(px.calls.filter((c) => c.decided_by === "upstream").length).toBe(60);
  });
});

describe("circuit breakers at the call", () => {
  it("maxCalls: a call over the limit is answered 14 at once, decided_by overflow, naming the limit", async () => {
    // The first call is held at the upstream until the second has its answer: "at once" is the
    // second answered while the first still holds the only slot (a queued second would wait for
    // the release, and the test would time out). A fixed 300 ms hold and a 200 ms bound on the
    // second call (its connection included) did not survive a loaded machine.
    const held: (() => void)[] = [];
    const up = await upstream((s) => afterRequest(s, () => (held.length === 0 ? held.push(() => replyGrpc(s, [Buffer.from("slow")])) : replyGrpc(s, [Buffer.from("ok")]))));
    const px = cleanup.add(await startProxy(up.address, { cluster: { circuitBreaker: { maxCalls: 1 } } }), (p) => p.close(0));
    const first = rawCall(px.address, {}, frame(REQUEST));
    await waitUntil(() => held.length === 1);
    const second = await rawCall(px.address, {}, frame(REQUEST));
    held[0]!();
    expect(second.headers?.["grpc-status"]).toBe("14");
    expect(decodeURIComponent(second.headers?.["grpc-message"] as string)).toBe("cluster backend: maxCalls 1 reached");
    expect(statusOf(await first)).toBe("0");
    expect(up.seen.length).toBe(1);
    await records(px, 2);
    expect(px.calls.map((c) => c.decided_by).sort()).toEqual(["overflow", "upstream"]);
    // the slot is released when the call ends
    expect(statusOf(await rawCall(px.address, {}, frame(REQUEST)))).toBe("0");
  });

  it("maxRetries: a retry over the limit of concurrent retries ends the call 14 decided_by overflow", async () => {
    // first attempts fail; retries hang 400 ms before they succeed
    const up = await upstream((s, h) => {
      if (h["grpc-previous-rpc-attempts"] === undefined) unavailable(s);
      else afterRequest(s, () => setTimeout(() => replyGrpc(s, [Buffer.from("late")]), 400));
    });
    const px = cleanup.add(
      await startProxy(up.address, { route: { retry: POLICY }, cluster: { circuitBreaker: { maxRetries: 1 } } }),
      (p) => p.close(0),
    );
    const first = rawCall(px.address, {}, frame(REQUEST));
    await new Promise((r) => setTimeout(r, 100));
    const second = await rawCall(px.address, {}, frame(REQUEST));
    expect(second.headers?.["grpc-status"]).toBe("14");
    expect(decodeURIComponent(second.headers?.["grpc-message"] as string)).toBe("cluster backend: maxRetries 1 reached");
    expect(statusOf(await first)).toBe("0");
    await records(px, 2);
    const overflow = px.calls.find((c) => c.decided_by === "overflow");
    expect(overflow?.attempts).toBe(1);
  });
});

describe("faults act per attempt", () => {
  it("an injected upstream_reset is retried like a real reset, each attempt reset again", async () => {
    const up = await upstream((s) => afterRequest(s, () => replyGrpc(s, [Buffer.from("never")])));
    const px = cleanup.add(await startProxy(up.address, { route: { retry: POLICY } }), (p) => p.close(0));
    px.faults.add({ id: "cut-up", action: { kind: "upstream_reset", code: "REFUSED_STREAM" } });
    const raw = await rawCall(px.address, {}, frame(REQUEST));
    // REFUSED_STREAM maps to 14; three attempts, each reset by the fault
    expect(raw.headers?.["grpc-status"]).toBe("14");
    expect(decodeURIComponent(raw.headers?.["grpc-message"] as string)).toContain("fault: upstream stream reset");
    await records(px, 1);
    expect(px.calls[0]).toMatchObject({ decided_by: "fault", attempts: 3 });
    expect(sample(await scrape(px.adminAddress), "dojang_retries_total", { reason: "reset" })).toBe(2);
    // the fault acts per attempt: once it is removed, the next call's first attempt goes through
    px.faults.reset();
    expect(statusOf(await rawCall(px.address, {}, frame(REQUEST)))).toBe("0");
  });

  it("an injected unreachable endpoint is retried once, transparently, without a policy", async () => {
    const up = await upstream((s) => afterRequest(s, () => replyGrpc(s, [Buffer.from("never")])));
    const px = cleanup.add(await startProxy(up.address), (p) => p.close(0));
    px.faults.add({ id: "down", action: { kind: "unreachable" } });
    const raw = await rawCall(px.address, {}, frame(REQUEST));
    expect(raw.headers?.["grpc-status"]).toBe("14");
    expect(up.seen.length).toBe(0);
    await records(px, 1);
    expect(px.calls[0]).toMatchObject({ decided_by: "fault", attempts: 2 });
  });
});
