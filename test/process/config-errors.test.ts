// Environment-driven config, as an operator meets it: a bad value from ${VAR} names the variable
// on stderr (exit 2), and the start-up line says where each cluster's calls will go, so a wrong
// UPSTREAM shows before the first call fails. Real `node dist/cli.js` processes.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { assertDistBuilt, canConnect, childEnv, freePort, killSpawned, runCli, spawnDojang, tempDir, waitReady } from "../helpers/process.js";

const tmp = tempDir();
beforeAll(() => assertDistBuilt());
afterEach(async () => {
  await killSpawned();
});
afterAll(() => tmp.remove());

/** The sidecar example's variables, all unset, plus `extra`. */
const sidecarEnv = (extra: Record<string, string>) =>
  childEnv({
    LISTEN_ADDRESS: undefined,
    UPSTREAM: undefined,
    ADMIN_ADDRESS: undefined,
    CALL_TIMEOUT: undefined,
    MAX_MESSAGE: undefined,
    CONNECT_TIMEOUT: undefined,
    DRAIN_TIMEOUT: undefined,
    LOG_LEVEL: undefined,
    ACCESS_LOG: undefined,
    ...extra,
  });

describe("a bad value from the environment", () => {
  it("CALL_TIMEOUT=abc: --check exits 2 and names the key, the value and $CALL_TIMEOUT", async () => {
    const r = await runCli(["--check", "--config", "config/sidecar.yaml"], sidecarEnv({ CALL_TIMEOUT: "abc" }));
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/listeners\[0\]\.routes\[0\]\.timeout: invalid duration "abc".* \(from \$CALL_TIMEOUT\)\n/);
  });

  it("CALL_TIMEOUT=30 (no unit: 30 s or 30 ms?): --check and a start exit 2, naming the units and $CALL_TIMEOUT, nothing listening", async () => {
    const expected = 'listeners[0].routes[0].timeout: "30" has no unit: write 30ms, 30s, 30m or 30h (from $CALL_TIMEOUT)\n';
    const check = await runCli(["--check", "--config", "config/sidecar.yaml"], sidecarEnv({ CALL_TIMEOUT: "30" }));
    expect(check.code).toBe(2);
    expect(check.stderr).toContain(expected);
    const [listen, admin] = [await freePort(), await freePort()];
    const start = await runCli(["--config", "config/sidecar.yaml"], sidecarEnv({ CALL_TIMEOUT: "30", LISTEN_ADDRESS: `127.0.0.1:${listen}`, ADMIN_ADDRESS: `127.0.0.1:${admin}` }));
    expect(start.code).toBe(2);
    expect(start.stderr).toContain(expected);
    expect(await canConnect(listen)).toBe(false);
    expect(await canConnect(admin)).toBe(false);
    // with a unit, both readings are fine
    for (const t of ["30s", "30ms"]) expect((await runCli(["--check", "--config", "config/sidecar.yaml"], sidecarEnv({ CALL_TIMEOUT: t }))).code).toBe(0);
  });

  it("the same file with the variable unset passes --check (the default is good)", async () => {
    const r = await runCli(["--check", "--config", "config/sidecar.yaml"], sidecarEnv({}));
    expect(r.code).toBe(0);
  });

  it("UPSTREAM without a port names $UPSTREAM at clusters[0].endpoints[0]; MAX_MESSAGE names itself at both keys it feeds", async () => {
    const r = await runCli(["--check", "--config", "config/sidecar.yaml"], sidecarEnv({ UPSTREAM: "app.local", MAX_MESSAGE: "4 megs" }));
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/clusters\[0\]\.endpoints\[0\]: .*"app\.local".* \(from \$UPSTREAM\)\n/);
    expect(r.stderr).toMatch(/routes\[0\]\.maxRequestMessageBytes: .*"4 megs".* \(from \$MAX_MESSAGE\)\n/);
    expect(r.stderr).toMatch(/routes\[0\]\.maxResponseMessageBytes: .*"4 megs".* \(from \$MAX_MESSAGE\)\n/);
  });

  it("a bad default in the file says it was the default, because the variable is unset", async () => {
    const file = tmp.write(
      "bad-default.yaml",
      'listeners: [{ name: l, address: "127.0.0.1:0", routes: [{ match: { prefix: "/" }, cluster: c, timeout: "${T:-30 seconds}" }] }]\nclusters: [{ name: c, endpoints: ["127.0.0.1:50051"] }]\n',
    );
    const r = await runCli(["--check", "--config", file], childEnv({ T: undefined }));
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/timeout: invalid duration "30 seconds".* \(from the default of \$T, which is unset\)\n/);
  });
});

describe("the start-up line", () => {
  it("lists each cluster's endpoints as dojang will dial them", async () => {
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const p = spawnDojang(
      ["--config", "config/sidecar.yaml"],
      sidecarEnv({
        LISTEN_ADDRESS: `127.0.0.1:${listenPort}`,
        ADMIN_ADDRESS: `127.0.0.1:${adminPort}`,
        UPSTREAM: "[::1]:50099",
        ACCESS_LOG: "false",
      }),
    );
    await waitReady(p, `127.0.0.1:${adminPort}`);
    process.kill(p.pid, "SIGTERM");
    expect(await p.exited(15_000)).toEqual({ code: 0, signal: null });
    const started = p
      .stdout()
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) => l["msg"] === "dojang started");
    expect(started).toMatchObject({
      listeners: [{ name: "sidecar", address: `127.0.0.1:${listenPort}` }],
      clusters: [{ name: "app", endpoints: ["[::1]:50099"] }],
      admin: `127.0.0.1:${adminPort}`,
    });
  });
});
