// Which cluster a side call rides (unary.ts): the cluster of `clusters:` the config names
// (rateLimit.global.cluster, extAuthz.cluster), with its health checks, outlier detection,
// breakers and TLS, or, for a service given by its address (rateLimit.global.service,
// extAuthz.address), a cluster of dojang's own for that address: one endpoint, h2c, no health
// checks or outlier detection, breakers wide open (as the gRPC channel that carried these calls
// before 0.6 had none). The address's cluster is made on first use, shared by every route that
// names the address, kept for the Dojang's life (a reload keeps its connections) and closed with
// it. Its name is the address itself ("127.0.0.1:8081"), which no cluster of the config can take
// (a name has no ":"), so it shows as such in the upstream metrics. Must not import src/proxy/call.
import type { Logger } from "pino";
import { DEFAULTS, LIMITS, type ClusterConfig } from "../../config/types.js";
import { formatHostPort, type HostPort } from "../../config/units.js";
import { DojangError } from "../../errors.js";
import type { Metrics } from "../observe/metrics.js";
import { Cluster } from "./cluster.js";

/** A side service as the config gives it: a cluster's name, or an address. */
export interface SideService {
  readonly cluster: string | null;
  readonly address: HostPort | null;
}

/** Where a service's side calls go. */
export interface SideRoute {
  readonly cluster: Cluster;
  /** the service in metrics and messages: the cluster's name, or the address */
  readonly label: string;
  /** the calls' :authority: the cluster's name (as Envoy's envoy_grpc sends it), or the address */
  readonly authority: string;
}

/** An address's own cluster config (see the header). */
export function addressClusterConfig(address: HostPort): ClusterConfig {
  const c = DEFAULTS.cluster;
  const wide = LIMITS.breaker.max;
  return Object.freeze({
    name: formatHostPort(address),
    endpoints: Object.freeze([address]),
    endpointWeights: Object.freeze([1]),
    dns: null,
    lb: c.lb,
    healthCheck: null,
    outlierDetection: null,
    circuitBreaker: Object.freeze({ maxConnections: wide, maxPendingCalls: wide, maxCalls: wide, maxRetries: c.circuitBreaker.maxRetries }),
    retryBudget: c.retryBudget,
    keepalive: null,
    connectTimeoutMs: c.connectTimeoutMs,
    maxConcurrentStreamsPerSession: c.maxConcurrentStreamsPerSession,
    maxSessionsPerEndpoint: c.maxSessionsPerEndpoint,
    initialWindowSize: c.initialWindowSize,
    connectionWindowSize: c.connectionWindowSize,
    tls: null,
  });
}

/** The address clusters of one Dojang (shared by its snapshots). */
export class SideClusters {
  private readonly byAddress = new Map<string, Cluster>();
  closed = false;

  constructor(
    private readonly metrics: Metrics,
    private readonly log: Logger,
  ) {}

  /**
   * The cluster, label and :authority of `service`; `clusters` are the snapshot's own. Its
   * endpoints start connecting now (the first call should not also pay for the connection).
   */
  route(service: SideService, clusters: ReadonlyMap<string, Cluster>): SideRoute {
    let r: SideRoute;
    if (service.cluster !== null) {
      const c = clusters.get(service.cluster);
      // the config parser rejects an unknown cluster; reaching this is a bug
      if (c === undefined) throw new DojangError("DOJANG_ERR_INTERNAL", `side call names unknown cluster ${service.cluster}`);
      r = { cluster: c, label: c.name, authority: c.name };
    } else {
      const label = formatHostPort(service.address!);
      let c = this.byAddress.get(label);
      if (c === undefined) {
        c = new Cluster(addressClusterConfig(service.address!), this.metrics, this.log);
        this.byAddress.set(label, c);
      }
      r = { cluster: c, label, authority: label };
    }
    if (!this.closed) r.cluster.preconnect();
    return r;
  }

  /** Dojang.close: every address cluster's sessions end at once. */
  close(): void {
    this.closed = true;
    for (const c of this.byAddress.values()) c.close(true);
    this.byAddress.clear();
  }
}
