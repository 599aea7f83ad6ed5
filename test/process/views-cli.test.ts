// `dojang stat`, `dojang tap` and `dojang top` without a terminal (issue "dojang 0.6: what an
// operator sees", item 2): a real dojang process with calls through it, asked by a second real
// process (`node dist/cli.js stat ...`), found by --admin, --config or --pid-file, with the admin
// token where one is set. `top` in a real terminal is test/process/top-terminal.test.ts.
import * as grpc from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { unary } from "../helpers/peers.js";
import { childEnv, configYaml, freePort, processTestKit, runCli, spawnDojang, waitFor, waitReady, ownConnectionClient, httpGet, spawnGroup, REPO_ROOT, CLI } from "../helpers/process.js";

const kit = processTestKit();
const TOKEN = "views-cli-token-0123456789";

/** A dojang process in front of a backend, with `okCalls` answered and `failedCalls` failed (14 from the upstream) already through it. */
async function running(o: { token?: boolean; okCalls?: number; failedCalls?: number; pidFile?: boolean } = {}) {
  const b = await kit.backend("b");
  const [listenPort, adminPort] = [await freePort(), await freePort()];
  const d = kit.dir();
  const file = d.write(
    "dojang.yaml",
    configYaml({ listenPort, adminPort, upstream: b.address, extraTop: "accessLog: false" }).replace(
      `  address: 127.0.0.1:${adminPort}\n`,
      `  address: 127.0.0.1:${adminPort}\n${o.token === true ? `  token: ${TOKEN}\n` : ""}`,
    ),
  );
  const pidFile = `${d.dir}/dojang.pid`;
  const p = spawnDojang(["--config", file, ...(o.pidFile === true ? ["--pid-file", pidFile] : [])]);
  const admin = `127.0.0.1:${adminPort}`;
  await waitReady(p, admin);
  const c = ownConnectionClient(`127.0.0.1:${listenPort}`, kit.clients);
  for (let i = 0; i < (o.okCalls ?? 0); i++) expect((await unary(c, Buffer.from("ok"))).err).toBeNull();
  b.failWith = grpc.status.UNAVAILABLE;
  for (let i = 0; i < (o.failedCalls ?? 0); i++) expect((await unary(c, Buffer.from("no"))).err?.code).toBe(grpc.status.UNAVAILABLE);
  b.failWith = undefined;
  return { b, file, admin, pidFile, dir: d.dir, client: c, p };
}

/** The table's rows as cells (split on two or more spaces), header first. */
function table(out: string): string[][] {
  return out
    .trim()
    .split("\n")
    .map((l) => l.split(/\s{2,}/));
}

describe("dojang stat", () => {
  it("prints the method table from --config: success rate, calls/s, latency quantiles, calls, who decided the failed ones", async () => {
    const r0 = await running({ okCalls: 3, failedCalls: 1 });
    await waitFor("the calls counted", async () => ((await httpGet(r0.admin, "/stats")).body.includes('"calls": 4') ? true : undefined), 5000);
    const r = await runCli(["stat", "--config", r0.file]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const t = table(r.stdout);
    expect(t[0]).toEqual(["METHOD", "SUCCESS", "RPS", "P50", "P95", "P99", "CALLS", "FAILED BY"]);
    expect(t).toHaveLength(2);
    const [name, success, rps, p50, , p99, calls, failedBy] = t[1]!;
    expect([name, success, calls, failedBy]).toEqual(["test.Echo/Unary", "75.00%", "4", "upstream 1"]);
    expect(Number(rps)).toBeGreaterThan(0);
    expect(p50).toMatch(/^\d+(\.\d+)?(µs|ms)$/);
    expect(p99).toMatch(/^\d+(\.\d+)?(µs|ms)$/);
  });

  it("finds dojang through its pid file, and prints routes and endpoints (-o wide: each status × decided_by), and JSON", async () => {
    const r0 = await running({ okCalls: 2, failedCalls: 2, pidFile: true });
    await waitFor("the calls counted", async () => ((await httpGet(r0.admin, "/stats")).body.includes('"calls": 4') ? true : undefined), 5000);
    const byRoute = await runCli(["stat", "--pid-file", r0.pidFile, "--by", "route", "--window", "10m"]);
    expect(byRoute.code).toBe(0);
    expect(table(byRoute.stdout)[1]!.slice(0, 2)).toEqual(["main prefix:/", "50.00%"]);
    const wide = await runCli(["stat", "--admin", r0.admin, "--by", "endpoint", "-o", "wide"]);
    expect(wide.code).toBe(0);
    const w = table(wide.stdout);
    expect(w[0]!.at(-1)).toBe("OUTCOMES");
    expect(w[1]![0]).toBe(`backend/${r0.b.address}`);
    expect(w[1]!.at(-1)).toBe("OK/upstream 2, UNAVAILABLE/upstream 2");
    // (10m: each command is a node process starting, seconds on a loaded machine)
    const json = await runCli(["stat", "--admin", r0.admin, "-o", "json", "--window", "10m"]);
    expect(json.code).toBe(0);
    const v = JSON.parse(json.stdout) as { window: string; total: { calls: number; failed_by: Record<string, number> } };
    expect(v.window).toBe("10m");
    expect(v.total).toMatchObject({ calls: 4, failed_by: { upstream: 2 } });
  });

  it("sends the admin token: from the config, or $DOJANG_ADMIN_TOKEN with --admin; says what to set when it has none", async () => {
    const r0 = await running({ token: true, okCalls: 1 });
    expect((await runCli(["stat", "--config", r0.file])).code).toBe(0);
    const none = await runCli(["stat", "--admin", r0.admin]);
    expect(none.code).toBe(1);
    expect(none.stderr).toBe(`dojang stat: http://${r0.admin}/stats?window=1m answered 401: /stats needs the header Authorization: Bearer <admin.token> (set $DOJANG_ADMIN_TOKEN)\n`);
    expect(none.stderr).not.toContain(TOKEN);
    expect((await runCli(["stat", "--admin", r0.admin], childEnv({ DOJANG_ADMIN_TOKEN: TOKEN }))).code).toBe(0);
    const wrong = await runCli(["stat", "--admin", r0.admin], childEnv({ DOJANG_ADMIN_TOKEN: "x".repeat(20) }));
    expect(wrong.stderr).toContain("(the token was refused)");
  });

  it("exits 2 on a usage error and 1 when nothing answers", async () => {
    const bad = await runCli(["stat", "--window", "5m", "--admin", "127.0.0.1:1"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe('dojang stat: --window: expected one of 10s, 1m, 10m, got "5m"\n');
    const port = await freePort();
    const gone = await runCli(["stat", "--admin", `127.0.0.1:${port}`]);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toBe(`dojang stat: http://127.0.0.1:${port}/stats?window=1m: connection refused (is dojang running? found through --admin)\n`);
  });
});

describe("dojang tap", () => {
  it("prints the calls that pass the filter as they end (-o json: NDJSON records), and stops after --count", async () => {
    const r0 = await running();
    const tap = spawnGroup(process.execPath, [CLI, "tap", "--admin", r0.admin, "-o", "json", "--failed", "--count", "2"], { cwd: REPO_ROOT, env: childEnv(), stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    tap.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
    const exited = new Promise<number | null>((r) => tap.once("close", (code) => r(code)));
    await waitFor("the tap to subscribe", async () => ((await httpGet(r0.admin, "/stats?state=1")).body.includes('"taps": 1') ? true : undefined), 15_000);
    expect((await unary(r0.client, Buffer.from("ok"))).err).toBeNull();
    r0.b.failWith = grpc.status.NOT_FOUND;
    for (let i = 0; i < 3; i++) await unary(r0.client, Buffer.from("no"));
    expect(await exited).toBe(0);
    const recs = out.trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(recs.map((x) => [x["grpc_code"], x["decided_by"], x["path"]])).toEqual([
      [5, "upstream", "/test.Echo/Unary"],
      [5, "upstream", "/test.Echo/Unary"],
    ]);
    // the subscription ends with the reader
    await waitFor("the tap to go", async () => ((await httpGet(r0.admin, "/stats?state=1")).body.includes('"taps": 0') ? true : undefined), 5000);
  });

  it("prints one line per call: time, status, who decided, method, duration, route, upstream, client", async () => {
    const r0 = await running();
    const tap = spawnGroup(process.execPath, [CLI, "tap", "--admin", r0.admin, "--count", "1"], { cwd: REPO_ROOT, env: childEnv(), stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    tap.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
    const exited = new Promise<number | null>((r) => tap.once("close", (code) => r(code)));
    await waitFor("the tap to subscribe", async () => ((await httpGet(r0.admin, "/stats?state=1")).body.includes('"taps": 1') ? true : undefined), 15_000);
    r0.b.failWith = grpc.status.UNAVAILABLE;
    await unary(r0.client, Buffer.from("no"));
    expect(await exited).toBe(0);
    expect(out).toMatch(
      new RegExp(`^\\d\\d:\\d\\d:\\d\\d\\.\\d{3}  UNAVAILABLE\\(14\\)  upstream  /test\\.Echo/Unary  [\\d.]+(µs|ms)  route=prefix:/  upstream=${r0.b.address.replaceAll(".", "\\.")}  client=127\\.0\\.0\\.1  msg=b fails\\n$`),
    );
  });

  it("refuses a bad filter (exit 1, dojang's reason) and a bad flag (exit 2)", async () => {
    const r0 = await running();
    const bad = await runCli(["tap", "--admin", r0.admin, "--code", "FINE"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('code "FINE": expected a gRPC code');
    expect((await runCli(["tap", "--admin", r0.admin, "--status", "14"])).code).toBe(2);
  });
});

describe("dojang top, not a terminal", () => {
  it("prints the table as plain text at each refresh, no escape codes, and stops after --iterations", async () => {
    const r0 = await running({ okCalls: 2 });
    await waitFor("the calls counted", async () => ((await httpGet(r0.admin, "/stats")).body.includes('"calls": 2') ? true : undefined), 5000);
    const r = await runCli(["top", "--admin", r0.admin, "--iterations", "2", "--interval", "200ms", "--sort", "calls"], childEnv(), 20_000);
    expect(r.code).toBe(0);
    expect(r.stdout).not.toMatch(/\x1b/);
    const blocks = r.stdout.trim().split("\n\n");
    expect(blocks).toHaveLength(2);
    for (const b of blocks) {
      const lines = b.split("\n");
      expect(lines[0]).toMatch(/^dojang top \d{4}-\d\d-\d\dT[\d:.]+Z · window 1m · by method · sort calls$/);
      expect(table(lines.slice(1).join("\n"))[1]!.slice(0, 2)).toEqual(["test.Echo/Unary", "100.00%"]);
    }
    expect((await runCli(["top", "--admin", r0.admin, "--interval", "5"])).stderr).toContain("--interval: expected a duration");
  });
});
