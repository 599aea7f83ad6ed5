// Issue 12, slowloris and connection churn, against a real dojang process (RSS is the process's):
// 1,000 connections that only open TCP or send the preface and nothing more must be closed
// within requestHeadersTimeout (+ slack), and connections opened and closed by the thousand must
// leave nothing behind; a grpc-js bystander's calls on the same dojang all succeed meanwhile.
import net from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { echoClient, sample, scrape, startProxy, startRawUpstream, type EchoClient, type RawUpstream } from "../helpers/peers.js";
import { echoOr, runBystander } from "../helpers/bystander.js";
import { idleConnection, rssMiB, startTarget, type IdleConnection, type Target } from "../helpers/attacks.js";
import { assertDistBuilt, killSpawned, sleep, tempDir } from "../helpers/process.js";

const tmp = tempDir();
let upstream: RawUpstream;
const clients: EchoClient[] = [];
const sockets: net.Socket[] = [];
/** An idle connection (attacks.ts) whose socket the afterEach destroys. */
async function idleConn(port: number, preface: boolean): Promise<IdleConnection> {
  const c = await idleConnection(`127.0.0.1:${port}`, preface);
  sockets.push(c.sock);
  return c;
}

beforeAll(async () => {
  assertDistBuilt();
  upstream = await startRawUpstream(echoOr());
});
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const s of sockets.splice(0)) s.destroy();
  await killSpawned();
});
afterAll(async () => {
  await upstream.close();
  tmp.remove();
});

function start(listenerExtra: string): Promise<Target> {
  return startTarget(tmp, upstream.address, (y) => y.replace(/( {4}address: 127\.0\.0\.1:\d+\n)/, `$1${listenerExtra}`));
}


/** dojang's idle heap shrinks so far (dojang_heap_shrinks_total). */
async function shrinks(admin: string): Promise<number> {
  return sample(await scrape(admin), "dojang_heap_shrinks_total");
}

/** The V8 heap in use (MiB) after an idle shrink (a full GC) past `since` shrinks: waits up to 15 s for one. */
async function heapUsedAfterShrink(admin: string, since: number): Promise<number> {
  const until = Date.now() + 15_000;
  for (;;) {
    const m = await scrape(admin);
    if (sample(m, "dojang_heap_shrinks_total") > since) return sample(m, "nodejs_heap_size_used_bytes") / 1_048_576;
    if (Date.now() > until) throw new Error(`no idle heap shrink within 15 s (${since} before, now ${sample(m, "dojang_heap_shrinks_total")})`);
    await sleep(100);
  }
}

const SLOW = 1000;
const TIMEOUT_S = 2;
/**
 * RSS bounds stated in the README's protections table. What requestHeadersTimeout protects is the
 * connections themselves (without it all 1,000 stay open: the test's `open` fails), not the
 * memory of the first seconds: measured with this test's steps on a loaded 2-CPU machine, two
 * runs, +26.2 and +28.8 MiB at the peak with requestHeadersTimeout null, +28.7 and +30.1 MiB
 * with 2 s (README: +33 to +35 in earlier runs; dojang 0.2, before issue 12: +55). So this bound is what 1,000 idle
 * connections may cost at all (about 1.7 times the figure measured), not the timeout's work: the
 * closing is asserted by `open` (0) and by when the first closed.
 */
const SLOWLORIS_RSS_BOUND_MIB = 48;
const CHURN_RSS_BOUND_MIB = 96;
/**
 * The heap in use after the churn less before it, each read after a full GC (dojang's idle shrink):
 * what 6,000 closed connections left behind. Measured −0.4 and −0.5 MiB; 1 KiB kept per
 * connection would be +5.9.
 */
const CHURN_HEAP_BOUND_MIB = 4;

describe("attack: slowloris (real dojang process)", () => {
  it(`${SLOW} connections that open TCP only or send just the preface are closed within requestHeadersTimeout ${TIMEOUT_S}s (+3 s); a bystander's calls all succeed`, { timeout: 60_000 }, async () => {
    const { p, address } = await start(`    requestHeadersTimeout: ${TIMEOUT_S}s\n`);
    const port = Number(address.split(":")[1]);
    const by = echoClient(address);
    clients.push(by);
    await runBystander(by, 50, 5); // warm-up
    await sleep(200);
    const before = rssMiB(p.pid);
    const t0 = performance.now();
    const conns: IdleConnection[] = [];
    for (let i = 0; i < SLOW; i += 100) {
      conns.push(...(await Promise.all(Array.from({ length: 100 }, (_, j) => idleConn(port, (i + j) % 2 === 1)))));
    }
    let peak = rssMiB(p.pid);
    const r = await runBystander(by, 200, 10);
    const deadline = t0 + (TIMEOUT_S + 3) * 1000;
    while (performance.now() < deadline && conns.some((c) => c.closedAt() === undefined)) {
      peak = Math.max(peak, rssMiB(p.pid));
      await sleep(50);
    }
    const open = conns.filter((c) => c.closedAt() === undefined).length;
    const last = Math.max(...conns.map((c) => c.closedAt() ?? Infinity)) - t0;
    console.log(`slowloris: ${SLOW} idle connections, all closed ${Math.round(last)} ms after the first opened; rss before ${before.toFixed(1)} MiB, peak ${peak.toFixed(1)} (+${(peak - before).toFixed(1)})`);
    expect(open).toBe(0);
    // none closed before the timeout (a connection is given its whole requestHeadersTimeout)
    expect(Math.min(...conns.map((c) => c.closedAt()!)) - t0).toBeGreaterThanOrEqual(TIMEOUT_S * 1000 - 50);
    expect(r.failures).toEqual([]);
    expect(peak - before).toBeLessThan(SLOWLORIS_RSS_BOUND_MIB);
  });

  it("3 × 2,000 connections opened and closed leave dojang's RSS within a bound; a bystander's calls all succeed", { timeout: 90_000 }, async () => {
    // the heap in use is read after a full GC both times: dojang's own shrinkHeapWhenIdle runs one
    // once no call has run for 1 s (read at any other moment it counts whatever garbage V8 has
    // not collected yet, which on a loaded machine was the churn's own: +16.5 MiB against +6.4)
    const { p, address, admin } = await startTarget(tmp, upstream.address, (y) => `${y.trimEnd()}\nshrinkHeapWhenIdle: 1s\n`);
    const port = Number(address.split(":")[1]);
    const by = echoClient(address);
    clients.push(by);
    await runBystander(by, 50, 5);
    const shrunkBefore = await shrinks(admin);
    await sleep(200);
    const before = rssMiB(p.pid);
    const heapUsedBefore = await heapUsedAfterShrink(admin, shrunkBefore);
    const bystander = runBystander(by, 300, 5);
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 2000; i += 200) {
        const batch = await Promise.all(Array.from({ length: 200 }, (_, j) => idleConn(port, j % 2 === 0)));
        for (const c of batch) c.sock.destroy();
      }
    }
    const r = await bystander;
    // a few calls after the churn, so that the next idle shrink comes after it (the bystander may
    // have ended, and a shrink run, while connections were still being opened)
    await runBystander(by, 10, 1);
    const shrunkAfter = await shrinks(admin);
    await sleep(1000);
    const after = rssMiB(p.pid);
    const heapUsedAfter = await heapUsedAfterShrink(admin, shrunkAfter);
    const m = await scrape(admin);
    console.log(
      `churn: 3 × 2,000 connections; rss before ${before.toFixed(1)} MiB, after ${after.toFixed(1)} (+${(after - before).toFixed(1)}); V8 heap used before ${heapUsedBefore.toFixed(1)} MiB, after ${heapUsedAfter.toFixed(1)}`,
    );
    expect(r.failures).toEqual([]);
    // nothing is kept per closed connection: only the bystander's session is left, and the heap
    // in use is back near where it was (RSS stays higher: V8 keeps the heap it grew, see README)
    expect(sample(m, "dojang_downstream_sessions")).toBe(1);
    expect(heapUsedAfter - heapUsedBefore).toBeLessThan(CHURN_HEAP_BOUND_MIB);
    expect(after - before).toBeLessThan(CHURN_RSS_BOUND_MIB);
  });
});

describe("maxConnections", () => {
  it("connections over the listener's maxConnections are closed as they are accepted; the first ones stay open", { timeout: 30_000 }, async () => {
    const px = await startProxy(upstream.address, { listener: { maxConnections: 5 } });
    try {
      const port = Number(px.address.split(":")[1]);
      const conns = [];
      for (let i = 0; i < 10; i++) conns.push(await idleConn(port, true));
      await sleep(500);
      expect(conns.filter((c) => c.closedAt() !== undefined).length).toBe(5);
      // the first five are the ones kept
      expect(conns.slice(0, 5).every((c) => c.closedAt() === undefined)).toBe(true);
    } finally {
      await px.close(0);
    }
  });
});
