// The tracing guide ends with the trace on screen (issue "a fleet operator's first hour", item 7):
// its steps run as written, ports moved to free ones. The Collector config after
// <!-- tracing:collector --> runs in a real OpenTelemetry Collector (test/engines/otelcol: the
// Collector's OTLP receiver and debug exporter, built from the Go module proxy); dojang runs the
// config after <!-- tracing:config -->; the README's echo upstream and call make one call. The
// Collector's console must then show that call's trace, the trace id of dojang's access log line,
// as the guide's sample after <!-- tracing:output --> shows it: every line of the sample (ids
// and ports masked) is a line the Collector printed.
import { readFileSync } from "node:fs";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { engineBinary } from "../helpers/engines.js";
import { CLI, REPO_ROOT, assertDistBuilt, childEnv, freePort, killSpawned, spawnGroup, tempDir, waitFor } from "../helpers/process.js";
import { blockAfterMarker, readDoc } from "../helpers/readme.js";

const guide = readDoc("docs/guides/tracing.md");
const readme = readDoc("README.md");
const tmp = tempDir();
beforeAll(() => assertDistBuilt());
afterEach(async () => {
  await killSpawned();
});
afterAll(() => tmp.remove());

/** `cmd args` in the clone (as the guide runs them), in its own process group (killed after the test), stdout and stderr together. */
function start(cmd: string, args: readonly string[]) {
  const child = spawnGroup(cmd, [...args], { cwd: REPO_ROOT, env: childEnv(), stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (out += d));
  const done = new Promise<number | null>((r) => child.once("close", (code) => r(code)));
  return { child, out: () => out, done };
}

/** The program of a ```sh block's one `node -e '...'` line. */
const program = (block: string) => /^node -e '([^'\n]+)'$/.exec(block.trim())?.[1] ?? `not a node -e one-liner: ${block}`;

/** The spans of one trace in the debug exporter's detailed output: each span's header fields and attributes. */
function spansOf(out: string, traceId: string): { fields: Record<string, string>; attributes: string[] }[] {
  return out
    .split(/^Span #\d+\n/m)
    .slice(1)
    .map((chunk) => {
      const fields: Record<string, string> = {};
      for (const m of chunk.matchAll(/^ {4}(\S[^:]*?)\s*: ?(.*)$/gm)) fields[m[1]!] = m[2]!.trim();
      const attrs = chunk.split(/^Attributes:\n/m)[1] ?? "";
      return { fields, attributes: attrs.split("\n").filter((l) => l.startsWith("     -> ")).map((l) => l.slice(8)) };
    })
    .filter((s) => s.fields["Trace ID"] === traceId);
}

describe("docs/guides/tracing.md, Trying it", () => {
  it("the guide's Collector, dojang config and the README's call put the call's trace on the Collector's console, as the guide shows it", { timeout: 120_000 }, async () => {
    const [otlp, listen, up] = [await freePort(), await freePort(), await freePort()];
    const move = (t: string) => t.replaceAll("127.0.0.1:4318", `127.0.0.1:${otlp}`).replaceAll("127.0.0.1:8080", `127.0.0.1:${listen}`).replaceAll("127.0.0.1:50051", `127.0.0.1:${up}`);
    const collectorYaml = blockAfterMarker(guide, "tracing:collector", "yaml");
    const dojangYaml = blockAfterMarker(guide, "tracing:config", "yaml");
    expect(collectorYaml).toContain("endpoint: 127.0.0.1:4318");
    expect(dojangYaml).toContain("endpoint: http://127.0.0.1:4318/v1/traces");
    // the commands the guide gives, as written
    expect(guide).toContain("node scripts/engines.mjs --only otelcol");
    expect(guide).toContain(".engines/bin/otelcol --config collector.yaml");
    expect(guide).toContain("node dist/cli.js --config tracing.yaml");
    const collectorFile = tmp.write("collector.yaml", move(collectorYaml));
    const dojangFile = tmp.write("tracing.yaml", move(dojangYaml));

    const collector = start(engineBinary("otelcol"), ["--config", collectorFile]);
    await waitFor("the Collector", () => (collector.out().includes("Everything is ready") ? true : collector.child.exitCode !== null ? Promise.reject(new Error(collector.out())) : undefined), 60_000);

    const upstream = start(process.execPath, ["-e", move(program(blockAfterMarker(readme, "quick-start:upstream", "sh")))]);
    await waitFor("the echo upstream", () => (upstream.out().includes("echo upstream on") ? true : undefined), 20_000);
    const dojang = start(process.execPath, [CLI, "--config", dojangFile]);
    await waitFor("dojang", () => (dojang.out().includes('"msg":"dojang started"') ? true : dojang.child.exitCode !== null ? Promise.reject(new Error(dojang.out())) : undefined), 30_000);

    const call = start(process.execPath, ["-e", move(program(blockAfterMarker(readme, "quick-start:call", "sh")))]);
    expect(await call.done, call.out()).toBe(0);
    expect(call.out().trim()).toBe("OK: hello dojang");

    const line = await waitFor("the call's access log line", () => dojang.out().split("\n").find((l) => l.includes('"path":"/demo.Echo/Echo"')), 10_000);
    const traceId = (JSON.parse(line) as { trace_id: string }).trace_id;
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);
    const spans = await waitFor("both spans on the Collector's console", () => {
      const s = spansOf(collector.out(), traceId);
      return s.length >= 2 ? s : undefined;
    }, 20_000);

    const server = spans.find((s) => s.fields["Kind"] === "Server");
    const client = spans.find((s) => s.fields["Kind"] === "Client");
    expect(server?.fields).toMatchObject({ Name: "demo.Echo/Echo", "Parent ID": "" });
    expect(server?.attributes).toEqual(expect.arrayContaining(["rpc.service: Str(demo.Echo)", "rpc.grpc.status_code: Int(0)", "dojang.decided_by: Str(upstream)"]));
    expect(client?.fields).toMatchObject({ Name: "demo.Echo/Echo", "Parent ID": server?.fields["ID"] });
    expect(client?.attributes).toEqual(expect.arrayContaining(["dojang.attempt: Int(1)", "server.address: Str(127.0.0.1)", `server.port: Int(${up})`, "rpc.grpc.status_code: Int(0)"]));
    expect(collector.out()).toContain("-> service.name: Str(dojang)");

    // the guide's sample output: each of its lines, ids masked, is a line the Collector printed;
    // and its trace id is the one its access-log sentence quotes
    const sample = blockAfterMarker(guide, "tracing:output", "text");
    const mask = (l: string) => l.replace(/\b[0-9a-f]{32}\b/g, "<trace>").replace(/\b[0-9a-f]{16}\b/g, "<span>").replace(/\d{5}/g, "<port>").trimEnd();
    const printed = new Set(collector.out().split("\n").map(mask));
    const missing = sample.split("\n").filter((l) => l.trim() !== "" && !printed.has(mask(l)));
    expect(missing).toEqual([]);
    const sampleTrace = /Trace ID {7}: ([0-9a-f]{32})/.exec(sample)?.[1];
    expect(guide).toContain(`"trace_id":"${sampleTrace}"`);
  });
});

// The engine is what the guide builds: the Collector's own components, pinned.
describe("test/engines/otelcol", () => {
  it("is the OpenTelemetry Collector's OTLP receiver and debug exporter behind otelcol.NewCommand, at one pinned version", () => {
    const gomod = readFileSync(`${REPO_ROOT}/test/engines/otelcol/go.mod`, "utf8");
    for (const m of ["go.opentelemetry.io/collector/otelcol v0.165.0", "go.opentelemetry.io/collector/receiver/otlpreceiver v0.165.0", "go.opentelemetry.io/collector/exporter/debugexporter v0.165.0"]) expect(gomod).toContain(m);
  });
});
