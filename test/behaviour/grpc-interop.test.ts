// grpc-go as the judge of dojang's forwarding (issue 0.5.1 item 0): grpc-go's own interop
// TestService (google.golang.org/grpc/interop, test/engines/grpc-interop) behind dojang, called by
// grpc-go clients: the engine's burst client (rounds of concurrent UnaryCalls on one connection,
// every reply's payload checked) and grpc-go's own interop client (interop/client, one test case
// per run, which exits non-zero when a case fails).
//
// The burst over a TLS upstream is the case outside judges found failing: on a TLS session
// node:http2 can emit an upstream stream's 'data' before its 'response' (docs/concepts/node-http2.md),
// and dojang once wrote that DATA before the head (node then sent a bare :status 200 of its own,
// and the real head threw): ~16 % of 3,000 calls ended 13 on this machine, a few 2 ("missing
// content-type") with large payloads.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DojangHandle } from "../../src/index.js";
import { CertDir, type Ca, type CertFiles } from "../helpers/certs.js";
import { engineBinary } from "../helpers/engines.js";
import { useFixtures } from "../helpers/fixtures.js";
import { runGroup, spawnGroup } from "../helpers/process.js";

const f = useFixtures();
let certs: CertDir;
let ca: Ca;
let upstreamCert: CertFiles;
let listenerCert: CertFiles;
let tlsUpstream: string;
let plainUpstream: string;

/** grpc-go's interop server on loopback (TLS with `cert`); its address once it listens. */
async function interopServer(cert?: CertFiles, ms = 20_000): Promise<string> {
  const args = cert === undefined ? ["serve"] : ["serve", "-tls_cert_file", cert.certFile, "-tls_key_file", cert.keyFile];
  const child = spawnGroup(engineBinary("grpc-interop"), args, { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  const port = await new Promise<number>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`grpc-interop did not start in ${ms} ms: ${out}`)), ms);
    const look = (d: Buffer): void => {
      out += d.toString("utf8");
      const m = /listening on (\d+)/.exec(out);
      if (m !== null) {
        clearTimeout(t);
        resolve(Number(m[1]));
      }
    };
    child.stdout!.on("data", look);
    child.stderr!.on("data", look);
    child.on("exit", (code) => reject(new Error(`grpc-interop exited ${code}: ${out}`)));
  });
  return `127.0.0.1:${port}`;
}

beforeAll(async () => {
  certs = new CertDir();
  ca = certs.ca("interop-ca");
  upstreamCert = certs.leaf(ca, "upstream", { cn: "upstream.test", dns: ["upstream.test"] });
  listenerCert = certs.leaf(ca, "listener", { cn: "dojang.test", dns: ["dojang.test"] });
  [tlsUpstream, plainUpstream] = await Promise.all([interopServer(upstreamCert), interopServer()]);
}, 60_000);
afterAll(() => certs.remove());

const TLS_CLUSTER = (): Record<string, unknown> => ({ tls: { caFile: ca.certFile, serverName: "upstream.test" } });
const TLS_LISTENER = (): Record<string, unknown> => ({ tls: { certFile: listenerCert.certFile, keyFile: listenerCert.keyFile } });

interface Burst {
  ok: number;
  codes: Record<string, number>;
  errors: string[];
  badPayload: number;
}

/** The engine's burst client against dojang: `rounds` × `concurrency` UnaryCalls on one connection. */
async function burst(px: DojangHandle, o: { tls: boolean; rounds: number; concurrency: number; requestSize: number; responseSize: number }): Promise<Burst> {
  const args = ["burst", "-addr", px.address, "-rounds", String(o.rounds), "-concurrency", String(o.concurrency)];
  args.push("-request_size", String(o.requestSize), "-response_size", String(o.responseSize));
  if (o.tls) args.push("-ca_file", ca.certFile, "-server_name", "dojang.test");
  const r = await runGroup(engineBinary("grpc-interop"), args, {}, 100_000);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout.trim()) as Burst;
}

describe("a tls: cluster in front of grpc-go's interop server, many concurrent unary calls on one TLS session", () => {
  // 150 rounds of 20, as the outside judges ran it: every call OK with the whole payload
  it("h2c listener: 3,000 of 3,000 OK, every payload whole", { timeout: 120_000 }, async () => {
    const px = await f.proxyFor(tlsUpstream, { cluster: TLS_CLUSTER() });
    const r = await burst(px, { tls: false, rounds: 150, concurrency: 20, requestSize: 271, responseSize: 314 });
    expect(r).toEqual({ ok: 3000, codes: {}, errors: [], badPayload: 0 });
  });

  it("TLS listener: 3,000 of 3,000 OK, every payload whole", { timeout: 120_000 }, async () => {
    const px = await f.proxyFor(tlsUpstream, { cluster: TLS_CLUSTER(), listener: TLS_LISTENER() });
    const r = await burst(px, { tls: true, rounds: 150, concurrency: 20, requestSize: 271, responseSize: 314 });
    expect(r).toEqual({ ok: 3000, codes: {}, errors: [], badPayload: 0 });
  });

  // 10 at a time: 20 replies of 314 KB to one client that a loaded machine leaves unread for
  // 200 ms hold more than the 8 MiB a connection's stalled calls may (observe/overload.ts), and
  // the guard cuts some with 8, as it should; that is not what this test is about
  it("large_unary's sizes (271,828 bytes up, 314,159 down): 500 of 500 OK", { timeout: 120_000 }, async () => {
    const px = await f.proxyFor(tlsUpstream, { cluster: TLS_CLUSTER() });
    const r = await burst(px, { tls: false, rounds: 50, concurrency: 10, requestSize: 271_828, responseSize: 314_159 });
    expect(r).toEqual({ ok: 500, codes: {}, errors: [], badPayload: 0 });
  });
});

/**
 * grpc-go's interop cases (interop/client), each one run of the client, through dojang. Cases
 * that need Google credentials, ALTS, xDS or several backends are left out, and so is orca_oob
 * (its reports come at grpc-go's one-second minimum interval, which only grpc-go's internal
 * test hook lowers: it times out against this server without dojang too). orca_per_rpc checks
 * that the ORCA load report in the upstream's trailers reaches the client.
 */
const CASES = [
  "empty_unary",
  "large_unary",
  "client_streaming",
  "server_streaming",
  "ping_pong",
  "empty_stream",
  "custom_metadata",
  "status_code_and_message",
  "special_status_message",
  "unimplemented_method",
  "unimplemented_service",
  "timeout_on_sleeping_server",
  "cancel_after_begin",
  "cancel_after_first_response",
  "orca_per_rpc",
] as const;

async function interopCases(px: DojangHandle, tls: boolean): Promise<Record<string, string>> {
  const [host, port] = px.address.split(":") as [string, string];
  // the service config grpc-go's interop_test.sh gives every case (the ORCA cases read their
  // reports through this LB policy)
  const base = ["-server_host", host, "-server_port", port, "-service_config_json", '{"loadBalancingConfig":[{"test_backend_metrics_load_balancer":{}}]}'];
  if (tls) base.push("-use_tls", "-use_test_ca", "-ca_file", ca.certFile, "-server_host_override", "dojang.test");
  const failed: Record<string, string> = {};
  // two at a time: the machine has two cores, and each case is a process of its own
  const queue = [...CASES];
  await Promise.all(
    [0, 1].map(async () => {
      for (let c = queue.shift(); c !== undefined; c = queue.shift()) {
        const r = await runGroup(engineBinary("grpc-interop-client"), [...base, "-test_case", c], {}, 30_000);
        if (r.code !== 0) failed[c] = `exit ${r.code}: ${(r.stderr + r.stdout).slice(-400)}`;
      }
    }),
  );
  return failed;
}

describe("grpc-go's interop client → dojang → grpc-go's interop server", () => {
  it("plain: h2c listener, h2c upstream: every case passes", { timeout: 90_000 }, async () => {
    const px = await f.proxyFor(plainUpstream);
    expect(await interopCases(px, false)).toEqual({});
  });

  it("TLS: TLS listener, tls: upstream: every case passes", { timeout: 90_000 }, async () => {
    const px = await f.proxyFor(tlsUpstream, { cluster: TLS_CLUSTER(), listener: TLS_LISTENER() });
    expect(await interopCases(px, true)).toEqual({});
  });
});
