// Where a cluster's endpoint addresses come from. Static lists only for now; a DNS resolver
// (re-resolved every refreshInterval) will implement the same interface. Must not import
// src/proxy/call.
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
