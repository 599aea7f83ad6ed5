// A named group of endpoints: where their addresses come from (static list or DNS), a picker
// over them (rebuilt when endpoints, weights, health or ejections change, never per call), the
// open sessions, active health checks, outlier ejection, keepalive's interval, its circuit
// breakers (breaker.ts) and its retry budget (budget.ts). Must not import src/proxy/call.
//
// Time and randomness are arguments (ClusterOptions.now / rand), so tests can fix them.
import type { Logger } from "pino";
import type { ClusterConfig, HostPort } from "../../config/schema.js";
import { formatHostPort } from "../../config/units.js";
import type { Metrics, ClusterMetricsSource } from "../observe/metrics.js";
import { forgive, recordResult, type OutlierConfig } from "../../translate/outlier.js";
import { addressLabel, diffEndpoints, isEmptyDelta, normalWeight, patchListInPlace, type EndpointDelta } from "../../translate/endpoint-set.js";
import { buildPicker, type Picker } from "./balancer.js";
import { patchRotation, rotation, type Rotation } from "../../translate/pick.js";
import { DnsResolver, defaultDnsResolver, type DnsResolverOptions } from "./dns.js";
import { Endpoint, type EndpointHost } from "./endpoint.js";
import { upstreamTlsOptions } from "./tls.js";
import { RetryBudget } from "./budget.js";
import { Breaker, type BreakerLimit } from "./breaker.js";
import { HealthChecker } from "./health-check.js";
import { staticResolver, type Resolver } from "./resolver.js";
import type { SessionOwner, UpstreamSession } from "./session.js";

export { BREAKER_LIMITS, type BreakerLimit } from "./breaker.js";

export interface ClusterOptions {
  /** monotonic milliseconds (ejection times); default performance.now */
  readonly now?: () => number;
  /** draws in [0, 1) for the pickers; default Math.random */
  readonly rand?: () => number;
  /** wall-clock milliseconds (the DNS and ejection times /clusters shows); default Date.now */
  readonly wall?: () => number;
  /** the DNS resolver for `dns:` clusters (tests point one at a local server) */
  readonly dns?: DnsResolverOptions["resolver"];
}

export class Cluster implements ClusterMetricsSource, EndpointHost {
  readonly name: string;
  /** the endpoints now, in the cluster's own list: patched in place by each change (setEndpoints, applyEndpointDelta), so a change of one endpoint in 10,000 is one store, not a copy */
  private readonly list: Endpoint[] = [];
  /** each endpoint's place in `endpoints`, by label (its address): where a delta lands */
  private readonly slots = new Map<string, number>();
  /** per endpoint, in the same order: in rotation (healthy, not ejected), weight, and what is derived; what the picker is built from, patched by each change */
  private rotation: Rotation = rotation([], []);
  picker: Picker<Endpoint>;
  readonly resolver: Resolver;
  readonly dns: DnsResolver | undefined;
  /** the last DNS lookup: when, and the error if it failed (the last endpoints stay) */
  dnsLast: { readonly atMs: number; readonly error?: string; readonly endpoints: number } | undefined;
  readonly connectCounters: Record<"ok" | "error" | "timeout", { inc(): void }>;
  /** every session not yet closed, in rotation or draining */
  readonly open = new Set<UpstreamSession>();
  /** the four circuit breakers, their counts and limits (breaker.ts) */
  readonly breaker: Breaker;
  /** the retry budget (budget.ts); a reload that keeps this cluster keeps it */
  readonly budget: RetryBudget;
  /** the keepalive PING interval now (the config's, doubled on each too_many_pings) */
  keepaliveIntervalMs: number;
  private readonly outlierCfg: OutlierConfig | null;
  private readonly now: () => number;
  private readonly rand: () => number;
  private readonly wall: () => number;
  private readonly ejectionTimers = new Map<Endpoint, NodeJS.Timeout>();
  private stopped = false;

  constructor(
    readonly cfg: ClusterConfig,
    readonly metrics: Metrics,
    readonly log: Logger,
    opts: ClusterOptions = {},
  ) {
    this.name = cfg.name;
    this.budget = new RetryBudget(cfg.name, cfg.retryBudget, metrics);
    this.now = opts.now ?? performance.now.bind(performance);
    this.rand = opts.rand ?? Math.random;
    this.wall = opts.wall ?? Date.now;
    this.outlierCfg = cfg.outlierDetection;
    this.keepaliveIntervalMs = cfg.keepalive?.intervalMs ?? 0;
    this.resolver = staticResolver(cfg);
    // clusters[].tls: its files are read now, so a missing one fails the start (or the reload)
    if (cfg.tls !== null) upstreamTlsOptions(cfg.tls, cfg.name);
    this.connectCounters = {
      ok: metrics.upstreamConnects.labels(cfg.name, "ok"),
      error: metrics.upstreamConnects.labels(cfg.name, "error"),
      timeout: metrics.upstreamConnects.labels(cfg.name, "timeout"),
    };
    this.breaker = new Breaker(cfg.name, cfg.circuitBreaker, this.open, metrics);
    this.picker = buildPicker<Endpoint>({ policy: cfg.lb, endpoints: [], usable: [], weights: [], rotation: this.rotation, active: activeOf, rand: this.rand });
    this.setEndpoints(this.resolver.resolve(), cfg.endpointWeights);
    metrics.clusterSources.add(this);
    if (cfg.dns !== null) {
      const d = cfg.dns;
      this.dns = new DnsResolver(d, (eps) => this.onDns(eps), {
        resolver: opts.dns ?? defaultDnsResolver(),
        onError: (why) => this.onDnsError(why),
      });
      void this.dns.start();
    } else {
      this.dns = undefined;
    }
  }

  /**
   * The endpoint for the next attempt; undefined when the cluster has none (yet). `avoid` (the
   * endpoint a retried attempt just failed on) is skipped when another endpoint can be had.
   * Eligible: healthy and not ejected; all endpoints when none is (panic).
   */
  /** the endpoints now (the cluster's own list: read it, do not keep it across a change) */
  get endpoints(): readonly Endpoint[] {
    return this.list;
  }

  pick(avoid?: Endpoint): Endpoint | undefined {
    return this.picker.pick(avoid);
  }

  /**
   * Replaces the endpoint list (DNS, reload): the change from the current list
   * (diffEndpoints: addresses that stay are skipped without a key being built) is applied as
   * applyEndpointDelta does it. Returns whether anything changed.
   */
  setEndpoints(endpoints: readonly HostPort[], weights: readonly number[]): boolean {
    return this.applyEndpointDelta(diffEndpoints(this.endpoints, null, endpoints, weights));
  }

  /**
   * Changes the endpoint set by `delta` without touching anything else (an EDS update, a DNS
   * re-resolution, a reload that only moved endpoints). Endpoints that stay are the same
   * objects: their sessions, attempts in flight (least_request counts), health and outlier
   * ejection carry on, and a new weight is taken. New ones start healthy with a health checker
   * and connect when first picked; each takes the place of a removed one in the list (patchList),
   * the rest go at the end. Removed ones are retired: no new attempt picks them, the attempts
   * queued at one end 14 (a transparent retry goes elsewhere), the streams on their sessions
   * finish and the sessions close (GOAWAY). The picker is rebuilt once, over the new list, from
   * the rotation patched where the delta lands (patchRotation: no pass over the endpoints; the
   * places come from the index kept by address; the endpoint list and the rotation's lists are
   * the cluster's own, patched where they are); the listeners, routes and filters are not
   * touched. Returns whether anything changed.
   */
  applyEndpointDelta(delta: EndpointDelta): boolean {
    if (isEmptyDelta(delta)) return false;
    const eps = this.list;
    // where the delta lands: each address's place from the index kept with the list (one map
    // lookup each); nothing per kept endpoint
    const out = new Set<number>();
    for (const r of delta.remove) {
      const i = this.slots.get(addressLabel(r.host, r.port));
      if (i !== undefined) out.add(i);
    }
    const removed = [...out].sort((x, y) => x - y);
    const fresh: Endpoint[] = [];
    const reweighted: { index: number; usable: boolean; weight: number; e: Endpoint }[] = [];
    const freshLabels = new Set<string>();
    for (const u of delta.upsert) {
      const w = normalWeight(u.weight);
      const label = addressLabel(u.host, u.port);
      const i = this.slots.get(label);
      if (i !== undefined && !out.has(i)) {
        const e = eps[i]!;
        if (e.weight !== w) {
          e.weight = w;
          reweighted.push({ index: i, usable: this.rotation.usable[i] === true, weight: w, e });
        }
      } else if (!freshLabels.has(label)) {
        freshLabels.add(label);
        fresh.push(new Endpoint(this, u.host, u.port, w));
      }
    }
    if (removed.length === 0 && fresh.length === 0 && reweighted.length === 0) return false;
    const gone = removed.map((i) => eps[i]!);
    const next = patchListInPlace(eps, removed, fresh);
    // the index follows patchList: a fresh endpoint takes a removed one's place, the rest go at
    // the end; removed places left over shift what follows them (only then is part of it redone)
    for (const e of gone) this.slots.delete(e.label);
    const k = Math.min(removed.length, fresh.length);
    for (let j = 0; j < k; j++) this.slots.set(fresh[j]!.label, removed[j]!);
    const shiftFrom = removed.length > k ? removed[k]! : next.length - (fresh.length - k);
    for (let i = shiftFrom; i < next.length; i++) this.slots.set(next[i]!.label, i);
    // (kept endpoints' reweighted indices are of the old list; they only move when places were taken out)
    const set = removed.length > k ? reweighted.map((r) => ({ ...r, index: this.slots.get(r.e.label)! })) : reweighted;
    this.rotation = patchRotation(this.rotation, { removed, added: fresh.map((e) => ({ usable: true, weight: e.weight })), set }, true);
    for (const e of fresh) this.startHealthCheck(e);
    this.buildPicker();
    // (after the new picker: attempts queued at a removed endpoint fail, and a retry of theirs
    // must pick among the endpoints that stay)
    for (const e of gone) {
      e.retire();
      const t = this.ejectionTimers.get(e);
      if (t !== undefined) clearTimeout(t);
      this.ejectionTimers.delete(e);
    }
    return true;
  }

  /** Every endpoint opens a session if it has none (side-clusters.ts: a side call's service is connected before its first call). */
  preconnect(): void {
    if (this.stopped) return;
    for (const e of this.endpoints) e.preconnect();
  }

  /** Some endpoint is healthy and not ejected (for /ready readyClusters and the health service). */
  hasHealthyEndpoint(): boolean {
    return this.endpoints.some((e) => e.healthy && !e.ejected);
  }

  /** Builds the picker over what is known now of `e` (its health or ejection changed). */
  private rebuild(e: Endpoint): void {
    const i = this.slots.get(e.label);
    if (i === undefined || this.list[i] !== e) return;
    this.rotation = patchRotation(this.rotation, { removed: [], added: [], set: [{ index: i, usable: e.healthy && !e.ejected, weight: e.weight }] }, true);
    this.buildPicker();
  }

  /** The picker over the endpoints, from the rotation as it is (an endpoint update patched it). */
  private buildPicker(): void {
    const r = this.rotation;
    // (live: the cluster's own lists, changed in place only by a change that replaces this picker)
    this.picker = buildPicker({ policy: this.cfg.lb, endpoints: this.list, usable: r.usable, weights: r.weights, rotation: r, active: activeOf, rand: this.rand, live: true });
  }

  private startHealthCheck(e: Endpoint): void {
    const hc = this.cfg.healthCheck;
    if (hc === null || this.stopped) return;
    const checker = new HealthChecker({ host: e.host, port: e.port }, hc, (healthy, r) => {
      if (e.retired) return;
      e.healthy = healthy;
      this.log.warn({ cluster: this.name, endpoint: e.label, healthy, why: r.why }, healthy ? "upstream endpoint healthy again" : "upstream endpoint unhealthy");
      this.rebuild(e);
      if (this.picker.panic) this.log.warn({ cluster: this.name }, "no endpoint is healthy and in rotation: every endpoint gets calls (panic)");
    });
    e.checker = checker;
    checker.start();
  }

  // === DNS ===

  private onDns(eps: readonly HostPort[]): void {
    if (this.stopped) return;
    this.dnsLast = { atMs: this.wall(), endpoints: eps.length };
    const before = this.endpoints.map((e) => e.label).join(",");
    this.setEndpoints(eps, []);
    this.log.info({ cluster: this.name, dns: this.dnsName(), endpoints: eps.map(formatHostPort), before }, "DNS endpoints changed");
  }

  private onDnsError(why: string): void {
    this.dnsLast = { atMs: this.wall(), error: why, endpoints: this.endpoints.length };
    this.log.warn({ cluster: this.name, dns: this.dnsName(), err: why }, "DNS lookup failed: the last endpoints stay");
  }

  private dnsName(): string | undefined {
    const d = this.cfg.dns;
    return d === null ? undefined : formatHostPort(d);
  }

  // === outlier detection ===

  /** An attempt's verdict on an endpoint (from Endpoint.attemptEnded; refused and local never come here). */
  onAttemptResult(e: Endpoint, ok: boolean): void {
    const oc = this.outlierCfg;
    if (oc === null || this.stopped) return;
    const now = this.now();
    if (ok) {
      if (e.outlier.timesEjected > 0) forgive(e.outlier, oc, now);
      e.outlier.consecutive = 0;
      return;
    }
    let ejectedNow = 0;
    for (const x of this.endpoints) if (x.ejected) ejectedNow++;
    if (!recordResult(e.outlier, oc, false, now, ejectedNow, this.endpoints.length)) return;
    e.ejected = true;
    const ms = e.outlier.ejectedUntil - now;
    this.metrics.upstreamEjections.labels(this.name, e.label).inc();
    this.log.warn({ cluster: this.name, endpoint: e.label, consecutiveFailures: e.consecutiveFailures, ejectionMs: Math.round(ms), timesEjected: e.outlier.timesEjected }, "upstream endpoint ejected");
    this.rebuild(e);
    const t = setTimeout(() => this.unEject(e), Math.max(1, ms));
    t.unref();
    this.ejectionTimers.set(e, t);
  }

  private unEject(e: Endpoint): void {
    this.ejectionTimers.delete(e);
    if (e.retired || this.stopped) return;
    e.ejected = false;
    e.outlier.consecutive = 0;
    this.log.info({ cluster: this.name, endpoint: e.label }, "upstream endpoint back from ejection");
    this.rebuild(e);
  }

  // === circuit breakers (breaker.ts) ===

  /** Attempts waiting now: for a session's SETTINGS, or in an endpoint's queue for a stream slot (maxPendingCalls counts them). */
  pendingAttempts(): number {
    return this.breaker.pendingAttempts;
  }

  // === keepalive ===

  /** GOAWAY ENHANCE_YOUR_CALM "too_many_pings" on one of our sessions: PING half as often. */
  onTooManyPings(s: UpstreamSession): void {
    if (this.cfg.keepalive === null) return;
    const before = this.keepaliveIntervalMs;
    // grpc-go's client doubles its keepalive time the same way; capped so it stays a number.
    this.keepaliveIntervalMs = Math.min(before * 2, 24 * 3600_000);
    this.log.warn({ cluster: this.name, endpoint: s.endpoint.label, keepaliveIntervalMs: this.keepaliveIntervalMs, before }, "upstream said too_many_pings: keepalive interval doubled");
  }

  onKeepaliveTimeout(s: UpstreamSession): void {
    this.metrics.upstreamKeepaliveTimeouts.labels(this.name).inc();
    this.log.warn({ cluster: this.name, endpoint: s.endpoint.label, reason: s.failure }, "upstream session dropped: keepalive PING not answered");
  }

  // === sessions ===

  sessionOpened(s: UpstreamSession): void {
    this.open.add(s);
    this.metrics.live.upstreamSessions++;
  }

  sessionClosed(s: UpstreamSession): void {
    if (this.open.delete(s)) this.metrics.live.upstreamSessions--;
    // one connection fewer (maxConnections), and its endpoint one session fewer: attempts
    // queued for want of a session may get one now
    if (this.breaker.pendingAttempts !== 0) for (const e of this.endpoints) if (e.queued !== 0) e.dispatch();
  }

  /** Stops health checkers, DNS and ejection timers (a reload dropped the cluster; Dojang.close). Sessions stay: close() ends them. */
  /**
   * No call routed here is still running: none counted by the breaker (from the route match, so
   * also calls that have not picked an endpoint yet), no attempt on a listed endpoint, and no stream
   * on any open session (an endpoint an earlier setEndpoints dropped is no longer listed, but its
   * draining session may carry one). A cluster a reload dropped is closed once this holds.
   */
  isIdle(): boolean {
    if (this.breaker.activeCalls > 0) return false;
    for (const e of this.endpoints) if (e.active > 0) return false;
    for (const sess of this.open) if (sess.active > 0) return false;
    return true;
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.dns?.stop();
    for (const e of this.endpoints) {
      e.checker?.stop();
      e.checker = undefined;
    }
    for (const t of this.ejectionTimers.values()) clearTimeout(t);
    this.ejectionTimers.clear();
    this.metrics.clusterSources.delete(this);
  }

  /** Closes every session: gracefully (GOAWAY, let streams finish) or at once; stops the timers. */
  close(force: boolean): void {
    this.stop();
    if (force) for (const e of this.endpoints) e.failQueue(`cluster ${this.name} closed while the call waited for a stream`);
    for (const s of [...this.open]) {
      if (force) s.h2.destroy();
      else s.retire();
    }
  }

  // === what /clusters and the metrics show ===

  /** ClusterMetricsSource: per endpoint, for the gauges at scrape time. */
  endpointStates(): { readonly endpoint: string; readonly healthy: boolean; readonly ejected: boolean; readonly active: number }[] {
    return this.endpoints.map((e) => ({ endpoint: e.label, healthy: e.healthy, ejected: e.ejected, active: e.active }));
  }

  /** The cluster as GET /clusters shows it (JSON). Wall-clock times for ejections. */
  describe(): ClusterView {
    const now = this.now();
    const wall = this.wall();
    const sessionsOf = new Map<SessionOwner, { open: number; draining: number; streams: number }>();
    for (const s of this.open) {
      let v = sessionsOf.get(s.endpoint);
      if (v === undefined) sessionsOf.set(s.endpoint, (v = { open: 0, draining: 0, streams: 0 }));
      if (s.state === "draining") v.draining++;
      else v.open++;
      v.streams += s.active;
    }
    const eligible = new Set(this.picker.eligible);
    return {
      name: this.name,
      lb: this.cfg.lb,
      panic: this.picker.panic,
      dns:
        this.cfg.dns === null
          ? null
          : {
              target: formatHostPort(this.cfg.dns),
              refreshIntervalMs: this.cfg.dns.refreshIntervalMs,
              lastResolution: this.dnsLast === undefined ? null : { at: new Date(this.dnsLast.atMs).toISOString(), endpoints: this.dnsLast.endpoints, ...(this.dnsLast.error === undefined ? {} : { error: this.dnsLast.error }) },
            },
      endpoints: this.endpoints.map((e) => ({
        address: e.label,
        weight: e.weight,
        healthy: e.healthy,
        ...(e.checker?.last === undefined ? {} : { lastCheck: e.checker.last.why }),
        ejected: e.ejected,
        ejection: e.outlier.timesEjected === 0 ? null : { until: e.ejected ? new Date(wall + (e.outlier.ejectedUntil - now)).toISOString() : null, times: e.outlier.timesEjected },
        inRotation: eligible.has(e),
        activeAttempts: e.active,
        sessions: sessionsOf.get(e) ?? { open: 0, draining: 0, streams: 0 },
        consecutiveFailures: e.consecutiveFailures,
        results: { ...e.results },
      })),
      sessions: this.open.size,
      activeCalls: this.breaker.activeCalls,
      breaker: this.breaker.view(),
      keepalive: this.cfg.keepalive === null ? null : { intervalMs: this.keepaliveIntervalMs, timeoutMs: this.cfg.keepalive.timeoutMs },
    };
  }
}

/** One cluster in GET /clusters. */
export interface ClusterView {
  readonly name: string;
  readonly lb: string;
  readonly panic: boolean;
  readonly dns: { readonly target: string; readonly refreshIntervalMs: number; readonly lastResolution: unknown } | null;
  readonly endpoints: readonly Record<string, unknown>[];
  readonly sessions: number;
  readonly activeCalls: number;
  readonly breaker: Record<BreakerLimit, { readonly current: number; readonly limit: number }>;
  readonly keepalive: { readonly intervalMs: number; readonly timeoutMs: number } | null;
}

function activeOf(e: Endpoint): number {
  return e.active;
}
