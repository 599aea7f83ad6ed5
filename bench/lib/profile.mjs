// Summarises V8 .cpuprofile files (node --cpu-prof, written when a dojang process exits):
// self time by area (dojang's own code, node's http2 layer, streams, GC, logging, metrics...)
// and the hottest functions. Idle time is left out of the percentages.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

function area(fn, url) {
  if (fn === "(garbage collector)") return "GC";
  if (fn === "(program)") return "(program: native, not attributed)";
  if (fn === "(idle)") return "(idle)";
  if (url === "") return "native builtins";
  if (/node:internal\/http2|node:http2/.test(url)) return "node http2 (JS side)";
  if (/node:internal\/(streams|stream_base_commons)|node:stream/.test(url)) return "node streams";
  if (/node:internal\/(timers|process\/task_queues)|node:timers/.test(url)) return "node timers / microtasks";
  if (/node:internal\/(event_target|events)|node:events/.test(url)) return "node events";
  if (url.startsWith("node:")) return "node (other)";
  if (/node_modules\/(pino|sonic-boom|thread-stream|fast-redact|quick-format)/.test(url)) return "logging (pino)";
  if (/node_modules\/prom-client/.test(url)) return "metrics (prom-client)";
  if (url.includes("node_modules/")) return "other dependencies";
  if (url.includes("/dist/")) return "dojang (dist/)";
  return "other";
}

function shortUrl(url) {
  if (url === "") return "";
  const i = url.indexOf("/dist/");
  if (i >= 0) return url.slice(i + 1);
  const j = url.indexOf("node_modules/");
  if (j >= 0) return url.slice(j + "node_modules/".length);
  return url.replace(/^file:\/\//, "");
}

/** { files, samples, busySamples, areas: [{area, pct}], top: [{fn, where, pct}] } or undefined. */
export function summarizeProfiles(dir, topN = 25) {
  let files;
  try {
    files = readdirSync(dir).filter((f) => f.endsWith(".cpuprofile"));
  } catch {
    return undefined;
  }
  if (files.length === 0) return undefined;
  const byFn = new Map();
  const byArea = new Map();
  let busy = 0;
  let total = 0;
  for (const f of files) {
    const prof = JSON.parse(readFileSync(join(dir, f), "utf8"));
    const nodes = new Map(prof.nodes.map((n) => [n.id, n]));
    const hits = new Map();
    // timeDeltas give each sample its own length; fall back to hitCount.
    if (Array.isArray(prof.samples) && Array.isArray(prof.timeDeltas) && prof.samples.length === prof.timeDeltas.length) {
      for (let i = 0; i < prof.samples.length; i++) {
        const dt = prof.timeDeltas[i + 1] ?? prof.timeDeltas[i];
        hits.set(prof.samples[i], (hits.get(prof.samples[i]) ?? 0) + Math.max(0, dt));
      }
    } else {
      for (const n of prof.nodes) hits.set(n.id, n.hitCount ?? 0);
    }
    for (const [id, us] of hits) {
      const n = nodes.get(id);
      if (!n) continue;
      const cf = n.callFrame;
      const fn = cf.functionName || "(anonymous)";
      const a = area(fn, cf.url);
      total += us;
      if (a === "(idle)") continue;
      busy += us;
      byArea.set(a, (byArea.get(a) ?? 0) + us);
      const key = `${fn}\u0000${shortUrl(cf.url)}${cf.url ? `:${cf.lineNumber + 1}` : ""}`;
      byFn.set(key, (byFn.get(key) ?? 0) + us);
    }
  }
  if (busy === 0) return undefined;
  const pct = (v) => Math.round((v / busy) * 1000) / 10;
  return {
    files: files.length,
    busySeconds: Math.round(busy / 1e5) / 10,
    idleSeconds: Math.round((total - busy) / 1e5) / 10,
    areas: [...byArea].sort((a, b) => b[1] - a[1]).map(([k, v]) => ({ area: k, pct: pct(v) })),
    top: [...byFn]
      .sort((a, b) => b[1] - a[1])
      .slice(0, topN)
      .map(([k, v]) => {
        const [fn, where] = k.split("\u0000");
        return { fn, where, pct: pct(v) };
      }),
  };
}
