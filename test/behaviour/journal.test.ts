// `journal` (README, the config reference and "Admin API"): the recent calls kept for GET /calls;
// 0 keeps none (the CLI's default). Only the presence of a record was tested before (through the
// process, test/observe/admin-security.test.ts); this checks the count from the operator's side:
// GET /calls on the admin listener after more calls than the journal holds.
import { describe, expect, it } from "vitest";
import { unary } from "../helpers/peers.js";
import { useFixtures } from "../helpers/fixtures.js";
import { startBackend } from "../helpers/backends.js";

const fx = useFixtures();

async function calls(adminAddress: string | undefined): Promise<{ path: string }[]> {
  const res = await fetch(`http://${adminAddress}/calls`);
  expect(res.status).toBe(200);
  return (await res.json()) as { path: string }[];
}

describe("journal: the recent calls GET /calls keeps", () => {
  it("journal: 3 keeps 3 of 5 calls", async () => {
    const b = fx.track(await startBackend("b"), (x) => x.close());
    const px = await fx.proxyFor(b.address, { top: { journal: 3 } });
    const c = fx.client(px.address);
    for (let i = 0; i < 5; i++) expect((await unary(c, Buffer.from(`c${i}`))).err).toBeNull();
    // a call is recorded when its client stream closes, just after the client has its answer
    const end = performance.now() + 5000;
    while ((await calls(px.adminAddress)).length < 3 && performance.now() < end) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 200));
    expect((await calls(px.adminAddress)).length).toBe(3);
    expect(b.calls).toBe(5);
  });

  it("journal: 0 keeps none", async () => {
    const b = fx.track(await startBackend("b"), (x) => x.close());
    const px = await fx.proxyFor(b.address, { top: { journal: 0 } });
    const c = fx.client(px.address);
    for (let i = 0; i < 3; i++) expect((await unary(c, Buffer.from(`c${i}`))).err).toBeNull();
    await new Promise((r) => setTimeout(r, 200));
    expect(await calls(px.adminAddress)).toEqual([]);
  });
});
