// Preloaded into a dojang process by bench/alloc.mjs (node --import): measures what the process
// does over a window the harness opens and closes with SIGWINCH (first signal: start, second:
// stop). Nothing runs between the two signals but V8's own GC profiler (and, with
// DOJANG_ALLOC_SAMPLE=1, V8's sampling heap profiler): no timer, no per-call hook.
//
//   bytes allocated  the sum, over the window, of how much the V8 heap grew between collections:
//                    (used before GC i − used after GC i−1) summed over the GCs in the window,
//                    plus the growth from the last one to the end (v8.GCProfiler gives the
//                    heap statistics around each GC). Off-heap memory (Buffer backing stores
//                    from node's pool, nghttp2's own buffers) is not in it.
//   loop turns       libuv's own count of event-loop iterations (performance.nodeTiming
//                    .uvMetricsInfo.loopCount) and of events it handed out (events)
//   CPU              process.cpuUsage() (user + system) over the window
//   by function      (DOJANG_ALLOC_SAMPLE=1) the sampling heap profile with the objects later
//                    collected by minor and major GCs included: every sampled allocation,
//                    live or not, by the function that made it (DOJANG_ALLOC_SURVIVORS=1: only
//                    the objects that outlived a young-generation GC)
//
// The result is written as JSON to the file named by DOJANG_ALLOC_OUT (then DOJANG_ALLOC_OUT +
// ".started" is written when the window opens, so the harness knows the signal was taken).
import { existsSync, readFileSync, writeFileSync, renameSync } from "node:fs";
import { Session } from "node:inspector";
import { SourceMap } from "node:module";
import { fileURLToPath } from "node:url";
import v8 from "node:v8";

const out = process.env.DOJANG_ALLOC_OUT;
const sample = process.env.DOJANG_ALLOC_SAMPLE === "1";
const SAMPLING_INTERVAL = 2048;
/** the repository's root as a file: URL prefix (this file is bench/lib/alloc-probe.mjs) */
const REPO_URL = new URL("../../", import.meta.url).href;

if (out !== undefined && out !== "") {
  let state = null;
  let session = null;

  const post = (method, params) =>
    new Promise((resolve, reject) => session.post(method, params, (err, r) => (err ? reject(err) : resolve(r))));

  const uv = () => performance.nodeTiming.uvMetricsInfo;

  async function begin() {
    if (sample) {
      session ??= new Session();
      try {
        session.connect();
      } catch {
        /* already connected */
      }
      await post("HeapProfiler.startSampling", {
        samplingInterval: SAMPLING_INTERVAL,
        includeObjectsCollectedByMajorGC: true,
        // DOJANG_ALLOC_SURVIVORS=1 (alloc.mjs --survivors): left out, so only what outlived a scavenge counts
        includeObjectsCollectedByMinorGC: process.env.DOJANG_ALLOC_SURVIVORS !== "1",
      });
    }
    const profiler = new v8.GCProfiler();
    profiler.start();
    const m = uv();
    state = {
      profiler,
      used0: v8.getHeapStatistics().used_heap_size,
      loop0: m.loopCount,
      events0: m.events,
      cpu0: process.cpuUsage(),
      t0: performance.now(),
    };
    writeFileSync(out + ".started", "1");
  }

  /** The bundle's line and column mapped back to src/ or node_modules/ (dist/*.map), when there is a map. */
  const maps = new Map();
  function place(f) {
    if (f.url === "") return "";
    let m = maps.get(f.url);
    if (m === undefined) {
      m = null;
      try {
        const file = f.url.startsWith("file:") ? fileURLToPath(f.url) : "";
        if (file !== "" && existsSync(file + ".map")) m = new SourceMap(JSON.parse(readFileSync(file + ".map", "utf8")));
      } catch {
        m = null;
      }
      maps.set(f.url, m);
    }
    if (m !== null) {
      const e = m.findEntry(f.lineNumber, f.columnNumber);
      if (e !== undefined && e.originalSource !== undefined) {
        return `${e.originalSource.replace(/^.*?\/(src|node_modules)\//, "$1/")}:${e.originalLine + 1}`;
      }
    }
    // places in the repository are written relative to it (no machine's paths in the results)
    const url = f.url.startsWith(REPO_URL) ? f.url.slice(REPO_URL.length) : f.url;
    return `${url.replace(/^.*\/(dist|node_modules)\//, "$1/")}:${f.lineNumber + 1}`;
  }

  async function end() {
    const s = state;
    state = null;
    const m = uv();
    const cpu = process.cpuUsage(s.cpu0);
    const used1 = v8.getHeapStatistics().used_heap_size;
    const wallMs = performance.now() - s.t0;
    const gc = s.profiler.stop();
    let allocated = 0;
    let prev = s.used0;
    let gcMs = 0;
    const kinds = {};
    for (const e of gc?.statistics ?? []) {
      allocated += Math.max(0, e.beforeGC.heapStatistics.usedHeapSize - prev);
      prev = e.afterGC.heapStatistics.usedHeapSize;
      gcMs += e.cost / 1000;
      kinds[e.gcType] = (kinds[e.gcType] ?? 0) + 1;
    }
    allocated += Math.max(0, used1 - prev);
    const r = {
      allocatedBytes: allocated,
      loopTurns: m.loopCount - s.loop0,
      events: m.events - s.events0,
      cpuUs: cpu.user + cpu.system,
      wallMs,
      gcs: gc?.statistics?.length ?? 0,
      gcKinds: kinds,
      gcMs,
    };
    if (sample) {
      const { profile } = await post("HeapProfiler.stopSampling");
      r.sampledBytes = 0;
      r.byFunction = Object.create(null);
      r.byStack = Object.create(null);
      // `up`: the callers' names, nearest first
      const walk = (n, up) => {
        const f = n.callFrame;
        const where = place(f);
        const name = `${f.functionName || "(anonymous)"} ${where}`.trim();
        if (n.selfSize > 0) {
          r.sampledBytes += n.selfSize;
          r.byFunction[name] = (r.byFunction[name] ?? 0) + n.selfSize;
          // the allocating function and its two nearest callers: enough to tell who asked
          const st = [name, ...up.slice(0, 2)].join(" < ");
          r.byStack[st] = (r.byStack[st] ?? 0) + n.selfSize;
        }
        const next = [name, ...up.slice(0, 1)];
        for (const c of n.children) walk(c, next);
      };
      walk(profile.head, []);
    }
    writeFileSync(out + ".tmp", JSON.stringify(r));
    renameSync(out + ".tmp", out);
  }

  process.on("SIGWINCH", () => {
    const p = state === null ? begin() : end();
    p.catch((err) => {
      writeFileSync(out + ".tmp", JSON.stringify({ error: String(err?.stack ?? err) }));
      renameSync(out + ".tmp", out);
    });
  });
}
