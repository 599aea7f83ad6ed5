// The launcher hands the config it parsed to the process it starts (src/config/handover.ts), and
// that process loads the config parsers (zod, YAML) only when something needs them
// (src/config/parsers.ts): real dojang processes, real grpc-js calls. The start-up line says which
// it is; a SIGHUP reload (the first use) still parses and applies the file; a config whose header
// faults need the parsers has them from the start, and a reload that turns them on loads them; a handover variable left in the environment by
// whatever started dojang is never taken for the config.
import { describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import { childEnv, configYaml, freePort, httpGet, logLines, processTestKit, spawnDojang, waitFor, waitReady } from "../helpers/process.js";
import { echoClient, unary, type EchoClient } from "../helpers/peers.js";
import { configFromText } from "../../src/config/index.js";
import { CONFIG_HANDOVER_ENV, encodeConfigHandover } from "../../src/config/handover.js";

const { clients, backend, dir: tempDirFor } = processTestKit();

function client(port: number): EchoClient {
  const c = echoClient(`127.0.0.1:${port}`);
  clients.push(c);
  return c;
}

async function answer(c: EchoClient, md = new grpc.Metadata()): Promise<string> {
  const r = await unary(c, Buffer.from("x"), md);
  return r.err ? `error ${r.err.code}: ${r.err.details}` : String(r.res);
}

const started = (lines: Record<string, any>[]) => lines.find((l) => l["msg"] === "dojang started");

describe("the served process takes the launcher's config", () => {
  it("starts with the parsers unloaded, serves, and a SIGHUP reload loads them and applies the file", async () => {
    const [a, b] = [await backend("a"), await backend("b")];
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const dir = tempDirFor();
    const file = dir.write("dojang.yaml", configYaml({ listenPort, adminPort, upstream: a.address }));
    const p = spawnDojang(["--config", file]);
    await waitReady(p, `127.0.0.1:${adminPort}`);
    expect(started(logLines(p))?.["config_parsers"]).toBe("on first use");
    const c = client(listenPort);
    expect(await answer(c)).toBe("a");
    // the admin's read-only routes work without them
    expect((await httpGet(`127.0.0.1:${adminPort}`, "/config")).status).toBe(200);
    expect((await httpGet(`127.0.0.1:${adminPort}`, "/faults")).status).toBe(200);

    dir.write("dojang.yaml", configYaml({ listenPort, adminPort, upstream: b.address }));
    p.child.kill("SIGHUP");
    const done = await waitFor("the reload's log line", () => logLines(p).find((l) => l["msg"] === "config reloaded"));
    expect(done["applied"]).toContain("clusters[0].endpoints");
    expect(await answer(c)).toBe("b");

    // an invalid file after that: refused with its key path, nothing changed
    dir.write("dojang.yaml", configYaml({ listenPort, adminPort, upstream: b.address, drainTimeout: "soon" }));
    p.child.kill("SIGHUP");
    const failed = await waitFor("the failed reload's log line", () => logLines(p).find((l) => l["msg"] === "reload failed; nothing changed"));
    expect(JSON.stringify(failed["issues"])).toContain("drainTimeout");
    expect(await answer(c)).toBe("b");
  });

  it("loads them at start when the config needs them: header faults on a listener", async () => {
    const a = await backend("a");
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const dir = tempDirFor();
    const file = dir.write("dojang.yaml", configYaml({ listenPort, adminPort, upstream: a.address }).replace("  - name: main\n", "  - name: main\n    faultHeaders: true\n"));
    const p = spawnDojang(["--config", file]);
    await waitReady(p, `127.0.0.1:${adminPort}`);
    expect(started(logLines(p))?.["config_parsers"]).toBe("loaded");
    const c = client(listenPort);
    const md = new grpc.Metadata();
    md.set("x-dojang-fault", "abort=UNAVAILABLE;msg=from-header");
    expect(await answer(c, md)).toBe("error 14: from-header");
    expect(await answer(c)).toBe("a");
  });

  it("a reload that turns header faults on loads the parsers for them: the next call's x-dojang-fault is applied", async () => {
    const a = await backend("a");
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const dir = tempDirFor();
    const plain = configYaml({ listenPort, adminPort, upstream: a.address });
    const file = dir.write("dojang.yaml", plain);
    const p = spawnDojang(["--config", file]);
    await waitReady(p, `127.0.0.1:${adminPort}`);
    expect(started(logLines(p))?.["config_parsers"]).toBe("on first use");
    const c = client(listenPort);
    const md = new grpc.Metadata();
    md.set("x-dojang-fault", "abort=UNAVAILABLE;msg=from-header");
    // header faults off: the header is just metadata
    expect(await answer(c, md)).toBe("a");

    dir.write("dojang.yaml", plain.replace("  - name: main\n", "  - name: main\n    faultHeaders: true\n"));
    p.child.kill("SIGHUP");
    const done = await waitFor("the reload's log line", () => logLines(p).find((l) => l["msg"] === "config reloaded"));
    expect(JSON.stringify(done["applied"])).toContain("faultHeaders");
    expect(await answer(c, md)).toBe("error 14: from-header");
    expect(await answer(c)).toBe("a");
  });

  it("never takes a handover it did not make: one in the environment that started dojang is dropped", async () => {
    const [a, b] = [await backend("a"), await backend("b")];
    const [listenPort, adminPort] = [await freePort(), await freePort()];
    const dir = tempDirFor();
    // two workers: the launcher hands no config over (the primary parses it for them), so a
    // variable that survived the launcher would be taken
    const file = dir.write("dojang.yaml", configYaml({ listenPort, adminPort, upstream: a.address, extraTop: "workers: 2" }));
    // a handover for the same file name, routing to b
    const planted = encodeConfigHandover(configFromText(configYaml({ listenPort, adminPort, upstream: b.address }), file), file);
    expect(planted).toBeDefined();
    const p = spawnDojang(["--config", file], childEnv({ [CONFIG_HANDOVER_ENV]: planted }));
    await waitReady(p, `127.0.0.1:${adminPort}`);
    expect(await answer(client(listenPort))).toBe("a");
  });
});
