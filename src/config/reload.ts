// What a reload applies, and what it cannot: the new config compared with the running one key by
// key, each changed key named by its path in the file's own words (`timeout`, not `timeoutMs`).
// Pure; the CLI, the admin's POST /reload and the cluster primary log and answer with it.
//
// Listeners and clusters are matched by name, not by position: a reordered list is no change, a
// new name is an added listener or cluster (`listeners[2]`, its index in the new file), a name
// that is gone is a removed one (`listeners["old"]`). Routes are compared by position.
import type { Config } from "./schema.js";

export const RELOADED_MESSAGE = "config reloaded";
export const PARTLY_RELOADED_MESSAGE = "config reloaded; some changes need a restart to apply";

export interface ReloadReport {
  /** key paths that changed and took effect (the swap applies them) */
  readonly applied: readonly string[];
  /** key paths that changed and need a restart: the process keeps its old value */
  readonly notApplied: readonly string[];
  readonly message: string;
}

/**
 * Keys a running process cannot change. `workers`: the number of processes is fixed at start.
 * `admin` address, switch and token: the admin listener that answers this reload is that
 * listener. `journal`, `faultInjection`: process-wide state (the call ring, the fault set's seed
 * and cap) made once. `shrinkHeapWhenIdle`, `concurrentMarking`: the heap tuners start once.
 * `watchConfig`: the watcher starts with the process. `tracing`: the exporter is made once. A listener's `maxHeaderListPairs` and
 * `maxSessionMemoryMiB`: node takes them only when the server is created (its SETTINGS are
 * updated in place; see Listener.reconfigure). A listener's `tls`: see below.
 */
const RESTART_ONLY: readonly RegExp[] = [
  /^workers$/,
  /^admin(\.(address|mutations|token))?$/,
  /^journal$/,
  /^faultInjection(\.|$)/,
  /^shrinkHeapWhenIdle$/,
  /^concurrentMarking$/,
  // V8's sizes are node flags, set when the process starts (src/config/memory.ts)
  /^memory(\.|$)/,
  /^watchConfig$/,
  // the tracer provider and its exporter are made once per process
  /^tracing(\.|$)/,
  // the xDS client starts with the process, from its bootstrap (src/xds)
  /^xds(\.|$)/,
  // the windows are made once per process and every listener's calls count into them
  /^stats(\.|$)/,
  /^listeners\[\d+\]\.(maxHeaderListPairs|maxSessionMemoryMiB)$/,
  // a listener is an h2c or a TLS server from its creation; certificate files changed in place
  // are re-read without a reload (src/proxy/downstream/tls.ts)
  /^listeners\[\d+\]\.tls(\.|\[|$)/,
];

export function reloadReport(running: Config, next: Config): ReloadReport {
  const changed: string[] = [];
  diffTop(running, next, changed);
  const applied: string[] = [];
  const notApplied: string[] = [];
  for (const p of new Set(changed)) (RESTART_ONLY.some((r) => r.test(p)) ? notApplied : applied).push(p);
  return { applied, notApplied, message: notApplied.length > 0 ? PARTLY_RELOADED_MESSAGE : RELOADED_MESSAGE };
}

/** The config file's key for a normalized field (`timeoutMs` is `timeout` in the file). */
function fileKey(k: string): string {
  // weights are written inside `endpoints` ({ address, weight })
  if (k === "endpointWeights") return "endpoints";
  // a route's retry.backoff: { base, max }
  if (k === "backoffBaseMs") return "backoff.base";
  if (k === "backoffMaxMs") return "backoff.max";
  return k.endsWith("Ms") ? k.slice(0, -2) : k;
}

/** A cluster's `dns: "host:port"` (one value in the file) and its `refreshInterval` (beside it). */
function diffDns(a: unknown, b: unknown, path: string, out: string[]): void {
  const da = a as { host: string; port: number; refreshIntervalMs: number } | null;
  const db = b as { host: string; port: number; refreshIntervalMs: number } | null;
  if (da === null || db === null) {
    if (da !== db) out.push(path);
    return;
  }
  if (da.host !== db.host || da.port !== db.port) out.push(path);
  if (da.refreshIntervalMs !== db.refreshIntervalMs) out.push(path.replace(/dns$/, "refreshInterval"));
}

function diffTop(a: Config, b: Config, out: string[]): void {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const k of keys) {
    const va = (a as unknown as Record<string, unknown>)[k];
    const vb = (b as unknown as Record<string, unknown>)[k];
    if (k === "listeners" || k === "clusters") diffNamed(va as readonly Named[], vb as readonly Named[], k, out);
    else if (k === "admin" && (va === null || vb === null)) {
      if (va !== vb) out.push("admin");
    } else diff(va, vb, fileKey(k), out);
  }
}

interface Named {
  readonly name: string;
}

function diffNamed(a: readonly Named[], b: readonly Named[], key: string, out: string[]): void {
  const before = new Map(a.map((x) => [x.name, x]));
  b.forEach((x, i) => {
    const old = before.get(x.name);
    if (old === undefined) out.push(`${key}[${i}]`);
    else diff(old, x, `${key}[${i}]`, out);
  });
  const names = new Set(b.map((x) => x.name));
  for (const x of a) if (!names.has(x.name)) out.push(`${key}[${JSON.stringify(x.name)}]`);
}

function isHostPort(v: object): boolean {
  const keys = Object.keys(v);
  return keys.length === 2 && keys.includes("host") && keys.includes("port");
}

function diff(a: unknown, b: unknown, path: string, out: string[]): void {
  if (Object.is(a, b)) return;
  const objA = typeof a === "object" && a !== null;
  const objB = typeof b === "object" && b !== null;
  if (!objA || !objB || Array.isArray(a) !== Array.isArray(b)) {
    out.push(path);
    return;
  }
  if (Array.isArray(a)) {
    const arrB = b as unknown[];
    const key = path.slice(path.lastIndexOf(".") + 1);
    if (key !== "routes" || a.length !== arrB.length) {
      if (JSON.stringify(a) !== JSON.stringify(arrB)) out.push(path);
      return;
    }
    for (let i = 0; i < a.length; i++) diff(a[i], arrB[i], `${path}[${i}]`, out);
    return;
  }
  if (isHostPort(a) || isHostPort(b)) {
    if (JSON.stringify(a) !== JSON.stringify(b)) out.push(path);
    return;
  }
  const ra = a as Record<string, unknown>;
  const rb = b as Record<string, unknown>;
  const keys = new Set([...Object.keys(ra), ...Object.keys(rb)]);
  for (const k of keys) {
    if (k === "dns" && /^clusters\[/.test(path)) diffDns(ra[k], rb[k], `${path}.dns`, out);
    else diff(ra[k], rb[k], `${path}.${fileKey(k)}`, out);
  }
}
