// clusters[].healthCheck's timeout and thresholds, each shown doing what it says, judged by the
// upstream's own health server (its log of the checks it was asked, what it answered, and when a
// held check was cancelled) and by where the calls go. Each test sets a value the default would
// decide the other way (timeout 2s against the default 1s; thresholds 5 and 4 against 3 and 2),
// so a dojang that ignored the key fails it. cluster-health.test.ts covers the checks themselves.
import { describe, expect, it } from "vitest";
import { unary, type EchoClient } from "../helpers/peers.js";
import { useFixtures, waitFor } from "../helpers/fixtures.js";
import { startBackend, type Backend } from "../helpers/backends.js";

const fx = useFixtures();

/** a loaded 2-core machine: timers fire late and a process may wait for a CPU */
const LATE_MS = 1500;

async function two(): Promise<[Backend, Backend]> {
  const a = fx.track(await startBackend("a"), (b) => b.close());
  const b = fx.track(await startBackend("b"), (x) => x.close());
  return [a, b];
}

/** Calls one by one (round robin over a and b) until `done(names of the last two)`; those names. */
async function callUntil(c: EchoClient, done: (lastTwo: string[]) => boolean, ms = 20_000): Promise<void> {
  const last: string[] = [];
  const until = performance.now() + ms;
  for (;;) {
    const r = await unary(c, Buffer.from("x"));
    expect(r.err).toBeNull();
    last.push(r.res!.toString());
    if (last.length > 2) last.shift();
    if (last.length === 2 && done(last)) return;
    if (performance.now() > until) throw new Error(`calls never reached the state wanted; last: ${last.join(", ")}`);
  }
}

describe("clusters[].healthCheck.timeout: a Check not answered within it fails", () => {
  it("timeout 2s: the upstream sees its unanswered Check cancelled after 2 s (not the default 1 s, not never), and after 2 such the endpoint gets no calls", async () => {
    const [a, b] = await two();
    const px = await fx.proxyFor(a.address, {
      cluster: { endpoints: [a.address, b.address], healthCheck: { interval: "100ms", timeout: "2s", unhealthyThreshold: 2, healthyThreshold: 1 } },
    });
    const c = fx.client(px.address);
    await waitFor("the first checks", () => a.checks >= 1 && b.checks >= 1);
    await callUntil(c, (l) => l.includes("b")); // b is in rotation
    b.hangChecks = true;
    const since = b.checkLog.length;
    await waitFor("two held checks cancelled", () => b.checkLog.slice(since).filter((x) => x.cancelledAt !== undefined).length >= 2, 20_000);
    for (const held of b.checkLog.slice(since).filter((x) => x.cancelledAt !== undefined)) {
      const took = held.cancelledAt! - held.at;
      // dojang's timer starts before the Check reaches the upstream: 2 s less that transit, which
      // is far below 500 ms; the default (1 s) would cancel it by then
      expect(took).toBeGreaterThan(1500);
      expect(took).toBeLessThan(2000 + LATE_MS);
    }
    // two timed-out checks: unhealthy, so every call goes to a
    await callUntil(c, (l) => l.every((x) => x === "a"), 5000);
    const before = b.calls;
    for (let i = 0; i < 6; i++) expect((await unary(c, Buffer.from("x"))).res?.toString()).toBe("a");
    expect(b.calls).toBe(before);
  }, 60_000);
});

describe("clusters[].healthCheck.unhealthyThreshold and healthyThreshold: failed and passed checks in a row", () => {
  it("unhealthyThreshold 5: the endpoint keeps its calls until it has answered NOT_SERVING 5 times; healthyThreshold 4: it gets calls again only after 4 SERVING answers", async () => {
    const [a, b] = await two();
    const px = await fx.proxyFor(a.address, {
      cluster: { endpoints: [a.address, b.address], healthCheck: { interval: "150ms", timeout: "1s", unhealthyThreshold: 5, healthyThreshold: 4 } },
    });
    const c = fx.client(px.address);
    // checks pass and calls alternate
    await waitFor("checks passing", () => b.checks >= 2);
    await callUntil(c, (l) => l.includes("a") && l.includes("b"));

    b.serving = false;
    const down = b.checkLog.length;
    // the first moment two calls in a row went to a: b was out by then
    await callUntil(c, (l) => l.every((x) => x === "a"));
    const notServing = b.checkLog.slice(down).filter((x) => x.serving === false).length;
    // dojang can only have acted on answers b had given: at least 5 (the default 3 takes it out sooner)
    expect(notServing).toBeGreaterThanOrEqual(5);

    b.serving = true;
    const up = b.checkLog.length;
    await callUntil(c, (l) => l.includes("b"));
    const serving = b.checkLog.slice(up).filter((x) => x.serving === true).length;
    expect(serving).toBeGreaterThanOrEqual(4);
  }, 60_000);
});
