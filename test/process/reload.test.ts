// Config faults are "loaded at start and on reload": SIGHUP re-reads the file's fault rules in a
// real dojang process; an invalid file keeps the rules that were working. Until full reload
// exists, every SIGHUP logs what it applied (the fault rules) and each other key that changed
// and was not applied.
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import { assertDistBuilt, configYaml, freePort, killSpawned, spawnDojang, tempDir, waitFor, waitReady } from "../helpers/process.js";
import { echoClient, startGrpcServer, unary, type GrpcServer } from "../helpers/peers.js";

let up: GrpcServer | undefined;
const dirs: { remove(): void }[] = [];
beforeAll(() => assertDistBuilt());
afterEach(async () => {
  await killSpawned();
  await up?.close();
  up = undefined;
  for (const d of dirs.splice(0)) d.remove();
});

const rule = (code: string) => `    faults:\n      - { id: r1, action: { kind: abort, code: ${code}, message: injected } }`;

describe("config `faults:` are loaded at start and on SIGHUP", () => {
  it("replaces the file's fault rules on SIGHUP and keeps them when the new file is invalid", async () => {
    up = await startGrpcServer({ Unary: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, c.request) });
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const dir = tempDir();
    dirs.push(dir);
    const base = configYaml({ listenPort, adminPort, upstream: up.address });
    const withRule = (code: string) => base.replace("    routes:\n", `${rule(code)}\n    routes:\n`);
    const file = dir.write("dojang.yaml", withRule("UNAVAILABLE"));
    const p = spawnDojang(["--config", file]);
    await waitReady(p, `127.0.0.1:${adminPort}`);
    const c = echoClient(`127.0.0.1:${listenPort}`);
    expect((await unary(c, Buffer.from("x"))).err?.code).toBe(grpc.status.UNAVAILABLE);

    dir.write("dojang.yaml", withRule("PERMISSION_DENIED"));
    process.kill(p.pid, "SIGHUP");
    await waitFor("the new rule", async () => ((await unary(c, Buffer.from("x"))).err?.code === grpc.status.PERMISSION_DENIED ? true : undefined), 5000, 50);

    dir.write("dojang.yaml", withRule("NOT_A_CODE"));
    process.kill(p.pid, "SIGHUP");
    await waitFor("the reload error in the log", () => (p.stdout().includes("reload failed") ? true : undefined), 5000, 25);
    expect((await unary(c, Buffer.from("x"))).err?.code).toBe(grpc.status.PERMISSION_DENIED);

    dir.write("dojang.yaml", base);
    process.kill(p.pid, "SIGHUP");
    await waitFor("no rule", async () => ((await unary(c, Buffer.from("x"))).err === null ? true : undefined), 5000, 50);
    c.close();
  });
});

/** pino's JSON lines from the process's stdout. */
function logLines(stdout: string): Record<string, any>[] {
  return stdout
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, any>);
}

describe("SIGHUP says what it applied and what it did not", () => {
  it("logs applied: fault rules and each changed key that needs a restart, and nothing but fault rules takes effect", async () => {
    up = await startGrpcServer({ Unary: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, c.request) });
    const [listenPort, adminPort, otherPort] = [await freePort(), await freePort(), await freePort()];
    const dir = tempDir();
    dirs.push(dir);
    const base = configYaml({ listenPort, adminPort, upstream: up.address, extraRoute: "timeout: 5s" });
    const file = dir.write("dojang.yaml", base);
    const p = spawnDojang(["--config", file]);
    await waitReady(p, `127.0.0.1:${adminPort}`);
    const c = echoClient(`127.0.0.1:${listenPort}`);
    expect((await unary(c, Buffer.from("x"))).err).toBeNull();
    const reloads = () => logLines(p.stdout()).filter((l) => Array.isArray(l["applied"]));

    // Only the fault rules changed: applied, nothing else to say.
    dir.write("dojang.yaml", base.replace("    routes:\n", `${rule("UNAVAILABLE")}\n    routes:\n`));
    process.kill(p.pid, "SIGHUP");
    const first = await waitFor("the first reload line", () => reloads()[0], 5000);
    expect(first).toMatchObject({ msg: "config reloaded: fault rules applied", applied: ["fault rules"], notApplied: [], file, level: 30 });
    expect((await unary(c, Buffer.from("x"))).err?.code).toBe(grpc.status.UNAVAILABLE);

    // Fault rules plus keys that need a restart: each named by its path in the file's own words.
    const changed = base
      .replace("    routes:\n", `${rule("ABORTED")}\n    routes:\n`)
      .replace("timeout: 5s", "timeout: 9s")
      .replace(`endpoints: ["${up.address}"]`, `endpoints: ["127.0.0.1:${otherPort}"]`)
      .replace("logLevel: info", "logLevel: debug")
      .replace("drainTimeout: 5s", "drainTimeout: 5s\nworkers: 2");
    dir.write("dojang.yaml", changed);
    process.kill(p.pid, "SIGHUP");
    const second = await waitFor("the second reload line", () => reloads()[1], 5000);
    expect(second["msg"]).toBe("routes and clusters are not reloaded yet; restart to apply");
    expect(second["level"]).toBe(40);
    expect(second["applied"]).toEqual(["fault rules"]);
    expect(second["notApplied"]).toEqual(["listeners[0].routes[0].timeout", "clusters[0].endpoints", "workers", "logLevel"]);
    // The fault rule changed; the cluster did not (calls without a rule would still reach `up`).
    expect((await unary(c, Buffer.from("x"))).err?.code).toBe(grpc.status.ABORTED);
    dir.write("dojang.yaml", changed.replace(rule("ABORTED"), "    faults: []"));
    process.kill(p.pid, "SIGHUP");
    await waitFor("the third reload line", () => reloads()[2], 5000);
    expect((await unary(c, Buffer.from("x"))).err).toBeNull();
    expect(p.stdout()).not.toContain('"level":20'); // logLevel debug was not applied either

    // An invalid file: nothing changes, and the log says why.
    dir.write("dojang.yaml", changed.replace("drainTimeout: 5s", "drainTimeout: soon"));
    process.kill(p.pid, "SIGHUP");
    const bad = await waitFor("the failure", () => logLines(p.stdout()).find((l) => l["msg"] === "reload failed; nothing changed"), 5000);
    expect(bad["err"]).toContain("drainTimeout");
    expect(reloads()).toHaveLength(3);
    expect((await unary(c, Buffer.from("x"))).err).toBeNull();
    c.close();
    p.child.kill("SIGTERM");
    expect(await p.exited(10_000)).toEqual({ code: 0, signal: null });
  });
});

describe("POST /faults/reset after a SIGHUP", () => {
  it("restores the rules of the file as last reloaded, once each, not the ones it had before", async () => {
    up = await startGrpcServer({ Unary: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, c.request) });
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const dir = tempDir();
    dirs.push(dir);
    const admin = `127.0.0.1:${adminPort}`;
    const base = configYaml({ listenPort, adminPort, upstream: up.address }).replace(`  address: ${admin}\n`, `  address: ${admin}\n  mutations: true\n`);
    const withRule = (code: string) => base.replace("    routes:\n", `${rule(code)}\n    routes:\n`);
    const file = dir.write("dojang.yaml", withRule("UNAVAILABLE"));
    const p = spawnDojang(["--config", file]);
    await waitReady(p, admin);
    const c = echoClient(`127.0.0.1:${listenPort}`);
    dir.write("dojang.yaml", withRule("PERMISSION_DENIED"));
    process.kill(p.pid, "SIGHUP");
    await waitFor("the new rule", async () => ((await unary(c, Buffer.from("x"))).err?.code === grpc.status.PERMISSION_DENIED ? true : undefined), 5000, 50);
    const reset = await fetch(`http://${admin}/faults/reset`, { method: "POST", signal: AbortSignal.timeout(3000) });
    expect(reset.status).toBe(200);
    const body = (await reset.json()) as { faults: { id: string; action: { code: string } }[] };
    expect(body.faults.map((f) => [f.id, f.action.code])).toEqual([["r1", "PERMISSION_DENIED"]]);
    expect((await unary(c, Buffer.from("x"))).err?.code).toBe(grpc.status.PERMISSION_DENIED);
    c.close();
  });
});
