// Which inline caches end megamorphic in one process and not in another: two V8 logs written with
// --log-ic (e.g. `node bench/cpu-profile.mjs --shape 10x10 --calls 20000 --config-extra X.yaml
// --node-args="--log-ic --logfile=A.log --no-logfile-per-isolate"`, once per config), each IC
// event named by the code object its pc falls in (the log's code-creation lines), keyed by
// (IC kind, function, line, column). Prints the sites whose last state is megamorphic ("N") in A
// and not in B, with the number of state changes each went through. (docs/contributing/benchmarks.md)
//
//   node bench/ic-diff.mjs A.log B.log
import { readFileSync } from "node:fs";

/** One CSV line of V8's log (its fields may be quoted, with "" for a quote). */
function fields(line) {
  const out = [];
  let cur = "";
  let q = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (q) {
      if (c === '"' && line[i + 1] === '"') (cur += '"'), i++;
      else if (c === '"') q = false;
      else cur += c;
    } else if (c === '"') q = true;
    else if (c === ",") out.push(cur), (cur = "");
    else cur += c;
  }
  out.push(cur);
  return out;
}

function load(file) {
  const codes = []; // [start, end, name], newest last
  const last = new Map();
  const changes = new Map();
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (line.startsWith("code-creation,")) {
      const f = fields(line);
      const start = Number.parseInt(f[4], 16);
      const size = Number(f[5]);
      if (Number.isFinite(start) && Number.isFinite(size)) codes.push([start, start + size, f[6] ?? "?"]);
      continue;
    }
    const comma = line.indexOf(",");
    if (comma < 0 || !line.slice(0, comma).endsWith("IC")) continue;
    const f = fields(line);
    const pc = Number.parseInt(f[1], 16);
    let name = "?";
    // (code is made and thrown away all the time: the newest code object holding the pc)
    for (let i = codes.length - 1, seen = 0; i >= 0 && seen < 4000; i--, seen++) {
      const c = codes[i];
      if (c[0] <= pc && pc < c[1]) {
        name = c[2].slice(0, 90);
        break;
      }
    }
    const key = `${f[0]} ${name} ${f[3]}:${f[4]}`;
    last.set(key, f[6]);
    changes.set(key, (changes.get(key) ?? 0) + 1);
  }
  return { last, changes };
}

const [fa, fb] = process.argv.slice(2);
if (fa === undefined || fb === undefined) {
  console.error("usage: node bench/ic-diff.mjs A.log B.log");
  process.exit(2);
}
const a = load(fa);
const b = load(fb);
const only = [...a.last].filter(([k, v]) => v === "N" && b.last.get(k) !== "N").map(([k]) => k).sort();
console.log(`megamorphic in ${fa} and not in ${fb}: ${only.length} sites`);
for (const k of only) console.log(`  ${k}  (A: ${a.changes.get(k)} changes; B: ${b.last.get(k) ?? "not reached"}, ${b.changes.get(k) ?? 0})`);
