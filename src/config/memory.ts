// The memory budget (`memory: { limit }`): what one limit for the whole container means for each
// process, pure (no I/O; reading the cgroup limit is src/proxy/observe/heap.ts, applying the flags
// is the launcher's, src/cli.ts + src/launch.ts).
//
// A dojang process's RSS is (a) node itself with its http2 code and dojang's code, a floor that
// does not move with load (an idle dojang is ~75 MiB RSS, of which ~13 MiB V8 heap; node:http2
// alone is 57 MiB), (b) V8's young generation, which
// V8 grows under load to 3 × the semi-space size (and keeps), (c) V8's old generation, whose
// growth V8 paces by the limit it has (a low --max-old-space-size makes V8 collect before it
// grows the heap: its heap-growing factor is lower for small heaps), and (d) bytes held outside
// the heap: socket reads and queued writes, most of them the response bytes of stalled calls,
// which the overload manager bounds (src/proxy/observe/overload.ts). The plan gives each of
// (b), (c), (d) its share of the per-process budget, after (a):
//
//   per process   B = limit                              (workers: 1)
//                 B = (limit − 80 MiB) / N                (workers: N > 1; the cluster primary
//                                                          forwards no call, its share is fixed)
//   semi-space    B / 64 clamped to 1..2 MiB, a power of two (the default without a limit is
//                 2 MiB: larger ones cost RSS and bought no CPU; README, Memory budget)
//   buffers       (B − 64 MiB) / 4 for the process (floor 2 MiB), a quarter of that per
//                 connection (1..8 MiB)
//   old space     B − 64 MiB − 3 × B/64 (clamped as the semi-space) − buffers (floor 8 MiB)
//
//   128 MiB → semi-space 2, old space 42, buffers 16 (4 per connection); 256 MiB → 2, 138, 48 (8)
//
// With no limit (none configured, no cgroup limit) only the semi-space size is set (the measured
// default, DEFAULT_SEMI_SPACE_MIB) and V8 sizes the old generation itself; the buffer budgets are
// the overload manager's defaults.

const MiB = 1_048_576;

/** Where the limit came from. */
export type MemoryLimitSource = "config" | "cgroup" | "none";

/** What the non-heap part of one dojang process takes (node, its http2 code, dojang's code). */
export const NATIVE_RESERVE_BYTES = 64 * MiB;
/** The cluster primary's share with workers: N > 1 (it forwards no call; ~75 MiB idle measured). */
export const PRIMARY_RESERVE_BYTES = 80 * MiB;
/** The smallest per-process budget the floors below fit in; `memory.limit` is refused below it. */
export const MIN_PROCESS_BYTES = 96 * MiB;
/** Semi-space size without a limit (MiB), chosen by measurement (README, "Memory"). */
export const DEFAULT_SEMI_SPACE_MIB = 2;
/** Without a limit, the overload manager's budgets (README "Protections"). */
export const DEFAULT_BUFFERS = Object.freeze({ perConnectionBytes: 8 * MiB, processBytes: 256 * MiB });

const SEMI_MIN_MIB = 1;
/** a limit only ever lowers the semi-space below the measured default (larger ones cost RSS and bought no CPU) */
const SEMI_MAX_MIB = DEFAULT_SEMI_SPACE_MIB;
const OLD_FLOOR_MIB = 8;
const BUFFERS_FLOOR = 2 * MiB;
const PER_CONN_MIN = 1 * MiB;

export interface MemoryPlan {
  /** the container's limit the plan divides (bytes), null for none */
  readonly limitBytes: number | null;
  readonly source: MemoryLimitSource;
  /** processes that serve calls (config `workers`) */
  readonly workers: number;
  /** each serving process's share (bytes), null without a limit */
  readonly perProcessBytes: number | null;
  /** V8's --max-semi-space-size (MiB); the young generation is up to 3 × this */
  readonly semiSpaceMiB: number;
  /** V8's --max-old-space-size (MiB), null: V8's own default */
  readonly oldSpaceMiB: number | null;
  /** the overload manager's budgets (per process) */
  readonly buffers: { readonly perConnectionBytes: number; readonly processBytes: number };
  /** the node flags the launcher starts the process with */
  readonly nodeFlags: readonly string[];
  /** set when the limit is too small for the plan's floors (a cgroup limit; the config refuses it) */
  readonly note?: string;
}

/** The per-process budget; null without a limit. */
export function perProcessBytes(limitBytes: number | null, workers: number): number | null {
  if (limitBytes === null) return null;
  const n = Math.max(1, Math.floor(workers));
  return n === 1 ? limitBytes : Math.floor((limitBytes - PRIMARY_RESERVE_BYTES) / n);
}

/** The smallest `memory.limit` for `workers` processes (the floors fit in each share). */
export function minimumLimitBytes(workers: number): number {
  const n = Math.max(1, Math.floor(workers));
  return n === 1 ? MIN_PROCESS_BYTES : PRIMARY_RESERVE_BYTES + n * MIN_PROCESS_BYTES;
}

/** Largest power of two ≤ x (x ≥ 1). */
function pow2Floor(x: number): number {
  return 2 ** Math.floor(Math.log2(x));
}

/** The plan for `limitBytes` (null: no limit) shared by `workers` serving processes. */
export function memoryPlan(limitBytes: number | null, source: MemoryLimitSource, workers: number): MemoryPlan {
  const n = Math.max(1, Math.floor(workers));
  const b = perProcessBytes(limitBytes, n);
  if (limitBytes === null || b === null) {
    return {
      limitBytes: null,
      source: "none",
      workers: n,
      perProcessBytes: null,
      semiSpaceMiB: DEFAULT_SEMI_SPACE_MIB,
      oldSpaceMiB: null,
      buffers: { ...DEFAULT_BUFFERS },
      nodeFlags: [`--max-semi-space-size=${DEFAULT_SEMI_SPACE_MIB}`],
    };
  }
  // the young generation's reserve is 3 × B/64 (clamped), not 3 × the power of two below it, so
  // the old space never shrinks when a larger limit doubles the semi-space (monotone in the limit)
  const semiShare = Math.min(SEMI_MAX_MIB, Math.max(SEMI_MIN_MIB, b / (64 * MiB)));
  const semi = pow2Floor(semiShare);
  const spare = Math.max(0, b - NATIVE_RESERVE_BYTES);
  const processBytes = Math.min(DEFAULT_BUFFERS.processBytes, Math.max(BUFFERS_FLOOR, Math.floor(spare / 4)));
  const perConnectionBytes = Math.min(processBytes, DEFAULT_BUFFERS.perConnectionBytes, Math.max(PER_CONN_MIN, Math.floor(processBytes / 4)));
  const oldSpaceMiB = Math.max(OLD_FLOOR_MIB, Math.floor((b - NATIVE_RESERVE_BYTES - 3 * semiShare * MiB - processBytes) / MiB));
  const plan: MemoryPlan = {
    limitBytes,
    source,
    workers: n,
    perProcessBytes: b,
    semiSpaceMiB: semi,
    oldSpaceMiB,
    buffers: { perConnectionBytes, processBytes },
    nodeFlags: [`--max-semi-space-size=${semi}`, `--max-old-space-size=${oldSpaceMiB}`],
  };
  if (b < MIN_PROCESS_BYTES) {
    return { ...plan, note: `the limit leaves ${Math.floor(b / MiB)} MiB per process, below the ${MIN_PROCESS_BYTES / MiB} MiB the plan's floors need` };
  }
  return plan;
}

/**
 * The limit a cgroup file states: memory.max (v2) or memory.limit_in_bytes (v1). "max", an
 * unreadable file, garbage, 0, or an absurd value (v1 says 9223372036854771712 for none) → undefined.
 */
export function parseCgroupMemoryLimit(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const t = text.trim();
  if (!/^\d+$/.test(t)) return undefined;
  const n = Number(t);
  // 2^50 (1 PiB): above any container's real limit; v1's "none" is near 2^63
  if (!Number.isSafeInteger(n) || n <= 0 || n >= 2 ** 50) return undefined;
  return n;
}

/**
 * The memory limit that applies to this process, from /proc/self/cgroup's text and a reader of
 * /sys/fs/cgroup files (injected: this function is pure). Each cgroup from the process's own up
 * to the root is asked (the lowest limit wins); where the process's path does not exist under
 * /sys/fs/cgroup (a container that mounts its own cgroup as the root), the root files are asked.
 * v2 (`0::/path`, memory.max) and v1 (`N:memory:/path` or `N:...,memory,...:/path`,
 * memory/memory.limit_in_bytes) alike. Returns the bytes and the file that said so.
 */
export function cgroupMemoryLimit(procSelfCgroup: string | undefined, read: (file: string) => string | undefined): { bytes: number; file: string } | undefined {
  const candidates: string[] = [];
  for (const line of (procSelfCgroup ?? "").split("\n")) {
    const m = /^\d+:([^:]*):(\/.*)$/.exec(line.trim());
    if (m === null) continue;
    const controllers = (m[1] ?? "").split(",");
    const path = m[2] ?? "/";
    if (m[1] === "") candidates.push(...ancestors(path).map((p) => `/sys/fs/cgroup${p}memory.max`));
    else if (controllers.includes("memory")) candidates.push(...ancestors(path).map((p) => `/sys/fs/cgroup/memory${p}memory.limit_in_bytes`));
  }
  candidates.push("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes");
  let best: { bytes: number; file: string } | undefined;
  const seen = new Set<string>();
  for (const file of candidates) {
    if (seen.has(file)) continue;
    seen.add(file);
    const bytes = parseCgroupMemoryLimit(read(file));
    if (bytes !== undefined && (best === undefined || bytes < best.bytes)) best = { bytes, file };
  }
  return best;
}

/** "/a/b" → ["/a/b/", "/a/", "/"] (each with a trailing slash, ready for a file name). */
function ancestors(path: string): string[] {
  const parts = path.split("/").filter((p) => p !== "" && p !== "." && p !== "..");
  const out: string[] = [];
  for (let i = parts.length; i >= 0; i--) out.push("/" + parts.slice(0, i).map((p) => p + "/").join(""));
  return out;
}

/** The plan as the launcher hands it to the served process (env DOJANG_MEMORY_PLAN), and back. */
export const MEMORY_PLAN_ENV = "DOJANG_MEMORY_PLAN";

/** Reads a plan the launcher wrote; undefined for anything that is not one. */
export function planFromEnv(text: string | undefined): MemoryPlan | undefined {
  if (text === undefined || text === "") return undefined;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof v !== "object" || v === null) return undefined;
  const p = v as Partial<MemoryPlan>;
  const okNum = (x: unknown): boolean => typeof x === "number" && Number.isFinite(x) && x > 0;
  if (!(p.limitBytes === null || okNum(p.limitBytes))) return undefined;
  if (p.source !== "config" && p.source !== "cgroup" && p.source !== "none") return undefined;
  if (!okNum(p.workers) || !okNum(p.semiSpaceMiB) || !(p.oldSpaceMiB === null || okNum(p.oldSpaceMiB))) return undefined;
  if (typeof p.buffers !== "object" || p.buffers === null || !okNum(p.buffers.perConnectionBytes) || !okNum(p.buffers.processBytes)) return undefined;
  if (!Array.isArray(p.nodeFlags) || !p.nodeFlags.every((f) => typeof f === "string")) return undefined;
  return p as MemoryPlan;
}
