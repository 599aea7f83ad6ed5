// The README's benchmark table in one run: the plain proxy shapes beside the upstream alone, nginx
// and HAProxy (bench/run.mjs), then the gateway shapes through the same build, each as dojang's CPU
// per call over a plain call measured in the same windows:
//   side calls   a global rate limit (envoyproxy/ratelimit on redis) and ext_authz (Istio's server)
//                over the call without either (bench/side-call-cost.mjs)
//   tracing      sampleRatio 1 and 0.01 over tracing off, all at once (bench/tracing-cost.mjs --together)
//   JSON         a transcoded JSON call and a Connect call over a native gRPC call (bench/json-transcoding.mjs)
// One after the other, never two at once (each pins its own processes); every figure in the README
// comes from the one invocation, whose outputs land in --results-dir (run.mjs's report, and each
// gateway benchmark's own output, verbatim, in gateway.md).
//
//   npm run build && node scripts/engines.mjs && node bench/release.mjs [--results-dir bench/results/release-perf4]
//        [--alt-dist DIR] [--rounds 3] [--side-rounds 7] [--tracing-rounds 11] [--json-rounds 3]
//
// Loopback only: each benchmark starts and stops its own processes by pid.
import { spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const { values: a } = parseArgs({
  options: {
    "results-dir": { type: "string", default: join(ROOT, "bench", "results", "release-perf4") },
    rounds: { type: "string", default: "3" },
    "side-rounds": { type: "string", default: "7" },
    "tracing-rounds": { type: "string", default: "11" },
    "json-rounds": { type: "string", default: "3" },
    shapes: { type: "string", default: "unary-c1,unary-10x10,unary-50x20,stream-64KiB,stream-long" },
    peers: { type: "string", default: "direct,dojang,node-naive,nginx,haproxy" },
    // a build of another commit (its dist, node_modules beside it) as the peer dojang-alt, and as the
    // "before" of the side-call and tracing benchmarks: the plain path and the gateway shapes
    // before/after in the same run
    "alt-dist": { type: "string" },
  },
});
const dir = a["results-dir"];
mkdirSync(dir, { recursive: true });

/** Runs one benchmark to its end, echoing and keeping its stdout; rejects on a non-zero exit. */
function run(args) {
  return new Promise((resolve, reject) => {
    process.stdout.write(`\n$ node ${args.join(" ")}\n`);
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (d) => {
      out += d;
      process.stdout.write(d);
    });
    child.on("exit", (code, signal) => (code === 0 ? resolve(out) : reject(new Error(`${args[0]} ended with ${signal ?? code}`))));
  });
}

const started = new Date();
const alt = a["alt-dist"];
const plain = ["bench/run.mjs", "--fresh", "--peers", alt ? `${a.peers},dojang-alt` : a.peers, ...(alt ? ["--dojang-alt-dist", alt] : []), "--shapes", a.shapes, "--rounds", a.rounds, "--results-dir", dir];
await run(plain);
const gateway = [
  ["bench/side-call-cost.mjs", ...(alt ? ["--alt-dist", alt] : []), "--rounds", a["side-rounds"], "--calls", "3000"],
  ["bench/tracing-cost.mjs", "--together", ...(alt ? ["--base-dist", alt, "--base-traced"] : []), "--rounds", a["tracing-rounds"]],
  ["bench/json-transcoding.mjs", ...(alt ? ["--alt-dist", alt] : []), "--rounds", a["json-rounds"]],
];
const sections = [];
for (const args of gateway) sections.push({ args, out: await run(args) });

const md = [
  `# Gateway shapes, the same run as [latest.md](latest.md)`,
  "",
  `Started ${started.toISOString().slice(0, 16)}Z by \`node bench/release.mjs --results-dir ${relative(ROOT, dir)}\`, after \`node ${plain.join(" ").replace(dir, relative(ROOT, dir))}\`. Each benchmark's output as it printed it.`,
  "",
  // the repository's own paths written relative to it: results are committed, machine paths are not
  ...sections.flatMap(({ args, out }) => [`## \`node ${args.join(" ")}\``, "", "```", out.trimEnd().split(ROOT).join(""), "```", ""]),
].join("\n");
writeFileSync(join(dir, "gateway.md"), md);
console.log(`\nrelease.mjs: wrote ${relative(ROOT, join(dir, "gateway.md"))} beside run.mjs's report`);
