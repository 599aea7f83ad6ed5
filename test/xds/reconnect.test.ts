// The control plane crashes and comes back, five times in a row, while a dojang process (its
// default back-off, no test hooks) serves what it accepted: each time, dojang's new ADS stream
// reaches the control plane within 2 s of it listening again, measured on the control plane's own
// log clock (its "listening" line → the first request of dojang's new stream). The bound: the ADS
// stream waits for the channel to be ready (grpc-js waitForReady) rather than failing on a cached
// connection error, so the wait is grpc-js's reconnect back-off (0.2 s growing ×1.6, capped at
// 2 s, ±20 %) from when the control plane went away, under 2 s for a 1.5 s outage. Calls through
// the listener it sent never fail meanwhile.
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { echoClient, startGrpcServer, type EchoClient, type GrpcServer } from "../helpers/peers.js";
import { assertDistBuilt, childEnv, freePort, logLines, sleep, spawnDojang, tempDir, waitFor, type DojangProcess } from "../helpers/process.js";
import { bootstrapYaml, cla, edsCluster, listener, route, routeConfig, startControlPlane, T, type ControlPlane } from "./control-plane.js";

const NODE = "reconnect-node";

describe("dojang's ADS stream when the control plane crashes and restarts, again and again", () => {
  const tmp = tempDir();
  let up: GrpcServer;
  let cp: ControlPlane;
  let d: DojangProcess;
  let client: EchoClient;

  beforeAll(async () => {
    assertDistBuilt();
    up = await startGrpcServer({ Unary: (_c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.from("up")) });
    const port = await freePort();
    cp = await startControlPlane();
    await cp.push(
      NODE,
      "1",
      { [T.listener]: [listener("in", port, "r")], [T.route]: [routeConfig("r", [route("/", "svc")])], [T.cluster]: [edsCluster("svc")], [T.endpoint]: [cla("svc", [up.address])] },
      true,
    );
    const admin = await freePort();
    const boot = tmp.write("bootstrap.yaml", bootstrapYaml(NODE, cp.adsPort));
    const cfg = tmp.write("dojang.yaml", `admin: { address: 127.0.0.1:${admin} }\naccessLog: false\nxds: { bootstrap: ${boot} }\nlisteners: []\nclusters: []\n`);
    d = spawnDojang(["--config", cfg], childEnv({ DOJANG_XDS_MISSING_MS: undefined, DOJANG_XDS_BACKOFF_MS: undefined }));
    client = echoClient(`127.0.0.1:${port}`);
    await waitFor("a call through the listener the control plane sent", () => callOk(client), 30_000, 100).catch(async (err: Error) => {
      throw new Error(`${err.message}\n${d.stdout()}\n${d.stderr()}\n${JSON.stringify(await cp.events())}`);
    });
  }, 60_000);

  afterAll(async () => {
    client?.close();
    await cp?.close();
    await up?.close();
    tmp.remove();
  });

  it("reaches the control plane within 2 s after each of five restarts (1.5 s down each time), and no call fails", async () => {
    const results: boolean[] = [];
    let on = true;
    const loop = (async () => {
      while (on) {
        results.push((await callOk(client)) === true);
        await sleep(20);
      }
    })();
    const back: number[] = [];
    try {
      for (let i = 0; i < 5; i++) {
        await cp.stop();
        await sleep(1500);
        const listening = await cp.start();
        const first = await waitFor(`dojang's new stream (restart ${i + 1})`, async () => (await cp.events()).find((e) => e.kind === "request" && e.node === NODE), 30_000, 10);
        back.push(first.at - listening);
        // the stream is whole again before the next crash (it got its response and ACKed it)
        await waitFor("the ACK", async () => (await cp.events()).find((e) => e.kind === "request" && e.nonce !== "" && e.nonce !== undefined), 10_000, 10);
      }
    } finally {
      on = false;
      await loop;
    }
    expect(back.every((ms) => ms <= 2000), `ms from the control plane listening to dojang's first request: ${back.join(", ")}\n${logLines(d).filter((l) => l["level"] >= 40).map((l) => JSON.stringify(l)).join("\n")}`).toBe(true);
    expect(results.length).toBeGreaterThan(20);
    expect(results.filter((ok) => !ok)).toEqual([]);
  }, 120_000);
});

function callOk(c: EchoClient): Promise<true | undefined> {
  return new Promise((r) => c.Unary(Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 5000 }, (e) => r(e === null ? true : undefined)));
}
