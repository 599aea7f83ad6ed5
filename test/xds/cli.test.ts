// The command line with xDS, as a real dojang process: `--xds-bootstrap` beside a config file with
// its own listener and cluster, a SIGHUP reload of the file that keeps what the control plane
// sent, and a bad bootstrap refused at start with its fields named.
import * as grpc from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { echoClient, sample, scrape, startGrpcServer } from "../helpers/peers.js";
import { assertDistBuilt, freePort, runCli, spawnDojang, tempDir, waitFor, waitReady } from "../helpers/process.js";
import { bootstrapYaml, cla, edsCluster, listener, route, routeConfig, startControlPlane, T } from "./control-plane.js";

describe("dojang --xds-bootstrap (a process)", () => {
  it("serves what the control plane sends beside the file's own listener, and a SIGHUP reload of the file keeps it", async () => {
    assertDistBuilt();
    const tmp = tempDir();
    const up = await startGrpcServer({ Unary: (_c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.from("up")) });
    const cp = await startControlPlane();
    const [admin, port, own] = [await freePort(), await freePort(), await freePort()];
    const boot = tmp.write("bootstrap.yaml", bootstrapYaml("cli-node", cp.adsPort));
    const cfg = tmp.write(
      "dojang.yaml",
      `admin: { address: 127.0.0.1:${admin} }\nlisteners: [{ name: own, address: 127.0.0.1:${own}, routes: [{ match: { prefix: / }, cluster: app }] }]\nclusters: [{ name: app, endpoints: ["${up.address}"] }]\n`,
    );
    // what the control plane serves is in its file before dojang starts: /ready then means served
    await cp.push("cli-node", "1", {
      [T.listener]: [listener("from-xds", port, "r")],
      [T.route]: [routeConfig("r", [route("/", "svc")])],
      [T.cluster]: [edsCluster("svc")],
      [T.endpoint]: [cla("svc", [up.address])],
    });
    const d = spawnDojang(["--config", cfg, "--xds-bootstrap", boot]);
    const client = echoClient(`127.0.0.1:${port}`);
    try {
      await waitReady(d, `127.0.0.1:${admin}`, 30_000);
      const call = () => new Promise<string>((r) => client.Unary(Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 5000 }, (e, res) => r(e === null ? res!.toString() : `error ${e.code}`)));
      expect(await call()).toBe("up");
      d.child.kill("SIGHUP");
      await waitFor("the reload", async () => (sample(await scrape(`127.0.0.1:${admin}`), "dojang_config_reloads_total", { result: "ok" }) === 1 ? true : undefined), 20_000, 100).catch((err: Error) => {
        throw new Error(`${err.message}\n${d.stdout()}\n${d.stderr()}`);
      });
      expect(await call()).toBe("up");
      const config = (await (await fetch(`http://127.0.0.1:${admin}/config`)).json()) as { xds: { bootstrap: string; listeners: string[] } };
      expect(config.xds.bootstrap).toBe(boot);
      expect(config.xds.listeners).toEqual(["from-xds"]);
      const ownClient = echoClient(`127.0.0.1:${own}`);
      const viaOwn = await new Promise<string>((r) => ownClient.Unary(Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 5000 }, (e, res) => r(e === null ? res!.toString() : `error ${e.code}`)));
      ownClient.close();
      expect(viaOwn).toBe("up");
    } finally {
      client.close();
      await up.close();
      await cp.close();
      tmp.remove();
    }
  }, 120_000);

  it("refuses a bootstrap without node.id or the control plane's cluster, naming the fields (exit 2)", async () => {
    assertDistBuilt();
    const tmp = tempDir();
    try {
      const boot = tmp.write("bad.yaml", "node: { cluster: c }\ndynamic_resources:\n  ads_config: { api_type: GRPC, grpc_services: [{ envoy_grpc: { cluster_name: cp } }] }\n");
      const r = await runCli(["--check", "--config", "config/dojang.yaml", "--xds-bootstrap", boot]);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain("node.id: is required");
      expect(r.stderr).toContain('static_resources.clusters: needs the control plane\'s cluster "cp"');
    } finally {
      tmp.remove();
    }
  }, 60_000);
});
