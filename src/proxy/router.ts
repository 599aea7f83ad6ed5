// Route table compiled once at load: routes are tried in config order (first match wins), each
// reduced to one string test. The request path only calls match().
import type { RetryConfig, RouteConfig } from "../config/index.js";
import { codeMask, type RetryPolicy } from "../translate/retry.js";
import type { StatsRow, StatsSlot } from "./observe/windows.js";

export interface CompiledRoute<C> extends StatsSlot {
  readonly index: number;
  /** human label for logs: "path:/pkg.Svc/M", "service:pkg.Svc", "prefix:/" */
  readonly label: string;
  readonly cluster: C;
  readonly timeoutMs: number | null;
  readonly maxRequestMessageBytes: number;
  readonly maxResponseMessageBytes: number;
  /** the route's streamIdleTimeout (ms, 0 = never); null = the listener's */
  readonly streamIdleTimeoutMs: number | null;
  /** the route's retry policy, normalized once; null = none (transparent retries only) */
  readonly retry: RetryPolicy | null;
  /** the route's row of the windowed stats, found on its first ended call (observe/windows.ts) */
  statsRow: StatsRow | undefined;
}

/** A route's `retry` block as the retry decision reads it (src/translate/retry.ts). */
export function retryPolicy(r: RetryConfig | null): RetryPolicy | null {
  if (r === null) return null;
  return Object.freeze({
    retryOnMask: codeMask(r.retryOn),
    maxAttempts: r.maxAttempts,
    perTryTimeoutMs: r.perTryTimeoutMs,
    backoffBaseMs: r.backoffBaseMs,
    backoffMaxMs: r.backoffMaxMs,
    bufferBytes: r.bufferBytes,
    retryResetAfterRequest: r.retryResetAfterRequest,
  });
}

interface Entry<C> {
  readonly kind: 0 | 1 | 2; // 0 exact path, 1 prefix, 2 prefix from a service name
  readonly value: string;
  readonly authority: string | undefined;
  readonly route: CompiledRoute<C>;
}

export interface Router<C> {
  match(path: string, authority: string | undefined): CompiledRoute<C> | undefined;
  readonly routes: readonly CompiledRoute<C>[];
}

/** :authority compared without the port, case-insensitively (host names are). */
function hostOf(authority: string): string {
  const a = authority.toLowerCase();
  if (a.startsWith("[")) {
    const end = a.indexOf("]");
    return end > 0 ? a.slice(0, end + 1) : a;
  }
  const colon = a.lastIndexOf(":");
  return colon >= 0 ? a.slice(0, colon) : a;
}

export function compileRoutes<C>(routes: readonly RouteConfig[], clusterFor: (name: string) => C): Router<C> {
  const entries: Entry<C>[] = routes.map((r, index) => {
    const m = r.match;
    let kind: 0 | 1 | 2;
    let value: string;
    let label: string;
    if (m.path !== undefined) {
      kind = 0;
      value = m.path;
      label = `path:${m.path}`;
    } else if (m.service !== undefined) {
      kind = 2;
      value = `/${m.service}/`;
      label = `service:${m.service}`;
    } else {
      kind = 1;
      value = m.prefix ?? "/";
      label = `prefix:${value}`;
    }
    const authority = m.authority === undefined ? undefined : hostOf(m.authority);
    if (authority !== undefined) label += `@${authority}`;
    return {
      kind,
      value,
      authority,
      route: {
        index,
        label,
        cluster: clusterFor(r.cluster),
        timeoutMs: r.timeoutMs,
        maxRequestMessageBytes: r.maxRequestMessageBytes,
        maxResponseMessageBytes: r.maxResponseMessageBytes,
        streamIdleTimeoutMs: r.streamIdleTimeoutMs,
        retry: retryPolicy(r.retry),
        statsRow: undefined,
      },
    };
  });
  const anyAuthority = entries.some((e) => e.authority !== undefined);
  return {
    routes: entries.map((e) => e.route),
    match(path, authority) {
      const host = anyAuthority && authority !== undefined ? hostOf(authority) : undefined;
      for (let i = 0; i < entries.length; i++) {
        const e = entries[i]!;
        if (e.authority !== undefined && e.authority !== host) continue;
        if (e.kind === 0 ? path === e.value : path.startsWith(e.value)) return e.route;
      }
      return undefined;
    },
  };
}
