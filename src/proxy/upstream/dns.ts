// DNS endpoints: a cluster given `dns: "name:port"` re-resolves A and AAAA records every
// `refreshInterval`, the way a Kubernetes headless Service is consumed (one record per ready
// pod), and reports the endpoint set whenever it changes. A failed lookup keeps the last known
// endpoints (Envoy's strict_dns does the same): a DNS hiccup must not empty a cluster.
import { promises as dnsp } from "node:dns";
import type { HostPort } from "../../config/index.js";

export interface DnsTarget {
  readonly host: string;
  readonly port: number;
  readonly refreshIntervalMs: number;
}

export interface DnsResolverOptions {
  /** a resolver to use (tests point one at a local server with setServers); default: the system's */
  readonly resolver?: Pick<dnsp.Resolver, "resolve4" | "resolve6">;
  /** called on a failed lookup, with the reason (the last endpoints stay) */
  readonly onError?: (message: string) => void;
}

/**
 * The resolver `dns:` clusters use: the system's servers, or those in the environment variable
 * DOJANG_DNS_SERVERS ("127.0.0.1:5353,[::1]:53"), read when a cluster starts. For tests and for
 * hosts whose DNS for upstreams differs from the system's; a bad value fails start-up loudly.
 */
export function defaultDnsResolver(env: NodeJS.ProcessEnv = process.env): dnsp.Resolver {
  const r = new dnsp.Resolver({ timeout: 2000, tries: 2 });
  const servers = env["DOJANG_DNS_SERVERS"];
  if (servers !== undefined && servers.trim() !== "") {
    const list = servers.split(",").map((x) => x.trim()).filter((x) => x !== "");
    try {
      r.setServers(list);
    } catch (err) {
      throw new Error(`DOJANG_DNS_SERVERS: ${(err as Error).message} (expected "ip[:port],…", got "${servers}")`);
    }
  }
  return r;
}

/** Codes that mean "the name has no records of this type", not a failure. */
const NO_RECORDS = new Set(["ENODATA", "ENOTFOUND"]);

export class DnsResolver {
  private timer: NodeJS.Timeout | undefined;
  private stopped = true;
  private endpoints: readonly HostPort[] = [];
  private key = "";
  private readonly resolver: Pick<dnsp.Resolver, "resolve4" | "resolve6">;

  constructor(
    readonly target: DnsTarget,
    private readonly onUpdate: (endpoints: readonly HostPort[]) => void,
    private readonly opts: DnsResolverOptions = {},
  ) {
    this.resolver = opts.resolver ?? defaultDnsResolver();
  }

  /** The endpoints of the last successful lookup (sorted, IPv4 first). */
  get current(): readonly HostPort[] {
    return this.endpoints;
  }

  /** Resolves once now (resolving when that lookup is done), then every refreshInterval. */
  async start(): Promise<void> {
    if (!this.stopped) return;
    this.stopped = false;
    await this.refresh();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.refresh(), this.target.refreshIntervalMs);
    this.timer.unref();
  }

  /** One lookup of both record types. */
  async refresh(): Promise<void> {
    const { host, port } = this.target;
    const [v4, v6] = await Promise.allSettled([this.resolver.resolve4(host), this.resolver.resolve6(host)]);
    if (this.stopped) return;
    const failed = [v4, v6].filter((r): r is PromiseRejectedResult => r.status === "rejected" && !NO_RECORDS.has((r.reason as NodeJS.ErrnoException).code ?? ""));
    const addrs = [...(v4.status === "fulfilled" ? [...v4.value].sort() : []), ...(v6.status === "fulfilled" ? [...v6.value].sort() : [])];
    if (failed.length > 0 || addrs.length === 0) {
      const why = failed.length > 0 ? failed.map((r) => (r.reason as Error).message).join("; ") : `no A or AAAA records for ${host}`;
      this.opts.onError?.(why);
      this.schedule();
      return;
    }
    const key = addrs.join(",");
    if (key !== this.key) {
      this.key = key;
      this.endpoints = Object.freeze(addrs.map((a) => Object.freeze({ host: a, port })));
      this.onUpdate(this.endpoints);
    }
    this.schedule();
  }
}
