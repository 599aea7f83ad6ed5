// The load shapes. `kind` picks the load generator; `only` limits which peers a shape makes
// sense for (the reason is printed for the others); `fresh` restarts the peer first, so a
// memory figure is a fresh process's RSS delta and not the high-water mark of earlier shapes.
import { STREAM_COUNT_HEADER, STREAM_PATH, UNARY_PATH } from "./grpc.mjs";

const MiB = 1 << 20;
const SAME_MEMORY = "the access log is written when a call ends, so held calls and idle connections cost what they cost dojang (skipped to keep the run under 10 minutes)";

export const SHAPES = [
  {
    id: "unary-c1",
    title: "unary 100 B, 1 stream (latency)",
    kind: "latency",
    path: UNARY_PATH,
    size: 100,
  },
  {
    id: "unary-10x10",
    title: "unary 100 B, 10 conns × 10 streams",
    kind: "h2load",
    path: UNARY_PATH,
    size: 100,
    clients: 10,
    streams: 10,
  },
  {
    id: "unary-50x20",
    title: "unary 100 B, 50 conns × 20 streams",
    kind: "h2load",
    path: UNARY_PATH,
    size: 100,
    clients: 50,
    streams: 20,
  },
  {
    id: "stream-64KiB",
    title: "server streaming, 32 × 64 KiB per call, 2 conns × 2 streams",
    kind: "h2load",
    path: STREAM_PATH,
    size: 8,
    clients: 2,
    streams: 2,
    headers: [`${STREAM_COUNT_HEADER}: 32`],
    bytes: true,
  },
  {
    // issue 33 item 0: one long stream, the shape of a large download (the stream window's cost)
    id: "stream-long",
    title: "server streaming, 1,024 × 64 KiB in one call, 1 conn × 1 stream",
    kind: "h2load",
    path: STREAM_PATH,
    size: 8,
    clients: 1,
    streams: 1,
    headers: [`${STREAM_COUNT_HEADER}: 1024`],
    bytes: true,
  },
  {
    id: "unary-1MiB",
    title: "unary 1 MiB each way, 4 conns × 2 streams",
    kind: "h2load",
    path: UNARY_PATH,
    size: MiB,
    clients: 4,
    streams: 2,
  },
  {
    id: "held-1k",
    title: "1,000 calls held open (10 conns × 100), memory",
    kind: "hold",
    streams: 1000,
    perConn: 100,
    only: "proxied",
    skip: { "dojang-log": SAME_MEMORY },
    fresh: true,
  },
  {
    id: "held-10k",
    title: "10,000 calls held open (100 conns × 100), memory; RSS again 3 s after they end",
    kind: "hold",
    streams: 10_000,
    perConn: 100,
    only: "proxied",
    skip: { "dojang-log": SAME_MEMORY },
    fresh: true,
    afterMs: 3000,
  },
  {
    id: "idle-5k",
    title: "5,000 idle connections, memory",
    kind: "idle",
    conns: 5000,
    only: "proxied",
    skip: { "dojang-log": SAME_MEMORY },
    fresh: true,
  },
  {
    id: "admin-metrics",
    title: "admin GET /metrics, HTTP/1.1, 10 conns (autocannon)",
    kind: "admin",
    conns: 10,
    only: "dojang",
  },
];

// Bytes of gRPC messages the upstream sends back per call (h2load's received bytes are checked
// against it: h2load itself looks at nothing but the HTTP status).
for (const s of SHAPES) {
  if (s.kind !== "h2load") continue;
  const n = s.headers ? Number(s.headers[0].split(":")[1]) : 0;
  s.responseBytes = s.path === STREAM_PATH ? n * (5 + 64 * 1024) : 5 + s.size;
}

// Opt-in (--shapes soak-1m): about 2 minutes per peer, too long for the default run.
export const EXTRA_SHAPES = [
  {
    id: "soak-1m",
    title: "1,000,000 unary 100 B calls (10 conns × 10 streams): RSS after 100k and after 1M, each 3 s after the load stops",
    kind: "soak",
    path: UNARY_PATH,
    size: 100,
    clients: 10,
    streams: 10,
    first: 100_000,
    total: 1_000_000,
    settleMs: 3000,
    only: "proxied",
    fresh: true,
  },
];

export const QUICK_SHAPES = ["unary-c1", "unary-10x10", "stream-64KiB"];

export function shapeById(id) {
  const s = SHAPES.find((x) => x.id === id) ?? EXTRA_SHAPES.find((x) => x.id === id);
  if (s === undefined) throw new Error(`unknown shape "${id}" (known: ${[...SHAPES, ...EXTRA_SHAPES].map((x) => x.id).join(", ")})`);
  return s;
}
