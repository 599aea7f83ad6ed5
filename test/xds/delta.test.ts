// Incremental (delta) xDS against go-control-plane (bootstrap api_type DELTA_GRPC): the same
// mapping and reload, with per-resource versions, subscriptions and removals. Calls go on without
// pause while endpoints move; a refused resource is NACKed naming its field; a removed cluster's
// route falls back to another.
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDojang, type DojangHandle } from "../../src/index.js";
import { CertDir } from "../helpers/certs.js";
import { ECHO_SERVICE, echoClient, startGrpcServer, type EchoClient, type GrpcServer } from "../helpers/peers.js";
import { freePort, sleep, tempDir, waitFor } from "../helpers/process.js";
import { bootstrapYaml, cla, edsCluster, listener, route, routeConfig, startControlPlane, T, type ControlPlane, type CpEvent } from "./control-plane.js";

const NODE = "delta-node";

describe("xDS: incremental (delta) ADS against go-control-plane", () => {
  let cp: ControlPlane;
  let d: DojangHandle;
  let ups: GrpcServer[];
  let client: EchoClient;
  let port: number;
  const tmp = tempDir();
  let version = 0;
  const call = (): Promise<string> =>
    new Promise((r) => client.Unary(Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 10_000 }, (e, res) => r(e === null ? res!.toString() : `error ${e.code} ${e.details}`)));
  const snap = (eps: string[], clusters = [edsCluster("svc")], routes = [route("/", "svc")]) => ({
    [T.listener]: [listener("in", port, "routes")],
    [T.route]: [routeConfig("routes", routes)],
    [T.cluster]: clusters,
    [T.endpoint]: [cla("svc", eps)],
  });
  const push = async (res: Partial<Record<string, unknown[]>>, consistent = true) => cp.push(NODE, String(++version), res, consistent);
  const deltaAnswer = (type: string, since: number, nack: boolean): Promise<CpEvent> =>
    waitFor(`delta ${nack ? "NACK" : "ACK"} of ${type}`, async () => (await cp.events(since)).find((e) => e.kind === "delta" && e.typeUrl === type && e.nonce !== "" && (e.errorDetail !== undefined) === nack), 30_000, 50);

  beforeAll(async () => {
    ups = await Promise.all(["a", "b"].map((n) => startGrpcServer({ Unary: (_c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.from(n)) })));
    cp = await startControlPlane();
    port = await freePort();
    d = await startDojang({
      config: {
        admin: { address: "127.0.0.1:0" },
        logLevel: "warn",
        accessLog: false,
        listeners: [{ name: "static", address: "127.0.0.1:0", routes: [{ match: { prefix: "/" }, cluster: "static" }] }],
        clusters: [{ name: "static", endpoints: [ups[0]!.address] }],
        xds: { bootstrap: tmp.write("bootstrap.yaml", bootstrapYaml(NODE, cp.adsPort, "DELTA_GRPC")) },
      },
    });
    client = echoClient(`127.0.0.1:${port}`);
  }, 60_000);

  afterAll(async () => {
    client?.close();
    await d?.close(0);
    await cp?.close();
    await Promise.all((ups ?? []).map((u) => u.close()));
    tmp.remove();
  });

  it("serves what the delta stream sends and moves endpoints with no failed call", async () => {
    await push(snap([ups[0]!.address]));
    await waitFor("a call through the delta-configured listener", async () => ((await call()) === "a" ? true : undefined), 30_000, 100);
    const results: string[] = [];
    let on = true;
    const loop = (async () => {
      while (on) {
        results.push(await call());
        await sleep(3);
      }
    })();
    try {
      await push(snap([ups[1]!.address]));
      await waitFor("b answers", async () => ((await call()) === "b" ? true : undefined), 20_000, 50);
      await push(snap([ups[0]!.address, ups[1]!.address]));
      await waitFor("a and b answer", async () => {
        const seen = new Set([await call(), await call(), await call(), await call()]);
        return seen.has("a") && seen.has("b") ? true : undefined;
      }, 20_000, 50);
      await sleep(500);
    } finally {
      on = false;
      await loop;
    }
    expect(results.length).toBeGreaterThan(5);
    expect(results.filter((r) => r !== "a" && r !== "b")).toEqual([]);
    const cfg = (await (await fetch(`http://${d.adminAddress}/config`)).json()) as { xds: { apiType: string; types: Record<string, { resources: Record<string, string> }> } };
    expect(cfg.xds.apiType).toBe("DELTA_GRPC");
    expect(Object.keys(cfg.xds.types["eds"]!.resources)).toEqual(["svc"]);
  }, 120_000);

  it("NACKs a resource it cannot serve, naming the field, and keeps serving", async () => {
    const since = (await cp.events()).length;
    await push(snap([ups[1]!.address], [edsCluster("svc", { lb_policy: "RING_HASH" })]), false);
    const nack = await deltaAnswer(T.cluster, since, true);
    expect(nack.errorDetail!.message).toContain('Cluster "svc" lb_policy: RING_HASH is not supported');
    expect(["a", "b"]).toContain(await call());
  }, 60_000);

  it("removes a cluster the control plane stops sending", async () => {
    await push({ ...snap([ups[1]!.address], [edsCluster("svc"), edsCluster("extra")]), [T.endpoint]: [cla("svc", [ups[1]!.address]), cla("extra", [ups[0]!.address])] });
    await waitFor("extra is served", async () => ((await (await fetch(`http://${d.adminAddress}/config`)).json()) as { xds: { clusters: string[] } }).xds.clusters.includes("extra") || undefined, 20_000, 100);
    await push(snap([ups[1]!.address]));
    await waitFor("extra is gone", async () => (((await (await fetch(`http://${d.adminAddress}/config`)).json()) as { xds: { clusters: string[] } }).xds.clusters.includes("extra") ? undefined : true), 20_000, 100);
    expect(await call()).toBe("b");
  }, 60_000);

  it("applies the fault filter's abort from the control plane, and stops when it is taken out", async () => {
    const fault = { name: "envoy.filters.http.fault", typed_config: { "@type": "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault", abort: { grpc_status: 7, percentage: { numerator: 100 } } } };
    await push({ ...snap([ups[1]!.address]), [T.listener]: [listener("in", port, "routes", [fault])] });
    await waitFor("calls end 7 PERMISSION_DENIED", async () => ((await call()).startsWith("error 7 ") ? true : undefined), 20_000, 100);
    await push(snap([ups[1]!.address]));
    await waitFor("calls succeed again", async () => ((await call()) === "b" ? true : undefined), 20_000, 100);
  }, 60_000);

  it("connects to a cluster over TLS with the CA given inline in its UpstreamTlsContext", async () => {
    const certs = new CertDir();
    const ca = certs.ca("xds-ca");
    const leaf = certs.leaf(ca, "backend", { cn: "backend.internal", dns: ["backend.internal"] });
    const server = new grpc.Server();
    server.addService(ECHO_SERVICE, { Unary: (_c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.from("tls")) });
    const tlsPort = await new Promise<number>((res, rej) =>
      server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createSsl(null, [{ cert_chain: leaf.cert, private_key: leaf.key }], false), (e, p) => (e ? rej(e) : res(p))),
    );
    const tls = { address: `127.0.0.1:${tlsPort}`, close: () => new Promise<void>((r) => server.tryShutdown(() => r())) };
    try {
      const transport = {
        name: "envoy.transport_sockets.tls",
        typed_config: {
          "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
          sni: "backend.internal",
          common_tls_context: { validation_context: { trusted_ca: { inline_string: ca.cert.toString() } } },
        },
      };
      await push({
        ...snap([ups[1]!.address], [edsCluster("svc"), edsCluster("secure", { transport_socket: transport })], [route("/", "secure")]),
        [T.endpoint]: [cla("svc", [ups[1]!.address]), cla("secure", [tls.address])],
      });
      await waitFor("a call over TLS to the upstream", async () => ((await call()) === "tls" ? true : undefined), 20_000, 100);
      const cfg = (await (await fetch(`http://${d.adminAddress}/config`)).json()) as { clusters: { name: string; tls: { caFile: string; serverName: string } | null }[] };
      const secure = cfg.clusters.find((c) => c.name === "secure")!;
      expect(secure.tls!.serverName).toBe("backend.internal");
      expect(secure.tls!.caFile).toMatch(/secure\.ca\.[0-9a-f]{16}\.pem$/);
    } finally {
      await tls.close();
      certs.remove();
    }
  }, 60_000);
});
