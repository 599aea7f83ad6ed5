// The house review's structural figures, counted the same way each time (house-review-3 §3, §5):
// listener.ts lines; Call's fields (public, mutable) and which files assign them; the import
// circles of src/ with `import type` edges counted; the 5-byte gRPC prefixes read or written by
// hand outside src/translate/framing.ts. Reads the source only: `node scripts/house-figures.mjs`.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const SRC = resolve(import.meta.dirname, "../src");
const rel = (f) => relative(SRC, f).split("\\").join("/");
const list = (d) => readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? list(join(d, e.name)) : [join(d, e.name)]));
const files = list(SRC).filter((f) => f.endsWith(".ts")).map(rel);
const read = (f) => readFileSync(join(SRC, f), "utf8");
const strip = (t) => t.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "").replace(/\s\/\/.*$/gm, "");

// --- listener.ts ---
const listenerLines = read("proxy/listener.ts").split("\n").length - 1;

// --- Call's fields ---
const callText = read("proxy/call/call.ts");
const classAt = callText.search(/export class Call\b/);
const body = callText.slice(classAt, callText.indexOf("\n}\n", classAt));
const fields = [];
for (const m of body.matchAll(/^ {2}((?:readonly |private |public |protected )*)([A-Za-z_$][\w$]*)[?!]?(?::|\s=)/gm)) {
  fields.push({ name: m[2], readonly: m[1].includes("readonly"), private: /private|protected/.test(m[1]) });
}
const mutable = fields.filter((f) => !f.readonly).map((f) => f.name);
// a write: `x.f =`, `x.f +=`…, `x.f++`, `++x.f`; `this.f` counts only in call.ts (elsewhere `this` is another class)
const writes = new Map(); // field -> Set(file)
for (const f of files.filter((f) => f.startsWith("proxy/"))) {
  const code = strip(read(f));
  for (const name of mutable) {
    const re = new RegExp(`([\\w$.!\\]\\)]+)\\.${name}\\s*(?:=(?!=)|\\+=|-=|\\?\\?=|\\|\\|=|&&=|\\+\\+|--)|(?:\\+\\+|--)([\\w$.!]+)\\.${name}\\b`, "g");
    for (const m of code.matchAll(re)) {
      const recv = m[1] ?? m[2];
      const isThis = recv === "this";
      if (f === "proxy/call/call.ts" ? !isThis && !/^(c|call|this\.call)$/.test(recv) : isThis) continue;
      // outside call/, only receivers that name a call (`call`, `.call`) are a call's fields
      if (!f.startsWith("proxy/call/") && !/(^|\.)call$/.test(recv)) continue;
      if (!writes.has(name)) writes.set(name, new Set());
      writes.get(name).add(f);
    }
  }
}
const outside = [...writes].filter(([, s]) => [...s].some((f) => f !== "proxy/call/call.ts"));
const twoFiles = [...writes].filter(([, s]) => s.size > 1);
const methods = [...body.matchAll(/^ {2}(?:private |static |async |get |set )*([A-Za-z_$][\w$]*)\s*\([^)]*\)\s*(?::\s*[^{]+)?\{/gm)].map((m) => m[1]).filter((n) => n !== "constructor");

// --- import circles, `import type` counted ---
function imports(f) {
  const code = strip(read(f));
  const specs = [];
  for (const m of code.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s*["']([^"']+)["']/gm)) specs.push(m[1]);
  for (const m of code.matchAll(/\bimport\s*\(\s*["']([^"']+)["']\s*\)/g)) specs.push(m[1]);
  return [...new Set(specs.filter((s) => s.startsWith(".")).map((s) => rel(resolve(SRC, dirname(f), s)).replace(/\.js$/, ".ts")))].filter((t) => files.includes(t));
}
const graph = new Map(files.map((f) => [f, imports(f)]));
// Tarjan's strongly connected components
let index = 0;
const idx = new Map(), low = new Map(), on = new Set(), stack = [], sccs = [];
function strong(v) {
  idx.set(v, index); low.set(v, index); index++; stack.push(v); on.add(v);
  for (const w of graph.get(v)) {
    if (!idx.has(w)) { strong(w); low.set(v, Math.min(low.get(v), low.get(w))); }
    else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
  }
  if (low.get(v) === idx.get(v)) {
    const c = [];
    let w;
    do { w = stack.pop(); on.delete(w); c.push(w); } while (w !== v);
    if (c.length > 1) sccs.push(c.sort());
  }
}
for (const f of files) if (!idx.has(f)) strong(f);

// --- hand-made 5-byte prefixes outside framing.ts ---
const PREFIX = /readUInt32BE|writeUInt32BE|alloc(?:Unsafe)?\(5\)|\[0\]\s*=\s*[^=]|prefixLength|byteAt\(chunks, [1-4]\)/;
const prefixFiles = files.filter((f) => f !== "translate/framing.ts" && f.startsWith("proxy/") && strip(read(f)).split("\n").some((l) => PREFIX.test(l)));

const out = {
  files: files.length,
  "listener.ts lines": listenerLines,
  "Call fields": fields.length,
  "Call fields public": fields.filter((f) => !f.private).length,
  "Call fields mutable": mutable.length,
  "Call methods": methods.length,
  "Call fields assigned outside call.ts": outside.length,
  "  by field": Object.fromEntries(outside.map(([n, s]) => [n, [...s].map((f) => f.replace("proxy/call/", "")).sort().join(" ")])),
  "Call fields assigned in two or more files": twoFiles.length,
  "import circles (type edges counted)": sccs.length,
  "  circles": sccs.map((c) => `${c.length} files: ${c.join(" ")}`),
  "files reading/writing a 5-byte prefix by hand (proxy/, outside framing.ts)": prefixFiles,
};
console.log(JSON.stringify(out, null, 2));
