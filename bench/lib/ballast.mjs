// A heap the size of dojang's for the plain node:http2 pipe (bench/long-stream-gc.mjs --proxy
// naive --ballast N): N small objects kept alive, then one memory-reducing GC as dojang runs at
// start-up (src/proxy/observe/heap.ts), so that V8 sets its limits from that heap. Loaded with
// node --expose-gc --import; BALLAST_OBJECTS is N (0: nothing kept, the GC still runs).
const n = Number(process.env["BALLAST_OBJECTS"] ?? "0");
globalThis.__ballast = Array.from({ length: n }, (_, i) => ({ i, s: `x${i}`, a: [i, i + 1] }));
setTimeout(() => globalThis.gc?.({ type: "major", execution: "sync", flavor: "last-resort" }), 100);
