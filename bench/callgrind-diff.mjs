// The difference of two callgrind_annotate outputs (--inclusive=no --threshold=100) of the same
// proxy after the same warm-up, divided by the extra calls: instructions per call by owner and by
// function (docs/contributing/cpu-profile.md).
//   node bench/callgrind-diff.mjs FEWER.txt MORE.txt EXTRA_CALLS [TOP]
import { readFileSync } from "node:fs";
const [a, b, nS, top] = process.argv.slice(2);
const n = Number(nS);
function load(f) {
  const m = new Map();
  for (const line of readFileSync(f, "utf8").split("\n")) {
    const r = /^\s*([\d,]+) \([ \d.]+%\)\s+(.*)$/.exec(line);
    if (!r || r[2].includes("PROGRAM TOTALS")) continue;
    m.set(r[2], (m.get(r[2]) ?? 0) + Number(r[1].replaceAll(",", "")));
  }
  return m;
}
const A = load(a), B = load(b);
const d = new Map();
for (const k of new Set([...A.keys(), ...B.keys()])) d.set(k, ((B.get(k) ?? 0) - (A.get(k) ?? 0)) / n);
function owner(k) {
  const fn = k.replace(/ \[[^\]]*\]$/, "");
  const obj = (/\[([^\]]*)\]$/.exec(k) ?? [])[1] ?? "";
  if (/nghttp2_/.test(fn)) return "nghttp2 (C)";
  if (/node::http2::/.test(fn)) return "node's http2 binding (C++)";
  if (/Scaveng|Marking|MarkCompact|Sweep|::Heap::|GCTracer|Evacuat|ConcurrentMark|MinorMS|RememberedSet|SlotSet|Worklist|heap::base|cppgc|LargeObjectSpace|PagedSpace|NewSpace|MemoryAllocator|MemoryChunk|ArrayBufferSweeper|Compactor|IncrementalMarking|Heap::|UpdatePointers|MarkingBarrier|WriteBarrier/.test(fn)) return "V8 GC";
  if (/^\?\?\?:Builtins_/.test(fn)) return "V8 builtins (ICs, interpreter, runtime stubs)";
  if (/v8::internal::(Scanner|Parser|Preparse|Compiler|Bytecode|Maglev|maglev|compiler::|Turbofan|turboshaft|Ast|FuncNameInferrer|Zone)|turboshaft|maglev/.test(fn)) return "V8 compilers / parser";
  if (/v8::|Runtime_|v8_/.test(fn)) return "V8 runtime (C++)";
  if (/node::|napi|node_/.test(fn)) return "node C++ (other: streams, timers, async hooks)";
  if (/uv_|uv__/.test(fn)) return "libuv";
  if (/libc|ld-linux|libm|libstdc|libgcc/.test(obj)) return "libc / libstdc++ (memcpy, malloc)";
  if (/^\?\?\?:0x/.test(fn) || obj === "") return "JIT code (JS compiled by Sparkplug/Maglev/TurboFan)";
  return "other: " + obj.replace(/^.*\/node_modules\//, "node_modules/");
}
const by = new Map();
let tot = 0;
for (const [k, v] of d) { const o = owner(k); by.set(o, (by.get(o) ?? 0) + v); tot += v; }
console.log(`instructions per call: ${Math.round(tot).toLocaleString("en-US")}`);
for (const [k, v] of [...by].sort((x, y) => y[1] - x[1])) console.log(`${Math.round(v).toLocaleString("en-US").padStart(9)}  ${((v / tot) * 100).toFixed(1).padStart(5)} %  ${k}`);
console.log("top functions (self, per call):");
for (const [k, v] of [...d].sort((x, y) => y[1] - x[1]).slice(0, Number(top ?? 30))) console.log(`${Math.round(v).toLocaleString("en-US").padStart(9)}  ${owner(k).slice(0, 12).padEnd(12)} ${k.replace(/ \[[^\]]*\]$/, "").slice(0, 150)}`);
