// shrinkHeapWhenIdle in a real dojang process: after a burst of calls and then quiet, the young
// generation V8 grew under load is given back (node's new space back to its minimum), counted
// in dojang_heap_shrinks_total; `0` turns it off.
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import { assertDistBuilt, configYaml, freePort, httpGet, killSpawned, spawnDojang, tempDir, waitFor, waitReady } from "../helpers/process.js";
import { echoClient, startGrpcServer, unary, type GrpcServer } from "../helpers/peers.js";

let up: GrpcServer | undefined;
const dirs: { remove(): void }[] = [];
beforeAll(() => assertDistBuilt());
afterEach(async () => {
  await killSpawned();
  await up?.close();
  up = undefined;
  for (const d of dirs.splice(0)) d.remove();
});

async function metric(admin: string, name: string): Promise<number> {
  const r = await httpGet(admin, "/metrics", 2000);
  const line = r.body.split("\n").find((l) => l.startsWith(name + " ") || l.startsWith(name + "{"));
  if (line === undefined) throw new Error(`${name} not in /metrics`);
  return Number(line.slice(line.lastIndexOf(" ") + 1));
}
const NEW_SPACE = 'nodejs_heap_space_size_total_bytes{space="new"}';

async function start(shrink: string, extraTop = ""): Promise<{ admin: string; target: string }> {
  up = await startGrpcServer({ Unary: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, c.request) });
  const [listenPort, adminPort] = [await freePort(), await freePort()];
  const dir = tempDir();
  dirs.push(dir);
  const file = dir.write("dojang.yaml", configYaml({ listenPort, adminPort, upstream: up.address, logLevel: "info", extraTop: `shrinkHeapWhenIdle: ${shrink}\naccessLog: false\n${extraTop}` }));
  const p = spawnDojang(["--config", file]);
  const admin = `127.0.0.1:${adminPort}`;
  await waitReady(p, admin);
  return { admin, target: `127.0.0.1:${listenPort}` };
}

/** 2,000 unary calls of 4 KiB, 50 at a time: enough garbage to grow node's new space. */
async function burst(target: string): Promise<void> {
  const c = echoClient(target);
  const body = Buffer.alloc(4096, 7);
  for (let i = 0; i < 40; i++) {
    const rs = await Promise.all(Array.from({ length: 50 }, () => unary(c, body)));
    for (const r of rs) expect(r.err).toBeNull();
  }
  c.close();
}

describe("shrinkHeapWhenIdle", () => {
  it("gives the young generation back after the calls stop", async () => {
    const { admin, target } = await start("300ms");
    // The start-up shrink has run once dojang serves.
    await waitFor("the start-up shrink", async () => ((await metric(admin, "dojang_heap_shrinks_total")) >= 1 ? true : undefined), 5000, 50);
    const afterStart = await metric(admin, "dojang_heap_shrinks_total");
    await burst(target);
    const grown = await metric(admin, NEW_SPACE);
    await waitFor("an idle shrink", async () => ((await metric(admin, "dojang_heap_shrinks_total")) > afterStart ? true : undefined), 5000, 50);
    const shrunk = await metric(admin, NEW_SPACE);
    expect(shrunk).toBeLessThanOrEqual(4 * 1048576); // node's minimum new space is 1 MiB (2 semi-spaces' worth)
    expect(shrunk).toBeLessThan(grown);
    // Idle stays idle: no shrink without calls in between.
    const n = await metric(admin, "dojang_heap_shrinks_total");
    await new Promise((r) => setTimeout(r, 800));
    expect(await metric(admin, "dojang_heap_shrinks_total")).toBe(n);
  });

  it("is off with 0 (the default): only the start-up shrink runs", async () => {
    const { admin, target } = await start("0");
    await waitFor("the start-up shrink", async () => ((await metric(admin, "dojang_heap_shrinks_total")) >= 1 ? true : undefined), 5000, 50);
    await burst(target);
    await new Promise((r) => setTimeout(r, 500));
    expect(await metric(admin, "dojang_heap_shrinks_total")).toBe(1);
  });
});

describe("concurrentMarking", () => {
  it("off turns V8's concurrent marking off in the process and says so in /metrics; on leaves it on", async () => {
    const off = await start("0", "concurrentMarking: off");
    expect(await metric(off.admin, "dojang_gc_concurrent_marking")).toBe(0);
    await burst(off.target); // calls still work with the flag changed under them
    await killSpawned();
    await up?.close();
    const on = await start("0", "concurrentMarking: on");
    expect(await metric(on.admin, "dojang_gc_concurrent_marking")).toBe(1);
  });
});
