// JSON transcoding's cost, in one run through one dojang with two listeners on the same fast
// upstream (bench/lib/upstream.mjs, whose /bench.Echo/Unary echoes the request message):
//   grpc/off  native gRPC to the listener WITHOUT jsonTranscoding          (the baseline)
//   grpc/on   native gRPC to the listener WITH jsonTranscoding              (what "on" costs a gRPC call)
//   json      POST /v1/items/{id}:archive (body "*", Item → Item) as JSON to the listener with
//             jsonTranscoding, transcoded to /dojang.test.shop.v1.Shop/ArchiveItem, which the route
//             rewrites to /bench.Echo/Unary; the echoed Item comes back as JSON
// All three with h2load over h2c (same connections and streams), in interleaved rounds; each
// line gives calls/s and dojang's CPU per call (utime+stime of the served process from /proc).
// The descriptor set is compiled by protoc (scripts/engines.mjs installs it) from the tests' shop.proto.
//
// usage: npm run build && node bench/json-transcoding.mjs [--connections 20] [--streams 5] [--duration 8] [--rounds 2]
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { create, createFileRegistry, fromBinary, toBinary } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { freePort } from "./lib/peers.mjs";
import { parseH2loadOutput } from "./lib/h2load.mjs";
import { startDojangChild, startFastUpstream } from "./lib/standalone.mjs";

const { values: args } = parseArgs({
  options: {
    connections: { type: "string", default: "20" },
    streams: { type: "string", default: "5" },
    duration: { type: "string", default: "8" },
    rounds: { type: "string", default: "2" },
  },
});
const repo = join(dirname(fileURLToPath(import.meta.url)), "..");
const tmp = mkdtempSync(join(tmpdir(), "dojang-json-bench-"));
const require = createRequire(import.meta.url);
const googleapis = join(dirname(require.resolve("@grpc/grpc-js-xds/package.json")), "deps", "googleapis");
const protoDir = join(repo, "test", "fixtures", "transcode");
const setFile = join(tmp, "shop.binpb");
execFileSync("protoc", ["-I", protoDir, "-I", googleapis, "--include_imports", `--descriptor_set_out=${setFile}`, join(protoDir, "shop.proto")]);

// the same Item both ways: as JSON for the transcoded call, as a framed message for the gRPC ones
const item = { id: "item-1", title: "A Tale of Two Cities", priceCents: "1999", color: "RED", tags: ["classic", "novel"], inStock: true, size: { width: 12.5, weightGrams: "420" } };
const json = JSON.stringify(item);
const reg = createFileRegistry(fromBinary(FileDescriptorSetSchema, readFileSync(setFile)));
const itemDesc = reg.getMessage("dojang.test.shop.v1.Item");
const { fromJson } = await import("@bufbuild/protobuf");
const bin = toBinary(itemDesc, fromJson(itemDesc, item));
const framed = Buffer.alloc(5 + bin.length);
framed.writeUInt32BE(bin.length, 1);
framed.set(bin, 5);
void create;

const { p: up, port: upPort } = await startFastUpstream();
const offPort = await freePort();
const onPort = await freePort();
const cfgFile = join(tmp, "dojang.yaml");
const routes = `
    routes:
      - match: { path: /dojang.test.shop.v1.Shop/ArchiveItem }
        cluster: backend
        rewritePrefix: /bench.Echo/Unary
      - match: { prefix: "/" }
        cluster: backend`;
writeFileSync(
  cfgFile,
  `logLevel: warn
accessLog: false
listeners:
  - name: off
    address: 127.0.0.1:${offPort}${routes}
  - name: on
    address: 127.0.0.1:${onPort}
    jsonTranscoding: { descriptorSet: ${JSON.stringify(setFile)} }${routes}
clusters:
  - name: backend
    endpoints: ["127.0.0.1:${upPort}"]
`,
);
const px = await startDojangChild(join(repo, "dist/cli.js"), cfgFile, [offPort, onPort]);
// whatever happens next, the two children go with this process
const stop = () => {
  px.kill("SIGTERM");
  up.kill("SIGTERM");
};
process.on("exit", stop);
process.on("uncaughtException", (err) => {
  console.error(err);
  process.exit(1);
});

// one checked call first: the JSON answer is the Item sent
{
  const r = spawnSync("curl", ["-s", "--http2-prior-knowledge", "-X", "POST", "-H", "content-type: application/json", "-d", json, `http://127.0.0.1:${onPort}/v1/items/item-1:archive`], { encoding: "utf8" });
  const got = JSON.parse(r.stdout || "null");
  if (JSON.stringify(got) !== json) throw new Error(`JSON probe failed: ${r.stdout} ${r.stderr}`);
}

/** utime+stime (clock ticks) of the launcher and every process under it. */
function cpuTicks(root) {
  const kids = new Map();
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const f = readFileSync(`/proc/${d}/stat`, "utf8").slice(readFileSync(`/proc/${d}/stat`, "utf8").lastIndexOf(")") + 2).split(" ");
      kids.set(Number(d), { ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]) });
    } catch {
      /* gone */
    }
  }
  let sum = 0;
  const walk = (pid) => {
    const k = kids.get(pid);
    if (k !== undefined) sum += k.ticks;
    for (const [c, v] of kids) if (v.ppid === pid) walk(c);
  };
  walk(root);
  return sum;
}
const TICK_US = 1e6 / Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim());

function run(name, port, path, data, contentType, extra = []) {
  const dataFile = join(tmp, `${name.replace("/", "-")}.bin`);
  writeFileSync(dataFile, data);
  const t0 = cpuTicks(px.pid);
  const h = spawnSync(
    "h2load",
    ["-c", args.connections, "-m", args.streams, "-D", args.duration, "-d", dataFile, "-H", `content-type: ${contentType}`, ...extra, `http://127.0.0.1:${port}${path}`],
    { encoding: "utf8", timeout: (Number(args.duration) + 30) * 1000 },
  );
  const cpu = (cpuTicks(px.pid) - t0) * TICK_US;
  const r = parseH2loadOutput(h.stdout);
  return { name, rps: r.reqPerSec, ok: r.succeeded, failed: (r.failed ?? 0) + (r.errored ?? 0), cpuPerCall: cpu / Math.max(1, r.succeeded ?? 1) };
}

const shapes = [
  ["grpc/off", offPort, "/dojang.test.shop.v1.Shop/ArchiveItem", framed, "application/grpc", ["-H", "te: trailers"]],
  ["grpc/on", onPort, "/dojang.test.shop.v1.Shop/ArchiveItem", framed, "application/grpc", ["-H", "te: trailers"]],
  ["json", onPort, "/v1/items/item-1:archive", Buffer.from(json), "application/json", []],
];
const results = {};
for (let round = 0; round < Number(args.rounds); round++) {
  for (const s of shapes) (results[s[0]] ??= []).push(run(...s));
}
stop();
rmSync(tmp, { recursive: true, force: true });

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const line = {};
for (const [name, rs] of Object.entries(results)) {
  line[name] = { rps: median(rs.map((r) => r.rps)), cpu: median(rs.map((r) => r.cpuPerCall)), failed: rs.reduce((a, r) => a + r.failed, 0) };
  console.log(`${name.padEnd(9)} ${line[name].rps.toFixed(0).padStart(7)} calls/s   CPU ${line[name].cpu.toFixed(1).padStart(6)} µs/call   failed ${line[name].failed}   (rounds: ${rs.map((r) => r.rps.toFixed(0)).join(", ")})`);
}
console.log(`grpc/on ÷ grpc/off: calls/s ${(line["grpc/on"].rps / line["grpc/off"].rps).toFixed(2)}, CPU per call ${(line["grpc/on"].cpu / line["grpc/off"].cpu).toFixed(2)}`);
console.log(`json ÷ grpc/on:     calls/s ${(line.json.rps / line["grpc/on"].rps).toFixed(2)}, CPU per call ${(line.json.cpu / line["grpc/on"].cpu).toFixed(2)}`);
process.exit(0);
