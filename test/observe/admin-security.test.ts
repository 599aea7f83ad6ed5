// The admin surface split into reads and mutations, over real HTTP: reads are open; mutations
// (every non-GET/HEAD on /faults) answer 403 naming `admin.mutations: true` unless it is on, and
// with `admin.token` they need `Authorization: Bearer <token>` (401 + WWW-Authenticate otherwise).
// /config never shows the token; the library turns mutations on by default, the CLI does not,
// and `--check` refuses mutations on a non-loopback admin without a token.
import * as grpc from "@grpc/grpc-js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { redactSecrets } from "../../src/config/redact.js";
import { resolveConfig, startDojang, type DojangHandle } from "../../src/index.js";
import { echoClient, startGrpcServer, startProxy, unary, type GrpcServer } from "../helpers/peers.js";
import { assertDistBuilt, childEnv, configYaml, freePort, killSpawned, runCli, spawnDojang, tempDir, waitReady } from "../helpers/process.js";

const TOKEN = "admin-security-token-0123456789";
const tmp = tempDir();
let up: GrpcServer;
const proxies: DojangHandle[] = [];

beforeAll(async () => {
  up = await startGrpcServer({ Unary: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, c.request) });
});
afterEach(async () => {
  for (const p of proxies.splice(0)) await p.close(0);
  await killSpawned();
});
afterAll(async () => {
  await up.close();
  tmp.remove();
});

const RULE = { id: "sec", action: { kind: "abort", code: "UNAVAILABLE", message: "injected" } };

async function req(admin: string | undefined, method: string, path: string, o: { body?: unknown; auth?: string } = {}) {
  const headers: Record<string, string> = {};
  if (o.auth !== undefined) headers["authorization"] = o.auth;
  const res = await fetch(`http://${admin}${path}`, {
    method,
    headers,
    ...(o.body === undefined ? {} : { body: JSON.stringify(o.body) }),
    signal: AbortSignal.timeout(3000),
  });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

async function library(admin: Record<string, unknown>): Promise<DojangHandle> {
  const px = await startDojang({
    logLevel: "silent",
    config: { admin, listeners: [{ name: "main", address: "127.0.0.1:0", routes: [{ match: { prefix: "/" }, cluster: "backend" }] }], clusters: [{ name: "backend", endpoints: [up.address] }] },
  });
  proxies.push(px);
  return px;
}

/** Every mutation the fault API has, each answered before its body is looked at. */
const MUTATIONS: [string, string, unknown?][] = [
  ["POST", "/faults", RULE],
  ["PATCH", "/faults/sec", { enabled: false }],
  ["DELETE", "/faults/sec"],
  ["POST", "/faults/reset"],
  ["PUT", "/faults"],
];

describe("mutations off (the CLI's default)", () => {
  it("answers 403 naming admin.mutations to every non-GET on /faults, and leaves the reads open", async () => {
    assertDistBuilt();
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const file = tmp.write("off.yaml", configYaml({ listenPort, adminPort, upstream: up.address, extraTop: "journal: 10" }));
    const p = spawnDojang(["--config", file]);
    const admin = `127.0.0.1:${adminPort}`;
    await waitReady(p, admin);
    for (const [method, path, body] of MUTATIONS) {
      const r = await req(admin, method, path, { body });
      expect(r.status, `${method} ${path}`).toBe(403);
      expect(r.headers.get("content-type")).toMatch(/^application\/json/);
      expect(r.json.enable).toBe("admin.mutations: true");
      expect(r.json.error).toContain("admin.mutations: true");
    }
    // Nothing changed traffic: a call goes through.
    const c = echoClient(`127.0.0.1:${listenPort}`);
    try {
      expect((await unary(c, Buffer.from("x"))).err).toBeNull();
    } finally {
      c.close();
    }
    for (const path of ["/metrics", "/ready", "/live", "/config", "/faults", "/calls"]) expect((await req(admin, "GET", path)).status, path).toBe(200);
    expect((await req(admin, "GET", "/faults")).json.faults).toEqual([]);
    expect((await req(admin, "GET", "/faults/sec")).status).toBe(404);
    expect((await req(admin, "GET", "/calls")).json).toHaveLength(1);
    expect(JSON.parse((await req(admin, "GET", "/config")).text).admin).toEqual({ address: { host: "127.0.0.1", port: adminPort }, mutations: false, token: null, readyClusters: [] });
  });

  it("is what the library does when its config says admin.mutations: false", async () => {
    const px = await library({ address: "127.0.0.1:0", mutations: false });
    expect((await req(px.adminAddress, "POST", "/faults", { body: RULE })).status).toBe(403);
    expect((await req(px.adminAddress, "GET", "/faults")).status).toBe(200);
  });
});

describe("the library (startDojang) turns mutations on unless told otherwise", () => {
  it("accepts POST /faults without any admin.mutations key, for object, text and file configs", async () => {
    const px = await startProxy(up.address);
    proxies.push(px);
    expect((await req(px.adminAddress, "POST", "/faults", { body: RULE })).status).toBe(201);
    const c = echoClient(px.address);
    try {
      expect((await unary(c, Buffer.from("x"))).err?.code).toBe(grpc.status.UNAVAILABLE);
    } finally {
      c.close();
    }
    expect(JSON.parse((await req(px.adminAddress, "GET", "/config")).text).admin.mutations).toBe(true);

    const yaml = configYaml({ listenPort: 0, adminPort: 0, upstream: up.address });
    expect(resolveConfig({ config: yaml }).admin?.mutations).toBe(true);
    expect(resolveConfig({ configFile: tmp.write("lib.yaml", yaml) }).admin?.mutations).toBe(true);
    const off = yaml.replace("  address: 127.0.0.1:0\n", "  address: 127.0.0.1:0\n  mutations: false\n");
    expect(resolveConfig({ config: off }).admin?.mutations).toBe(false);
    expect(resolveConfig({ configFile: tmp.write("lib-off.yaml", off) }).admin?.mutations).toBe(false);
  });

  it("keeps them off on an admin other machines can reach when no token is set (resolved, never bound)", () => {
    const base = { listeners: [{ name: "main", address: "127.0.0.1:0", routes: [{ match: { prefix: "/" }, cluster: "b" }] }], clusters: [{ name: "b", endpoints: [up.address] }] };
    expect(resolveConfig({ config: { ...base, admin: { address: "0.0.0.0:0" } } }).admin?.mutations).toBe(false);
    expect(resolveConfig({ config: { ...base, admin: { address: "0.0.0.0:0", token: TOKEN } } }).admin?.mutations).toBe(true);
    expect(resolveConfig({ config: { ...base, admin: { address: "[::1]:0" } } }).admin?.mutations).toBe(true);
  });
});

describe("admin.token", () => {
  it("answers 401 with WWW-Authenticate: Bearer without the token or with a wrong one, and accepts the right one", async () => {
    const px = await library({ address: "127.0.0.1:0", mutations: true, token: TOKEN });
    const a = px.adminAddress;
    for (const auth of [undefined, `Bearer ${TOKEN}x`, `Bearer ${TOKEN.slice(0, -1)}`, `Basic ${Buffer.from(`u:${TOKEN}`).toString("base64")}`, "Bearer", TOKEN]) {
      const r = await req(a, "POST", "/faults", { body: RULE, ...(auth === undefined ? {} : { auth }) });
      expect(r.status, String(auth)).toBe(401);
      expect(r.headers.get("www-authenticate"), String(auth)).toMatch(/^Bearer realm="dojang admin"/);
      expect(r.text).not.toContain(TOKEN);
    }
    expect(px.faults.list()).toEqual([]);
    // Reads need no token.
    expect((await req(a, "GET", "/faults")).status).toBe(200);
    expect((await req(a, "GET", "/metrics")).status).toBe(200);

    expect((await req(a, "POST", "/faults", { body: RULE, auth: `Bearer ${TOKEN}` })).status).toBe(201);
    expect((await req(a, "PATCH", "/faults/sec", { body: { enabled: false }, auth: `bearer  ${TOKEN} ` })).status).toBe(200);
    expect((await req(a, "DELETE", "/faults/sec", { auth: `Bearer ${TOKEN}` })).status).toBe(204);
    expect((await req(a, "POST", "/faults/reset", { auth: `Bearer ${TOKEN}` })).status).toBe(200);
  });

  it("never shows on /config (null stays null)", async () => {
    const px = await library({ address: "127.0.0.1:0", mutations: true, token: TOKEN });
    const r = await req(px.adminAddress, "GET", "/config");
    expect(r.text).not.toContain(TOKEN);
    expect(r.json.admin).toEqual({ address: { host: "127.0.0.1", port: 0 }, mutations: true, token: "<redacted>", readyClusters: [] });
    const plain = await library({ address: "127.0.0.1:0" });
    expect((await req(plain.adminAddress, "GET", "/config")).json.admin.token).toBeNull();
    // The rule itself: every key named token, at any depth; the input is left as it was.
    const input = { admin: { token: "t0ps3cret-t0ps3cret" }, list: [{ token: "x" }, { token: null }], tokens: "kept" };
    expect(redactSecrets(input)).toEqual({ admin: { token: "<redacted>" }, list: [{ token: "<redacted>" }, { token: null }], tokens: "kept" });
    expect(input.admin.token).toBe("t0ps3cret-t0ps3cret");
  });

  it("is never logged by the CLI, whatever the requests (token from ${DOJANG_ADMIN_TOKEN})", async () => {
    assertDistBuilt();
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const yaml = configYaml({ listenPort, adminPort, upstream: up.address, logLevel: "trace" }).replace(
      `  address: 127.0.0.1:${adminPort}\n`,
      `  address: 127.0.0.1:${adminPort}\n  mutations: true\n  token: \${DOJANG_ADMIN_TOKEN}\n`,
    );
    const file = tmp.write("token.yaml", yaml);
    const p = spawnDojang(["--config", file], childEnv({ DOJANG_ADMIN_TOKEN: TOKEN }));
    const admin = `127.0.0.1:${adminPort}`;
    await waitReady(p, admin);
    expect((await req(admin, "POST", "/faults", { body: RULE })).status).toBe(401);
    expect((await req(admin, "POST", "/faults", { body: RULE, auth: "Bearer wrong-wrong-wrong-wrong" })).status).toBe(401);
    expect((await req(admin, "POST", "/faults", { body: RULE, auth: `Bearer ${TOKEN}` })).status).toBe(201);
    expect((await req(admin, "GET", "/config")).text).not.toContain(TOKEN);
    p.child.kill("SIGTERM");
    expect((await p.exited(10_000)).code).toBe(0);
    expect(p.stdout() + p.stderr()).not.toContain(TOKEN);
    expect(p.stdout()).toContain("dojang started"); // the log was on
  });
});

describe("--check", () => {
  const exposed = (extra: string) =>
    configYaml({ listenPort: 0, upstream: "127.0.0.1:1" }).replace("listeners:\n", `admin:\n  address: 0.0.0.0:9901\n${extra}listeners:\n`);

  it("refuses mutations on a non-loopback admin without a token (exit 2, naming admin.token)", async () => {
    assertDistBuilt();
    const r = await runCli(["--check", "--config", tmp.write("exposed.yaml", exposed("  mutations: true\n"))]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("admin.token");
    expect(r.stdout).toBe("");
  });

  it("accepts the same admin with mutations off, or with a token", async () => {
    assertDistBuilt();
    expect((await runCli(["--check", "--config", tmp.write("exposed-off.yaml", exposed(""))])).code).toBe(0);
    expect((await runCli(["--check", "--config", tmp.write("exposed-token.yaml", exposed(`  mutations: true\n  token: ${TOKEN}\n`))])).code).toBe(0);
  });
});
