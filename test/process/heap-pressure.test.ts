// The overload manager's heap trigger in a real dojang process under a 128 MiB memory plan
// (42 MiB old space): calls held open cost heap, and 10,000 of them made V8 abort the process
// (every call lost). Now, near V8's heap limit, new streams are refused (REFUSED_STREAM) and the
// process lives; once the held calls end, calls are taken again.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRawUpstream, echoClient, unary, type RawUpstream } from "../helpers/peers.js";
import { connectRawH2, grpcRequestFields, type RawH2Client } from "../helpers/raw-h2-client.js";
import { FRAME } from "../helpers/h2-frames.js";
import { startTarget } from "../helpers/attacks.js";
import { assertDistBuilt, httpGet, killSpawned, sleep, tempDir } from "../helpers/process.js";
import { echoOr } from "../helpers/bystander.js";

const REFUSED_STREAM = 0x7;
const tmp = tempDir();
let upstream: RawUpstream;
beforeAll(async () => {
  assertDistBuilt();
  // holds every call but the bystander's open, never answering
  upstream = await startRawUpstream(echoOr((s) => s.on("error", () => {})));
});
afterAll(async () => {
  await killSpawned();
  await upstream.close();
  tmp.remove();
});

describe("heap pressure (memory.limit 128MiB)", () => {
  it("held calls by the thousand: past 50 % of V8's heap limit new streams are refused, the process lives, and calls are taken again once they end", { timeout: 120_000 }, async () => {
    // the cluster's circuit breaker (1,024 calls by default) would stop the calls long before the heap
    const edit = (y: string): string =>
      y
        .replace(/( {4}address: 127\.0\.0\.1:\d+\n)/, "$1    maxConcurrentStreams: 100\n")
        .replace(/( {4}endpoints: .*\n)/, "$1    circuitBreaker: { maxCalls: 20000, maxPendingCalls: 20000 }\n");
    const { p, address, admin } = await startTarget(tmp, upstream.address, edit, "memory: { limit: 128MiB }\naccessLog: false");
    const raws: RawH2Client[] = [];
    try {
      const refusedCount = (): number => {
        let n = 0;
        for (const c of raws) for (let i = 0; i < 100; i++) if (c.on(1 + 2 * i).some((f) => f.type === FRAME.RST_STREAM && f.errorCode === REFUSED_STREAM)) n++;
        return n;
      };
      // 100 held calls per connection until dojang refuses (at most 150 connections)
      for (let c = 0; c < 150 && !p.hasExited && refusedCount() === 0; c++) {
        const atk = await connectRawH2(address).catch((e: Error) => e);
        // (a connection dojang did not answer within 5 s: the loop is busy collecting; stop opening)
        if (atk instanceof Error) break;
        raws.push(atk);
        for (let i = 0; i < 100; i++) atk.headers(1 + 2 * i, grpcRequestFields("/test.Stream/Held"));
        if (c % 10 === 9) await sleep(100);
      }
      const t0 = performance.now();
      while (performance.now() - t0 < 10_000 && refusedCount() === 0 && !p.hasExited) await sleep(200);
      const refused = refusedCount();
      const metrics = (await httpGet(admin, "/metrics", 5000)).body;
      const line = metrics.split("\n").find((l) => l.startsWith("dojang_downstream_streams_refused_total"));
      console.log(`heap pressure: ${upstream.seen.length} calls reached the upstream, ${refused} streams refused; ${line}`);
      expect(p.hasExited, p.stderr()).toBe(false);
      expect(refused).toBeGreaterThan(0);
      // the held calls end: the pressure goes, and calls are taken again
      for (const c of raws.splice(0)) c.close();
      const by = echoClient(address);
      let ok = false;
      const t1 = performance.now();
      while (!ok && performance.now() - t1 < 20_000) {
        const r = await unary(by, Buffer.from("after"), undefined, { deadline: Date.now() + 2000 });
        ok = r.err === null;
        if (!ok) await sleep(500);
      }
      by.close();
      await sleep(300);
      expect(p.hasExited, p.stderr().slice(-2500)).toBe(false);
      expect(ok).toBe(true);
    } finally {
      for (const c of raws) c.close();
    }
  });
});
