// OTLP/gRPC (config `tracing.protocol: grpc`): each span batch is one unary call of
// opentelemetry.proto.collector.trace.v1.TraceService/Export on the collector's origin, carried as
// dojang's other side calls are (unary.ts inside side-call.ts): on a cluster of dojang's own for
// the endpoint's address (one endpoint; h2c for http://, TLS with the system's CAs and the host as
// SNI for https://), so the export holds one HTTP/2 session and its streams are node:http2's, the
// same objects every proxied call's attempt makes. (node:http's client, which OTLP/HTTP uses,
// makes sockets, requests and responses no proxied call makes; at a low sampleRatio its rare
// exports make V8 recompile node's shared stream functions after each one:
// docs/contributing/benchmarks.md.)
//
// The answer is judged as a side call's: grpc-status 0 is the collector's acceptance (the
// ExportTraceServiceResponse's partial_success is not read, as OTLP/HTTP's body is not), any other
// end is the batch's loss, within tracing.exportTimeout (its grpc-timeout too). The cluster is the
// exporter's alone and closes with it, after the last batch went (Dojang.close).
// Must not import src/proxy/call.
import type { Logger } from "pino";
import type { TracingConfig } from "../../config/types.js";
import type { Metrics } from "../observe/metrics.js";
import { endpointAddress, type ExportTransport } from "../observe/otlp-export.js";
import { Cluster } from "./cluster.js";
import { sideCall, type SideCallHandle, type SideOutcome } from "./side-call.js";
import { addressClusterConfig } from "./side-clusters.js";
import { startUnary, unaryTarget, type UnaryTarget } from "./unary.js";

/** The OTLP trace service's one method (opentelemetry-proto, collector/trace/v1/trace_service.proto). */
export const OTLP_EXPORT_PATH = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/** Any ExportTraceServiceResponse is an acceptance (its partial_success is not read). */
function accepted(): true {
  return true;
}

export class GrpcTransport implements ExportTransport {
  readonly framed = true;
  private readonly cluster: Cluster;
  private readonly target: UnaryTarget;
  private readonly inFlight = new Set<SideCallHandle>();

  constructor(
    private readonly cfg: TracingConfig,
    metrics: Metrics,
    log: Logger,
  ) {
    const u = new URL(cfg.endpoint);
    const base = addressClusterConfig(endpointAddress(u));
    this.cluster = new Cluster(u.protocol === "https:" ? { ...base, tls: { caFile: null, serverName: null, certFile: null, keyFile: null } } : base, metrics, log);
    this.target = unaryTarget(this.cluster, OTLP_EXPORT_PATH, u.host, cfg.exportTimeoutMs);
  }

  send(body: Buffer, done: (err: Error | undefined) => void): void {
    const h = sideCall(
      this.cfg.exportTimeoutMs,
      (settle) => startUnary(this.target, body, accepted, settle),
      (o: SideOutcome<true>) => {
        this.inFlight.delete(h);
        done(o.result === "ok" ? undefined : new Error(o.result === "timeout" ? `no answer within ${this.cfg.exportTimeoutMs} ms (tracing.exportTimeout)` : `${o.result}: ${o.detail}`));
      },
    );
    this.inFlight.add(h);
  }

  close(): void {
    for (const h of this.inFlight) h.cancel();
    this.cluster.close(true);
  }
}
