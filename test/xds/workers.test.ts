// xDS with `workers: 2`, as real processes: the example control plane (go-control-plane v0.14.0,
// docs/examples/xds-control-plane) drives a dojang primary and its two workers. The primary holds
// the one ADS stream (the control plane's own log shows one stream for the node) and hands each
// update it accepts to every worker, ACKing only once all have applied it. The 0.4 xDS suite's
// continuous calls run over several connections (so both workers carry them) while endpoints
// move, a cluster and a route are added and a bad cluster is pushed: not one call may fail. After
// each ACK, calls over fresh connections show that every worker serves the new config: the
// upstream records the peer of each call, and the kernel's socket tables (/proc) say which worker
// process owns that connection. A bad cluster is NACKed with its name while the good one in the
// same response is applied (gRFC A46), and a worker started later (a replacement) gets the
// current xDS config before it listens.
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { echoClient, sample, scrape, startGrpcServer, type EchoClient, type GrpcServer } from "../helpers/peers.js";
import { assertDistBuilt, childEnv, freePort, httpGet, logLine, logLines, sleep, spawnDojang, tempDir, waitFor, waitReady, type DojangProcess } from "../helpers/process.js";
import { childPids, ownersOf } from "../helpers/sockets.js";
import { bootstrapYaml, cla, edsCluster, listener, route, routeConfig, startControlPlane, T, type ControlPlane, type CpEvent } from "./control-plane.js";

const NODE = "sidecar~127.0.0.1~workers-test.default~cluster.local";

interface Upstream {
  readonly name: string;
  readonly server: GrpcServer;
  /** the peer ("127.0.0.1:port") of every call it answered, in order */
  readonly peers: string[];
}

async function upstream(name: string): Promise<Upstream> {
  const peers: string[] = [];
  const server = await startGrpcServer({
    Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      peers.push(call.getPeer());
      cb(null, Buffer.from(name));
    },
  });
  return { name, server, peers };
}

function call(c: EchoClient): Promise<{ ok: boolean; who: string; err?: string }> {
  return new Promise((resolve) => {
    c.Unary(Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 10_000 }, (err, res) => {
      resolve(err === null ? { ok: true, who: res!.toString() } : { ok: false, who: "", err: `${err.code} ${err.details}` });
    });
  });
}

/** Calls without pause on each client (each its own connection, so both workers carry some) until stop(). */
function load(clients: readonly EchoClient[]): { results: { ok: boolean; who: string; err?: string; at: number }[]; stop(): Promise<void> } {
  const results: { ok: boolean; who: string; err?: string; at: number }[] = [];
  let on = true;
  const loops = clients.map(async (c) => {
    while (on) {
      results.push({ ...(await call(c)), at: Date.now() });
      await sleep(3);
    }
  });
  return {
    results,
    stop: async () => {
      on = false;
      await Promise.all(loops);
    },
  };
}

describe("xDS with workers: 2 (real processes, go-control-plane)", () => {
  let cp: ControlPlane;
  let a: Upstream, b: Upstream, c: Upstream;
  let p: DojangProcess;
  let admin: string;
  let xdsPort: number;
  const tmp = tempDir();
  const clients: EchoClient[] = [];
  let version = 0;

  const base = (eps: string[], extra: Partial<Record<string, unknown[]>> = {}): Partial<Record<string, unknown[]>> => ({
    [T.listener]: [listener("xds-in", xdsPort, "routes")],
    [T.route]: [routeConfig("routes", [route("/", "svc")])],
    [T.cluster]: [edsCluster("svc")],
    [T.endpoint]: [cla("svc", eps)],
    ...extra,
  });
  const push = async (res: Partial<Record<string, unknown[]>>, consistent = true): Promise<string> => {
    const v = String(++version);
    await cp.push(NODE, v, res, consistent);
    return v;
  };
  /** dojang's answer to `version` of `type` (an ACK echoes it; a NACK carries error_detail and the older version) */
  const answer = (type: string, since: number, nack: boolean, v?: string): Promise<CpEvent> =>
    waitFor(
      `${nack ? "NACK" : "ACK"} of ${type}${v === undefined ? "" : ` version ${v}`}`,
      async () =>
        (await cp.events(since)).find((e) => e.kind === "request" && e.typeUrl === type && (e.errorDetail !== undefined) === nack && e.nonce !== "" && (v === undefined || e.version === v)),
      30_000,
      50,
    ).catch((err: Error) => {
      throw new Error(`${err.message}\n${p.stdout().slice(-6000)}\n${p.stderr().slice(-2000)}`);
    });
  /** the two workers' pids */
  const workers = (): number[] => {
    const pids = childPids(p.pid);
    expect(pids).toHaveLength(2);
    return pids;
  };
  /**
   * `k` calls, each over a fresh connection (the primary hands connections to the workers in
   * turn): what answered, and which worker processes own the connections `up` saw them on.
   */
  const overFreshConnections = async (up: Upstream, k = 8): Promise<{ who: string[]; pids: Set<number | undefined> }> => {
    const from = up.peers.length;
    const who: string[] = [];
    for (let i = 0; i < k; i++) {
      const cl = echoClient(`127.0.0.1:${xdsPort}`, { "grpc.use_local_subchannel_pool": 1 });
      const r = await call(cl);
      cl.close();
      who.push(r.ok ? r.who : `error ${r.err}`);
    }
    const owners = ownersOf(new Set(up.peers.slice(from)), workers());
    return { who, pids: new Set(owners.values()) };
  };

  beforeAll(async () => {
    assertDistBuilt();
    [a, b, c] = await Promise.all([upstream("a"), upstream("b"), upstream("c")]);
    cp = await startControlPlane();
    xdsPort = await freePort();
    const adminPort = await freePort();
    admin = `127.0.0.1:${adminPort}`;
    const boot = tmp.write("bootstrap.yaml", bootstrapYaml(NODE, cp.adsPort));
    const file = tmp.write(
      "dojang.yaml",
      [`admin: { address: "${admin}" }`, "workers: 2", "logLevel: info", "accessLog: false", "drainTimeout: 5s", `xds: { bootstrap: "${boot}" }`, "listeners: []", "clusters: []", ""].join("\n"),
    );
    // served before dojang starts: /ready then means served by both workers
    await push(base([a.server.address]));
    p = spawnDojang(["--config", file], childEnv({ DOJANG_XDS_MISSING_MS: "1500", DOJANG_XDS_BACKOFF_MS: "100" }));
    await waitReady(p, admin, 30_000).catch((err: Error) => {
      throw new Error(`${err.message}\n${p.stdout()}\n${p.stderr()}`);
    });
    for (let i = 0; i < 4; i++) clients.push(echoClient(`127.0.0.1:${xdsPort}`, { "grpc.use_local_subchannel_pool": 1 }));
  }, 90_000);

  afterAll(async () => {
    for (const cl of clients) cl.close();
    if (p !== undefined && !p.hasExited) {
      p.child.kill("SIGTERM");
      await p.exited(15_000).catch(() => undefined);
    }
    await cp?.close();
    await Promise.all([a, b, c].filter((u) => u !== undefined).map((u) => u.server.close()));
    tmp.remove();
  }, 30_000);

  it("serves what the control plane sent from both workers, over the one ADS stream the primary holds", async () => {
    const r = await overFreshConnections(a);
    expect(r.who, `dojang's log:\n${p.stdout().slice(-6000)}`).toEqual(Array(8).fill("a"));
    expect(r.pids).toEqual(new Set(workers()));
    const ev = await cp.events();
    const opened = ev.filter((e) => e.kind === "open");
    expect(opened).toHaveLength(1);
    // every request the control plane got came on that one stream
    const requests = ev.filter((e) => e.kind === "request");
    expect(requests.length).toBeGreaterThanOrEqual(4);
    expect(new Set(requests.map((e) => e.stream))).toEqual(new Set([opened[0]!.stream]));
    const cfg = (await (await fetch(`http://${admin}/config`)).json()) as any;
    expect(cfg.xds.node).toBe(NODE);
    expect(cfg.xds.connected).toBe(true);
    expect(cfg.xds.initialFetch).toBe("complete");
    expect(cfg.xds.listeners).toEqual(["xds-in"]);
    expect(cfg.listeners.map((l: { name: string }) => l.name)).toEqual(["xds-in"]);
    expect(cfg.clusters.find((k: { name: string }) => k.name === "svc").endpoints).toEqual([{ host: "127.0.0.1", port: Number(a.server.address.split(":")[1]) }]);
    const clusters = (await (await fetch(`http://${admin}/clusters`)).json()) as any[];
    const svc = clusters.find((k) => k.name === "svc");
    expect(svc).toMatchObject({ source: "xds", xdsVersion: "1", xdsEndpointsVersion: "1" });
    expect(svc.workers).toHaveLength(2);
  }, 60_000);

  it("no call fails while endpoints move, a cluster and a route are added and a bad cluster is pushed; after each ACK every worker serves the new config", async () => {
    const l = load(clients);
    try {
      // endpoints move: a → b, c (an endpoint update: each worker applies the delta in place)
      let since = (await cp.events()).length;
      let v = await push(base([b.server.address, c.server.address]));
      await answer(T.endpoint, since, false, v);
      // the primary's line for it: applied in place (each worker got the delta), not by a reload.
      // Waited for: the line is logged before the ACK is sent, but reaches this test through the
      // primary's stdout pipe, which a loaded machine delivers after the control plane has the
      // ACK (a clean-clone run read the log too early and missed it)
      const ack = await logLine(p, (x) => x["msg"] === "xds: update accepted (ACK)" && x["type"] === "eds" && x["version"] === v, `the primary's ACK of eds ${v}`);
      expect(ack).toMatchObject({ how: "endpoints" });
      const moved = await overFreshConnections(b, 6);
      const movedC = await overFreshConnections(c, 6);
      expect([...moved.who, ...movedC.who].every((w) => w === "b" || w === "c")).toBe(true);
      expect(new Set([...moved.pids, ...movedC.pids])).toEqual(new Set(workers()));

      // a cluster is added and the route moves to it (a whole-state update: each worker reloads)
      since = (await cp.events()).length;
      const good = base([b.server.address, c.server.address], {
        [T.route]: [routeConfig("routes", [route("/test.Echo/", "svc2"), route("/", "svc")])],
        [T.cluster]: [edsCluster("svc"), edsCluster("svc2", { lb_policy: "LEAST_REQUEST" })],
        [T.endpoint]: [cla("svc", [b.server.address, c.server.address]), cla("svc2", [c.server.address])],
      });
      v = await push(good);
      await answer(T.route, since, false, v);
      await waitFor("svc2's endpoints ACKed", async () => (await cp.events(since)).find((e) => e.kind === "request" && e.typeUrl === T.endpoint && e.version === v && e.errorDetail === undefined && (e.resourceNames ?? []).includes("svc2")), 30_000, 50);
      const onC = await overFreshConnections(c, 8);
      expect(onC.who).toEqual(Array(8).fill("c"));
      expect(onC.pids).toEqual(new Set(workers()));

      // one response with a good new cluster and a bad one: the good one is applied in every
      // worker, the bad one NACKed by name and its last good version serves on (gRFC A46)
      since = (await cp.events()).length;
      const vb = await push({ ...good, [T.cluster]: [edsCluster("svc"), edsCluster("svc2", { lb_policy: "MAGLEV" }), edsCluster("svc3")], [T.endpoint]: [...good[T.endpoint]!, cla("svc3", [a.server.address])] }, false);
      const nack = await answer(T.cluster, since, true);
      expect(nack.errorDetail!.message).toBe('Cluster "svc2" lb_policy: MAGLEV is not supported (ROUND_ROBIN, LEAST_REQUEST, RANDOM)');
      expect(nack.version).toBe(v);
      const onC2 = await overFreshConnections(c, 8);
      expect(onC2.who).toEqual(Array(8).fill("c"));
      expect(onC2.pids).toEqual(new Set(workers()));
      const clusters = await waitFor(
        "svc3 in both workers",
        async () => ((ks: any[]) => (ks.find((k) => k.name === "svc3")?.workers.length === 2 ? ks : undefined))((await (await fetch(`http://${admin}/clusters`)).json()) as any[]),
        20_000,
        100,
      );
      expect(clusters.find((k) => k.name === "svc2").lb).toBe("least_request");
      const cfg = (await (await fetch(`http://${admin}/config`)).json()) as any;
      expect(cfg.xds.types.cds.version).toBe(v);
      expect(cfg.xds.types.cds.lastRejected).toMatchObject({ resources: ["svc2"] });
      // svc's bytes did not change: it keeps the version it was accepted in; svc3 is vb's, svc2 its last good one's
      expect(cfg.xds.types.cds.resources).toEqual({ svc: vb, svc2: v, svc3: vb });

      // back to a config with no bad resource
      since = (await cp.events()).length;
      v = await push(good);
      await answer(T.cluster, since, false, v);
    } finally {
      await l.stop();
    }
    expect(l.results.length).toBeGreaterThan(50);
    expect(l.results.filter((r) => !r.ok)).toEqual([]);
    // both workers carried the continuous calls
    const m = await scrape(admin);
    expect(sample(m, "dojang_xds_updates_total", { type: "cds", result: "rejected" })).toBeGreaterThanOrEqual(1);
    expect(sample(m, "dojang_xds_updates_total", { type: "eds", result: "accepted" })).toBeGreaterThanOrEqual(2);
    expect(sample(m, "dojang_xds_connected")).toBe(1);
    // still the one stream
    expect((await cp.events()).filter((e) => e.kind === "open")).toHaveLength(1);
  }, 240_000);

  it("a worker started later (a replacement) serves the current xDS config from its first call", async () => {
    const [victim, other] = workers();
    const before = logLines(p).filter((l) => l["msg"] === "worker died; starting another").length;
    process.kill(victim!, "SIGKILL");
    await waitFor("the replacement", () => (logLines(p).filter((l) => l["msg"] === "worker died; starting another").length > before ? true : undefined), 10_000);
    await waitReady(p, admin, 30_000);
    const pids = workers();
    expect(pids).toContain(other);
    expect(pids).not.toContain(victim);
    // the route to svc2 (endpoint c) came from the control plane: the replacement has it
    const r = await overFreshConnections(c, 8);
    expect(r.who).toEqual(Array(8).fill("c"));
    expect(r.pids).toEqual(new Set(pids));
    // and the control plane saw no second stream
    expect((await cp.events()).filter((e) => e.kind === "open")).toHaveLength(1);
    const ready = await httpGet(admin, "/ready");
    expect(ready.status).toBe(200);
  }, 90_000);
});
