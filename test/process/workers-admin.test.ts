// `workers: 2` behaves like one process from outside: SIGHUP is handled by the primary and sent
// to every worker (no exit 129), the fault API on the primary's admin reaches every worker (a rule
// added once is seen on every connection and listed once, its counters summed), GET /calls merges
// both workers' journals, a replacement worker gets the API-added rules, and the mutation rules
// (403 with mutations off, 401 without the token) hold on the primary too. Real processes.
import { readFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startGrpcServer, unary, type EchoClient, type GrpcServer } from "../helpers/peers.js";
import {
  assertDistBuilt,
  configYaml,
  freePort,
  httpGet,
  killSpawned,
  logLines,
  ownConnectionClient,
  spawnDojang,
  tempDir,
  waitFor,
  waitReady,
  type DojangProcess,
} from "../helpers/process.js";

const TOKEN = "workers-admin-token-0123456789";
const tmp = tempDir();
let up: GrpcServer;
const clients: EchoClient[] = [];

beforeAll(async () => {
  assertDistBuilt();
  up = await startGrpcServer({ Unary: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, c.request) });
});
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  await killSpawned();
});
afterAll(async () => {
  await up.close();
  tmp.remove();
});

/** A new channel with its own connection: the primary hands connections to the workers in turn. */
const client = (address: string): EchoClient => ownConnectionClient(address, clients);

/** `workers: 2` with the journal on; `admin` lines go under the admin block. */
function workersConfig(listenPort: number, adminPort: number, admin: string[] = []): string {
  const base = configYaml({ listenPort, adminPort, upstream: up.address, extraTop: "workers: 2\njournal: 100" });
  return base.replace(`  address: 127.0.0.1:${adminPort}\n`, `  address: 127.0.0.1:${adminPort}\n${admin.map((l) => `  ${l}\n`).join("")}`);
}

async function api(admin: string, method: string, path: string, body?: unknown, token: string | null = TOKEN) {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (token !== null) headers["authorization"] = `Bearer ${token}`;
  const res = await fetch(`http://${admin}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(8000),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: text === "" ? undefined : (JSON.parse(text) as any) };
}

/** The worker pids of a primary (Linux: its children in /proc). */
function childPids(pid: number): number[] {
  return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
}

/** Unary calls over `k` fresh connections; the status code of each. */
async function codesOver(listen: string, k: number): Promise<number[]> {
  const rs = await Promise.all(Array.from({ length: k }, () => unary(client(listen), Buffer.from("x"), new grpc.Metadata(), { deadline: Date.now() + 5000 })));
  return rs.map((r) => (r.err === null ? grpc.status.OK : r.err.code));
}

async function start(admin: string[]): Promise<{ p: DojangProcess; adminAddr: string; listen: string; file: string }> {
  const [listenPort, adminPort] = [await freePort(), await freePort()];
  const file = tmp.write(`w-${listenPort}.yaml`, workersConfig(listenPort, adminPort, admin));
  const p = spawnDojang(["--config", file]);
  const adminAddr = `127.0.0.1:${adminPort}`;
  await waitReady(p, adminAddr, 15_000);
  return { p, adminAddr, listen: `127.0.0.1:${listenPort}`, file };
}

describe("workers: 2 behind one admin", () => {
  it("survives SIGHUP: the primary logs once what it applied and what not, keeps serving, and exits 0 on SIGTERM later", async () => {
    const { p, adminAddr, listen, file } = await start([]);
    // Rewrite the file: a fault rule, a cluster change and the drain timeout (all applied by every
    // worker's reload; test/process/reload-workers.test.ts follows calls through such changes).
    const text = readFileSync(file, "utf8")
      .replace("    routes:\n", "    faults:\n      - { id: hup, action: { kind: abort, code: UNAVAILABLE, message: from-sighup } }\n    routes:\n")
      .replace("drainTimeout: 5s", "drainTimeout: 7s")
      .replace(`endpoints: ["${up.address}"]`, `endpoints: ["${up.address}", "127.0.0.1:1"]`);
    tmp.write(file.slice(tmp.dir.length + 1), text);
    process.kill(p.pid, "SIGHUP");
    const line = await waitFor("the reload log line", () => logLines(p).find((l) => Array.isArray(l["applied"])), 8000);
    expect(line["msg"]).toBe("config reloaded");
    expect(line["applied"]).toEqual(["listeners[0].faults", "clusters[0].endpoints", "drainTimeout"]);
    expect(line["notApplied"]).toEqual([]);
    expect(line["workers"]).toHaveLength(2);
    expect(line["missing"]).toEqual([]);
    // One line for the whole process, not one per worker.
    expect(logLines(p).filter((l) => Array.isArray(l["applied"]))).toHaveLength(1);
    // Every worker applied the rule: calls over several connections all get it.
    expect(await codesOver(listen, 8)).toEqual(Array(8).fill(grpc.status.UNAVAILABLE));
    expect(p.hasExited).toBe(false);
    expect((await httpGet(adminAddr, "/ready")).status).toBe(200);

    // An invalid file changes nothing and says why.
    tmp.write(file.slice(tmp.dir.length + 1), text.replace("code: UNAVAILABLE", "code: NOT_A_CODE"));
    process.kill(p.pid, "SIGHUP");
    const failed = await waitFor("the reload failure", () => logLines(p).find((l) => l["msg"] === "reload failed; nothing changed"), 8000);
    expect(failed["err"]).toContain("NOT_A_CODE");
    expect(await codesOver(listen, 4)).toEqual(Array(4).fill(grpc.status.UNAVAILABLE));

    // A SIGHUP that reaches a worker itself (a closing terminal signals the whole process group)
    // neither ends it nor reloads twice.
    const workers = childPids(p.pid);
    for (const w of workers) process.kill(w, "SIGHUP");
    await new Promise((r) => setTimeout(r, 300));
    expect(childPids(p.pid)).toEqual(workers);
    expect(logLines(p).filter((l) => Array.isArray(l["applied"]))).toHaveLength(1);

    p.child.kill("SIGTERM");
    expect(await p.exited(15_000)).toEqual({ code: 0, signal: null });
  });

  it("sends the fault API to every worker: one POST is seen on every connection, listed once with summed counters, and GET /calls merges both journals", async () => {
    const { adminAddr, listen } = await start(["mutations: true", `token: ${TOKEN}`]);
    // Before any rule: calls land on both workers.
    expect(await codesOver(listen, 8)).toEqual(Array(8).fill(grpc.status.OK));
    const calls = await api(adminAddr, "GET", "/calls");
    expect(calls.status).toBe(200);
    expect(calls.json).toHaveLength(8);
    expect(new Set(calls.json.map((c: { worker: number }) => c.worker)).size).toBe(2);
    const starts = calls.json.map((c: { start_ms: number }) => c.start_ms);
    expect([...starts].sort((a, b) => a - b)).toEqual(starts);
    expect((await api(adminAddr, "GET", "/calls?last=3")).json).toHaveLength(3);

    const created = await api(adminAddr, "POST", "/faults", { id: "all", action: { kind: "abort", code: "PERMISSION_DENIED", message: "api" } });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({ id: "all", source: "api", matched: 0, fired: 0 });
    expect(await codesOver(listen, 8)).toEqual(Array(8).fill(grpc.status.PERMISSION_DENIED));
    const list = await api(adminAddr, "GET", "/faults", undefined, null);
    expect(list.status).toBe(200);
    expect(list.json.faults).toHaveLength(1);
    expect(list.json.faults[0]).toMatchObject({ id: "all", matched: 8, fired: 8 });
    expect((await api(adminAddr, "GET", "/faults/all", undefined, null)).json).toMatchObject({ id: "all", fired: 8 });
    const denied = (await api(adminAddr, "GET", "/calls")).json.filter((c: { grpc_code: number }) => c.grpc_code === grpc.status.PERMISSION_DENIED);
    expect(new Set(denied.map((c: { worker: number }) => c.worker)).size).toBe(2);

    // Mutations through the primary obey the same rules as a single process.
    const noToken = await api(adminAddr, "DELETE", "/faults/all", undefined, null);
    expect(noToken.status).toBe(401);
    expect(noToken.headers.get("www-authenticate")).toMatch(/^Bearer /);
    expect((await api(adminAddr, "POST", "/faults", { id: "all", action: { kind: "abort", code: 5 } })).status).toBe(409);
    expect((await api(adminAddr, "DELETE", "/faults/all")).status).toBe(204);
    expect(await codesOver(listen, 6)).toEqual(Array(6).fill(grpc.status.OK));
    expect((await api(adminAddr, "GET", "/faults")).json.faults).toEqual([]);
  });

  it("gives a worker started after a crash the primary's config, the API-added rules and the SIGHUP-loaded ones, whatever the file says by then", async () => {
    const { p, adminAddr, listen, file } = await start(["mutations: true"]);
    expect((await api(adminAddr, "POST", "/faults", { id: "early", match: { metadata: [{ name: "x-which", equals: "early" }] }, action: { kind: "abort", code: "UNAVAILABLE", message: "early" } }, null)).status).toBe(201);
    expect((await api(adminAddr, "PATCH", "/faults/early", { action: { code: "DATA_LOSS" } }, null)).status).toBe(200);
    const text = readFileSync(file, "utf8");
    tmp.write(file.slice(tmp.dir.length + 1), text.replace("    routes:\n", "    faults:\n      - { id: hup, action: { kind: abort, code: RESOURCE_EXHAUSTED, message: hup } }\n    routes:\n"));
    process.kill(p.pid, "SIGHUP");
    await waitFor("the reload", () => logLines(p).find((l) => Array.isArray(l["applied"])), 8000);
    // The file now would not even start a worker; the replacement must not read it.
    tmp.write(file.slice(tmp.dir.length + 1), text.replace("drainTimeout: 5s", "drainTimeout: whenever"));
    const before = childPids(p.pid);
    expect(before).toHaveLength(2);
    process.kill(before[0]!, "SIGKILL");
    await waitFor("a replacement worker", () => {
      const now = childPids(p.pid);
      return now.length === 2 && !now.includes(before[0]!) ? now : undefined;
    }, 10_000);
    await waitReady(p, adminAddr, 10_000);
    const md = new grpc.Metadata();
    md.set("x-which", "early");
    const codes = async (m: grpc.Metadata) =>
      (await Promise.all(Array.from({ length: 8 }, () => unary(client(listen), Buffer.from("x"), m, { deadline: Date.now() + 5000 })))).map((r) => r.err?.code);
    expect(await codes(md)).toEqual(Array(8).fill(grpc.status.DATA_LOSS));
    expect(await codes(new grpc.Metadata())).toEqual(Array(8).fill(grpc.status.RESOURCE_EXHAUSTED));
    const list = await api(adminAddr, "GET", "/faults", undefined, null);
    expect(list.status).toBe(200); // not 500: the workers agree, rule for rule and in order
    expect(list.json.faults.map((f: { id: string }) => f.id)).toEqual(["early", "hup"]);
    expect(p.hasExited).toBe(false);
  });

  it("refuses mutations on the primary's admin unless admin.mutations is on, and its 404 lists what exists", async () => {
    const { adminAddr } = await start([]);
    const r = await api(adminAddr, "POST", "/faults", { id: "x", action: { kind: "abort", code: 14 } }, null);
    expect(r.status).toBe(403);
    expect(r.json.enable).toBe("admin.mutations: true");
    expect((await api(adminAddr, "GET", "/faults", undefined, null)).json.faults).toEqual([]);
    const nf = await httpGet(adminAddr, "/nope");
    expect(nf.status).toBe(404);
    expect(nf.body).toBe("not found: try /metrics /ready /live /config /faults /reload /drain /calls /stats /tap /ui /clusters\n");
    expect((await httpGet(adminAddr, "/calls")).status).toBe(200);
  });
});
