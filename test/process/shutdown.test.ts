// Graceful shutdown of a real dojang process: SIGTERM/SIGINT turn /ready to 503, stop
// accepting connections, let in-flight calls finish up to drainTimeout, cut what is left with a
// status, and exit 0.
import * as grpc from "@grpc/grpc-js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { echoClient, sample, startGrpcServer, unary, type EchoClient, type GrpcServer, type UnaryResult } from "../helpers/peers.js";
import {
  answerAfterPayloadMs,
  assertDistBuilt,
  canConnect,
  configYaml,
  freePort,
  httpGet,
  killSpawned,
  spawnDojang,
  tempDir,
  waitFor,
  waitReady,
  type DojangProcess,
} from "../helpers/process.js";

const tmp = tempDir();
let up: GrpcServer;
const clients: EchoClient[] = [];

beforeAll(async () => {
  assertDistBuilt();
  // Unary answers "done:<n>" after n ms, n being the request payload; a cancelled call stops its timer.
  up = await startGrpcServer({ Unary: answerAfterPayloadMs() });
});
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  await killSpawned();
});
afterAll(async () => {
  await up.close();
  tmp.remove();
});

interface Started {
  p: DojangProcess;
  listen: string;
  listenPort: number;
  admin: string;
}

async function start(drainTimeout: string): Promise<Started> {
  const [listenPort, adminPort] = [await freePort(), await freePort()];
  const file = tmp.write(`drain-${listenPort}.yaml`, configYaml({ listenPort, adminPort, upstream: up.address, drainTimeout, logLevel: "info" }));
  const p = spawnDojang(["--config", file]);
  const admin = `127.0.0.1:${adminPort}`;
  await waitReady(p, admin);
  return { p, listen: `127.0.0.1:${listenPort}`, listenPort, admin };
}

function client(address: string): EchoClient {
  const c = echoClient(address);
  clients.push(c);
  return c;
}

/** Starts a call that the upstream answers after `ms`, and waits until dojang counts it in flight. */
async function slowCall(s: Started, ms: number): Promise<{ result: Promise<UnaryResult> }> {
  const call = unary(client(s.listen), Buffer.from(String(ms)), new grpc.Metadata(), { deadline: Date.now() + 30_000 });
  await waitFor("the call to be in flight", async () => {
    const m = (await httpGet(s.admin, "/metrics")).body;
    return sample(m, "dojang_active_calls") >= 1 ? true : undefined;
  }, 5000);
  // Wrapped: an async function returning the bare promise would wait for the call to end.
  return { result: call };
}

/** Polls /ready until it answers 503; returns the body. */
function readyTurns503(admin: string): Promise<string> {
  return waitFor("/ready to answer 503", async () => {
    const r = await httpGet(admin, "/ready", 500);
    return r.status === 503 ? r.body : undefined;
  }, 3000, 10);
}

describe("SIGTERM", () => {
  it("turns /ready 503, refuses new connections, lets the in-flight call finish OK, and exits 0", async () => {
    const s = await start("5s");
    const { result: pending } = await slowCall(s, 800);
    let finished = false;
    void pending.then(() => (finished = true));

    const t0 = Date.now();
    s.p.child.kill("SIGTERM");
    expect(await readyTurns503(s.admin)).toBe("draining\n");
    expect((await httpGet(s.admin, "/live")).status).toBe(200);
    // Still draining (the upstream answers at 800 ms): the listener no longer accepts connections.
    expect(await canConnect(s.listenPort)).toBe(false);
    expect(finished).toBe(false);

    const r = await pending;
    expect(r.err).toBeNull();
    expect(r.status?.code).toBe(grpc.status.OK);
    expect(r.res?.toString()).toBe("done:800");

    expect(await s.p.exited(10_000)).toEqual({ code: 0, signal: null });
    // It stopped when the last call ended, not at the 5 s drain timeout.
    expect(Date.now() - t0).toBeLessThan(4000);

    // Its stdout is pino JSON lines: the signal, the drain, the drained call's access line, the stop.
    const lines = s.p.stdout().trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    const msgs = lines.map((l) => l["msg"]);
    expect(lines.find((l) => l["msg"] === "signal received, draining")?.["signal"]).toBe("SIGTERM");
    expect(lines.filter((l) => l["msg"] === "call").map((l) => [l["grpc_status"], l["decided_by"]])).toEqual([["OK", "upstream"]]);
    expect(msgs.indexOf("draining")).toBeLessThan(msgs.indexOf("call"));
    expect(msgs[msgs.length - 1]).toBe("stopped");

    // After the exit, a new connection fails and a new call gets UNAVAILABLE.
    expect(await canConnect(s.listenPort)).toBe(false);
    const after = await unary(client(s.listen), Buffer.from("0"), new grpc.Metadata(), { deadline: Date.now() + 3000 });
    expect(after.err?.code).toBe(grpc.status.UNAVAILABLE);
  });

  it("exits 0 promptly when no call is in flight", async () => {
    const s = await start("5s");
    const t0 = Date.now();
    s.p.child.kill("SIGTERM");
    expect(await s.p.exited(5000)).toEqual({ code: 0, signal: null });
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(await canConnect(s.listenPort)).toBe(false);
  });

  it("cuts a call that outlives drainTimeout with UNAVAILABLE from dojang, and exits 0 soon after", async () => {
    const s = await start("300ms");
    const { result: pending } = await slowCall(s, 5000);
    const t0 = Date.now();
    s.p.child.kill("SIGTERM");

    const r = await Promise.race([
      pending,
      new Promise<"hang">((res) => setTimeout(() => res("hang"), 4000)),
    ]);
    const statusAfter = Date.now() - t0;
    expect(r).not.toBe("hang");
    const res = r as UnaryResult;
    // A stamp the client can act on (UNAVAILABLE is safe to retry elsewhere), sent by dojang
    // because it is shutting down, not a dropped connection and not the upstream's answer.
    expect(res.err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(res.err?.details).toMatch(/shutting down/i);
    // The call had its drain time first.
    expect(statusAfter).toBeGreaterThanOrEqual(250);

    expect(await s.p.exited(5000)).toEqual({ code: 0, signal: null });
    expect(Date.now() - t0).toBeLessThan(3000);
  });
});

describe("SIGINT", () => {
  it("drains the same way: /ready 503, the in-flight call finishes OK, exit 0 (a second signal does not cut it)", async () => {
    const s = await start("5s");
    const { result: pending } = await slowCall(s, 800);
    s.p.child.kill("SIGINT");
    expect(await readyTurns503(s.admin)).toBe("draining\n");
    s.p.child.kill("SIGINT");

    const r = await pending;
    expect(r.err).toBeNull();
    expect(r.res?.toString()).toBe("done:800");
    expect(await s.p.exited(10_000)).toEqual({ code: 0, signal: null });
    expect(await canConnect(s.listenPort)).toBe(false);
  });
});
