// Issue "Performance 4", item 1: the side calls ride a dojang cluster. A route's rateLimit.global and
// extAuthz may name a cluster of `clusters:` instead of an address, and then the cluster's TLS,
// health checks and outlier detection apply to its side calls. The services are the real ones:
// envoyproxy/ratelimit on redis with its own gRPC TLS listener (GRPC_SERVER_USE_TLS, and a client
// certificate required: GRPC_CLIENT_TLS_CACERT), and Istio's ext_authz server behind TLS (the
// ext-authz engine's tls-front: Go's crypto/tls in front, Istio's server judging the protocol).
// Concurrent calls share one TLS session to each service, and each gets its own answer.
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDojang, type DojangHandle } from "../../src/index.js";
import { echoAll, h2Call, memoryLogger, startExtAuthz, startTlsFront, type ExtAuthzServer } from "../helpers/auth.js";
import { CertDir, type Ca, type CertFiles } from "../helpers/certs.js";
import { startMisbehavingGrpc, type Misbehaving } from "../helpers/misbehaving.js";
import { sample, scrape, type RawUpstream } from "../helpers/peers.js";
import { freePort, httpGet, killSpawned, waitFor } from "../helpers/process.js";
import { startRedis, startRls, type Redis, type Rls } from "../helpers/ratelimit.js";

const DOMAIN = "dojang-cluster";
/** per-run limits (any value of "run", "hc", "od"), per hour: see rate-limit-global.test.ts on windows */
const RLS_CONFIG = `domain: ${DOMAIN}
descriptors:
  - key: run
    rate_limit:
      unit: hour
      requests_per_unit: 5
  - key: big
    rate_limit:
      unit: hour
      requests_per_unit: 1000000
`;

let certs: CertDir;
let ca: Ca;
let clientCa: Ca;
let rlsCert: CertFiles;
let authzCert: CertFiles;
let dojangClient: CertFiles;
let redis: Redis;
let rls: Rls;
let authz: ExtAuthzServer;
let front: { address: string };
let upstream: RawUpstream;

beforeAll(async () => {
  certs = new CertDir();
  ca = certs.ca("services-ca");
  clientCa = certs.ca("dojang-client-ca");
  rlsCert = certs.leaf(ca, "rls", { cn: "rls.test", dns: ["rls.test"] });
  authzCert = certs.leaf(ca, "authz", { cn: "authz.test", dns: ["authz.test"] });
  dojangClient = certs.leaf(clientCa, "dojang", { cn: "dojang.test", dns: ["dojang.test"] });
  redis = await startRedis();
  [rls, authz, upstream] = await Promise.all([
    // envoyproxy/ratelimit's own gRPC TLS, a client certificate from clientCa required
    startRls(RLS_CONFIG, redis.port, undefined, {
      GRPC_SERVER_USE_TLS: "true",
      GRPC_SERVER_TLS_CERT: rlsCert.certFile,
      GRPC_SERVER_TLS_KEY: rlsCert.keyFile,
      GRPC_CLIENT_TLS_CACERT: clientCa.certFile,
    }),
    startExtAuthz(),
    echoAll(),
  ]);
  front = await startTlsFront(authz.address, authzCert, clientCa.certFile);
}, 120_000);
afterAll(async () => {
  await upstream?.close();
  rls?.dir.remove();
  redis?.dir.remove();
  certs?.remove();
  await killSpawned();
});

/** A cluster of the side calls' services: TLS verified against `ca`, dojang's client certificate unless `noClientCert`. */
function tlsCluster(name: string, endpoint: string, serverName: string, o: { caFile?: string; noClientCert?: boolean } = {}): Record<string, unknown> {
  return {
    name,
    endpoints: [endpoint],
    tls: { caFile: o.caFile ?? ca.certFile, serverName, ...(o.noClientCert === true ? {} : { certFile: dojangClient.certFile, keyFile: dojangClient.keyFile }) },
  };
}

async function proxy(routes: Record<string, unknown>[], clusters: Record<string, unknown>[]): Promise<DojangHandle> {
  return startDojang({
    logger: memoryLogger().logger,
    config: {
      admin: { address: "127.0.0.1:0" },
      journal: 500,
      listeners: [{ name: "main", address: "127.0.0.1:0", routes: routes.map((r, i) => ({ match: { service: `r${i}.S` }, cluster: "backend", ...r })) }],
      clusters: [{ name: "backend", endpoints: [upstream.address] }, ...clusters],
    },
  });
}

/** Counts per result of one service's side calls. */
async function counted(px: DojangHandle, metric: string, service: string, results: readonly string[]): Promise<Record<string, number>> {
  const text = await scrape(px.adminAddress);
  return Object.fromEntries(results.map((r) => [r, sample(text, metric, { service, result: r })]).filter(([, n]) => n !== 0));
}
const RLS_RESULTS = ["ok", "over_limit", "timeout", "unavailable", "error", "cancelled"];
const EXT_RESULTS = ["allowed", "denied", "timeout", "unavailable", "error", "cancelled"];

describe("side calls on a named cluster over TLS (the real services)", () => {
  it("rateLimit.global.cluster over mTLS to envoyproxy/ratelimit: 20 calls at once on one TLS session, exactly the limit (5) admitted, the rest refused by the service", { timeout: 60_000 }, async () => {
    const run = randomUUID();
    const px = await proxy(
      [{ rateLimit: { global: { cluster: "rls", domain: DOMAIN, timeout: "5s", descriptors: [[{ key: "run", value: run }]] } } }],
      [tlsCluster("rls", rls.address, "rls.test")],
    );
    try {
      const before = upstream.seen.length;
      const ends = await Promise.all(Array.from({ length: 20 }, () => h2Call(px.address, "/r0.S/Call")));
      expect(ends.filter((e) => e.status === "0").length).toBe(5);
      expect(ends.filter((e) => e.status === "8").length).toBe(15);
      expect(upstream.seen.length - before).toBe(5);
      expect(await counted(px, "dojang_rate_limit_service_calls_total", "rls", RLS_RESULTS)).toEqual({ ok: 5, over_limit: 15 });
      // one TLS session carried them all (opened when the config was loaded)
      const c = (JSON.parse((await httpGet(px.adminAddress!, "/clusters")).body) as { name: string; sessions: number }[]).find((x) => x.name === "rls")!;
      expect(c.sessions).toBe(1);
      expect(sample(await scrape(px.adminAddress), "dojang_upstream_connects_total", { cluster: "rls", result: "ok" })).toBe(1);
    } finally {
      await px.close(0);
    }
  });

  it("TLS is in effect: without its client certificate, or against another CA, the service is not reached; counted, and failureModeDeny refuses", { timeout: 60_000 }, async () => {
    const other = certs.ca("not-the-services-ca");
    const px = await proxy(
      [
        { rateLimit: { global: { cluster: "no-cert", domain: DOMAIN, timeout: "2s", failureModeDeny: true, descriptors: [[{ key: "big", value: "tls" }]] } } },
        { rateLimit: { global: { cluster: "wrong-ca", domain: DOMAIN, timeout: "2s", failureModeDeny: true, descriptors: [[{ key: "big", value: "tls" }]] } } },
      ],
      [tlsCluster("no-cert", rls.address, "rls.test", { noClientCert: true }), tlsCluster("wrong-ca", rls.address, "rls.test", { caFile: other.certFile })],
    );
    try {
      const a = await h2Call(px.address, "/r0.S/Call");
      const b = await h2Call(px.address, "/r1.S/Call");
      expect([a.status, b.status]).toEqual(["14", "14"]);
      expect(px.calls.slice(-2).map((r) => r.decided_by)).toEqual(["rate_limit_service_failed", "rate_limit_service_failed"]);
      expect(await counted(px, "dojang_rate_limit_service_calls_total", "no-cert", RLS_RESULTS)).toEqual({ unavailable: 1 });
      expect(await counted(px, "dojang_rate_limit_service_calls_total", "wrong-ca", RLS_RESULTS)).toEqual({ unavailable: 1 });
    } finally {
      await px.close(0);
    }
  });

  it("extAuthz.cluster over mTLS to Istio's ext_authz: 20 calls at once, each allowed or denied by its own header, the allowed ones with the headers the service added", { timeout: 60_000 }, async () => {
    const px = await proxy([{ extAuthz: { cluster: "authz", timeout: "5s" } }], [tlsCluster("authz", front.address, "authz.test")]);
    try {
      const before = upstream.seen.length;
      const asks = Array.from({ length: 20 }, (_, i) => ({ id: `rid-${i}`, verdict: i % 3 === 0 ? "deny" : "allow" }));
      const ends = await Promise.all(asks.map((q) => h2Call(px.address, "/r0.S/Call", { "x-ext-authz": q.verdict, "x-request-id": q.id })));
      expect(ends.map((e) => e.status)).toEqual(asks.map((q) => (q.verdict === "allow" ? "0" : "7")));
      expect(ends.filter((e) => e.status === "7").every((e) => e.message === "denied by ext_authz for not found header `x-ext-authz: allow` in the request")).toBe(true);
      const seen = upstream.seen.slice(before);
      expect(seen.length).toBe(13);
      // each upstream request carries the verdict on its own attributes (its own request id)
      for (const s of seen) {
        expect(s.headers["x-ext-authz-check-result"]).toBe("allowed");
        expect(String(s.headers["x-ext-authz-check-received"])).toContain(`id:"${String(s.headers["x-request-id"])}"`);
      }
      expect(await counted(px, "dojang_ext_authz_calls_total", "authz", EXT_RESULTS)).toEqual({ allowed: 13, denied: 7 });
    } finally {
      await px.close(0);
    }
  });

  it("extAuthz.cluster whose TLS fails (no client certificate): the check fails, 7 without failOpen, the call goes on with it", { timeout: 60_000 }, async () => {
    const px = await proxy(
      [{ extAuthz: { cluster: "authz-no-cert", timeout: "2s" } }, { extAuthz: { cluster: "authz-no-cert", timeout: "2s", failOpen: true } }],
      [tlsCluster("authz-no-cert", front.address, "authz.test", { noClientCert: true })],
    );
    try {
      const a = await h2Call(px.address, "/r0.S/Call", { "x-ext-authz": "allow" });
      expect(a.status).toBe("7");
      expect(a.message).toMatch(/^external authorization failed \(/);
      expect((await h2Call(px.address, "/r1.S/Call", { "x-ext-authz": "allow" })).status).toBe("0");
      const n = await counted(px, "dojang_ext_authz_calls_total", "authz-no-cert", EXT_RESULTS);
      expect(Object.keys(n)).toEqual(["unavailable"]);
      expect(n["unavailable"]).toBe(2);
    } finally {
      await px.close(0);
    }
  });
});

describe("a named cluster's health checks and outlier detection apply to its side calls", () => {
  let dead: string;
  let refusing: Misbehaving;
  let plainRls: Rls;
  beforeAll(async () => {
    dead = `127.0.0.1:${await freePort()}`;
    refusing = await startMisbehavingGrpc("answers HTTP 503");
    plainRls = await startRls(RLS_CONFIG, redis.port);
  }, 120_000);
  afterAll(async () => {
    await refusing?.close();
    plainRls?.dir.remove();
  });

  it("healthCheck: an endpoint that fails its checks gets no side call; without checks, round robin sends it every other one", { timeout: 60_000 }, async () => {
    const global = (cluster: string) => ({ rateLimit: { global: { cluster, domain: DOMAIN, timeout: "2s", descriptors: [[{ key: "big", value: "hc" }]] } } });
    const px = await proxy(
      [global("checked"), global("unchecked")],
      [
        { name: "checked", endpoints: [dead, plainRls.address], healthCheck: { interval: "100ms", timeout: "500ms", unhealthyThreshold: 1, healthyThreshold: 1 } },
        { name: "unchecked", endpoints: [dead, plainRls.address] },
      ],
    );
    try {
      await waitFor(
        "the dead endpoint to be unhealthy",
        async () => {
          const cs = JSON.parse((await httpGet(px.adminAddress!, "/clusters")).body) as { name: string; endpoints: { address: string; healthy: boolean }[] }[];
          return cs.find((c) => c.name === "checked")!.endpoints.find((e) => e.address === dead)?.healthy === false ? true : undefined;
        },
        20_000,
        50,
      );
      for (let i = 0; i < 10; i++) {
        await h2Call(px.address, "/r0.S/Call");
        await h2Call(px.address, "/r1.S/Call");
      }
      expect(await counted(px, "dojang_rate_limit_service_calls_total", "checked", RLS_RESULTS)).toEqual({ ok: 10 });
      expect(await counted(px, "dojang_rate_limit_service_calls_total", "unchecked", RLS_RESULTS)).toEqual({ ok: 5, unavailable: 5 });
    } finally {
      await px.close(0);
    }
  });

  it("outlierDetection: an endpoint that answers HTTP 503 is ejected after consecutiveFailures, and the side calls after it go to the other", { timeout: 60_000 }, async () => {
    const px = await proxy(
      [{ rateLimit: { global: { cluster: "od", domain: DOMAIN, timeout: "2s", descriptors: [[{ key: "big", value: "od" }]] } } }],
      [{ name: "od", endpoints: [refusing.address, plainRls.address], outlierDetection: { consecutiveFailures: 2, baseEjection: "30s" } }],
    );
    try {
      for (let i = 0; i < 14; i++) await h2Call(px.address, "/r0.S/Call");
      // round robin: the refusing endpoint's second failure (of its first two calls) ejects it
      expect(await counted(px, "dojang_rate_limit_service_calls_total", "od", RLS_RESULTS)).toEqual({ ok: 12, unavailable: 2 });
      expect(sample(await scrape(px.adminAddress), "dojang_upstream_ejections_total", { cluster: "od", endpoint: refusing.address })).toBe(1);
      expect(refusing.hits()).toBe(2);
    } finally {
      await px.close(0);
    }
  });
});
