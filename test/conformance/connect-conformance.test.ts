// Contract (issue 21 part 3): the Connect conformance suite (connectrpc.com/conformance v1.0.7,
// built by scripts/engines.mjs from test/engines/connect-conformance) in server mode, "with dojang
// in front of its reference server, for the Connect, gRPC and gRPC-Web protocols". The runner's
// connect-go reference client (and its grpc-go client for gRPC) calls dojang;
// dojang-in-front.mjs starts the reference server with the runner's request and dojang before it
// (connect-conformance.yaml: HTTP/2 h2c, proto and JSON, identity and gzip, every stream type,
// Connect GET; connect-conformance-tls.yaml: the same over TLS, where one port serves HTTP/1.1
// too). Every case must pass (one of the Timeouts suite's five cases may fail once in a run on a
// starved machine, see FLAKY_CASES); there is no known-failing list.
//
// Two runs (Connect and gRPC; gRPC-Web), so a failure names its protocol, with the route a gateway
// has (the reference server's service); the TLS run has the route a sidecar has (`prefix: "/"`,
// every path upstream: issue 0.5.1 item 7, a path the service does not know must still be
// Connect's 404 when the reference server, not dojang, answers it). The suite found one bug
// this way: an empty request whose END_STREAM node read before the first call to a new upstream
// was connected never reached the upstream (gRPC-Web and Connect alike; behaviour/connect.test.ts).
import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { engineBinary } from "../helpers/engines.js";
import { REPO_ROOT, assertDistBuilt, childEnv, runGroup, tempDir } from "../helpers/process.js";

const CONFIG = join(REPO_ROOT, "test", "conformance", "connect-conformance.yaml");
const CONFIG_TLS = join(REPO_ROOT, "test", "conformance", "connect-conformance-tls.yaml");
const FRONT = join(REPO_ROOT, "test", "conformance", "dojang-in-front.mjs");

interface Outcome {
  readonly code: number | null;
  readonly total: number;
  readonly passed: number;
  readonly failed: number;
  /** the known-flaky cases that failed this run (the runner counts them neither passed nor failed) */
  readonly flaky: readonly string[];
  readonly output: string;
}

/**
 * The known-flaky allowance, named and capped (issue 0.4.1 item 8): the Timeouts suite's cases
 * give the client 200 ms against a response 1.5 s away, and once in about ten runs beside five
 * other busy test runs (load 14 on 2 cores) one of them missed. Only these five cases may fail
 * as flaky, and at most MAX_FLAKY_PER_RUN times in one run: a second one, or a case of another
 * suite, fails the test.
 */
const FLAKY_CASES = ["unary", "client-stream", "server-stream", "bidi-stream/full-duplex", "bidi-stream/half-duplex"] as const;
const MAX_FLAKY_PER_RUN = 1;

/** One connectconformance run over `protocols` (the config's features otherwise as they are); `prefixRoute`: dojang's one route is `prefix: "/"`. */
async function run(protocols: readonly string[], config = CONFIG, prefixRoute = false): Promise<Outcome> {
  assertDistBuilt();
  const tmp = tempDir();
  try {
    const yaml = readFileSync(config, "utf8").replace(/^ {2}protocols: \[.*\]$/m, `  protocols: [${protocols.join(", ")}]`);
    const conf = tmp.write("conformance.yaml", yaml);
    // One server at a time, two RPCs in flight: the CI machine has two cores. The Timeouts cases
    // may fail, not must (FLAKY_CASES); they run, and are counted.
    const allowance = FLAKY_CASES.flatMap((c) => ["--known-flaky", `Timeouts/**/${c}`]);
    const front = prefixRoute ? [FRONT, "--prefix-route"] : [FRONT];
    const r = await runGroup(engineBinary("connectconformance"), ["--mode", "server", "--conf", conf, "--max-servers", "1", "-p", "2", "-v", ...allowance, "--", process.execPath, ...front, engineBinary("referenceserver")], { env: childEnv() }, 240_000);
    const out = `${r.stdout}\n${r.stderr}`;
    const total = Number(/Total cases: (\d+)/.exec(out)?.[1] ?? NaN);
    const m = /(\d+) passed, (\d+) failed/.exec(out);
    const flaky = [...out.matchAll(/^INFO: (\S+) failed \(as expected\)/gm)].map((f) => f[1]!);
    if (flaky.length > 0) console.log(`conformance: known-flaky cases that failed this run: ${flaky.join(", ")}`);
    return { code: r.code, total, passed: Number(m?.[1] ?? NaN), failed: Number(m?.[2] ?? NaN), flaky, output: out };
  } finally {
    tmp.remove();
  }
}

/**
 * Every case passed, but for at most MAX_FLAKY_PER_RUN of the named Timeouts cases that missed its
 * budget on a starved machine (the runner reports it as "failed (as expected)" and counts it
 * neither way): only that one may be missing from the passed count.
 */
function expectAllPassed(r: Outcome): void {
  expect(r.flaky.filter((name) => !FLAKY_CASES.some((c) => name.startsWith("Timeouts/") && name.endsWith(`/${c}`))), r.output).toEqual([]);
  expect(r.flaky.length, `known-flaky cases that failed this run: ${r.flaky.join(", ")}`).toBeLessThanOrEqual(MAX_FLAKY_PER_RUN);
  expect(r.passed + r.flaky.length).toBe(r.total);
}

describe("Connect conformance suite, server mode, dojang in front of the reference server", () => {
  it("Connect and gRPC: every case passes", async () => {
    const r = await run(["PROTOCOL_CONNECT", "PROTOCOL_GRPC"]);
    // (-v names each server config it ran)
    expect(r.output).toContain("server config #1 {HTTP_VERSION_2, PROTOCOL_CONNECT, TLS:false}");
    expect(r.output).toContain("PROTOCOL_GRPC, TLS:false}");
    expect({ code: r.code, failed: r.failed }, r.output).toEqual({ code: 0, failed: 0 });
    // the matrix: 400 Connect cases (incl. GET) and 322 + 156 gRPC ones (connect-go's and grpc-go's clients)
    expect(r.total).toBeGreaterThanOrEqual(800);
    expectAllPassed(r);
  }, 280_000);

  it("gRPC-Web: every case passes", async () => {
    const r = await run(["PROTOCOL_GRPC_WEB"]);
    expect({ code: r.code, failed: r.failed }, r.output).toEqual({ code: 0, failed: 0 });
    expect(r.output).toContain("PROTOCOL_GRPC_WEB, TLS:false}");
    expect(r.total).toBeGreaterThanOrEqual(300);
    expectAllPassed(r);
  }, 280_000);

  it("over TLS, HTTP/1.1 and HTTP/2 on one port (ALPN), all three protocols, with a prefix route: every case passes", async () => {
    const r = await run(["PROTOCOL_CONNECT", "PROTOCOL_GRPC", "PROTOCOL_GRPC_WEB"], CONFIG_TLS, true);
    expect(r.output).toContain("{HTTP_VERSION_1, PROTOCOL_CONNECT, TLS:true}");
    expect(r.output).toContain("{HTTP_VERSION_1, PROTOCOL_GRPC_WEB, TLS:true}");
    expect(r.output).not.toContain("TLS:false}");
    expect({ code: r.code, failed: r.failed }, r.output).toEqual({ code: 0, failed: 0 });
    expect(r.total).toBeGreaterThanOrEqual(1500);
    expectAllPassed(r);
  }, 280_000);
});
