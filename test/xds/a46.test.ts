// gRFC A46 (xDS NACK semantics) against go-control-plane (the example control plane): a response
// with a good and a bad resource applies the good one and NACKs the bad one by name, with the
// NACK's version_info the last version accepted whole; the bad resource's last good version keeps
// serving, and one that was never valid is absent (for EDS and RDS: does-not-exist at once, gRFC
// A88, not after the 15 s timer). Per type (CDS, LDS, RDS, EDS), state of the world and delta.
// What serves is judged by calls from a grpc-js client through two listeners, each routed to its
// own cluster; what was NACKed, by the control plane's own log.
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startDojang, type DojangHandle } from "../../src/index.js";
import { echoClient, startGrpcServer, type EchoClient, type GrpcServer } from "../helpers/peers.js";
import { freePort, tempDir, waitFor } from "../helpers/process.js";
import { bootstrapYaml, cla, edsCluster, listener, route, routeConfig, startControlPlane, T, type ControlPlane, type CpEvent } from "./control-plane.js";

interface Upstream {
  readonly name: string;
  readonly server: GrpcServer;
}

async function upstream(name: string): Promise<Upstream> {
  const server = await startGrpcServer({ Unary: (_c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.from(name)) });
  return { name, server };
}

function call(c: EchoClient): Promise<string> {
  return new Promise((resolve) => {
    c.Unary(Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 5_000 }, (err, res) => resolve(err === null ? res!.toString() : `error ${err.code}`));
  });
}

/** The answers of `n` calls (one name when they agree). */
async function answers(c: EchoClient, n = 6): Promise<string> {
  const s = new Set<string>();
  for (let i = 0; i < n; i++) s.add(await call(c));
  return [...s].sort().join(",");
}

/** A STATIC cluster (its endpoints inline) speaking HTTP/2. */
function staticCluster(name: string, addresses: readonly string[]): Record<string, unknown> {
  const { eds_cluster_config: _e, ...rest } = edsCluster(name);
  return { ...rest, type: "STATIC", load_assignment: cla(name, addresses) };
}

const badFilter = { name: "acme.filters.http.magic", typed_config: { "@type": "type.googleapis.com/google.protobuf.Empty" } };

function suite(apiType: "GRPC" | "DELTA_GRPC"): void {
  const delta = apiType === "DELTA_GRPC";
  const NODE = `a46-${delta ? "delta" : "sotw"}~127.0.0.1~dojang-test.default~cluster.local`;
  let cp: ControlPlane;
  let d: DojangHandle;
  let a: Upstream, b: Upstream, c: Upstream;
  let p1: number, p2: number, p3: number;
  let c1: EchoClient, c2: EchoClient, c3: EchoClient;
  const tmp = tempDir();
  let version = 0;

  /** L1 → r1 → svc (a); L2 → r2 → svc2 (b): each listener's calls say which cluster serves it */
  const baseline = (): Partial<Record<string, unknown[]>> => ({
    [T.listener]: [listener("L1", p1, "r1"), listener("L2", p2, "r2")],
    [T.route]: [routeConfig("r1", [route("/", "svc")]), routeConfig("r2", [route("/", "svc2")])],
    [T.cluster]: [edsCluster("svc"), edsCluster("svc2")],
    [T.endpoint]: [cla("svc", [a.server.address]), cla("svc2", [b.server.address])],
  });
  const push = async (res: Partial<Record<string, unknown[]>>): Promise<string> => {
    const v = String(++version);
    await cp.push(NODE, v, res, false);
    return v;
  };
  /** dojang's answer (ACK or NACK) to the control plane's response of `type` at `v` */
  const answerTo = (type: string, v: string, since: number): Promise<CpEvent> =>
    waitFor(
      `dojang's answer to ${type} version ${v}`,
      async () => {
        const ev = await cp.events(since);
        const nonces = new Set(ev.filter((e) => e.kind === "response" && e.typeUrl === type && e.version === v).map((e) => e.nonce));
        return ev.find((e) => (e.kind === "request" || e.kind === "delta") && e.typeUrl === type && e.nonce !== undefined && nonces.has(e.nonce));
      },
      30_000,
      50,
    );
  const config = async (): Promise<any> => (await fetch(`http://${d.adminAddress}/config`)).json();

  beforeAll(async () => {
    [a, b, c] = await Promise.all([upstream("a"), upstream("b"), upstream("c")]);
    cp = await startControlPlane();
    [p1, p2, p3] = [await freePort(), await freePort(), await freePort()];
    const boot = tmp.write("bootstrap.yaml", bootstrapYaml(NODE, cp.adsPort, apiType));
    // the does-not-exist timer far away: what is missing here is so at once, not by the timer
    process.env["DOJANG_XDS_MISSING_MS"] = "60000";
    process.env["DOJANG_XDS_BACKOFF_MS"] = "100";
    d = await startDojang({ config: { admin: { address: "127.0.0.1:0" }, logLevel: "silent", accessLog: false, listeners: [{ name: "static", address: "127.0.0.1:0", routes: [{ match: { prefix: "/" }, cluster: "static-backend" }] }], clusters: [{ name: "static-backend", endpoints: [a.server.address] }], xds: { bootstrap: boot } } });
    [c1, c2, c3] = [echoClient(`127.0.0.1:${p1}`), echoClient(`127.0.0.1:${p2}`), echoClient(`127.0.0.1:${p3}`)];
  }, 60_000);

  afterAll(async () => {
    for (const cl of [c1, c2, c3]) cl?.close();
    await d?.close(0);
    await cp?.close();
    await Promise.all([a, b, c].filter((u) => u !== undefined).map((u) => u.server.close()));
    tmp.remove();
    delete process.env["DOJANG_XDS_MISSING_MS"];
    delete process.env["DOJANG_XDS_BACKOFF_MS"];
  });

  beforeEach(async () => {
    // every case starts from the baseline, served and answered
    await push(baseline());
    await waitFor("the baseline served", async () => ((await answers(c1, 2)) === "a" && (await answers(c2, 2)) === "b" ? true : undefined), 30_000, 100);
  }, 60_000);

  it("CDS: the good cluster of the response serves, the bad one is NACKed by name and its last good version serves on", async () => {
    const since = (await cp.events()).length;
    const held = (await config()).xds.types.cds;
    const before = held.version;
    const v = await push({ ...baseline(), [T.cluster]: [staticCluster("svc", [c.server.address]), edsCluster("svc2", { lb_policy: "MAGLEV" })] });
    const nack = await answerTo(T.cluster, v, since);
    expect(nack.errorDetail?.message).toBe('Cluster "svc2" lb_policy: MAGLEV is not supported (ROUND_ROBIN, LEAST_REQUEST, RANDOM)');
    // state of the world: the NACK's version_info is the last version accepted whole (delta has none)
    if (!delta) expect(nack.version).toBe(before);
    await waitFor("svc (now STATIC, c) serves L1", async () => ((await answers(c1)) === "c" ? true : undefined), 20_000, 100);
    expect(await answers(c2)).toBe("b");
    const cds = (await config()).xds.types.cds;
    expect(cds.lastRejected).toEqual({ version: v, error: nack.errorDetail!.message, resources: ["svc2"] });
    // each resource's version: svc's is the response's (delta: its own, a digest), svc2 keeps the one it had
    if (delta) expect(cds.resources.svc).not.toBe(held.resources.svc);
    else expect(cds.resources.svc).toBe(v);
    expect(cds.resources.svc2).toBe(held.resources.svc2);
    if (!delta) expect(cds.version).toBe(before);
    const clusters = (await (await fetch(`http://${d.adminAddress}/clusters`)).json()) as { name: string; lb: string }[];
    expect(clusters.find((k) => k.name === "svc2")?.lb).toBe("round_robin");
  }, 60_000);

  it("LDS: the good listener's change serves, a bad change to another keeps its last good version, a bad new one is absent", async () => {
    const since = (await cp.events()).length;
    const v = await push({
      ...baseline(),
      // L1 moves to r2 (svc2, b); L2 gets a filter dojang cannot serve; L3 is new and bad
      [T.listener]: [listener("L1", p1, "r2"), listener("L2", p2, "r1", [badFilter]), listener("L3", p3, "r1", [badFilter])],
    });
    const nack = await answerTo(T.listener, v, since);
    expect(nack.errorDetail?.message).toContain('Listener "L2" filter_chains[0].filters[0].typed_config.http_filters[0]: filter "acme.filters.http.magic"');
    expect(nack.errorDetail?.message).toContain('Listener "L3" filter_chains[0]');
    await waitFor("L1 moved to r2 (b)", async () => ((await answers(c1)) === "b" ? true : undefined), 20_000, 100);
    // L2 serves as it did (r2: b), not r1
    expect(await answers(c2)).toBe("b");
    // L3 was never valid: nothing listens on its port
    expect(await answers(c3, 2)).toBe(`error ${grpc.status.UNAVAILABLE}`);
    const lds = (await config()).xds.types.lds;
    expect(lds.lastRejected.resources).toEqual(["L2", "L3"]);
    expect(Object.keys(lds.resources).sort()).toEqual(["L1", "L2"]);
  }, 60_000);

  it("RDS: the good route table's change serves, the bad one keeps its last good version", async () => {
    const since = (await cp.events()).length;
    const v = await push({
      ...baseline(),
      [T.route]: [routeConfig("r1", [route("/", "svc2")]), routeConfig("r2", [{ match: { safe_regex: { regex: ".*" } }, route: { cluster: "svc" } }])],
    });
    const nack = await answerTo(T.route, v, since);
    expect(nack.errorDetail?.message).toMatch(/^RouteConfiguration "r2" /);
    await waitFor("L1 routed by the new r1 (b)", async () => ((await answers(c1)) === "b" ? true : undefined), 20_000, 100);
    expect(await answers(c2)).toBe("b");
    expect((await config()).xds.types.rds.lastRejected.resources).toEqual(["r2"]);
  }, 60_000);

  it("EDS: the good assignment moves its cluster, the bad one keeps its cluster's last good endpoints", async () => {
    const since = (await cp.events()).length;
    const v = await push({ ...baseline(), [T.endpoint]: [cla("svc", [c.server.address]), cla("svc2", [a.server.address, a.server.address])] });
    const nack = await answerTo(T.endpoint, v, since);
    expect(nack.errorDetail?.message).toMatch(/^ClusterLoadAssignment "svc2" endpoints\[0\]\.lb_endpoints\[1\]\.endpoint\.address: duplicate address/);
    await waitFor("svc moved to c", async () => ((await answers(c1)) === "c" ? true : undefined), 20_000, 100);
    expect(await answers(c2)).toBe("b");
    expect((await config()).xds.types.eds.lastRejected.resources).toEqual(["svc2"]);
  }, 60_000);

  it("EDS: an assignment that was never valid is does-not-exist at once: its cluster serves with no endpoints (14), not after the 15 s timer", async () => {
    const since = (await cp.events()).length;
    const v = await push({
      ...baseline(),
      [T.route]: [routeConfig("r1", [route("/", "svc4")]), routeConfig("r2", [route("/", "svc2")])],
      [T.cluster]: [edsCluster("svc"), edsCluster("svc2"), edsCluster("svc4")],
      [T.endpoint]: [cla("svc", [a.server.address]), cla("svc2", [b.server.address]), cla("svc4", [c.server.address, c.server.address])],
    });
    await answerTo(T.cluster, v, since);
    const t0 = Date.now();
    await waitFor("svc4's calls end 14", async () => ((await answers(c1, 2)) === `error ${grpc.status.UNAVAILABLE}` ? true : undefined), 20_000, 100);
    // far sooner than the does-not-exist timer (60 s here)
    expect(Date.now() - t0).toBeLessThan(20_000);
    const eds = (await config()).xds.types.eds;
    expect(eds.missing).toEqual(["svc4"]);
    expect(eds.lastRejected.resources).toEqual(["svc4"]);
    expect(await answers(c2)).toBe("b");
  }, 60_000);
}

describe("gRFC A46 over state-of-the-world ADS (go-control-plane)", () => suite("GRPC"));
describe("gRFC A46 over delta ADS (go-control-plane)", () => suite("DELTA_GRPC"));
