// What `dojang stat`, `top` and `tap` print: the stats table (Linkerd's `viz stat` columns with
// dojang's own, FAILED BY: who decided the failed calls) and one line per tapped call. Pure:
// strings in, strings out; no terminal codes here (top.ts adds them).
import type { StatsRow, StatsView } from "../proxy/observe/stats.js";

export type By = "method" | "route" | "endpoint";
export const BY: readonly By[] = ["method", "route", "endpoint"];

/** What `top` sorts by (its keys), most interesting first. */
export type SortKey = "rps" | "success" | "p99" | "calls" | "name";
export const SORT_KEYS: readonly SortKey[] = ["rps", "success", "p99", "calls", "name"];

export function rowsOf(v: StatsView, by: By): readonly StatsRow[] {
  return by === "method" ? v.methods : by === "route" ? v.routes : v.endpoints;
}

/** Rows sorted by `key`: the busiest, the least successful, the slowest, the most calls first; names A→Z. */
export function sortRows(rows: readonly StatsRow[], key: SortKey): StatsRow[] {
  const out = [...rows];
  const byName = (a: StatsRow, b: StatsRow): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  switch (key) {
    case "rps":
      return out.sort((a, b) => b.rps - a.rps || byName(a, b));
    case "success":
      return out.sort((a, b) => (a.success ?? 2) - (b.success ?? 2) || byName(a, b));
    case "p99":
      return out.sort((a, b) => (b.p99_ms ?? -1) - (a.p99_ms ?? -1) || byName(a, b));
    case "calls":
      return out.sort((a, b) => b.calls - a.calls || byName(a, b));
    case "name":
      return out.sort(byName);
  }
}

export function formatSuccess(s: number | null): string {
  return s === null ? "-" : `${(s * 100).toFixed(2)}%`;
}

export function formatMs(ms: number | null): string {
  if (ms === null) return "-";
  if (ms < 1) return `${Math.round(ms * 1000)}µs`;
  if (ms < 1000) return `${ms < 10 ? ms.toFixed(2) : ms < 100 ? ms.toFixed(1) : Math.round(ms)}ms`;
  return `${(ms / 1000).toFixed(2)}s`;
}

export function formatRps(r: number): string {
  return r < 10 ? r.toFixed(2) : r < 100 ? r.toFixed(1) : String(Math.round(r));
}

/** "upstream_reset 3, deadline 1": failed calls by who decided, most first. */
export function formatFailedBy(by: Readonly<Record<string, number>>): string {
  return Object.entries(by)
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .map(([k, n]) => `${k} ${n}`)
    .join(", ");
}

function outcomesOf(r: StatsRow): string {
  return r.outcomes.map((o) => `${o.grpc_status}/${o.decided_by} ${o.calls}`).join(", ");
}

/** The table: a header line and one line per row, columns padded; `wide` adds every status × decided_by. */
export function statTable(rows: readonly StatsRow[], by: By, wide: boolean): string {
  const head = [by === "method" ? "METHOD" : by === "route" ? "ROUTE" : "ENDPOINT", "SUCCESS", "RPS", "P50", "P95", "P99", "CALLS", "FAILED BY"];
  if (wide) head.push("OUTCOMES");
  const lines = rows.map((r) => {
    const cells = [r.name, formatSuccess(r.success), formatRps(r.rps), formatMs(r.p50_ms), formatMs(r.p95_ms), formatMs(r.p99_ms), String(r.calls), formatFailedBy(r.failed_by) || "-"];
    if (wide) cells.push(outcomesOf(r));
    return cells;
  });
  return columns([head, ...lines]);
}

/** Left-aligned columns two spaces apart; the last column is not padded. */
export function columns(table: readonly (readonly string[])[]): string {
  const widths: number[] = [];
  for (const row of table) row.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, [...c].length)));
  return table.map((row) => row.map((c, i) => (i === row.length - 1 ? c : c + " ".repeat(widths[i]! - [...c].length))).join("  ")).join("\n");
}

/** A tapped call as one line: time, status, who decided, method, route, upstream, duration, client, and the auth facts when present. */
export function tapLine(rec: Readonly<Record<string, unknown>>): string {
  const start = typeof rec["start_ms"] === "number" ? new Date(rec["start_ms"]) : undefined;
  const time = start === undefined ? "--:--:--.---" : start.toISOString().slice(11, 23);
  const parts = [time, `${String(rec["grpc_status"])}(${String(rec["grpc_code"])})`, String(rec["decided_by"]), String(rec["path"])];
  const opt = (k: string, label: string): void => {
    const v = rec[k];
    if (v !== undefined && v !== null && v !== "") parts.push(`${label}=${String(v)}`);
  };
  if (typeof rec["duration_ms"] === "number") parts.push(formatMs(rec["duration_ms"]));
  opt("route", "route");
  opt("upstream", "upstream");
  opt("client_address", "client");
  opt("jwt_subject", "sub");
  opt("rbac_rule", "rule");
  opt("worker", "worker");
  if (rec["grpc_code"] !== 0) opt("grpc_message", "msg");
  return parts.join("  ");
}
