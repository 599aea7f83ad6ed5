// Config faults are "loaded at start and on reload": SIGHUP re-reads the file's fault rules in a
// real dojang process; an invalid file keeps the rules that were working.
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
