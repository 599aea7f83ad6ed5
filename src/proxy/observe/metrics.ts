// Every metric dojang exports is defined here, on a per-instance prom-client Registry.
// The hot path never calls labels(): label children are bound once per (method, code, reason)
// and cached in fixed-size arrays, and gauges are read at scrape time from plain counters. The
// per-call counters (dojang_calls_total, dojang_messages_total) are plain numbers on the
// method's series too, added to prom-client at scrape time: a prom-client child's inc() builds
// its label key string and a result object on every call (about 1.3 KB per call in all,
// bench/alloc.mjs --profile). The per-call histograms (dojang_call_duration_seconds,
// dojang_call_attempts, and dojang_budget_in/out_seconds for calls with a deadline) are
// NumberHistograms for the same reason (observe() built a key string
// and two objects per call): bucket counts in a Float64Array per label set, exposed in the
// shape prom-client's own histograms have.
import client from "prom-client";
import { CODE_NAMES, DECIDED_BY, codeLabel, splitMethodPath, type DecidedBy } from "../../translate/index.js";
import { RETRY_REASONS, type RetryReason } from "../../translate/retry.js";
import type { StatsRow, StatsSlot } from "./windows.js";
import { responseBuffers } from "./overload.js";

/** Distinct (service, method) label pairs before new ones are folded into "other". */
export const MAX_METHOD_SERIES = 500;
const OTHER = "other";
/** The labels of a call whose :path is not a method path (src/translate/grpc-path.ts): refused before routing. */
const MALFORMED = "malformed";
const REASONS = Object.keys(DECIDED_BY) as DecidedBy[];
const REASON_INDEX: Readonly<Record<string, number>> = Object.fromEntries(REASONS.map((r, i) => [r, i]));
const N_CODES = CODE_NAMES.length + 1; // 0..16 plus "OTHER"

/** Live numbers the gauges read at scrape time (no prom-client work per call). */
export interface LiveState {
  activeCalls: number;
  /** calls started since the process began (the idle heap shrinker watches it) */
  startedCalls: number;
  upstreamSessions: number;
  downstreamSessions: number;
  /** payload bytes of finished calls, both ways (Dojang.forwardedBytes adds the calls in flight) */
  forwardedBytes: number;
  /** V8's concurrent marking as dojang set it (1 on, 0 off) */
  concurrentMarking: number;
}

/** A TLS listener's served certificates, as the expiry gauge reads them at scrape time (downstream/tls.ts). */
export interface CertificateSource {
  readonly listener: string;
  expiries(): readonly { readonly certificate: string; readonly notAfter: number }[];
}

/** A cluster as the per-endpoint gauges read it at scrape time (implemented by upstream/cluster.ts). */
export interface ClusterMetricsSource {
  readonly name: string;
  endpointStates(): readonly { readonly endpoint: string; readonly healthy: boolean; readonly ejected: boolean; readonly active: number }[];
}

type EndpointState = ReturnType<ClusterMetricsSource["endpointStates"]>[number];

/** A gauge that reads one live number at scrape time (no prom-client work per call). */
function liveGauge(r: client.Registry[], name: string, help: string, read: () => number): void {
  new client.Gauge({
    name,
    help,
    registers: r,
    collect() {
      this.set(read());
    },
  });
}

/** A gauge per cluster and endpoint, rebuilt at scrape time from the clusters' endpoint states
 * (removed endpoints drop out of it). */
function endpointGauge(r: client.Registry[], sources: Iterable<ClusterMetricsSource>, name: string, help: string, value: (e: EndpointState) => number): void {
  new client.Gauge({
    name,
    help,
    labelNames: ["cluster", "endpoint"],
    registers: r,
    collect() {
      this.reset();
      for (const c of sources) for (const e of c.endpointStates()) this.labels(c.name, e.endpoint).set(value(e));
    },
  });
}

/** One label set of a NumberHistogram: counts per bucket (not cumulative), sum and count. */
export class HistogramCell {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  /** shown on /metrics (prom-client's entry exists): once observed, or from the start for a histogram without labels, until a reset */
  present: boolean;
  constructor(
    readonly labels: Readonly<Record<string, string>>,
    private readonly bounds: readonly number[],
    present: boolean,
  ) {
    this.counts = new Float64Array(bounds.length);
    this.present = present;
  }
  /** As prom-client: the first bucket whose upper bound is >= v (above the last: +Inf only). */
  observe(v: number): void {
    const b = this.bounds;
    for (let i = 0; i < b.length; i++) {
      if (v <= b[i]!) {
        this.counts[i]!++;
        break;
      }
    }
    this.sum += v;
    this.count++;
    this.present = true;
  }
}

/**
 * A histogram registered on a prom-client Registry as a custom metric: get() returns what
 * prom-client's Histogram.get() returns (cumulative `_bucket` samples with `le` first, then
 * `_sum` and `_count`; aggregator sum, so `workers: N` sums it on the primary), the text format
 * comes out the same. A label set appears once it has an observation; with no label names its
 * one cell appears from the start; a reset hides them until the next observation (all as
 * prom-client's; test/observe/number-histogram.test.ts compares them).
 */
export class NumberHistogram {
  readonly type = "histogram";
  readonly aggregator = "sum";
  private readonly cells: HistogramCell[] = [];
  /** no label names: one label set, shown from the start */
  private readonly always: boolean;
  constructor(
    readonly name: string,
    readonly help: string,
    labelNames: readonly string[],
    private readonly bounds: readonly number[],
    registry: client.Registry,
  ) {
    this.always = labelNames.length === 0;
    if (this.always) this.cells.push(new HistogramCell({}, bounds, true));
    registry.registerMetric(this as unknown as client.Metric);
  }
  /** A new label set (the caller keeps it; one per distinct label values); with no label names, the one set. */
  cell(labels: Readonly<Record<string, string>>): HistogramCell {
    if (this.always) return this.cells[0]!;
    const c = new HistogramCell(labels, this.bounds, false);
    this.cells.push(c);
    return c;
  }
  get(): Promise<{ name: string; help: string; type: string; values: { labels: Record<string, string | number>; value: number; metricName: string }[]; aggregator: string }> {
    const values: { labels: Record<string, string | number>; value: number; metricName: string }[] = [];
    const bucket = `${this.name}_bucket`;
    for (const c of this.cells) {
      if (!c.present) continue;
      let acc = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        acc += c.counts[i]!;
        values.push({ labels: { le: this.bounds[i]!, ...c.labels }, value: acc, metricName: bucket });
      }
      values.push({ labels: { le: "+Inf", ...c.labels }, value: c.count, metricName: bucket });
      values.push({ labels: { ...c.labels }, value: c.sum, metricName: `${this.name}_sum` });
      values.push({ labels: { ...c.labels }, value: c.count, metricName: `${this.name}_count` });
    }
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator });
  }
  reset(): void {
    for (const c of this.cells) {
      c.counts.fill(0);
      c.sum = 0;
      c.count = 0;
      c.present = false;
    }
  }
}

/**
 * The results dojang_rate_limit_service_calls_total counts: the answers, then the side call's
 * failures (upstream/side-call.ts), "cancelled" being a call that ended before the answer.
 */
export const RLS_RESULTS = ["ok", "over_limit", "timeout", "unavailable", "error", "cancelled"] as const;
export type RlsResult = (typeof RLS_RESULTS)[number];
/** The results dojang_ext_authz_calls_total counts (the answers, then the side call's failures). */
export const EXT_AUTHZ_RESULTS = ["allowed", "denied", "timeout", "unavailable", "error", "cancelled"] as const;
export type ExtAuthzResult = (typeof EXT_AUTHZ_RESULTS)[number];
/** The results dojang_jwks_fetches_total counts (a fetch is no call's own: it is never cancelled). */
export const JWKS_RESULTS = ["ok", "timeout", "unavailable", "error"] as const;
export type JwksResult = (typeof JWKS_RESULTS)[number];

/** Per-method label set; one instance per distinct :path (bounded by MAX_METHOD_SERIES). */
export class MethodSeries implements StatsSlot {
  readonly service: string;
  readonly method: string;
  /** this method's row of the windowed stats (windows.ts), once a call has ended on it */
  statsRow: StatsRow | undefined = undefined;
  /**
   * Finished calls without a fault rule, index code * REASONS.length + reason: counted here per
   * call, added to dojang_calls_total at scrape time (flushCalls). What was added so far is in
   * `callsFlushed`; the counter children are bound on their first flush.
   */
  readonly callCounts: Float64Array;
  private readonly callsFlushed: Float64Array;
  private readonly calls: (client.Counter.Internal | undefined)[];
  readonly duration: HistogramCell;
  /** messages forwarded by finished calls, added to dojang_messages_total at scrape time */
  reqMessages = 0;
  respMessages = 0;
  private reqFlushed = 0;
  private respFlushed = 0;
  private readonly reqChild: client.Counter.Internal;
  private readonly respChild: client.Counter.Internal;
  constructor(m: Metrics, service: string, method: string) {
    this.service = service;
    this.method = method;
    this.callCounts = new Float64Array(N_CODES * REASONS.length);
    this.callsFlushed = new Float64Array(N_CODES * REASONS.length);
    this.calls = new Array(N_CODES * REASONS.length).fill(undefined);
    this.duration = m.callDuration.cell({ grpc_service: service, grpc_method: method });
    this.reqChild = m.messages.labels(service, method, "request");
    this.respChild = m.messages.labels(service, method, "response");
  }

  /** Scrape time: what dojang_calls_total has not seen yet. */
  flushCalls(counter: client.Counter<string>): void {
    const counts = this.callCounts;
    const flushed = this.callsFlushed;
    for (let i = 0; i < counts.length; i++) {
      const d = counts[i]! - flushed[i]!;
      if (d === 0) continue;
      flushed[i] = counts[i]!;
      let c = this.calls[i];
      if (c === undefined) {
        const codeIdx = Math.floor(i / REASONS.length);
        c = counter.labels(this.service, this.method, codeLabel(codeIdx), REASONS[i % REASONS.length]!, "");
        this.calls[i] = c;
      }
      c.inc(d);
    }
  }

  /** Scrape time: what dojang_messages_total has not seen yet. */
  flushMessages(): void {
    const rq = this.reqMessages - this.reqFlushed;
    if (rq > 0) {
      this.reqFlushed = this.reqMessages;
      this.reqChild.inc(rq);
    }
    const rs = this.respMessages - this.respFlushed;
    if (rs > 0) {
      this.respFlushed = this.respMessages;
      this.respChild.inc(rs);
    }
  }
}

export class Metrics {
  readonly registry: client.Registry;
  readonly live: LiveState = { activeCalls: 0, startedCalls: 0, upstreamSessions: 0, downstreamSessions: 0, forwardedBytes: 0, concurrentMarking: 1 };
  readonly callsTotal: client.Counter<string>;
  readonly callDuration: NumberHistogram;
  readonly messages: client.Counter<string>;
  readonly budgetIn: NumberHistogram;
  readonly budgetOut: NumberHistogram;
  readonly upstreamConnects: client.Counter<string>;
  readonly faultsInjected: client.Counter<string>;
  /** auth decisions by listener, stage (jwt, rbac, ext_authz) and result (src/proxy/filters/auth) */
  readonly authDecisions: client.Counter<string>;
  readonly heapShrinks: client.Counter<string>;
  /** config reloads by result (ok, error); see configReloadsCounter */
  readonly configReloads: Record<"ok" | "error", client.Counter.Internal>;
  /** retries by cluster and reason (RETRY_REASONS); children bound once per cluster (retryCounters) */
  readonly retriesTotal: client.Counter<string>;
  /** upstream attempts per call (1 = no retry); observed once per call that had an attempt */
  readonly callAttempts: HistogramCell;
  /** circuit breaker overflows by cluster and limit (children bound once per cluster) */
  readonly upstreamOverflow: client.Counter<string>;
  /** outlier ejections by cluster and endpoint ("host:port": bounded by the config and DNS) */
  readonly upstreamEjections: client.Counter<string>;
  /** upstream sessions dropped because a keepalive PING went unanswered */
  readonly upstreamKeepaliveTimeouts: client.Counter<string>;
  /** rateLimit.global: the rate-limit service's answers and failures, by service and result */
  readonly rateLimitService: client.Counter<string>;
  /** extAuthz: the authorization service's answers and failures, by service and result */
  readonly extAuthzCalls: client.Counter<string>;
  /** jwt.jwks.url: fetches of a JWKS, by URL (origin and path) and result */
  readonly jwksFetches: client.Counter<string>;
  /** the clusters the per-endpoint gauges read at scrape time (a cluster adds itself, stop() removes it) */
  readonly clusterSources = new Set<ClusterMetricsSource>();
  /** TLS listeners' certificates, read at scrape time (a listener adds itself, destroy() removes it) */
  readonly certificateSources = new Set<CertificateSource>();
  /** client streams refused with REFUSED_STREAM because their connection was at its limit */
  readonly refusedStreams: client.Counter.Internal;
  /** refused TLS handshakes by listener and reason (downstream/tls.ts HANDSHAKE_ERROR_REASONS); children bound once per TLS listener */
  readonly tlsHandshakeErrors: client.Counter<string>;
  readonly budgetInNoLabels: HistogramCell;
  readonly budgetOutNoLabels: HistogramCell;
  private readonly methods = new Map<string, MethodSeries>();
  private readonly other: MethodSeries;
  private malformedSeries: MethodSeries | undefined = undefined;

  constructor() {
    this.registry = new client.Registry();
    const r = [this.registry];
    const self = this;
    this.callsTotal = new client.Counter({
      name: "dojang_calls_total",
      help: "Finished gRPC calls by method, final grpc-status and who decided it (decided_by: upstream = the upstream's own grpc-status was forwarded; anything else = dojang's reason); fault_rule names the fault rule(s) applied, empty for none.",
      labelNames: ["grpc_service", "grpc_method", "grpc_code", "decided_by", "fault_rule"],
      registers: r,
      collect() {
        for (const s of self.allSeries()) s.flushCalls(this);
      },
    });
    this.callDuration = new NumberHistogram(
      "dojang_call_duration_seconds",
      "Time from request headers to the call's end, as dojang saw it.",
      ["grpc_service", "grpc_method"],
      [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      this.registry,
    );
    this.messages = new client.Counter({
      name: "dojang_messages_total",
      help: "gRPC messages (5-byte-prefixed frames) forwarded, by direction.",
      labelNames: ["grpc_service", "grpc_method", "direction"],
      registers: r,
      collect() {
        for (const s of self.allSeries()) s.flushMessages();
      },
    });
    const budgetBuckets = [0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 3600];
    this.budgetIn = new NumberHistogram(
      "dojang_budget_in_seconds",
      "Deadline budget as it arrived from the client (grpc-timeout), for calls that had one.",
      [],
      budgetBuckets,
      this.registry,
    );
    this.budgetOut = new NumberHistogram(
      "dojang_budget_out_seconds",
      "Deadline budget sent upstream (grpc-timeout after the route cap and dojang's own time).",
      [],
      budgetBuckets,
      this.registry,
    );
    this.budgetInNoLabels = this.budgetIn.cell({});
    this.budgetOutNoLabels = this.budgetOut.cell({});
    this.upstreamConnects = new client.Counter({
      name: "dojang_upstream_connects_total",
      help: "Upstream HTTP/2 session attempts by cluster and result (ok, error, timeout).",
      labelNames: ["cluster", "result"],
      registers: r,
    });
    this.faultsInjected = new client.Counter({
      name: "dojang_faults_injected_total",
      help: "Fault actions applied to calls, by rule id (\"header\" for request-header faults) and kind.",
      labelNames: ["rule", "kind"],
      registers: r,
    });
    this.authDecisions = new client.Counter({
      name: "dojang_auth_decisions_total",
      help: "Authentication and authorization decisions by listener, stage (jwt, rbac, ext_authz) and result (allow, deny, shadow_deny: rbac in shadow mode would have denied, error_allow: ext_authz failed and failOpen let the call through).",
      labelNames: ["listener", "stage", "result"],
      registers: r,
    });
    this.configReloads = configReloadsCounter(this.registry);
    this.heapShrinks = new client.Counter({
      name: "dojang_heap_shrinks_total",
      help: "Memory-reducing GCs: one at start-up, then (with shrinkHeapWhenIdle) one after each idle period that followed calls.",
      registers: r,
    });
    this.retriesTotal = new client.Counter({
      name: "dojang_retries_total",
      help: "Upstream attempts that retried an earlier one, by cluster and reason (status, refused, reset, per_try_timeout).",
      labelNames: ["cluster", "reason"],
      registers: r,
    });
    this.callAttempts = new NumberHistogram("dojang_call_attempts", "Upstream attempts per call (1 = not retried).", [], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], this.registry).cell({});
    this.upstreamOverflow = new client.Counter({
      name: "dojang_upstream_overflow_total",
      help: "Calls ended with 14 decided_by overflow because a circuit breaker of the cluster was full, by limit (maxConnections, maxPendingCalls, maxCalls, maxRetries).",
      labelNames: ["cluster", "limit"],
      registers: r,
    });
    this.upstreamEjections = new client.Counter({
      name: "dojang_upstream_ejections_total",
      help: "Outlier ejections of an upstream endpoint (consecutive failures), by cluster and endpoint.",
      labelNames: ["cluster", "endpoint"],
      registers: r,
    });
    this.rateLimitService = new client.Counter({
      name: "dojang_rate_limit_service_calls_total",
      help: "ShouldRateLimit calls to a global rate-limit service (rateLimit.global), by service and result: ok, over_limit, or a failure (timeout, unavailable, error), after which the call was admitted (or refused with failureModeDeny).",
      labelNames: ["service", "result"],
      registers: r,
    });
    this.extAuthzCalls = new client.Counter({
      name: "dojang_ext_authz_calls_total",
      help: "Check calls to an external authorization service (extAuthz), by service and result: allowed, denied, or a failure (timeout, unavailable, error) after which the call was refused (or admitted with failOpen); cancelled: the call ended before the answer.",
      labelNames: ["service", "result"],
      registers: r,
    });
    this.jwksFetches = new client.Counter({
      name: "dojang_jwks_fetches_total",
      help: "Fetches of a JWKS URL (jwt.jwks.url), by URL (origin and path) and result: ok, or a failure (timeout, unavailable, error) after which the last good keys serve.",
      labelNames: ["service", "result"],
      registers: r,
    });
    this.upstreamKeepaliveTimeouts = new client.Counter({
      name: "dojang_upstream_keepalive_timeouts_total",
      help: "Upstream sessions dropped because a keepalive PING was not answered within keepalive.timeout, by cluster.",
      labelNames: ["cluster"],
      registers: r,
    });
    const sources = this.clusterSources;
    endpointGauge(
      r,
      sources,
      "dojang_upstream_endpoint_healthy",
      "1 when the endpoint's active health check passes (always 1 without healthCheck), 0 when not; by cluster and endpoint.",
      (e) => (e.healthy ? 1 : 0),
    );
    endpointGauge(r, sources, "dojang_upstream_endpoint_ejected", "1 while outlier detection has the endpoint ejected, by cluster and endpoint.", (e) => (e.ejected ? 1 : 0));
    endpointGauge(r, sources, "dojang_upstream_endpoint_active_attempts", "Attempts open or waiting for a session on the endpoint, by cluster and endpoint.", (e) => e.active);
    new client.Gauge({
      name: "dojang_upstream_endpoints",
      help: "Endpoints of a cluster by state: healthy (in rotation), unhealthy (failing health checks), ejected (outlier detection).",
      labelNames: ["cluster", "state"],
      registers: r,
      collect() {
        this.reset();
        for (const c of sources) {
          let healthy = 0;
          let unhealthy = 0;
          let ejected = 0;
          for (const e of c.endpointStates()) {
            if (e.ejected) ejected++;
            else if (!e.healthy) unhealthy++;
            else healthy++;
          }
          this.labels(c.name, "healthy").set(healthy);
          this.labels(c.name, "unhealthy").set(unhealthy);
          this.labels(c.name, "ejected").set(ejected);
        }
      },
    });
    const live = this.live;
    liveGauge(r, "dojang_active_calls", "Calls in flight.", () => live.activeCalls);
    liveGauge(r, "dojang_upstream_sessions", "Open upstream HTTP/2 sessions.", () => live.upstreamSessions);
    this.refusedStreams = new client.Counter({
      name: "dojang_downstream_streams_refused_total",
      help: "Client streams refused with RST_STREAM(REFUSED_STREAM): their connection already had the listener's maxConcurrentStreams open, or the process was over its response-buffer budget.",
      registers: r,
    }).labels();
    liveGauge(r, "dojang_downstream_sessions", "Open client HTTP/2 sessions.", () => live.downstreamSessions);
    this.tlsHandshakeErrors = new client.Counter({
      name: "dojang_tls_handshake_errors_total",
      help: "Client TLS handshakes that did not complete, by listener and reason (no_client_cert, bad_client_cert, protocol, server_cert_refused, timeout, client_closed, other).",
      labelNames: ["listener", "reason"],
      registers: r,
    });
    const certs = this.certificateSources;
    new client.Gauge({
      name: "dojang_tls_certificate_expiry_timestamp_seconds",
      help: "When a certificate a TLS listener serves stops being valid (its notAfter, seconds since the epoch), by listener and certificate (its key path: tls.certFile, tls.certificates[i].certFile). A renewed file is read again without a restart.",
      labelNames: ["listener", "certificate"],
      registers: r,
      collect() {
        this.reset();
        for (const c of certs) for (const e of c.expiries()) this.labels(c.listener, e.certificate).set(e.notAfter);
      },
    });
    liveGauge(
      r,
      "dojang_overload_active",
      "1 while the calls' response buffers are over the process budget: dojang refuses new streams (REFUSED_STREAM) and cuts the largest idle ones (decided_by overload) until it is back under it.",
      () => (responseBuffers.overloaded ? 1 : 0),
    );
    liveGauge(
      r,
      "dojang_gc_concurrent_marking",
      "1 while V8 marks the old generation on a helper thread (its default), 0 while dojang has turned that off (concurrentMarking: off, or auto on one CPU under a high byte rate).",
      () => live.concurrentMarking,
    );
    // prom-client's default metrics under their standard names (process_cpu_seconds_total,
    // process_resident_memory_bytes, nodejs_eventloop_lag_seconds, nodejs_heap_*...), which
    // stock Node.js and Prometheus dashboards query; a prefix would hide them (issue 18 item 7).
    client.collectDefaultMetrics({ register: this.registry });
    this.other = new MethodSeries(this, OTHER, OTHER);
  }

  /**
   * The label set for a call's canonical method path (the Call derives it once; a path outside the
   * gRPC grammar never gets here, see `malformed`); the path string itself is the cache key (no
   * string building per call).
   */
  seriesFor(path: string): MethodSeries {
    let s = this.methods.get(path);
    if (s !== undefined) return s;
    if (this.methods.size >= MAX_METHOD_SERIES) return this.other;
    const names = splitMethodPath(path);
    if (names === undefined) return this.malformed;
    s = new MethodSeries(this, names[0], names[1]);
    this.methods.set(path, s);
    return s;
  }

  /**
   * The one label set of every call whose :path is not a method path (refused before routing): a
   * client sending junk paths never makes a series per path. Made at the first such call.
   */
  get malformed(): MethodSeries {
    return (this.malformedSeries ??= new MethodSeries(this, MALFORMED, MALFORMED));
  }

  /** dojang_rate_limit_service_calls_total's children for one service, bound once (by its client). */
  rateLimitServiceCounters(service: string): Record<RlsResult, client.Counter.Internal> {
    const out = {} as Record<RlsResult, client.Counter.Internal>;
    for (const result of RLS_RESULTS) out[result] = this.rateLimitService.labels(service, result);
    return out;
  }

  /** dojang_ext_authz_calls_total's children for one service, bound once (by its client). */
  extAuthzCounters(service: string): Record<ExtAuthzResult, client.Counter.Internal> {
    const out = {} as Record<ExtAuthzResult, client.Counter.Internal>;
    for (const result of EXT_AUTHZ_RESULTS) out[result] = this.extAuthzCalls.labels(service, result);
    return out;
  }

  /** dojang_jwks_fetches_total's children for one JWKS URL (its origin and path: no query, no credentials), bound once. */
  jwksCounters(url: string): Record<JwksResult, client.Counter.Internal> {
    const u = new URL(url);
    const service = u.origin + u.pathname;
    const out = {} as Record<JwksResult, client.Counter.Internal>;
    for (const result of JWKS_RESULTS) out[result] = this.jwksFetches.labels(service, result);
    return out;
  }

  /** dojang_retries_total's children for one cluster, one per reason (bound once, by the cluster's budget). */
  retryCounters(cluster: string): Record<RetryReason, client.Counter.Internal> {
    const out = {} as Record<RetryReason, client.Counter.Internal>;
    for (const reason of Object.keys(RETRY_REASONS) as RetryReason[]) out[reason] = this.retriesTotal.labels(cluster, reason);
    return out;
  }

  /** Counts one finished call. */
  countCall(s: MethodSeries, code: number, decidedBy: DecidedBy, faultRule?: string): void {
    if (faultRule !== undefined) {
      // Faulted calls are the harness's business, not the hot path: no cache.
      this.callsTotal.labels(s.service, s.method, codeLabel(code), decidedBy, faultRule).inc();
      return;
    }
    const codeIdx = code >= 0 && code < CODE_NAMES.length ? code : CODE_NAMES.length;
    s.callCounts[codeIdx * REASONS.length + (REASON_INDEX[decidedBy] ?? 0)]!++;
  }

  /** Every method series (scrape time). */
  private *allSeries(): Iterable<MethodSeries> {
    yield* this.methods.values();
    // (undefined only while the constructor builds the metrics, before `other` exists)
    if (this.other !== undefined) yield this.other;
    if (this.malformedSeries !== undefined) yield this.malformedSeries;
  }
}

/**
 * dojang_config_reloads_total{result}: one per reload (SIGHUP, POST /reload, a watched file
 * change), ok or error. With `workers: N` the primary counts each reload once in a registry of
 * its own, so the workers' counters are left out of the sum ('omit').
 */
export function configReloadsCounter(r: client.Registry): Record<"ok" | "error", client.Counter.Internal> {
  const c = new client.Counter({
    name: "dojang_config_reloads_total",
    help: "Config reloads (SIGHUP, POST /reload, a watched file change) by result: ok (the new config serves) or error (rejected; the old one keeps serving).",
    labelNames: ["result"],
    registers: [r],
    aggregator: "omit",
  });
  return { ok: c.labels("ok"), error: c.labels("error") };
}
