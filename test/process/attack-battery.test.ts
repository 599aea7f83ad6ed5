// The edge issue's attack battery (issue 12) against one real dojang process with a 128 MiB
// memory budget (issue 13: "a container with a 128 MiB limit must survive ... the edge issue's
// attack battery"). Where this machine lets the test make a memory cgroup, dojang runs inside a
// real 128 MiB one and picks its limit up by itself, and the kernel would OOM-kill it past the
// limit; elsewhere the same budget comes from `memory.limit`. The attacks: rapid reset, the floods nghttp2 stops, WINDOW_UPDATE floods, a zero-window
// stall, slowloris and connection churn, one after another, each while a well-behaved grpc-js
// client runs calls on the same dojang. The process must live through all of it, every attacker
// connection that must be cut is cut, every bystander call succeeds, and the process's anonymous
// memory (RssAnon: heap, buffers, nghttp2 — what a container is charged for; node's own code
// pages are file-backed and shared) never crosses the budget. The edge settings are config/edge.yaml's (small upstream window, a short
// requestHeadersTimeout for the test). Without a cgroup the checks only a cgroup can make (no OOM
// kill, its use never at the limit) are skipped, visibly: the describe's title says which budget ran, and
// the skipped test's title says why.
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { echoClient, type EchoClient } from "../helpers/peers.js";
import { echoOr, runBystander } from "../helpers/bystander.js";
import { connectRawH2, type RawH2Client } from "../helpers/raw-h2-client.js";
import { FLAG_END_STREAM, FRAME, SETTING, decodeHeaderBlock, settingsFrame, type SeenFrame } from "../helpers/h2-frames.js";
import { CANCEL, NGHTTP2_FLOODS, memMiB, churn, idleConnection, manyFrames, openStalledStreams, resetFlood, streamFlood, windowUpdate, type IdleConnection } from "../helpers/attacks.js";
import { cgroupEntry, cgroupPeak, makeCgroup, oomKills } from "../helpers/cgroup.js";
import { assertDistBuilt, childEnv, configYaml, freePort, killSpawned, sleep, spawnDojang, tempDir, waitReady, type DojangProcess } from "../helpers/process.js";

const MiB = 1_048_576;
/** the budget: memory.limit, and the RSS bound the whole battery must stay under */
const LIMIT_MIB = 128;

const tmp = tempDir();
let server: http2.Http2Server;
let upstream: string;
let p: DojangProcess;
let address: string;
let by: EchoClient;
const raws: RawH2Client[] = [];
const idle: IdleConnection[] = [];
let peak = 0;
let peakAnon = 0;
const upstreamErrors: string[] = [];
let sampler: NodeJS.Timeout | undefined;
/** a real memory cgroup, made when the file is collected so that the titles can say which ran; or why none could be */
const cg = makeCgroup(LIMIT_MIB * MiB);
const noCgroup = typeof cg === "string" ? cg : undefined;
// the afterAll removes it; this, when no test ran (a filtered run)
if (typeof cg !== "string") process.once("exit", () => cg.remove());
const BUDGET = noCgroup === undefined ? `in a real ${LIMIT_MIB} MiB memory cgroup` : `with memory.limit ${LIMIT_MIB}MiB (no memory cgroup: ${noCgroup})`;
/**
 * Streams of the zero-window stall's 100 per connection the per-connection budget must cut. With
 * a 128 MiB budget it is 4 MiB per connection (src/config/memory.ts), and each stalled stream
 * holds at least its 64 KiB window once the upstream filled it: 100 of them hold 6.25 MiB or
 * more, so at least 36 are cut (measured: 75 on each connection before issue 22, 36 since, now
 * that a stalled stream no longer also holds 64 KiB queued for its client); without the budget
 * none is.
 */
const STALL_MIN_CUT = 36;
const RESOURCE_EXHAUSTED = "8";

/**
 * Whether the budget cut a stalled stream, as its client sees it on the wire. Two forms, one cut:
 * RST_STREAM ENHANCE_YOUR_CALM when its response head had gone out (what is queued for it is
 * dropped), or a trailers-only RESOURCE_EXHAUSTED when the cut came at its response head (the
 * unread budget, src/proxy/observe/overload.ts unreadAtHead: a connection already at its share
 * of unread calls gets no more). Which form a stream gets is event order: the second, whenever
 * the client's SETTINGS (window 0) and its first streams' stalls are processed before a stream's
 * response head comes back (seen on 83 to 95 of a connection's 100 streams when the streams
 * past a loop turn's budget were served at the turn's end: the fix tried for issue 32 item 4, see
 * attack-new-connections.test.ts). The upstream's streamFlood never ends a stream, so a HEADERS
 * with END_STREAM on one is dojang's; its status is read from the frame itself (node sends a
 * one-character value raw; the test decoder reads no Huffman, so the name `grpc-status` is not
 * compared).
 */
function cutByBudget(frames: readonly SeenFrame[]): boolean {
  for (const f of frames) {
    if (f.type === FRAME.RST_STREAM && f.errorCode === 0xb) return true;
    if (f.type === FRAME.HEADERS && (f.flags & FLAG_END_STREAM) !== 0 && frames[0] === f) {
      const block = decodeHeaderBlock(f.payload!);
      return block.some(([n, v]) => n === ":status" && v === "200") && block.some(([n, v]) => !n.startsWith(":") && v === RESOURCE_EXHAUSTED);
    }
  }
  return false;
}

function sample(): void {
  if (p.hasExited) return;
  const m = memMiB(p.pid);
  peak = Math.max(peak, m.rss);
  peakAnon = Math.max(peakAnon, m.anon);
}

beforeAll(async () => {
  assertDistBuilt();
  // node's default maxSessionMemory (10 MiB) would end the upstream's own connection under the
  // stall (its queued DATA counts against it) and with it the bystander's calls on that shared
  // connection: a real upstream blocks on flow control instead (attack-slow-reader does the same)
  server = http2.createServer({ maxSessionMemory: 1024 });
  const handler = echoOr((s, h) => {
    if (h[":path"] === "/test.Stream/Flood") streamFlood(s);
    else s.on("error", () => {});
  });
  server.on("stream", handler);
  // an upstream session error would be the shared connection ended by what dojang forwarded
  // (e.g. the attackers' resets: upstream/session.ts noteReset)
  server.on("session", (s) => s.on("error", (e) => upstreamErrors.push(e.message)));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  upstream = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  const port = await freePort();
  const admin = await freePort();
  const budget = typeof cg === "string" ? `memory: { limit: ${LIMIT_MIB}MiB }\n` : "";
  const yaml = configYaml({ listenPort: port, adminPort: admin, upstream, logLevel: "warn", extraTop: `${budget}accessLog: false` })
    .replace(/( {4}address: 127\.0\.0\.1:\d+\n)/, "$1    requestHeadersTimeout: 2s\n    maxConcurrentStreams: 100\n")
    .replace(/(endpoints: \[[^\]]*\]\n)/, "$1    initialWindowSize: 64KiB\n");
  const cfg = tmp.write("battery.yaml", yaml);
  p = typeof cg === "string" ? spawnDojang(["--config", cfg]) : spawnDojang(["--config", cfg], childEnv(), cgroupEntry(tmp, cg));
  console.log(typeof cg === "string" ? `battery: NO CGROUP (${cg}); memory.limit ${LIMIT_MIB}MiB instead, the cgroup checks are skipped` : `battery: in a real ${LIMIT_MIB} MiB cgroup v${cg.version}`);
  await waitReady(p, `127.0.0.1:${admin}`);
  address = `127.0.0.1:${port}`;
  by = echoClient(address);
  await runBystander(by, 100, 10); // warm-up
  sample();
  sampler = setInterval(sample, 20);
});

afterAll(async () => {
  clearInterval(sampler);
  by?.close();
  for (const r of raws.splice(0)) r.close();
  for (const c of idle.splice(0)) c.sock.destroy();
  await killSpawned();
  if (typeof cg !== "string") cg.remove();
  await new Promise<void>((r) => server.close(() => r()));
  tmp.remove();
});

/** Runs `attack` while the bystander makes 200 calls; the process must live and every call succeed. */
async function underAttack(name: string, attack: () => Promise<void>): Promise<void> {
  const bystander = runBystander(by, 200, 10);
  await attack();
  const r = await bystander;
  console.log(`battery ${name}: peak RSS so far ${peak.toFixed(1)} MiB (anonymous ${peakAnon.toFixed(1)}); bystander ${r.ok}/200`);
  expect(p.hasExited, p.stderr()).toBe(false);
  if (r.failures.length > 0) console.log(`battery ${name}: dojang's log\n${p.stdout().slice(-3000)}\n${p.stderr().slice(-3000)}`);
  expect(r.failures).toEqual([]);
}

async function untilClosed(conns: readonly { readonly closed: boolean }[], ms: number): Promise<void> {
  const t0 = performance.now();
  while (performance.now() - t0 < ms && conns.some((c) => !c.closed)) await sleep(20);
}

describe(`the attack battery against one dojang process ${BUDGET}`, () => {
  it("rapid reset: 10 connections x 1,000 reset streams, each cut with GOAWAY ENHANCE_YOUR_CALM", { timeout: 60_000 }, async () => {
    await underAttack("rapid reset", async () => {
      const atks = await Promise.all(Array.from({ length: 10 }, () => connectRawH2(address)));
      raws.push(...atks);
      const sent = await Promise.all(atks.map((c) => resetFlood(c, 1000, CANCEL)));
      await untilClosed(atks, 10_000);
      console.log(`battery rapid reset: streams sent ${sent.join(",")}; closed ${atks.map((c) => c.closed).join(",")}; GOAWAY ${atks.map((c) => c.goaway()?.errorCode).join(",")}`);
      // every connection closed; the GOAWAY a client read says why (one that was still writing
      // when its connection was destroyed may lose the GOAWAY it had not read to the TCP reset;
      // attack-rapid-reset.test.ts asserts the GOAWAY itself)
      for (const c of atks) expect(c.closed).toBe(true);
      for (const c of atks) if (c.goaway() !== undefined) expect(c.goaway()?.errorCode).toBe(0xb);
      // (node:http2 ending a session itself, before dojang's cut, lost 1 to 3 of them in about half
      // the runs until listener.ts raised maxSessionRejectedStreams; none in 8 runs since)
      expect(atks.filter((c) => c.goaway()?.errorCode === 0xb).length).toBeGreaterThanOrEqual(9);
    });
  });

  it("the floods nghttp2 stops (PING, SETTINGS, empty DATA, CONTINUATION): each connection cut", { timeout: 60_000 }, async () => {
    await underAttack("floods", async () => {
      const atks = await Promise.all(NGHTTP2_FLOODS.map(() => connectRawH2(address)));
      raws.push(...atks);
      NGHTTP2_FLOODS.forEach((f, i) => atks[i]!.write(f.bytes()));
      await untilClosed(atks, 5000);
      for (const c of atks) expect(c.closed).toBe(true);
    });
  });

  it("WINDOW_UPDATE floods: a sustained one is cut with ENHANCE_YOUR_CALM, an overflowing window with FLOW_CONTROL_ERROR", { timeout: 60_000 }, async () => {
    await underAttack("WINDOW_UPDATE", async () => {
      const [flood, over] = await Promise.all([connectRawH2(address), connectRawH2(address)]);
      raws.push(flood!, over!);
      over!.write(manyFrames(windowUpdate(0, 0x7fffffff), 1000));
      const burst = manyFrames(windowUpdate(0, 1), 40_000);
      const t0 = performance.now();
      while (performance.now() - t0 < 8000 && !flood!.closed) {
        if (flood!.goaway() === undefined) flood!.write(burst);
        await sleep(100);
      }
      await untilClosed([over!], 5000);
      expect(over!.goaway()?.errorCode).toBe(0x3);
      expect(flood!.closed).toBe(true);
      expect(flood!.goaway()?.errorCode).toBe(0xb);
    });
  });

  it(`zero-window stall: 3 connections x 100 server streams never read (the edge limit), the per-connection budget cuts at least ${STALL_MIN_CUT} on each`, { timeout: 60_000 }, async () => {
    await underAttack("zero-window stall", async () => {
      // opened at the default window, closed right after: at window 0 from its first SETTINGS a
      // connection may open only 12 streams (downstream/guards.ts), 88 refused; this is the
      // stalled-buffer budget's test
      const atks = await Promise.all(Array.from({ length: 3 }, () => connectRawH2(address)));
      raws.push(...atks);
      const ids = atks.map((c) => openStalledStreams(c, 100));
      for (const c of atks) c.write(settingsFrame([[SETTING.INITIAL_WINDOW_SIZE, 0]]));
      // what the per-connection budget cut (cutByBudget), once the stalls are idle (200 ms) and
      // swept, however busy the machine
      const cutOn = (i: number): number => ids[i]!.filter((id) => cutByBudget(atks[i]!.on(id))).length;
      const t0 = performance.now();
      while (performance.now() - t0 < 10_000 && atks.some((_, i) => cutOn(i) < STALL_MIN_CUT)) await sleep(100);
      await sleep(1000); // and what a later sweep cuts
      const cut = atks.map((_, i) => cutOn(i));
      console.log(`battery zero-window stall: streams cut per connection ${cut.join(", ")}`);
      for (const n of cut) expect(n).toBeGreaterThanOrEqual(STALL_MIN_CUT);
      // the connections themselves stay: only their stalled calls are cut
      for (const c of atks) expect(c.closed).toBe(false);
      for (const c of atks) c.close();
    });
  });

  it("slowloris: 1,000 connections (half TCP only, half the preface) closed after requestHeadersTimeout 2s", { timeout: 60_000 }, async () => {
    await underAttack("slowloris", async () => {
      const conns = await Promise.all(Array.from({ length: 1000 }, (_, i) => idleConnection(address, i % 2 === 0)));
      idle.push(...conns);
      const t0 = performance.now();
      while (performance.now() - t0 < 8000 && conns.some((c) => c.closedAt() === undefined)) await sleep(50);
      expect(conns.filter((c) => c.closedAt() === undefined)).toHaveLength(0);
    });
  });

  it("connection churn: 3,000 connections opened and closed", { timeout: 60_000 }, async () => {
    await underAttack("churn", () => churn(address, 3000));
  });

  it(`the process lived through the battery (alive, no upstream session error), its anonymous memory under ${LIMIT_MIB} MiB`, async () => {
    await sleep(500);
    expect(p.hasExited, p.stderr()).toBe(false);
    sample();
    const inCg = typeof cg === "string" ? "; no cgroup" : `; cgroup peak ${(cgroupPeak(cg) / MiB).toFixed(1)} MiB, OOM kills ${oomKills(cg)}`;
    console.log(`battery: peak RSS ${peak.toFixed(1)} MiB, anonymous ${peakAnon.toFixed(1)} MiB (budget ${LIMIT_MIB} MiB)${inCg}`);
    expect(upstreamErrors).toEqual([]);
    expect(peakAnon).toBeLessThan(LIMIT_MIB);
  });

  // A dojang the kernel OOM-killed would have failed the test above (it must be alive); what only
  // the cgroup can say is that the kernel never had to act: no OOM kill of any process in it, and
  // its peak use under the limit. The kernel keeps the peak at most the limit (the check this
  // replaces); it is exactly the limit once the kernel had to reclaim or kill (helpers/cgroup.ts).
  it.skipIf(noCgroup !== undefined)(`in the cgroup: no OOM kill, its use never reached the ${LIMIT_MIB} MiB limit${noCgroup === undefined ? "" : ` (skipped: ${noCgroup})`}`, () => {
    if (typeof cg === "string") return;
    expect(p.hasExited, p.stderr()).toBe(false);
    expect(oomKills(cg)).toBe(0);
    expect(cgroupPeak(cg)).toBeLessThan(LIMIT_MIB * MiB);
  });
});
