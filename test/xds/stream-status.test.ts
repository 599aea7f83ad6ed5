// What a dojang process says about its ADS stream, read the way an operator reads it (/config,
// /metrics, /ready, the log), against the example control plane: keyed on another node id, the
// stream is up and says so, a warning names the node id, its cluster and the control plane; /ready
// waits for the first fetch until the bootstrap's initial_fetch_timeout passes (Envoy's
// semantics), and answers as soon as the first fetch is complete when it is; the line logged when
// the stream ends says what serves; each listener the control plane sends logs where it is bound.
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { echoClient, sample, scrape, startGrpcServer, type GrpcServer } from "../helpers/peers.js";
import { assertDistBuilt, childEnv, freePort, httpGet, logLine, logLines, sleep, spawnDojang, tempDir, waitFor, type DojangProcess } from "../helpers/process.js";
import { describeEnd } from "../../src/xds/client.js";
import { bootstrapYaml, cla, edsCluster, listener, route, routeConfig, startControlPlane, T, type ControlPlane } from "./control-plane.js";

const MINE = "sidecar~127.0.0.1~mine.default~cluster.local";
const OTHER = "sidecar~127.0.0.1~other.default~cluster.local";

const snapshot = (port: number, upstream: string): Partial<Record<string, unknown[]>> => ({
  [T.listener]: [listener("xds-in", port, "routes")],
  [T.route]: [routeConfig("routes", [route("/", "svc")])],
  [T.cluster]: [edsCluster("svc")],
  [T.endpoint]: [cla("svc", [upstream])],
});

function call(address: string): Promise<string> {
  const c = echoClient(address);
  return new Promise<string>((r) =>
    c.Unary(Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 5000 }, (e, res) => {
      c.close();
      r(e === null ? res!.toString() : `error ${e.code}`);
    }),
  );
}

/** dojang with `listeners: []`, driven by the control plane (no test hooks in its environment) */
function startDojang(tmp: ReturnType<typeof tempDir>, admin: number, cpPort: number, initialFetchTimeout: string): DojangProcess {
  const boot = tmp.write(`bootstrap-${admin}.yaml`, bootstrapYaml(MINE, cpPort, "GRPC", `{ ads: {}, resource_api_version: V3, initial_fetch_timeout: ${initialFetchTimeout} }`));
  const cfg = tmp.write(`dojang-${admin}.yaml`, `admin: { address: 127.0.0.1:${admin} }\naccessLog: false\nxds: { bootstrap: ${boot} }\nlisteners: []\nclusters: []\n`);
  return spawnDojang(["--config", cfg], childEnv({ DOJANG_XDS_MISSING_MS: undefined, DOJANG_XDS_BACKOFF_MS: undefined }));
}

describe("a dojang process whose node id the control plane does not serve", () => {
  const tmp = tempDir();
  let up: GrpcServer;
  let cp: ControlPlane;
  let d: DojangProcess;
  let admin: string;
  let port: number;
  let startedAt = 0;

  beforeAll(async () => {
    assertDistBuilt();
    up = await startGrpcServer({ Unary: (_c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.from("up")) });
    port = await freePort();
    cp = await startControlPlane();
    await cp.push(OTHER, "1", snapshot(port, up.address), true);
    const a = await freePort();
    admin = `127.0.0.1:${a}`;
    startedAt = Date.now();
    d = startDojang(tmp, a, cp.adsPort, "8s");
  }, 60_000);

  afterAll(async () => {
    await cp?.close();
    await up?.close();
    tmp.remove();
  });

  it("has its stream up: the control plane logs dojang's CDS and LDS requests, and /config and dojang_xds_connected say connected", async () => {
    await waitFor(
      "dojang's CDS and LDS requests, with its node id",
      async () => {
        const ev = await cp.events();
        const asked = (t: string) => ev.some((e) => e.kind === "request" && e.node === MINE && e.typeUrl === t);
        return asked(T.cluster) && asked(T.listener) ? true : undefined;
      },
      20_000,
    );
    // the stream is established: what dojang shows follows it, whether or not a response came
    const shown = await waitFor(
      "/config and the gauge",
      async () => {
        const r = await httpGet(admin, "/config").catch(() => undefined);
        if (r?.status !== 200) return undefined;
        const cfg = JSON.parse(r.body) as { xds: { connected: boolean } };
        return { connected: cfg.xds.connected, gauge: sample(await scrape(admin), "dojang_xds_connected") };
      },
      5_000,
    );
    expect(shown).toEqual({ connected: true, gauge: 1 });
    // and it is not ready: Envoy's initial fetch (8 s here) has neither completed nor timed out
    const ready = await httpGet(admin, "/ready");
    expect(ready.status).toBe(503);
    expect(ready.body).toMatch(/^xds: waiting for the initial fetch/);
    // nothing came: the control plane said so in its own log, naming the node id it has
    const told = (await cp.events()).find((e) => e.msg.startsWith("no snapshot for this node id"));
    expect(told?.node).toBe(MINE);
  }, 60_000);

  it("is not ready until initial_fetch_timeout (8s) passes, then warns naming its node id, its cluster and the control plane, and is ready with what it has", async () => {
    const warning = await waitFor("the warning", () => logLines(d).find((l) => l["level"] === 40 && String(l["msg"]).includes(MINE)), 20_000);
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(8000);
    expect(warning["msg"]).toContain(`the control plane at 127.0.0.1:${cp.adsPort}`);
    expect(warning["msg"]).toContain('cluster "test"');
    expect(warning).toMatchObject({ node: MINE, cluster: "test", server: `127.0.0.1:${cp.adsPort}` });
    await waitFor("/ready 200 after the initial fetch timeout", async () => ((await httpGet(admin, "/ready")).status === 200 ? true : undefined), 10_000);
  }, 60_000);

  it("says, when the stream ends, that nothing was accepted yet and the static config alone serves; no dangling 'Resolution note'", async () => {
    await cp.stop();
    const line = await waitFor("the stream's end", () => logLines(d).find((l) => String(l["msg"]).includes("ADS stream ended")), 10_000);
    expect(line["msg"]).toMatch(/before anything from the control plane was accepted.*static config alone serves/);
    expect(line["msg"]).not.toContain("keeps serving");
    // while it is gone, the stream waits for it rather than failing over and over
    await sleep(2500);
    const lines = logLines(d).map((l) => JSON.stringify(l));
    expect(lines.filter((l) => l.includes("Resolution note"))).toEqual([]);
    expect(logLines(d).filter((l) => String(l["msg"]).includes("ADS stream ended")).length).toBe(1);
  }, 60_000);

  it("logs where each listener the control plane sends is bound, once the file serves its node id", async () => {
    // the control plane stopped above comes back (started in this test: its cleanup stops it)
    await cp.start();
    await cp.push(MINE, "1", snapshot(port, up.address), true);
    // grpc-js's channel retries the address on its own back-off (1 s, x1.6, jittered), which has grown
    // while the control plane was down; on a loaded machine (CI: 2 cores) its next try can come
    // 15-20 s after the restart, so the bound is 45 s
    const bound = await waitFor("the listener's bound line", () => logLines(d).find((l) => l["msg"] === "listener bound" && l["listener"] === "xds-in"), 45_000);
    expect(bound).toMatchObject({ level: 30, address: `127.0.0.1:${port}`, trigger: "xds" });
    expect(await call(`127.0.0.1:${port}`)).toBe("up");
  }, 90_000);
});

describe("a dojang process whose control plane serves it at once", () => {
  it("is not ready while the control plane has nothing for it, then ready as soon as the first fetch is complete (long before initial_fetch_timeout, 60s), and routes at once", async () => {
    assertDistBuilt();
    const tmp = tempDir();
    const up = await startGrpcServer({ Unary: (_c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.from("up")) });
    const port = await freePort();
    const cp = await startControlPlane();
    try {
      const a = await freePort();
      const admin = `127.0.0.1:${a}`;
      const d = startDojang(tmp, a, cp.adsPort, "60s");
      // dojang has asked; the file does not serve its node id yet: not ready, saying why
      await waitFor("dojang's requests", async () => ((await cp.events()).some((e) => e.kind === "request" && e.node === MINE) ? true : undefined), 20_000);
      await waitFor("/ready answering", async () => ((await httpGet(admin, "/ready").catch(() => undefined))?.status === 503 ? true : undefined), 10_000);
      const waiting = await httpGet(admin, "/ready");
      expect(`${waiting.status} ${waiting.body}`).toMatch(/^503 xds: waiting for the initial fetch from the control plane at 127\.0\.0\.1:\d+ \(node id "sidecar~127\.0\.0\.1~mine\.default~cluster\.local"; at most 60s, initial_fetch_timeout\)/);
      // served: ready as soon as listener, routes, cluster and endpoints are all in, and routing
      const t0 = Date.now();
      await cp.push(MINE, "1", snapshot(port, up.address), true);
      await waitFor("/ready 200", async () => ((await httpGet(admin, "/ready").catch(() => undefined))?.status === 200 ? true : undefined), 30_000, 5).catch((err: Error) => {
        throw new Error(`${err.message}\n${d.stdout()}`);
      });
      expect(Date.now() - t0).toBeLessThan(30_000);
      expect(await call(`127.0.0.1:${port}`)).toBe("up");
      expect(await logLine(d, (l) => l["msg"] === "xds: the initial fetch is complete", "the initial fetch is complete")).toMatchObject({ listeners: ["xds-in"], clusters: ["svc"] });
    } finally {
      await cp.close();
      await up.close();
      tmp.remove();
    }
  }, 60_000);
});

describe("a dojang process whose control plane is not there", () => {
  it("warns after initial_fetch_timeout (1s) that the control plane has not been reachable, naming the node id, its cluster and the address; then is ready with its static config", async () => {
    assertDistBuilt();
    const tmp = tempDir();
    try {
      const [a, nobody] = [await freePort(), await freePort()];
      const admin = `127.0.0.1:${a}`;
      const d = startDojang(tmp, a, nobody, "1s");
      const warning = await waitFor("the warning", () => logLines(d).find((l) => l["level"] === 40 && String(l["msg"]).includes(MINE)), 20_000);
      expect(warning["msg"]).toBe(
        `xds: the control plane at 127.0.0.1:${nobody} has not been reachable in 1s (channel TRANSIENT_FAILURE) for node id "${MINE}" (cluster "test"); the static config alone serves`,
      );
      await waitFor("/ready 200", async () => ((await httpGet(admin, "/ready").catch(() => undefined))?.status === 200 ? true : undefined), 10_000);
      const cfg = JSON.parse((await httpGet(admin, "/config")).body) as { xds: { connected: boolean; channel: string; initialFetch: string } };
      expect(cfg.xds).toMatchObject({ connected: false, channel: "TRANSIENT_FAILURE", initialFetch: "timed out" });
      expect(sample(await scrape(admin), "dojang_xds_connected")).toBe(0);
      expect(await logLine(d, (l) => String(l["msg"]).startsWith("xds: the initial fetch did not complete"), "the initial fetch did not complete")).toMatchObject({ pending: ["cds", "lds"], afterMs: 1000 });
    } finally {
      tmp.remove();
    }
  }, 60_000);
});

describe("describeEnd(): why a stream ended, as the log says it", () => {
  // the details grpc-js gives (load-balancer-pick-first.ts, load-balancer-round-robin.ts)
  const err = (code: number, details: string) => Object.assign(new Error(`${code} ${grpc.status[code]}: ${details}`), { code, details, metadata: new grpc.Metadata() });
  it("names the code and keeps the details, without grpc-js's empty trailing 'Resolution note: '", () => {
    expect(describeEnd(err(14, "No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:18000. Resolution note: "))).toBe("UNAVAILABLE: No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:18000");
    expect(describeEnd(err(14, "Connection dropped"))).toBe("UNAVAILABLE: Connection dropped");
    expect(describeEnd(err(14, "No addresses resolved. Resolution note: DNS lookup failed"))).toBe("UNAVAILABLE: No addresses resolved. Resolution note: DNS lookup failed");
    expect(describeEnd(new Error("read ECONNRESET"))).toBe("read ECONNRESET");
  });
});
