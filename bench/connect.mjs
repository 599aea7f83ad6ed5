// Connect unary beside native gRPC, through the same dojang: one run, one line each and the ratio.
//   Connect: h2load over h2c to the listener's port, POST application/proto with the bare message
//            (connect-protocol-version: 1), so dojang adds the 5-byte prefix upstream, holds the
//            response message until the trailers and sends it bare with HTTP 200
//   native:  h2load over h2c to the same port, application/grpc with the framed message
// Same connections, streams, upstream (bench/lib/upstream.mjs) and message; the Connect response
// is checked once before measuring. The two runs alternate (Connect, native, Connect, native) and
// the ratio is of the sums, so a neighbour's load lands on both alike.
//
// usage: npm run build && npx node bench/connect.mjs [--connections 50] [--duration 10] [--bytes 100]
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http2 from "node:http2";
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
const framed = frame(Number(args.bytes));
const bare = framed.subarray(5);
const repo = join(dirname(fileURLToPath(import.meta.url)), "..");
const tmp = mkdtempSync(join(tmpdir(), "dojang-connect-bench-"));

const { p: up, port: upPort } = await startFastUpstream();
const h2Port = await freePort();
const cfgFile = join(tmp, "dojang.yaml");
writeFileSync(
  cfgFile,
  `logLevel: warn
accessLog: false
listeners:
  - name: edge
    address: 127.0.0.1:${h2Port}
    connect: true
    routes: [{ match: { prefix: "/" }, cluster: backend }]
clusters:
  - name: backend
    endpoints: ["127.0.0.1:${upPort}"]
`,
);
const px = await startDojangChild(join(repo, "dist/cli.js"), cfgFile, [h2Port]);

// one checked call first: HTTP 200, application/proto, the bare message echoed
{
  const s = http2.connect(`http://127.0.0.1:${h2Port}`);
  const r = await new Promise((resolve, reject) => {
    const st = s.request({ ":method": "POST", ":path": UNARY_PATH, "content-type": "application/proto", "connect-protocol-version": "1" });
    const chunks = [];
    let head = {};
    st.on("response", (h) => (head = h));
    st.on("data", (c) => chunks.push(c));
    st.on("end", () => resolve({ head, body: Buffer.concat(chunks) }));
    st.on("error", reject);
    st.end(bare);
  });
  s.close();
  if (r.head[":status"] !== 200 || r.head["content-type"] !== "application/proto" || !r.body.equals(bare)) {
    throw new Error(`Connect probe failed: HTTP ${r.head[":status"]} ${r.head["content-type"]}, ${r.body.length} bytes`);
  }
}

const bareFile = join(tmp, "bare.bin");
const framedFile = join(tmp, "framed.bin");
writeFileSync(bareFile, bare);
writeFileSync(framedFile, framed);
function h2load(file, headers) {
  const h = spawnSync(
    "h2load",
    ["-c", String(CONNECTIONS), "-m", "1", "-D", String(DURATION_S), "-d", file, ...headers.flatMap((x) => ["-H", x]), `http://127.0.0.1:${h2Port}${UNARY_PATH}`],
    { encoding: "utf8", timeout: (DURATION_S + 30) * 1000 },
  );
  const r = parseH2loadOutput(h.stdout);
  return { rps: Number(r.rps ?? r.reqPerSec ?? NaN), r };
}
const runs = { connect: [], native: [] };
for (let i = 0; i < 2; i++) {
  runs.connect.push(h2load(bareFile, ["content-type: application/proto", "connect-protocol-version: 1"]));
  runs.native.push(h2load(framedFile, ["content-type: application/grpc", "te: trailers"]));
}

px.kill("SIGTERM");
up.kill("SIGTERM");
rmSync(tmp, { recursive: true, force: true });

const sum = (xs) => xs.reduce((n, x) => n + x.rps, 0);
for (const k of ["connect", "native"]) console.log(`${k.padEnd(7)} (h2load, h2c, ${CONNECTIONS} connections x 1, ${args.bytes}-byte unary): ${runs[k].map((x) => x.rps.toFixed(0)).join(", ")} calls/s (${JSON.stringify(runs[k].map((x) => x.r))})`);
console.log(`ratio Connect / native gRPC: ${(sum(runs.connect) / sum(runs.native)).toFixed(2)}`);
process.exit(0);
