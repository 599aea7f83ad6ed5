// Endpoint updates without a reload (0.7 item 3), against go-control-plane (the example control
// plane): an EDS update changes only the cluster's endpoint set. The listeners, routes and
// filters are not rebuilt (a local rate limit's spent bucket stays spent, where a reload would
// refill it); endpoints that stay keep their sessions (the upstream sees no new connection),
// their outlier ejection and their in-flight counts (least_request still steers away from an
// endpoint busy with calls that started before the update); a new endpoint connects when first
// picked, not before; a removed one drains (its long stream finishes, no new call reaches it);
// and not one call of a continuous load fails meanwhile. Judged by grpc-js clients and by what
// the upstreams saw (their calls, peers and connections).
import * as grpc from "@grpc/grpc-js";
import { createServer, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDojang, type DojangHandle } from "../../src/index.js";
import { echoClient, startGrpcServer, type EchoClient, type GrpcServer } from "../helpers/peers.js";
import { freePort, sleep, tempDir, waitFor } from "../helpers/process.js";
import { bootstrapYaml, cla, edsCluster, listener, route, routeConfig, startControlPlane, T, type ControlPlane, type CpEvent } from "./control-plane.js";

const NODE = "sidecar~127.0.0.1~endpoints-test.default~cluster.local";

interface Upstream {
  readonly name: string;
  readonly server: GrpcServer;
  /** the peer of each call (dojang's connection it came on) */
  readonly peers: string[];
  /** answer Unary with this status instead of the name (undefined: OK) */
  failWith: number | undefined;
}

async function upstream(name: string): Promise<Upstream> {
  const u: { -readonly [K in keyof Upstream]: Upstream[K] } = { name, server: undefined as unknown as GrpcServer, peers: [], failWith: undefined };
  u.server = await startGrpcServer({
    Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      u.peers.push(call.getPeer());
      const ms = Number(call.request.toString()) || 0;
      const answer = (): void => (u.failWith === undefined ? cb(null, Buffer.from(name)) : cb({ code: u.failWith, details: `${name} fails` }));
      if (ms > 0) setTimeout(answer, ms);
      else answer();
    },
    // ten messages 100 ms apart: a call in flight across the update
    ServerStream: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
      u.peers.push(call.getPeer());
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
  return u;
}

function call(c: EchoClient, payload = "x"): Promise<{ ok: boolean; who: string; code?: number }> {
  return new Promise((resolve) => {
    c.Unary(Buffer.from(payload), new grpc.Metadata(), { deadline: Date.now() + 10_000 }, (err, res) => {
      resolve(err === null ? { ok: true, who: res!.toString() } : { ok: false, who: "", code: err.code });
    });
  });
}

const LIMITED = {
  name: "envoy.filters.http.local_ratelimit",
  typed_config: {
    "@type": "type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit",
    stat_prefix: "rl",
    token_bucket: { max_tokens: 3, tokens_per_fill: 1, fill_interval: "3600s" },
    filter_enabled: { default_value: { numerator: 100, denominator: "HUNDRED" }, runtime_key: "rl_enabled" },
    filter_enforced: { default_value: { numerator: 100, denominator: "HUNDRED" }, runtime_key: "rl_enforced" },
  },
};

describe("EDS updates applied to the cluster in place (go-control-plane)", () => {
  let cp: ControlPlane;
  let d: DojangHandle;
  let ups: Upstream[];
  let inPort: number, limitedPort: number;
  let client: EchoClient, limitedClient: EchoClient;
  const tmp = tempDir();
  let version = 0;

  /** listeners "in" and "limited" (a local rate limit of 3 calls an hour) → svc; `cluster` its extra Cluster fields */
  const snapshot = (eps: readonly string[], cluster: Record<string, unknown> = {}): Partial<Record<string, unknown[]>> => ({
    [T.listener]: [listener("in", inPort, "routes"), listener("limited", limitedPort, "routes", [LIMITED])],
    [T.route]: [routeConfig("routes", [route("/", "svc")])],
    [T.cluster]: [edsCluster("svc", cluster)],
    [T.endpoint]: [cla("svc", eps)],
  });
  const push = async (res: Partial<Record<string, unknown[]>>): Promise<string> => {
    const v = String(++version);
    await cp.push(NODE, v, res, true);
    return v;
  };
  const acked = (type: string, v: string, since: number): Promise<CpEvent> =>
    waitFor(`the ACK of ${type} ${v}`, async () => (await cp.events(since)).find((e) => e.kind === "request" && e.typeUrl === type && e.version === v && e.errorDetail === undefined), 30_000, 25);
  /** pushes `res` and waits until dojang ACKed every type at its version */
  const settle = async (res: Partial<Record<string, unknown[]>>): Promise<string> => {
    const since = (await cp.events()).length;
    const v = await push(res);
    for (const t of [T.cluster, T.endpoint, T.listener, T.route]) await acked(t, v, since);
    return v;
  };
  const clusterView = async (): Promise<any> => ((await (await fetch(`http://${d.adminAddress}/clusters`)).json()) as any[]).find((k) => k.name === "svc");
  const addr = (u: Upstream): string => u.server.address;

  beforeAll(async () => {
    ups = await Promise.all(["a", "b", "c", "e"].map(upstream));
    cp = await startControlPlane();
    [inPort, limitedPort] = [await freePort(), await freePort()];
    const boot = tmp.write("bootstrap.yaml", bootstrapYaml(NODE, cp.adsPort));
    d = await startDojang({
      config: {
        admin: { address: "127.0.0.1:0" },
        logLevel: "silent",
        accessLog: false,
        listeners: [{ name: "static", address: "127.0.0.1:0", routes: [{ match: { prefix: "/" }, cluster: "static-backend" }] }],
        clusters: [{ name: "static-backend", endpoints: [addr(ups[0]!)] }],
        xds: { bootstrap: boot },
      },
    });
    client = echoClient(`127.0.0.1:${inPort}`);
    limitedClient = echoClient(`127.0.0.1:${limitedPort}`);
  }, 60_000);

  afterAll(async () => {
    client?.close();
    limitedClient?.close();
    await d?.close(0);
    await cp?.close();
    await Promise.all((ups ?? []).map((u) => u.server.close()));
    tmp.remove();
  });

  it("leaves the listeners' filters as they are: a local rate limit's spent bucket stays spent across an endpoint update (a reload would refill it)", async () => {
    const [a, b] = ups as [Upstream, Upstream];
    await settle(snapshot([addr(a)]));
    await waitFor("the limited listener serving", async () => ((await call(limitedClient)).ok ? true : undefined), 20_000, 100);
    // (the bucket held 3; one was spent above) two more pass, then it is empty
    const rest = [await call(limitedClient), await call(limitedClient), await call(limitedClient)];
    expect(rest.map((r) => r.code ?? "ok")).toEqual(["ok", "ok", grpc.status.RESOURCE_EXHAUSTED]);
    await settle(snapshot([addr(a), addr(b)]));
    const after = await call(limitedClient);
    expect(after.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    // the other listener routes over the new endpoint set
    const who = new Set<string>();
    for (let i = 0; i < 8; i++) who.add((await call(client)).who);
    expect(who).toEqual(new Set(["a", "b"]));
  }, 60_000);

  it("keeps the sessions of endpoints that stay (the upstream sees no new connection), and connects to a new one only when it is first picked", async () => {
    const [a, b] = ups as [Upstream, Upstream];
    // a plain TCP listener as the new endpoint: every connection to it is counted
    const sockets: Socket[] = [];
    const lazy: Server = createServer((s) => sockets.push(s));
    await new Promise<void>((r) => lazy.listen(0, "127.0.0.1", r));
    const lazyAddr = `127.0.0.1:${(lazy.address() as { port: number }).port}`;
    try {
      await settle(snapshot([addr(a), addr(b)]));
      for (let i = 0; i < 6; i++) expect((await call(client)).ok).toBe(true);
      const used = { a: new Set(a.peers), b: new Set(b.peers) };
      await settle(snapshot([addr(a), addr(b), lazyAddr]));
      await sleep(300);
      expect(sockets).toHaveLength(0);
      // back to a and b: the same two connections carried every call, before and after
      await settle(snapshot([addr(a), addr(b)]));
      for (let i = 0; i < 6; i++) expect((await call(client)).ok).toBe(true);
      expect(new Set(a.peers)).toEqual(used.a);
      expect(new Set(b.peers)).toEqual(used.b);
      expect(sockets).toHaveLength(0);
    } finally {
      for (const s of sockets) s.destroy();
      lazy.close();
    }
  }, 60_000);

  it("keeps an ejected endpoint that stays ejected, with its ejection count", async () => {
    const [a, b, c] = ups as [Upstream, Upstream, Upstream];
    const od = { outlier_detection: { consecutive_gateway_failure: 2, base_ejection_time: "60s", max_ejection_percent: 50 } };
    await settle(snapshot([addr(a), addr(b)], od));
    b.failWith = grpc.status.UNAVAILABLE;
    try {
      await waitFor(
        "b ejected",
        async () => {
          await call(client);
          return (await clusterView()).endpoints.find((e: any) => e.address === addr(b))?.ejected === true ? true : undefined;
        },
        20_000,
        10,
      );
      const ejection = (await clusterView()).endpoints.find((e: any) => e.address === addr(b)).ejection;
      const calledB = b.peers.length;
      await settle(snapshot([addr(a), addr(b), addr(c)], od));
      const view = await clusterView();
      expect(view.endpoints.map((e: any) => e.address)).toEqual([addr(a), addr(b), addr(c)]);
      const eb = view.endpoints.find((e: any) => e.address === addr(b));
      expect(eb.ejected).toBe(true);
      // the same ejection: its count, and its end (a wall-clock time /clusters derives from the monotonic one, so ±50 ms)
      expect(eb.ejection.times).toBe(ejection.times);
      expect(Math.abs(Date.parse(eb.ejection.until) - Date.parse(ejection.until))).toBeLessThan(50);
      // b gets no call: every one succeeds, on a and c
      const who = new Set<string>();
      for (let i = 0; i < 12; i++) {
        const r = await call(client);
        expect(r.ok).toBe(true);
        who.add(r.who);
      }
      expect(who).toEqual(new Set(["a", "c"]));
      expect(b.peers.length).toBe(calledB);
    } finally {
      b.failWith = undefined;
    }
  }, 60_000);

  it("keeps in-flight counts: least_request sends new calls away from an endpoint busy with calls that began before the update", async () => {
    const [a, b] = ups as [Upstream, Upstream];
    const lr = { lb_policy: "LEAST_REQUEST" };
    await settle(snapshot([addr(a)], lr));
    // 20 calls in flight on a, each answered after 4 s
    const slow = Array.from({ length: 20 }, () => call(client, "4000"));
    await waitFor("20 calls in flight at a", async () => ((await clusterView()).endpoints[0].activeAttempts === 20 ? true : undefined), 10_000, 20);
    await settle(snapshot([addr(a), addr(b)], lr));
    // a still has its 20: power of two choices over a (20) and b (0) always picks b
    const who: string[] = [];
    for (let i = 0; i < 10; i++) who.push((await call(client)).who);
    expect(who).toEqual(Array(10).fill("b"));
    expect((await Promise.all(slow)).every((r) => r.ok && r.who === "a")).toBe(true);
  }, 60_000);

  it("drains a removed endpoint (its long stream finishes; no new call reaches it), gives the new one calls, and no call fails meanwhile", async () => {
    const [a, b, c, e] = ups as [Upstream, Upstream, Upstream, Upstream];
    await settle(snapshot([addr(a), addr(b)]));
    // a stream in flight on b (round robin: open streams until one lands on b)
    let got: string[] = [];
    let done: Promise<grpc.StatusObject> | undefined;
    for (let i = 0; i < 6 && done === undefined; i++) {
      const msgs: string[] = [];
      const s = client.ServerStream(Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 20_000 });
      const st = new Promise<grpc.StatusObject>((resolve) => {
        s.on("data", (m: Buffer) => msgs.push(m.toString()));
        s.on("error", () => undefined);
        s.on("status", resolve);
      });
      await waitFor("the first message", () => (msgs.length > 0 ? true : undefined), 10_000, 5);
      if (msgs[0]!.startsWith("b")) {
        got = msgs;
        done = st;
      } else s.cancel();
    }
    expect(done).toBeDefined();
    // continuous calls across the update
    const results: { ok: boolean; who: string }[] = [];
    let on = true;
    const loops = Array.from({ length: 3 }, async () => {
      while (on) {
        results.push(await call(client));
        await sleep(2);
      }
    });
    try {
      await sleep(200);
      const v = await settle(snapshot([addr(a), addr(c), addr(e)]));
      expect(v).toBeDefined();
      const calledB = b.peers.length;
      await sleep(500);
      // b got nothing new, c and e get calls
      expect(b.peers.length).toBe(calledB);
      // every endpoint of the new set gets calls, b none: the picker chooses at random, so calls
      // until all three answered (at most 60), where a fixed 9 missed one now and then under load
      const after = new Set<string>();
      for (let i = 0; i < 60 && after.size < 3; i++) after.add((await call(client)).who);
      expect(after).toEqual(new Set(["a", "c", "e"]));
      // the load runs on until the drained stream has finished, and for 60 calls at least
      await done;
      await waitFor("60 calls", () => (results.length >= 60 ? true : undefined), 20_000, 20);
    } finally {
      on = false;
      await Promise.all(loops);
    }
    const status = await done!;
    expect(status.code).toBe(grpc.status.OK);
    expect(got).toEqual(Array.from({ length: 10 }, (_, i) => `b${i}`));
    expect(results.filter((r) => !r.ok)).toEqual([]);
  }, 60_000);
});
