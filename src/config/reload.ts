// What a SIGHUP applies, and what it cannot yet: the new config compared with the running one key
// by key. Pure; the CLI (one process) and the cluster primary log the result. Until a full reload
// exists only fault rules are applied; every other difference is named so an operator knows a
// restart is needed.
import type { Config } from "./schema.js";

export const NOT_RELOADED_MESSAGE = "routes and clusters are not reloaded yet; restart to apply";
export const RELOADED_MESSAGE = "config reloaded: fault rules applied";

export interface ReloadReport {
  /** what took effect: always "fault rules" (the file's rules replace the previous file's; API rules stay) */
  readonly applied: readonly string[];
  /** key paths (the file's names: `timeout`, not `timeoutMs`) that differ and were not applied */
  readonly notApplied: readonly string[];
  readonly message: string;
}

/** Arrays compared element by element (when their lengths agree); any other array is one value. */
const INDEXED_ARRAYS: ReadonlySet<string> = new Set(["listeners", "routes", "clusters"]);
/** Applied by a reload: the fault rule lists of listeners and routes. */
const APPLIED_KEYS: ReadonlySet<string> = new Set(["faults"]);

export function reloadReport(running: Config, next: Config): ReloadReport {
  const notApplied: string[] = [];
  diff(running, next, "", notApplied);
  return { applied: ["fault rules"], notApplied, message: notApplied.length > 0 ? NOT_RELOADED_MESSAGE : RELOADED_MESSAGE };
}

/** The config file's key for a normalized field (`timeoutMs` is `timeout` in the file). */
function fileKey(k: string): string {
  return k.endsWith("Ms") ? k.slice(0, -2) : k;
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
    if (!INDEXED_ARRAYS.has(key) || a.length !== arrB.length) {
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
    if (APPLIED_KEYS.has(k)) continue;
    diff(ra[k], rb[k], path === "" ? fileKey(k) : `${path}.${fileKey(k)}`, out);
  }
}
