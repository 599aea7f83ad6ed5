// dojang configured by a real control plane (go-control-plane's SnapshotCache over ADS: the
// example docs/examples/xds-control-plane, driven through its snapshot file): listeners, routes, clusters and endpoints pushed as
// snapshots while grpc-js clients call through dojang without pause; not one call may fail
// across endpoint moves, a new cluster, a route change, a refused (NACKed) resource and a
// restart of the control plane. Also: the NACK's error_detail names the field, the last good
// config keeps serving, /config and /clusters show what came from xDS with its versions, the
// update metrics, a resource that never arrives is marked missing, static and dynamic together.
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDojang, type DojangHandle } from "../../src/index.js";
import { echoClient, sample, scrape, startGrpcServer, type EchoClient, type GrpcServer } from "../helpers/peers.js";
import { freePort, sleep, tempDir, waitFor } from "../helpers/process.js";
import { bootstrapYaml, cla, edsCluster, listener, route, routeConfig, startControlPlane, T, type ControlPlane, type CpEvent } from "./control-plane.js";

const NODE = "sidecar~127.0.0.1~dojang-test.default~cluster.local";

interface Upstream {
  readonly name: string;
  readonly server: GrpcServer;
}

async function upstream(name: string): Promise<Upstream> {
  const server = await startGrpcServer({
    Unary: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.from(name)),
    // ten messages 100 ms apart: a call that is in flight while the control plane changes things
    ServerStream: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
      let n = 0;
      const t = setInterval(() => {
        call.write(Buffer.from(`${name}${n}`));
        if (++n === 10) {
          clearInterval(t);
          call.end();
        }
      }, 100);
      call.on("cancelled", () => clearInterval(t));
    },
  });
  return { name, server };
}

function call(c: EchoClient): Promise<{ ok: boolean; who: string; err?: string }> {
  return new Promise((resolve) => {
    c.Unary(Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 10_000 }, (err, res) => {
      resolve(err === null ? { ok: true, who: res!.toString() } : { ok: false, who: "", err: `${err.code} ${err.details}` });
    });
  });
}

/** Calls without pause from `workers` loops until stop(); every result is kept. */
function load(c: EchoClient, workers = 3): { results: { ok: boolean; who: string; err?: string; at: number }[]; stop(): Promise<void> } {
  const results: { ok: boolean; who: string; err?: string; at: number }[] = [];
  let on = true;
  const loops = Array.from({ length: workers }, async () => {
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

async function json(admin: string, path: string): Promise<any> {
  return (await fetch(`http://${admin}${path}`)).json();
}

describe("xDS: dojang configured by go-control-plane over ADS", () => {
  let cp: ControlPlane;
  let d: DojangHandle;
  let a: Upstream, b: Upstream, c: Upstream;
  let xdsPort: number;
  let client: EchoClient;
  let staticClient: EchoClient;
  const tmp = tempDir();
  let version = 0;

  /** the snapshot the tests build on: listener xds-in → RDS "routes" → cluster svc (EDS) */
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
  /** the request that answers `version` of `type` (an ACK echoes it; a NACK carries error_detail) */
  const answer = (type: string, nonceAfter: number, nack: boolean, says?: RegExp): Promise<CpEvent> =>
    waitFor(
      `${nack ? "NACK" : "ACK"} of ${type}`,
      async () =>
        (await cp.events(nonceAfter)).find(
          (e) => e.kind === "request" && e.typeUrl === type && (e.errorDetail !== undefined) === nack && e.nonce !== "" && (says === undefined || says.test(e.errorDetail?.message ?? "")),
        ),
      30_000,
      50,
    );
  const whoAnswers = async (cl: EchoClient, n = 12): Promise<Set<string>> => {
    const s = new Set<string>();
    for (let i = 0; i < n; i++) {
      const r = await call(cl);
      if (r.ok) s.add(r.who);
    }
    return s;
  };

  beforeAll(async () => {
    [a, b, c] = await Promise.all([upstream("a"), upstream("b"), upstream("c")]);
    cp = await startControlPlane();
    xdsPort = await freePort();
    const boot = tmp.write("bootstrap.yaml", bootstrapYaml(NODE, cp.adsPort));
    // the does-not-exist timer (15 s by default) and the reconnect back-off, shortened so the
    // tests' time stays bounded
    process.env["DOJANG_XDS_MISSING_MS"] = "1500";
    process.env["DOJANG_XDS_BACKOFF_MS"] = "100";
    d = await startDojang({
      config: {
        admin: { address: "127.0.0.1:0" },
        logLevel: "warn",
        accessLog: false,
        listeners: [{ name: "static", address: "127.0.0.1:0", routes: [{ match: { prefix: "/" }, cluster: "static-backend" }] }],
        clusters: [{ name: "static-backend", endpoints: [a.server.address] }],
        xds: { bootstrap: boot },
      },
    });
    client = echoClient(`127.0.0.1:${xdsPort}`);
    staticClient = echoClient(d.address);
  }, 60_000);

  afterAll(async () => {
    client?.close();
    staticClient?.close();
    await d?.close(0);
    await cp?.close();
    await Promise.all([a, b, c].filter((u) => u !== undefined).map((u) => u.server.close()));
    tmp.remove();
    delete process.env["DOJANG_XDS_MISSING_MS"];
    delete process.env["DOJANG_XDS_BACKOFF_MS"];
  });

  it("serves a listener, route, cluster and endpoints from the control plane, beside the static ones; /config and /clusters show them with versions", async () => {
    const v = await push(base([a.server.address]));
    await waitFor("a call through the xDS listener", async () => ((await call(client)).ok ? true : undefined), 30_000, 100);
    expect(await whoAnswers(client)).toEqual(new Set(["a"]));
    expect(await whoAnswers(staticClient)).toEqual(new Set(["a"]));
    const cfg = await json(d.adminAddress!, "/config");
    expect(cfg.xds.node).toBe(NODE);
    expect(cfg.xds.connected).toBe(true);
    for (const t of ["lds", "rds", "cds", "eds"]) expect(cfg.xds.types[t].version, t).toBe(v);
    expect(cfg.xds.types.cds.resources).toEqual({ svc: v });
    expect(cfg.xds.types.eds.subscribed).toEqual(["svc"]);
    expect(cfg.xds.listeners).toEqual(["xds-in"]);
    expect(cfg.xds.clusters).toEqual(["svc"]);
    expect(cfg.listeners.map((l: { name: string }) => l.name)).toEqual(["static", "xds-in"]);
    const clusters = await json(d.adminAddress!, "/clusters");
    const svc = clusters.find((k: { name: string }) => k.name === "svc");
    expect(svc).toMatchObject({ source: "xds", xdsVersion: v, xdsEndpointsVersion: v });
    expect(clusters.find((k: { name: string }) => k.name === "static-backend").source).toBeUndefined();
  }, 60_000);

  it("no call fails while endpoints move, a cluster is added, a route changes, and a bad resource is pushed", async () => {
    const l = load(client);
    try {
      // endpoints move: a → b, c
      let since = (await cp.events()).length;
      await push(base([b.server.address, c.server.address]));
      await answer(T.endpoint, since, false);
      await waitFor("only b and c answer", async () => ((s) => (s.has("a") ? undefined : s))(await whoAnswers(client)), 20_000, 50);

      // a cluster is added and the route moves to it
      since = (await cp.events()).length;
      const good = base([b.server.address, c.server.address], {
        [T.route]: [routeConfig("routes", [route("/test.Echo/", "svc2"), route("/", "svc")])],
        [T.cluster]: [edsCluster("svc"), edsCluster("svc2", { lb_policy: "LEAST_REQUEST" })],
        [T.endpoint]: [cla("svc", [b.server.address, c.server.address]), cla("svc2", [c.server.address])],
      });
      const goodVersion = await push(good);
      await answer(T.route, since, false);
      await waitFor("only c answers (svc2)", async () => ((s) => (s.size === 1 && s.has("c") ? s : undefined))(await whoAnswers(client)), 20_000, 50);

      // a cluster dojang cannot serve: NACKed, naming the field; the last good config serves on
      since = (await cp.events()).length;
      await push({ ...good, [T.cluster]: [edsCluster("svc"), edsCluster("svc2", { lb_policy: "MAGLEV" })] }, false);
      const nack = await answer(T.cluster, since, true);
      expect(nack.errorDetail!.message).toContain('Cluster "svc2" lb_policy: MAGLEV is not supported');
      expect(nack.version).toBe(goodVersion);
      expect(await whoAnswers(client)).toEqual(new Set(["c"]));
      const cfg = await json(d.adminAddress!, "/config");
      expect(cfg.xds.types.cds.version).toBe(goodVersion);
      expect(cfg.xds.types.cds.lastRejected.error).toContain("lb_policy");

      // a cluster that does not say HTTP/2 (Envoy would speak HTTP/1.1 to it): NACKed, naming the field
      since = (await cp.events()).length;
      const { typed_extension_protocol_options: _, ...http1 } = edsCluster("svc2");
      await push({ ...good, [T.cluster]: [edsCluster("svc"), http1] }, false);
      const h1 = await answer(T.cluster, since, true, /typed_extension_protocol_options/);
      expect(h1.errorDetail!.message).toContain('Cluster "svc2" typed_extension_protocol_options: gRPC needs HTTP/2 to the upstream');
      expect(h1.version).toBe(goodVersion);
      expect(await whoAnswers(client)).toEqual(new Set(["c"]));

    } finally {
      await l.stop();
    }
    const failed = l.results.filter((r) => !r.ok);
    expect(l.results.length).toBeGreaterThan(50);
    expect(failed).toEqual([]);
  }, 180_000);

  it("counts accepted and rejected updates per type", async () => {
    const m = await scrape(d.adminAddress);
    expect(sample(m, "dojang_xds_updates_total", { type: "cds", result: "rejected" })).toBeGreaterThanOrEqual(1);
    expect(sample(m, "dojang_xds_updates_total", { type: "eds", result: "accepted" })).toBeGreaterThanOrEqual(2);
    expect(sample(m, "dojang_xds_updates_total", { type: "lds", result: "rejected" })).toBe(0);
    expect(sample(m, "dojang_xds_connected")).toBe(1);
  });

  it("marks an EDS resource that never arrives missing after the does-not-exist timer, and serves its cluster with no endpoints", async () => {
    const since = (await cp.events()).length;
    await push(
      base([b.server.address], {
        [T.route]: [routeConfig("routes", [route("/test.Echo/", "ghost"), route("/", "svc")])],
        [T.cluster]: [edsCluster("svc"), edsCluster("ghost")],
        [T.endpoint]: [cla("svc", [b.server.address])],
      }),
      false,
    );
    await answer(T.cluster, since, false);
    const cfg = await waitFor("ghost marked missing", async () => ((x) => (x.xds.types.eds.missing.includes("ghost") ? x : undefined))(await json(d.adminAddress!, "/config")), 20_000, 100);
    expect(cfg.clusters.find((k: { name: string }) => k.name === "ghost").endpoints).toEqual([]);
    const r = await call(client);
    expect(r.ok).toBe(false);
    expect(r.err).toMatch(/^14 /);
  }, 60_000);

  it("refuses a dynamic listener whose name a static listener has, and an unknown required filter; skips an optional one", async () => {
    let since = (await cp.events()).length;
    await push(base([b.server.address], { [T.listener]: [listener("static", xdsPort, "routes")] }));
    let nack = await answer(T.listener, since, true);
    expect(nack.errorDetail!.message).toContain("listener static: a static listener has this name");
    since = (await cp.events()).length;
    const unknown = { name: "acme.filters.http.magic", typed_config: { "@type": "type.googleapis.com/google.protobuf.Empty" } };
    await push(base([b.server.address], { [T.listener]: [listener("xds-in", xdsPort, "routes", [unknown])] }));
    nack = await answer(T.listener, since, true, /magic/);
    expect(nack.errorDetail!.message).toMatch(/Listener "xds-in" filter_chains\[0\]\.filters\[0\]\.typed_config\.http_filters\[0\]: filter "acme\.filters\.http\.magic" \(google\.protobuf\.Empty\) is not supported and not is_optional/);
    // optional: skipped, and the listener serves
    since = (await cp.events()).length;
    await push(base([b.server.address], { [T.listener]: [listener("xds-in", xdsPort, "routes", [{ ...unknown, is_optional: true }])] }));
    await answer(T.listener, since, false);
    expect(await whoAnswers(client)).toEqual(new Set(["b"]));
  }, 60_000);

  it("a call in flight finishes on the endpoint it started with while EDS moves the cluster away from it", async () => {
    const got: string[] = [];
    const stream = client.ServerStream(Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 20_000 });
    const done = new Promise<grpc.StatusObject>((resolve) => {
      stream.on("data", (m: Buffer) => got.push(m.toString()));
      stream.on("error", () => undefined);
      stream.on("status", resolve);
    });
    await waitFor("the first message", () => (got.length > 0 ? true : undefined), 10_000, 10);
    const since = (await cp.events()).length;
    await push(base([c.server.address]));
    await answer(T.endpoint, since, false);
    expect(await whoAnswers(client)).toEqual(new Set(["c"]));
    const status = await done;
    expect(status.code).toBe(grpc.status.OK);
    expect(got).toEqual(Array.from({ length: 10 }, (_, i) => `b${i}`));
  }, 60_000);

  it("no call fails while the control plane restarts: dojang reconnects with back-off and resumes with the versions it accepted", async () => {
    const good = base([c.server.address]);
    let since = (await cp.events()).length;
    const goodVersion = await push(good);
    await answer(T.endpoint, since, false);
    await waitFor("c answers", async () => ((s) => (s.size === 1 && s.has("c") ? s : undefined))(await whoAnswers(client)), 20_000, 50);
    const l = load(client);
    try {
      // a crash, then the same program on the same port and file (started inside this test, so
      // the test's cleanup stops it)
      await cp.stop();
      await sleep(1000);
      await cp.start();
      const opened = await waitFor("dojang's new stream", async () => (await cp.events()).find((e) => e.kind === "request" && e.typeUrl === T.cluster), 30_000, 50);
      expect(opened.node).toBe(NODE);
      expect(opened.version).toBe(goodVersion);
      // the same resources as a newer version: the control plane answers, dojang ACKs
      since = (await cp.events()).length;
      await push(good);
      await answer(T.cluster, since, false);
      await waitFor("the stream is up again", async () => ((x) => (x.xds.connected ? x : undefined))(await json(d.adminAddress!, "/config")), 30_000, 100);
      expect(await whoAnswers(client)).toEqual(new Set(["c"]));
    } finally {
      await l.stop();
    }
    expect(l.results.length).toBeGreaterThan(20);
    expect(l.results.filter((r) => !r.ok)).toEqual([]);
    const log = (await cp.events()).filter((e) => e.kind === "request" && e.errorDetail !== undefined);
    expect(log).toEqual([]);
  }, 120_000);

});
