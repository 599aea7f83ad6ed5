// What TLS costs at the listener: the same dojang with an h2c listener and a TLS listener (ALPN
// h2, a P-256 certificate made here with the openssl CLI) in front of the same fast upstream
// (bench/lib/upstream.mjs); h2load drives each in turn with the same connections, streams and
// framed unary request, and one line each plus the ratio is printed. --cli runs another build
// of dojang (for example one from before a change, to compare its h2c line with this one's).
//
// usage: npm run build && npx node bench/tls.mjs [--connections 50] [--streams 1] [--duration 10] [--bytes 100] [--cli dist/cli.js]
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { UNARY_PATH, frame } from "./lib/grpc.mjs";
import { freePort } from "./lib/peers.mjs";
import { parseH2loadOutput } from "./lib/h2load.mjs";
import { startDojangChild, startFastUpstream } from "./lib/standalone.mjs";

const { values: args } = parseArgs({
  options: {
    connections: { type: "string", default: "50" },
    streams: { type: "string", default: "1" },
    duration: { type: "string", default: "10" },
    bytes: { type: "string", default: "100" },
    cli: { type: "string" },
  },
});
const repo = join(dirname(fileURLToPath(import.meta.url)), "..");
const cli = args.cli === undefined ? join(repo, "dist/cli.js") : resolve(args.cli);
const tmp = mkdtempSync(join(tmpdir(), "dojang-tls-bench-"));

// a throwaway certificate for 127.0.0.1 (self-signed; h2load does not verify)
execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "k.pem", "-out", "c.pem", "-days", "1", "-subj", "/CN=bench", "-addext", "subjectAltName=IP:127.0.0.1"], { cwd: tmp, stdio: "ignore" });

const { p: up, port: upPort } = await startFastUpstream();
const plainPort = await freePort();
const tlsPort = await freePort();
const cfgFile = join(tmp, "dojang.yaml");
writeFileSync(
  cfgFile,
  `logLevel: warn
accessLog: false
listeners:
  - name: plain
    address: 127.0.0.1:${plainPort}
    routes: [{ match: { prefix: "/" }, cluster: backend }]
${args.cli === undefined ? `  - name: tls
    address: 127.0.0.1:${tlsPort}
    tls: { certFile: ${join(tmp, "c.pem")}, keyFile: ${join(tmp, "k.pem")} }
    routes: [{ match: { prefix: "/" }, cluster: backend }]
` : ""}clusters:
  - name: backend
    endpoints: ["127.0.0.1:${upPort}"]
`,
);
const px = await startDojangChild(cli, cfgFile, args.cli === undefined ? [plainPort, tlsPort] : [plainPort]);

const dataFile = join(tmp, "req.bin");
writeFileSync(dataFile, frame(Number(args.bytes)));
function h2load(url) {
  const r = spawnSync(
    "h2load",
    ["-c", args.connections, "-m", args.streams, "-D", args.duration, "--warm-up-time", "2", "-d", dataFile, "-H", "content-type: application/grpc", "-H", "te: trailers", url],
    { encoding: "utf8", timeout: (Number(args.duration) + 40) * 1000 },
  );
  return parseH2loadOutput(r.stdout);
}
const plain = h2load(`http://127.0.0.1:${plainPort}${UNARY_PATH}`);
const secure = args.cli === undefined ? h2load(`https://127.0.0.1:${tlsPort}${UNARY_PATH}`) : undefined;
px.kill("SIGTERM");
up.kill("SIGTERM");
rmSync(tmp, { recursive: true, force: true });

const shape = `${args.connections} connections x ${args.streams} streams, ${args.bytes}-byte unary, ${args.duration} s`;
console.log(`${cli === join(repo, "dist/cli.js") ? "this build" : cli}: h2c ${plain.reqPerSec?.toFixed(0)} calls/s (${plain.succeeded}/${plain.total} ok) [${shape}]`);
if (secure !== undefined) {
  console.log(`this build: TLS ${secure.reqPerSec?.toFixed(0)} calls/s (${secure.succeeded}/${secure.total} ok)`);
  console.log(`ratio TLS / h2c: ${(secure.reqPerSec / plain.reqPerSec).toFixed(2)}`);
}
process.exit(0);
