// Where a cluster's endpoint addresses come from. Static lists only for now; the DNS resolver
// (dns.ts, re-resolved every refreshInterval) is to be wired behind the same interface (a
// cluster with `dns:` has no static endpoints until then). Must not import src/proxy/call.
import type { ClusterConfig, HostPort } from "../../config/index.js";

export interface Resolver {
  /** the addresses now */
  resolve(): readonly HostPort[];
}

/** The configured `endpoints` list, as it is. */
export function staticResolver(cfg: ClusterConfig): Resolver {
  const list = Object.freeze([...cfg.endpoints]);
  return { resolve: () => list };
}
