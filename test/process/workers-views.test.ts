// The operator's views with `workers: 2` (issue "dojang 0.6: what an operator sees"): the primary
// answers GET /stats with every worker's rows summed (calls, quantiles from the summed bins),
// GET /calls?failed with both workers' failed calls (each with its worker id), and GET /tap with
// the records of both workers as they end. Real processes; each client on its own connection, so
// the primary hands them to the workers in turn.
import * as grpc from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { unary } from "../helpers/peers.js";
import { configYaml, freePort, httpGet, ownConnectionClient, processTestKit, spawnDojang, waitFor, waitReady } from "../helpers/process.js";

const kit = processTestKit();

async function start() {
  const b = await kit.backend("b");
  const [listenPort, adminPort] = [await freePort(), await freePort()];
  const file = kit.dir().write("w.yaml", configYaml({ listenPort, adminPort, upstream: b.address, extraTop: "workers: 2\naccessLog: false" }));
  const p = spawnDojang(["--config", file]);
  const admin = `127.0.0.1:${adminPort}`;
  await waitReady(p, admin, 20_000);
  return { b, admin, listen: `127.0.0.1:${listenPort}` };
}

async function json(admin: string, path: string): Promise<any> {
  const r = await httpGet(admin, path, 8000);
  expect(r.status, path).toBe(200);
  return JSON.parse(r.body);
}

describe("workers: 2, one view", () => {
  it("GET /stats sums both workers' rows; GET /calls?failed merges their failed calls; GET /tap streams both", { timeout: 90_000 }, async () => {
    const { b, admin, listen } = await start();
    // a tap open before the calls, on the primary
    const ac = new AbortController();
    const res = await fetch(`http://${admin}/tap?failed`, { signal: ac.signal });
    expect(res.status).toBe(200);
    const lines: Record<string, unknown>[] = [];
    void (async () => {
      const reader = res.body!.getReader();
      const dec = new TextDecoder();
      let rest = "";
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return;
          rest += dec.decode(value, { stream: true });
          let nl: number;
          while ((nl = rest.indexOf("\n")) >= 0) {
            lines.push(JSON.parse(rest.slice(0, nl)) as Record<string, unknown>);
            rest = rest.slice(nl + 1);
          }
        }
      } catch {
        /* aborted */
      }
    })();
    await waitFor("the tap in both workers", async () => ((await json(admin, "/stats?state=1")).state.taps === 1 ? true : undefined), 10_000);

    // 8 connections (4 per worker, round-robin), each an OK call then a failed one
    const clients = Array.from({ length: 8 }, () => ownConnectionClient(listen, kit.clients));
    for (const c of clients) expect((await unary(c, Buffer.from("ok"))).err).toBeNull();
    b.failWith = grpc.status.RESOURCE_EXHAUSTED;
    for (const c of clients) expect((await unary(c, Buffer.from("no"))).err?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);

    const v = await waitFor("16 calls counted", async () => {
      const s = await json(admin, "/stats?state=1");
      return s.total.calls === 16 ? s : undefined;
    }, 10_000);
    expect(v.workers).toBe(2);
    expect(v.methods).toHaveLength(1);
    expect(v.methods[0]).toMatchObject({ name: "test.Echo/Unary", calls: 16, failed: 8, success: 0.5, failed_by: { upstream: 8 } });
    expect(v.endpoints[0]).toMatchObject({ name: `backend/${b.address}`, calls: 16 });
    expect(v.state.clusters[0].workers.map((w: { worker: number }) => w.worker).sort()).toHaveLength(2);

    const failed = (await json(admin, "/calls?failed&since=60s")) as { worker: number; grpc_code: number }[];
    expect(failed).toHaveLength(8);
    expect(failed.every((r) => r.grpc_code === 8)).toBe(true);
    expect(new Set(failed.map((r) => r.worker)).size).toBe(2);

    await waitFor("8 tapped", () => (lines.length >= 8 ? true : undefined), 10_000);
    expect(lines.filter((l) => l["grpc_code"] === 8)).toHaveLength(8);
    expect(new Set(lines.map((l) => l["worker"])).size).toBe(2);
    ac.abort();
    await waitFor("the tap gone from both workers", async () => ((await json(admin, "/stats?state=1")).state.taps === 0 ? true : undefined), 10_000);
  });
});
