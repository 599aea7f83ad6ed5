// What checking a request's metadata costs per call (src/translate/metadata.ts requestFieldProblem,
// run on every forwarded field in copyRequestHeaders' pass): this build's against another's
// (--alt-dist DIR: e.g. a copy of dist/ built before a change), side by side in one process, in
// alternating rounds, for three heads: a grpc-js client's usual fields, the same with a 1 KB
// bearer token (an edge gateway's call with a JWT), and with 256 bytes of base64 -bin metadata. Prints ns per head, medians over the rounds,
// and each round's ratio this/alt.
//
//   npm run build && node bench/field-check.mjs --alt-dist .bench-alt-meta [--rounds 9] [--heads 200000]
//
// No network; no process started.
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

const ROOT = resolve(fileURLToPath(new URL("..", import.meta.url)));
const { values: a } = parseArgs({
  options: {
    dist: { type: "string", default: join(ROOT, "dist") },
    "alt-dist": { type: "string" },
    rounds: { type: "string", default: "9" },
    heads: { type: "string", default: "200000" },
  },
});
const load = async (dir) => (await import(pathToFileURL(join(resolve(dir), "translate", "metadata.js")).href)).requestFieldProblem;
const builds = [{ id: "this", check: await load(a.dist) }];
if (a["alt-dist"] !== undefined) builds.push({ id: "alt", check: await load(a["alt-dist"]) });

// the fields a grpc-js client sends beside the pseudo-headers, as node hands them over (flat strings)
const flat = (s) => Buffer.from(s, "latin1").toString("latin1");
const usual = [
  ["content-type", "application/grpc"],
  ["te", "trailers"],
  ["user-agent", "grpc-node-js/1.14.0"],
  ["grpc-accept-encoding", "identity,deflate,gzip"],
  ["accept-encoding", "identity"],
  ["grpc-timeout", "4999870u"],
  ["x-request-id", "3f2a1b4c-5d6e-4f70-8192-a3b4c5d6e7f8"],
].map(([n, v]) => [flat(n), flat(v)]);
const jwt = [...usual, [flat("authorization"), flat(`Bearer ${"eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9".repeat(28)}`)]];
const bin = [...usual, [flat("x-session-bin"), Buffer.alloc(192, 0xa7).toString("base64")]];
const heads = { usual, "with a 1 KB token": jwt, "with 256 B of -bin": bin };

const N = Number(a.heads);
function time(check, head) {
  const t0 = process.hrtime.bigint();
  let bad = 0;
  for (let i = 0; i < N; i++) for (let j = 0; j < head.length; j++) if (check(head[j][0], head[j][1]) !== null) bad++;
  if (bad !== 0) throw new Error("a usual field was refused");
  return Number(process.hrtime.bigint() - t0) / N;
}
const median = (xs) => [...xs].sort((x, y) => x - y)[xs.length >> 1];
const out = {};
for (const [name, head] of Object.entries(heads)) {
  for (const b of builds) time(b.check, head); // warm-up
  const ns = Object.fromEntries(builds.map((b) => [b.id, []]));
  for (let r = 0; r < Number(a.rounds); r++) {
    const order = r % 2 === 0 ? builds : [...builds].reverse();
    for (const b of order) ns[b.id].push(time(b.check, head));
  }
  out[name] = { ns: Object.fromEntries(builds.map((b) => [b.id, +median(ns[b.id]).toFixed(1)])), ...(builds.length > 1 ? { ratio: +median(ns.this.map((x, i) => x / ns.alt[i])).toFixed(3) } : {}) };
  console.log(`${name.padEnd(18)} ${builds.map((b) => `${b.id} ${out[name].ns[b.id]} ns/head`).join("  ")}${out[name].ratio === undefined ? "" : `  this/alt ×${out[name].ratio}`}`);
}
console.log(`JSON ${JSON.stringify({ heads: N, rounds: Number(a.rounds), out })}`);
