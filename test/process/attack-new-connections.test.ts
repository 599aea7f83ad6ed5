// Issue 32 item 4: a new connection is served while other clients attack. Ten raw-frame clients
// each open and reset 1,000 streams (rapid reset, CVE-2023-44487) against one real dojang
// process; while they do, a separate probe process (bench/lib/settings-probe.mjs, so that this
// process's own busy loop does not delay its clock) opens a new connection every 50 ms and times
// each to dojang's first SETTINGS. Every probe must have its SETTINGS within SETTINGS_BOUND_MS,
// a well-behaved grpc-js client's calls on its existing connection must all succeed, and the
// attackers must still be cut with GOAWAY ENHANCE_YOUR_CALM. nginx and HAProxy answered every
// such probe (bench/new-conn-under-attack.mjs measures the three in one run).
import { createInterface } from "node:readline";
import { join } from "node:path";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { echoClient, type EchoClient } from "../helpers/peers.js";
import { echoOr, runBystander } from "../helpers/bystander.js";
import { connectRawH2, type RawH2Client } from "../helpers/raw-h2-client.js";
import { CANCEL, resetBurst, startTarget, type Target } from "../helpers/attacks.js";
import { REPO_ROOT, assertDistBuilt, killSpawned, sleep, spawnGroup, tempDir } from "../helpers/process.js";

const ATTACKERS = 10;
const RESETS = 1000;
const PROBES = 20;
const PROBE_EVERY_MS = 50;
/**
 * Each new connection's SETTINGS must come within this, from its connect() call. Measured on a
 * 2-CPU machine shared with other work: before issue 32 item 4, 19 of 20 probes over 2.5 s in
 * each run (2.5 to 4.9 s, load average 14; bench/new-conn-under-attack.mjs: medians 5.9 and
 * 6.3 s at load 27; on the tree before the fix, slowest 2.4 and 2.5 s at load 8 to 14); with the
 * fix (src/proxy/downstream/turns.ts) the slowest probe 0.23 to 1.0 s in 13 runs at load 11 to 22.
 * So 2 s fails without the fix and holds with twice the worst figure with it.
 */
const SETTINGS_BOUND_MS = 2000;
const ENHANCE_YOUR_CALM = 0xb;

const tmp = tempDir();
let server: http2.Http2Server;
let target: Target;
let by: EchoClient;
const raws: RawH2Client[] = [];

beforeAll(async () => {
  assertDistBuilt();
  server = http2.createServer();
  server.on("stream", echoOr((s) => s.on("error", () => {})));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  target = await startTarget(tmp, `127.0.0.1:${(server.address() as AddressInfo).port}`);
  by = echoClient(target.address);
  await runBystander(by, 50, 10); // its connection is made before the attack
});

afterAll(async () => {
  by?.close();
  for (const r of raws.splice(0)) r.close();
  await killSpawned();
  await new Promise<void>((r) => server.close(() => r()));
  tmp.remove();
});

/** Starts the probe process; resolves with `go` (starts the probes, resolves with their result). */
async function startProbes(address: string): Promise<() => Promise<{ settingsMs: (number | null)[]; wrong: string[] }>> {
  const child = spawnGroup(process.execPath, [join(REPO_ROOT, "bench", "lib", "settings-probe.mjs"), address, "--count", String(PROBES), "--interval-ms", String(PROBE_EVERY_MS), "--timeout-ms", "10000"], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const first = await lines.next();
  expect(JSON.parse(String(first.value))).toEqual({ ready: true });
  return async () => {
    child.stdin!.write("go\n");
    const r = await lines.next();
    return JSON.parse(String(r.value));
  };
}

describe("a new connection is served while other clients attack (issue 32 item 4)", () => {
  // The fix: src/proxy/downstream/turns.ts (one flood read per loop turn; the others held until
  // the turns after it have accepted every connection that waited). Its first form held the others
  // for 32 turns and let test/behaviour/attack-rapid-reset.test.ts's paced attackers write up to
  // all 1,000 streams before their GOAWAY; that test is the other half of this one's oracle.
  it(`${ATTACKERS} connections x ${RESETS} reset streams: ${PROBES} new connections opened during the attack each get SETTINGS within ${SETTINGS_BOUND_MS} ms; bystander calls succeed; attackers get GOAWAY ENHANCE_YOUR_CALM`, { timeout: 90_000 }, async () => {
    const go = await startProbes(target.address);
    const atks = await Promise.all(Array.from({ length: ATTACKERS }, () => connectRawH2(target.address)));
    raws.push(...atks);
    const bystander = runBystander(by, 200, 10);
    const probes = go();
    for (const c of atks) resetBurst(c, RESETS, CANCEL);
    const [probed, calls] = await Promise.all([probes, bystander]);
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline && atks.some((c) => !c.closed)) await sleep(20);
    const ms = probed.settingsMs;
    const sorted = ms.map((v) => v ?? Infinity).sort((a, b) => a - b);
    console.log(
      `new connections under attack: SETTINGS after ${ms.map((v) => (v === null ? "timeout" : v.toFixed(0))).join(", ")} ms ` +
        `(median ${sorted[PROBES >> 1]!.toFixed(0)}, max ${sorted[PROBES - 1]!.toFixed(0)}); ` +
        `GOAWAY ${atks.map((c) => c.goaway()?.errorCode).join(",")}; bystander ${calls.ok}/200`,
    );
    expect(target.p.hasExited, target.p.stderr()).toBe(false);
    expect(probed.wrong).toEqual([]);
    expect(ms.filter((v) => v === null || v > SETTINGS_BOUND_MS)).toEqual([]);
    expect(calls.failures).toEqual([]);
    // the attackers are cut as before (a client still writing when its connection was destroyed
    // may lose the GOAWAY to the TCP reset: attack-rapid-reset.test.ts asserts the GOAWAY itself)
    for (const c of atks) expect(c.closed).toBe(true);
    for (const c of atks) if (c.goaway() !== undefined) expect(c.goaway()?.errorCode).toBe(ENHANCE_YOUR_CALM);
    expect(atks.filter((c) => c.goaway()?.errorCode === ENHANCE_YOUR_CALM).length).toBeGreaterThanOrEqual(8);
  });
});
