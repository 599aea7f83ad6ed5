// node:http2's own floor for one side call: a plain client session to the service that makes unary
// calls with a fixed request (framed, given in hex) and reads each answer to its end, nothing
// decoded. bench/side-call-cost.mjs measures this process's CPU per call beside dojang's: what any
// side call made with node:http2 costs at least. Commands on stdin, one per line: "<calls> <concurrency>";
// it answers "done <failed>" on stdout, and exits when stdin closes.
//   node bench/lib/unary-floor.mjs <host:port> <:path> <request hex> [header=value ...]
import http2 from "node:http2";
import { createInterface } from "node:readline";

const [target, path, hex, ...extra] = process.argv.slice(2);
const body = Buffer.from(hex, "hex");
const headers = { ":method": "POST", ":path": path, ":authority": target, "content-type": "application/grpc", te: "trailers", "grpc-timeout": "2000m" };
for (const kv of extra) {
  const i = kv.indexOf("=");
  headers[kv.slice(0, i)] = kv.slice(i + 1);
}
const s = http2.connect(`http://${target}`);
s.on("error", (err) => {
  console.error(`unary-floor: ${err.message}`);
  process.exit(1);
});

function one() {
  return new Promise((resolve) => {
    const req = s.request(headers, { endStream: false });
    let status;
    req.on("response", (h) => (status = h["grpc-status"] ?? status));
    req.on("data", () => {});
    req.on("trailers", (t) => (status = t["grpc-status"]));
    req.on("error", () => {});
    req.on("close", () => resolve(status === "0"));
    req.end(body);
  });
}

const rl = createInterface({ input: process.stdin });
// stdin closed: done (an exit of its own, so a profiler around it writes its file)
rl.on("close", () => {
  s.close();
  process.exit(0);
});
rl.on("line", async (line) => {
  const [n, conc] = line.split(" ").map(Number);
  let left = n;
  let failed = 0;
  await Promise.all(
    Array.from({ length: conc }, async () => {
      while (left > 0) {
        left--;
        if (!(await one())) failed++;
      }
    }),
  );
  process.stdout.write(`done ${failed}\n`);
});
s.once("remoteSettings", () => process.stdout.write("ready\n"));
