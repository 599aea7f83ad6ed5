// gRPC-Web beside native gRPC, through the same dojang: one run, one line each and the ratio.
//   gRPC-Web: autocannon over HTTP/1.1 (keep-alive, one request in flight per connection, as a
//             browser's fetch does) to the listener's http1Address, application/grpc-web+proto
//   native:   h2load over h2c to the listener's own port (the same connections and streams)
// Both call /bench.Echo/Unary with the same framed request on the same fast upstream
// (bench/lib/upstream.mjs), and the response is checked once before measuring.
//
// usage: npm run build && npx node bench/grpc-web.mjs [--connections 50] [--duration 10] [--bytes 100]
import autocannon from "autocannon";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { UNARY_PATH, frame } from "./lib/grpc.mjs";
import { freePort } from "./lib/peers.mjs";
import { parseH2loadOutput } from "./lib/h2load.mjs";
import { startDojangChild, startFastUpstream } from "./lib/standalone.mjs";

const { values: args } = parseArgs({
  options: {
    connections: { type: "string", default: "50" },
    duration: { type: "string", default: "10" },
    bytes: { type: "string", default: "100" },
  },
});
const CONNECTIONS = Number(args.connections);
const DURATION_S = Number(args.duration);
const body = frame(Number(args.bytes));
const repo = join(dirname(fileURLToPath(import.meta.url)), "..");
const tmp = mkdtempSync(join(tmpdir(), "dojang-grpcweb-bench-"));

const { p: up, port: upPort } = await startFastUpstream();
const h2Port = await freePort();
const h1Port = await freePort();
const cfgFile = join(tmp, "dojang.yaml");
writeFileSync(
  cfgFile,
  `logLevel: warn
accessLog: false
listeners:
  - name: edge
    address: 127.0.0.1:${h2Port}
    grpcWeb: true
    http1Address: 127.0.0.1:${h1Port}
    routes: [{ match: { prefix: "/" }, cluster: backend }]
clusters:
  - name: backend
    endpoints: ["127.0.0.1:${upPort}"]
`,
);
const px = await startDojangChild(join(repo, "dist/cli.js"), cfgFile, [h2Port, h1Port]);

// one checked call first: the gRPC-Web answer carries the echoed message and grpc-status 0
{
  const res = await fetch(`http://127.0.0.1:${h1Port}${UNARY_PATH}`, { method: "POST", headers: { "content-type": "application/grpc-web+proto" }, body });
  const b = Buffer.from(await res.arrayBuffer());
  const trailer = b.subarray(body.length);
  if (res.status !== 200 || !b.subarray(0, body.length).equals(body) || trailer[0] !== 0x80 || !trailer.toString("latin1").includes("grpc-status: 0")) {
    throw new Error(`gRPC-Web probe failed: HTTP ${res.status}, ${b.length} bytes`);
  }
}

const web = await autocannon({
  url: `http://127.0.0.1:${h1Port}${UNARY_PATH}`,
  method: "POST",
  headers: { "content-type": "application/grpc-web+proto", "x-grpc-web": "1" },
  body,
  connections: CONNECTIONS,
  pipelining: 1,
  duration: DURATION_S,
});

const dataFile = join(tmp, "req.bin");
writeFileSync(dataFile, body);
const h2 = spawnSync(
  "h2load",
  ["-c", String(CONNECTIONS), "-m", "1", "-D", String(DURATION_S), "-d", dataFile, "-H", "content-type: application/grpc", "-H", "te: trailers", `http://127.0.0.1:${h2Port}${UNARY_PATH}`],
  { encoding: "utf8", timeout: (DURATION_S + 30) * 1000 },
);
const native = parseH2loadOutput(h2.stdout);

px.kill("SIGTERM");
up.kill("SIGTERM");
rmSync(tmp, { recursive: true, force: true });

const webRps = web.requests.average;
const nativeRps = native.rps ?? native.reqPerSec ?? NaN;
console.log(`gRPC-Web (autocannon, HTTP/1.1, ${CONNECTIONS} connections x 1): ${webRps.toFixed(0)} calls/s, p50 ${web.latency.p50} ms, p99 ${web.latency.p99} ms, errors ${web.errors}, non-2xx ${web.non2xx}`);
console.log(`native gRPC (h2load, h2c, ${CONNECTIONS} connections x 1):       ${Number(nativeRps).toFixed(0)} calls/s (${JSON.stringify(native)})`);
console.log(`ratio gRPC-Web / native: ${(webRps / nativeRps).toFixed(2)}`);
process.exit(0);
