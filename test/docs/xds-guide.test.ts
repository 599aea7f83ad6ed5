// The xDS guide's "Try it" runs as written (docs/guides/xds.md, the blocks after its
// <!-- xds-guide:* --> markers): the README's echo upstream, the example control plane run in its
// folder on its own snapshot.yaml, dojang started with config/xds-sidecar.yaml and the bootstrap it
// names, `dojang health`, the README's call, then the edit the guide makes (a NACK naming the
// field, the call still served). Only the four fixed ports (8080, 50051, 9901, 18000) move to free
// ones, in copies of the files that name them. The control plane is the binary scripts/engines.mjs
// builds from docs/examples/xds-control-plane with `go build`: the program `go run .` runs there.
// The output lines the guide shows must be found in what the programs print ("…" stands for any
// text).
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { engineBinary } from "../helpers/engines.js";
import { assertDistBuilt, childEnv, freePort, killSpawned, logLine, REPO_ROOT, runCli, spawnDojang, spawnGroup, tempDir, waitFor } from "../helpers/process.js";
import { DOC_PAGES, blockAfterMarker, readDoc } from "../helpers/readme.js";

const guide = readDoc(DOC_PAGES.xds);
const readme = readDoc(DOC_PAGES.quickStart);
const tmp = tempDir();

beforeAll(() => assertDistBuilt());
afterEach(async () => {
  await killSpawned();
});
afterAll(() => tmp.remove());

/** A line the docs show, as a pattern: "…" is any text, the rest literal. */
function shownLine(line: string): RegExp {
  return new RegExp(`^${line.split("…").map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join(".*")}$`);
}

/** Each shown line matches some printed line. */
function expectShown(shown: string, printed: string, what: string): void {
  const lines = printed.split("\n");
  for (const l of shown.split("\n")) expect(lines.some((p) => shownLine(l).test(p)), `${what} shows\n${l}\nnot among what it printed:\n${printed}`).toBe(true);
}

/** The one block of `lang` right after `<!-- marker -->`; the `node -e` program of a one-liner. */
const block = (marker: string, lang = "sh") => blockAfterMarker(guide, marker, lang);
const program = (sh: string): string => {
  const m = /^node -e '([^'\n]+)'$/.exec(sh);
  expect(m, `a node -e one-liner: ${sh}`).not.toBeNull();
  return m![1]!;
};
/** The text block that follows the sh block after `<!-- marker -->` (its shown output). */
function shownAfter(marker: string): string {
  const at = guide.indexOf(`<!-- ${marker} -->`);
  const rest = guide.slice(at);
  const second = rest.indexOf("```text\n", rest.indexOf("```sh\n") + 1);
  return rest.slice(second + "```text\n".length, rest.indexOf("\n```", second + 1));
}

describe("the xDS guide, step by step (docs/guides/xds.md)", () => {
  it("says what it runs: dojang built, the README's one-liners, the example control plane in its folder, the shipped config", () => {
    expect(block("xds-guide:build")).toBe("npm ci && npm run build");
    expect(block("xds-guide:upstream")).toBe(blockAfterMarker(readme, "quick-start:upstream", "sh"));
    expect(block("xds-guide:call")).toBe(blockAfterMarker(readme, "quick-start:call", "sh"));
    expect(block("xds-guide:control-plane")).toBe("cd docs/examples/xds-control-plane && go run .");
    expect(block("xds-guide:dojang")).toBe("node dist/cli.js --config config/xds-sidecar.yaml");
    expect(block("xds-guide:health")).toBe("node dist/cli.js health --config config/xds-sidecar.yaml");
  });

  it("ends with a routed call, and the edit it makes is refused with a NACK naming the field while the call is still served", async () => {
    const [listen, up, admin, cpPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
    const move = (text: string) =>
      text
        .replaceAll("127.0.0.1:8080", `127.0.0.1:${listen}`)
        .replaceAll("127.0.0.1:50051", `127.0.0.1:${up}`)
        .replaceAll("127.0.0.1:9901", `127.0.0.1:${admin}`)
        .replaceAll("127.0.0.1:18000", `127.0.0.1:${cpPort}`)
        .replaceAll("port_value: 8080", `port_value: ${listen}`)
        .replaceAll("port_value: 50051", `port_value: ${up}`)
        .replaceAll("port_value: 18000", `port_value: ${cpPort}`);

    // the files the steps use, as shipped, saying the ports the guide says
    const example = join(REPO_ROOT, "docs", "examples", "xds-control-plane");
    const snapshot = readFileSync(join(example, "snapshot.yaml"), "utf8");
    const bootstrap = readFileSync(join(REPO_ROOT, "config", "xds", "bootstrap.yaml"), "utf8");
    const sidecar = readFileSync(join(REPO_ROOT, "config", "xds-sidecar.yaml"), "utf8");
    for (const p of ["port_value: 8080", "port_value: 50051", '"sidecar~127.0.0.1~app-0.default~cluster.local"']) expect(snapshot).toContain(p);
    expect(bootstrap).toContain("id: sidecar~127.0.0.1~app-0.default~cluster.local");
    expect(bootstrap).toContain("port_value: 18000");
    expect(sidecar).toContain("${ADMIN_ADDRESS:-127.0.0.1:9901}");
    expect(sidecar).toContain("${XDS_BOOTSTRAP:-config/xds/bootstrap.yaml}");
    const help = spawnGroup(engineBinary("xds-control-plane"), ["-h"], { stdio: ["ignore", "pipe", "pipe"] });
    let usage = "";
    help.stderr!.setEncoding("utf8").on("data", (d: string) => (usage += d));
    await new Promise((r) => help.once("close", r));
    expect(usage).toMatch(/-addr string[^-]*default "127\.0\.0\.1:18000"/);
    expect(usage).toMatch(/-file string[^-]*default "snapshot\.yaml"/);

    // 2. the echo upstream
    const echo = spawnGroup(process.execPath, ["-e", move(program(block("xds-guide:upstream")))], { cwd: REPO_ROOT, stdio: ["ignore", "pipe", "pipe"] });
    let echoOut = "";
    echo.stdout!.setEncoding("utf8").on("data", (d: string) => (echoOut += d));
    await waitFor("the echo upstream", () => (echoOut.includes("echo upstream on") ? true : undefined), 15_000);

    // 3. the control plane, in a copy of its folder (a clone's layout) with the file's ports moved
    const folder = join(tmp.dir, "docs", "examples", "xds-control-plane");
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, "snapshot.yaml"), move(snapshot));
    const cp = spawnGroup(engineBinary("xds-control-plane"), ["-addr", `127.0.0.1:${cpPort}`], { cwd: folder, stdio: ["ignore", "pipe", "pipe"] });
    let cpOut = "";
    cp.stderr!.setEncoding("utf8").on("data", (d: string) => (cpOut += d));
    await waitFor("the control plane listening", () => (cpOut.includes("ADS server listening") ? true : undefined), 20_000);
    const cpShown = guide.slice(guide.indexOf("<!-- xds-guide:control-plane -->"));
    expectShown(move(cpShown.slice(cpShown.indexOf("```text\n") + 8, cpShown.indexOf("\n```", cpShown.indexOf("```text\n")))), cpOut, "the control plane");

    // 4. dojang, with the shipped config and a copy of the bootstrap it names
    const boot = tmp.write("bootstrap.yaml", move(bootstrap));
    const env = childEnv({ ADMIN_ADDRESS: `127.0.0.1:${admin}`, XDS_BOOTSTRAP: boot });
    const d = spawnDojang(block("xds-guide:dojang").split(" ").slice(2), env);

    // 5. ready, once the first fetch is complete
    const health = await waitFor(
      "dojang health: ready",
      async () => {
        const r = await runCli(block("xds-guide:health").split(" ").slice(2), env);
        return r.code === 0 ? r : undefined;
      },
      30_000,
      200,
    ).catch((err: Error) => {
      // dojang's stderr too: a dojang that stopped before it was ready says why there
      throw new Error(`${err.message}\n${d.stdout()}\n${d.stderr()}\n${cpOut}`);
    });
    expectShown(move(shownAfter("xds-guide:health")), (health.stdout + health.stderr).trim(), "dojang health");
    expect(await logLine(d, (l) => l["msg"] === "listener bound", "listener bound")).toMatchObject({ listener: "ingress", address: `127.0.0.1:${listen}`, trigger: "xds" });
    expect(await logLine(d, (l) => l["msg"] === "xds: the initial fetch is complete", "the initial fetch is complete")).toMatchObject({ listeners: ["ingress"], clusters: ["echo"] });

    // 6. the call, routed by what the control plane sent
    const call = async (): Promise<string> => {
      const r = spawnGroup(process.execPath, ["-e", move(program(block("xds-guide:call")))], { cwd: REPO_ROOT, stdio: ["ignore", "pipe", "pipe"] });
      let out = "";
      r.stdout!.setEncoding("utf8").on("data", (x: string) => (out += x));
      r.stderr!.setEncoding("utf8").on("data", (x: string) => (out += x));
      await new Promise((res) => r.once("close", res));
      return out.trim();
    };
    expect(await call()).toBe("OK: hello dojang");
    expect(cpOut).toMatch(/msg=request .*node=sidecar~127\.0\.0\.1~app-0\.default~cluster\.local type=type\.googleapis\.com\/envoy\.config\.cluster\.v3\.Cluster/);

    // 7. the edit: lb_policy MAGLEV, saved in place as an editor does; refused, naming the field
    const file = join(folder, "snapshot.yaml");
    const text = readFileSync(file, "utf8");
    expect(text.split("lb_policy: ROUND_ROBIN").length).toBe(2);
    writeFileSync(file, text.replace("lb_policy: ROUND_ROBIN", "lb_policy: MAGLEV"));
    const nackShown = blockAfterMarker(guide, "xds-guide:nack", "text");
    await waitFor("the NACK", () => (cpOut.includes("msg=NACK") ? true : undefined), 20_000).catch((err: Error) => {
      throw new Error(`${err.message}\n${cpOut}`);
    });
    expectShown(nackShown, cpOut, "the control plane");
    expect(await call()).toBe("OK: hello dojang");
    // changed back: the version dojang has; the call is still served
    writeFileSync(file, text);
    await waitFor("the file read again", () => (cpOut.split("msg=serving").length >= 4 ? true : undefined), 20_000);
    expect(await call()).toBe("OK: hello dojang");
  }, 120_000);
});
