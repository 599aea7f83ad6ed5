// The JSON transcoder alone (src/translate/transcode.ts), in one process: Transcoder.request and
// Transcoder.response on the bench's Item (the same message and rule as bench/json-transcoding.mjs),
// µs per call and V8 heap bytes per call, for this build's dist/ and, with --alt-dist DIR, another
// build's, in interleaved rounds after a warm-up round each (a before/after in one run; read the ratios). No sockets: what a
// JSON call's translation costs, apart from the bridge and node:http2 around it.
// The descriptor set is compiled by protoc (scripts/engines.mjs installs it) from the tests' shop.proto.
//
// usage: npm run build && node bench/transcoder.mjs [--alt-dist DIR] [--calls 200000] [--rounds 5]
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import v8 from "node:v8";
import { ITEM, compileShop } from "./lib/shop.mjs";

const { values: args } = parseArgs({
  options: {
    "alt-dist": { type: "string" },
    calls: { type: "string", default: "200000" },
    rounds: { type: "string", default: "5" },
  },
});
const repo = join(dirname(fileURLToPath(import.meta.url)), "..");
const tmp = mkdtempSync(join(tmpdir(), "dojang-transcoder-bench-"));
const descriptorSet = readFileSync(compileShop(tmp));
rmSync(tmp, { recursive: true, force: true });

// the bench's Item (bench/lib/shop.mjs), POSTed to /v1/items/{id}:archive with body "*"
const item = ITEM;
const body = Buffer.from(JSON.stringify(item));
const calls = Number(args.calls);

async function load(tag, dist) {
  const { Transcoder } = await import(pathToFileURL(join(resolve(dist), "translate", "transcode.js")).href);
  const tc = new Transcoder(descriptorSet, { ignoreUnknownFields: false, emitDefaults: false });
  const m = tc.match("POST", "/v1/items/item-1:archive");
  const bin = tc.request(m, "", body);
  if (JSON.parse(tc.response(m.rule, bin)).title !== item.title) throw new Error(`${tag}: the Item does not come back`);
  return { tag, tc, m, bin, request: [], response: [], reqBytes: [], resBytes: [] };
}

/** µs per call and V8 heap bytes per call of `f`, run `calls` times (bytes: how much the heap grew between collections, as bench/lib/alloc-probe.mjs counts them). */
function time(f) {
  const profiler = new v8.GCProfiler();
  profiler.start();
  const used0 = v8.getHeapStatistics().used_heap_size;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) f();
  const us = Number(process.hrtime.bigint() - t0) / calls / 1000;
  const used1 = v8.getHeapStatistics().used_heap_size;
  let allocated = 0;
  let prev = used0;
  for (const e of profiler.stop()?.statistics ?? []) {
    allocated += Math.max(0, e.beforeGC.heapStatistics.usedHeapSize - prev);
    prev = e.afterGC.heapStatistics.usedHeapSize;
  }
  allocated += Math.max(0, used1 - prev);
  return [us, allocated / calls];
}

const builds = [await load("dist", join(repo, "dist"))];
if (args["alt-dist"] !== undefined) builds.push(await load("alt", args["alt-dist"]));
// a round each, not counted: V8 compiles the hot functions in the first
for (const b of builds) {
  time(() => b.tc.request(b.m, "", body));
  time(() => b.tc.response(b.m.rule, b.bin));
}
for (let r = 0; r < Number(args.rounds); r++) {
  for (const b of r % 2 === 0 ? builds : [...builds].reverse()) {
    const [rq, rqB] = time(() => b.tc.request(b.m, "", body));
    const [rs, rsB] = time(() => b.tc.response(b.m.rule, b.bin));
    b.request.push(rq);
    b.response.push(rs);
    b.reqBytes.push(rqB);
    b.resBytes.push(rsB);
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
for (const b of builds) {
  console.log(`${b.tag.padEnd(5)} request ${median(b.request).toFixed(2)} µs (${b.request.map((x) => x.toFixed(2)).join(", ")})  ${Math.round(median(b.reqBytes))} B   response ${median(b.response).toFixed(2)} µs (${b.response.map((x) => x.toFixed(2)).join(", ")})  ${Math.round(median(b.resBytes))} B`);
}
if (builds.length === 2) {
  const [a, b] = builds;
  console.log(`dist ÷ alt   request ${(median(a.request) / median(b.request)).toFixed(2)}, response ${(median(a.response) / median(b.response)).toFixed(2)} (time); bytes ${(median(a.reqBytes) / median(b.reqBytes)).toFixed(2)}, ${(median(a.resBytes) / median(b.resBytes)).toFixed(2)}`);
}
