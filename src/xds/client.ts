// The xDS client: one ADS stream on @grpc/grpc-js to the control plane the bootstrap names, state
// of the world (api_type GRPC) or incremental (DELTA_GRPC: per-resource versions, subscribe and
// unsubscribe, removed_resources, initial_resource_versions on a new stream). CDS and LDS are asked for by wildcard; EDS and RDS by the names the accepted
// clusters and listeners refer to. Each response is decoded, mapped (map/) and, when every
// resource in it maps, applied through the host (Dojang: the whole-config reload, so calls in
// flight keep the snapshot they started with); then ACKed with its version and nonce. A response
// with a resource dojang cannot serve, or one the reload refuses, is NACKed with error_detail
// naming the resource and field, and the last accepted config keeps serving. A named resource
// that has not arrived 15 s after it was asked for (on a stream that is up) is marked missing.
// The stream waits for the channel to be ready (waitForReady: a control plane that is back is
// reached within grpc-js's reconnect back-off, not after a failed attempt doubled dojang's), and
// is opened again with exponential back-off when it ends; what was accepted keeps serving
// meanwhile. What /config, dojang_xds_connected and /ready say follows the stream: connected while
// the stream is open on a ready channel, ready once the first fetch is complete or the bootstrap's
// initial_fetch_timeout has passed (Envoy's semantics), with a warning naming the node id while
// the control plane sends nothing.
import * as grpc from "@grpc/grpc-js";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Logger } from "pino";
import { Counter, Gauge, type Registry } from "prom-client";
import type { ClusterTlsConfig } from "../config/types.js";
import { formatHostPort } from "../config/units.js";
import { ConfigError } from "../errors.js";
import { upstreamTlsOptions } from "../proxy/upstream/tls.js";
import { diffEndpoints, isEmptyDelta, type EndpointDelta } from "../translate/endpoint-set.js";
import { serviceConstructor } from "../protos/channel.js";
import { decodeAny } from "../protos/load.js";
import { VERSION } from "../version.js";
import { INITIAL_FETCH_TIMEOUT_MS, type Bootstrap } from "./bootstrap.js";
import { isWarming, type XdsState } from "./compose.js";
import {
  TYPE,
  mapCluster,
  mapClusterLoadAssignment,
  mapClusterLoadAssignmentBytes,
  endpointsChange,
  mapListener,
  mapRouteConfiguration,
  type AnyDecoder,
  type Issue,
  type ClaMemo,
  type Mapped,
  type Msg,
  type TlsSource,
  type TypeUrl,
  type XdsCluster,
  type XdsEndpoints,
  type XdsListener,
  type XdsRouteTable,
} from "./map/index.js";

/** Resources a refusal is about, by name (the host could serve the rest: gRFC A46). */
export interface RefusedResources {
  readonly listeners: readonly string[];
  readonly clusters: readonly string[];
}

/** What applying a state came to: applied, or refused with its issues (and, when it can say, which resources they are about). */
export type ApplyResult = { readonly ok: true } | { readonly ok: false; readonly issues: readonly Issue[]; readonly refused?: RefusedResources };

/** One ClusterLoadAssignment that changed, as the change of its endpoint set. */
export interface EndpointUpdate {
  /** the ClusterLoadAssignment's name (a cluster's eds service name) */
  readonly name: string;
  readonly delta: EndpointDelta;
  /**
   * the assignment as the client now holds it (its endpoints are the held ones with `delta`
   * applied, as a set, in the resource's order): the host keeps it as it is instead of patching
   * a copy of its own list. Only within the process (a worker is sent name and delta).
   */
  readonly value?: XdsEndpoints;
}

/** What the client needs of the running proxy. */
export interface XdsHost {
  readonly log: Logger;
  readonly registry: Registry;
  /** applies the state (static config + it, the whole-config reload); the issues when refused */
  apply(state: XdsState): Promise<ApplyResult>;
  /**
   * An update that changed only endpoint sets of clusters being served (none of them a member of
   * a weighted split): applied to those clusters in place, without a reload. `state` is the
   * state afterwards (what apply() would have been given). "reload": the host cannot, apply()
   * follows.
   */
  applyEndpoints(state: XdsState, updates: readonly EndpointUpdate[]): Promise<ApplyResult | "reload">;
}

export interface XdsOptions {
  /** Envoy's does-not-exist timer (gRFC A57): 15 s */
  readonly missingAfterMs?: number;
  /** reconnect back-off: first wait and cap */
  readonly backoffBaseMs?: number;
  readonly backoffMaxMs?: number;
  /**
   * true (the default): an update that changes only endpoints is applied in place, one that
   * changes nothing is not applied, and what came before byte for byte is not decoded again.
   * false: every response is decoded whole and applied with the whole-config reload, as dojang
   * did before 0.7 (bench/eds.mjs's baseline)
   */
  readonly endpointsInPlace?: boolean;
}

/** What /config shows of one resource type. */
export interface TypeStatus {
  /** the version last accepted (ACKed); "" before any */
  readonly version: string;
  readonly nonce: string;
  /** the last NACK: its version, its error_detail, the resources it refused by name (the others were applied: gRFC A46) */
  readonly lastRejected: Rejection | null;
  /** the names asked for (null: wildcard) */
  readonly subscribed: readonly string[] | null;
  /** name → the version it was accepted in */
  readonly resources: Readonly<Record<string, string>>;
  readonly missing: readonly string[];
}

const TYPES: readonly TypeUrl[] = [TYPE.cluster, TYPE.endpoint, TYPE.listener, TYPE.route];
const SHORT: Readonly<Record<TypeUrl, string>> = { [TYPE.listener]: "lds", [TYPE.route]: "rds", [TYPE.cluster]: "cds", [TYPE.endpoint]: "eds" };

/** A NACK as /config shows it. */
export interface Rejection {
  readonly version: string;
  readonly error: string;
  /** the resources refused, by name (a resource whose name could not be read is not here) */
  readonly resources: readonly string[];
}

interface Sub {
  /** null: wildcard */
  names: Set<string> | null;
  version: string;
  nonce: string;
  lastRejected: Rejection | null;
  /** name → version accepted in */
  versions: Map<string, string>;
  missing: Set<string>;
  timers: Map<string, NodeJS.Timeout>;
  /** NACKs of the same version in a row (a server that sends a refused version again at once) */
  rejectStreak: number;
  nackTimer: NodeJS.Timeout | undefined;
  /** how the last response of this type was handled ("none" before any) */
  last: "none" | "accepted" | "rejected";
}

/** The first fetch (Envoy's initialization): /ready waits for it, at most initial_fetch_timeout. */
type InitialFetch = "waiting" | "complete" | "timed out";

/** The warning about a silent control plane repeats, doubling, up to this. */
const SILENCE_WARN_MAX_MS = 300_000;

type Resource = XdsListener | XdsRouteTable | { cluster: XdsCluster; tls: ClusterTlsConfig | null } | XdsEndpoints;

/** A resource as last mapped, by the digest of its bytes: the same bytes again are not decoded again. */
interface Mapped1 {
  readonly name: string;
  readonly value: Resource;
}

interface AdsStream {
  write(m: unknown): boolean;
  on(ev: string, f: (...a: never[]) => void): unknown;
  cancel(): void;
  end(): void;
}

const decode: AnyDecoder = (any) => decodeAny(any as { type_url?: string; value?: Uint8Array });

export class XdsClient {
  private readonly client: grpc.Client & { StreamAggregatedResources(md: grpc.Metadata): AdsStream; DeltaAggregatedResources(md: grpc.Metadata): AdsStream };
  /** incremental xDS (api_type DELTA_GRPC): per-resource versions, subscribe/unsubscribe, removals */
  private readonly delta: boolean;
  private stream: AdsStream | undefined;
  private readonly subs = new Map<TypeUrl, Sub>();
  private listeners = new Map<string, XdsListener>();
  private routes = new Map<string, XdsRouteTable>();
  private clusters = new Map<string, { cluster: XdsCluster; tls: ClusterTlsConfig | null }>();
  private endpoints = new Map<string, XdsEndpoints>();
  /** the route tables and listeners the last applied state served (state() holds new ones back while their clusters warm) */
  private servedRoutes: ReadonlyMap<string, XdsRouteTable> = new Map();
  private servedListeners: ReadonlyMap<string, XdsListener> = new Map();
  private closed = false;
  private attempt = 0;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private sentNode = false;
  private chain: Promise<void> = Promise.resolve();
  /** the stream's response headers came (the control plane has answered on it) */
  private headers = false;
  /** the channel's connectivity state (grpc-js), watched while the client runs */
  private channelState: grpc.connectivityState = grpc.connectivityState.IDLE;
  private streams = 0;
  /** something from the control plane was accepted, on any stream (the retry line says what serves) */
  private accepted = false;
  /** the current stream has had a response */
  private answered = false;
  private silenceTimer: NodeJS.Timeout | undefined;
  private initialFetch: InitialFetch = "waiting";
  private initialTimer: NodeJS.Timeout | undefined;
  private readonly missingAfterMs: number;
  private readonly backoffBaseMs: number;
  private readonly backoffMaxMs: number;
  private readonly updates: Counter<"type" | "result">;
  private readonly connected: Gauge;
  /** where inline certificates are written (0700), made on first need */
  private certDir: string | undefined;
  /** per type, the resources now held by the digest of the bytes they came in (unchanged ones are not decoded again) */
  private readonly mappedByDigest = new Map<TypeUrl, Map<string, Mapped1>>();
  /** the state the host last applied (null before any): the next one is compared with it */
  private served: XdsState | null = null;
  /** per ClusterLoadAssignment, what its last mapping without an issue left for the next (map/endpoint.ts mapClusterLoadAssignmentBytes) */
  private readonly claMemos = new Map<string, ClaMemo>();
  private readonly endpointsInPlace: boolean;

  constructor(
    private readonly boot: Bootstrap,
    private readonly host: XdsHost,
    opts: XdsOptions = {},
  ) {
    this.missingAfterMs = opts.missingAfterMs ?? 15_000;
    this.delta = boot.apiType === "DELTA_GRPC";
    this.backoffBaseMs = opts.backoffBaseMs ?? 500;
    this.backoffMaxMs = opts.backoffMaxMs ?? 30_000;
    this.endpointsInPlace = opts.endpointsInPlace ?? true;
    ({ updates: this.updates, connected: this.connected } = registerXdsMetrics(host.registry));
    for (const t of TYPES) for (const r of ["accepted", "rejected"]) this.updates.labels(SHORT[t], r);
    for (const t of TYPES) {
      const wildcard = (t === TYPE.listener && boot.lds) || (t === TYPE.cluster && boot.cds);
      this.subs.set(t, { names: wildcard ? null : new Set(), version: "", nonce: "", lastRejected: null, versions: new Map(), missing: new Set(), timers: new Map(), rejectStreak: 0, nackTimer: undefined, last: "none" });
    }
    const Ctor = serviceConstructor("envoy.service.discovery.v3.AggregatedDiscoveryService");
    this.client = new Ctor(formatHostPort(boot.server), credentialsFor(boot), {
      "grpc.keepalive_time_ms": 30_000,
      "grpc.keepalive_timeout_ms": 10_000,
      "grpc.max_receive_message_length": 64 * 1024 * 1024,
      // how soon a control plane that is back is reached: the ADS stream waits for the channel
      // (waitForReady), which tries to connect 0.2 s after a failure, growing ×1.6 to 2 s (±20 %)
      "grpc.initial_reconnect_backoff_ms": 200,
      "grpc.max_reconnect_backoff_ms": 2_000,
    }) as unknown as XdsClient["client"];
  }

  start(): void {
    this.watchChannel();
    const t = this.boot.initialFetchTimeoutMs;
    if (t > 0) {
      this.initialTimer = setTimeout(() => this.initialFetchTimedOut(), t);
      this.initialTimer.unref();
    }
    this.connect();
  }

  /** Why /ready is 503 because of xDS (the first fetch, Envoy's initialization), or null. */
  notReady(): string | null {
    if (this.initialFetch !== "waiting") return null;
    const t = this.boot.initialFetchTimeoutMs;
    return `xds: waiting for the initial fetch from the control plane at ${formatHostPort(this.boot.server)} (node id ${JSON.stringify(this.boot.node.id)}; ${t > 0 ? `at most ${t / 1000}s, initial_fetch_timeout` : "no initial_fetch_timeout"})`;
  }

  /** The channel's state, kept in channelState (what connected and the silence warning say). */
  private watchChannel(): void {
    const ch = this.client.getChannel();
    const next = (): void => {
      if (this.closed) return;
      const st = ch.getConnectivityState(false);
      this.channelState = st;
      this.refreshConnected();
      try {
        ch.watchConnectivityState(st, Infinity, next);
      } catch {
        /* the channel is shut down (close()) */
      }
    };
    next();
  }

  /**
   * Connected: a stream is open and its channel is ready (the control plane has the stream,
   * whether or not it has answered on it: go-control-plane answers nothing for a node id it has
   * no snapshot for), or the control plane's response headers came. Envoy's
   * control_plane.connected_state likewise turns 1 when the stream is established, not on its
   * first response (envoy source/common/config/grpc_stream.h, establishNewStream).
   */
  private get isConnected(): boolean {
    return this.stream !== undefined && (this.headers || this.channelState === grpc.connectivityState.READY);
  }

  private refreshConnected(): void {
    this.connected.set(this.isConnected ? 1 : 0);
  }

  /** Stops the stream and every timer (the accepted config keeps serving). */
  close(): void {
    this.closed = true;
    if (this.reconnectTimer !== undefined) clearTimeout(this.reconnectTimer);
    if (this.initialTimer !== undefined) clearTimeout(this.initialTimer);
    this.stopTimers();
    this.stream?.cancel();
    this.client.close();
    this.connected.set(0);
    if (this.certDir !== undefined) rmSync(this.certDir, { recursive: true, force: true });
  }

  /** The xDS part of /config. */
  status(): Record<string, unknown> {
    const types: Record<string, TypeStatus> = {};
    for (const t of TYPES) {
      const s = this.subs.get(t)!;
      types[SHORT[t]] = {
        version: s.version,
        nonce: s.nonce,
        lastRejected: s.lastRejected,
        subscribed: s.names === null ? null : [...s.names].sort(),
        resources: Object.fromEntries([...s.versions].sort()),
        missing: [...s.missing].sort(),
      };
    }
    return {
      node: this.boot.node.id,
      server: formatHostPort(this.boot.server),
      apiType: this.boot.apiType,
      connected: this.isConnected,
      channel: grpc.connectivityState[this.channelState],
      initialFetch: this.initialFetch,
      initialFetchTimeoutMs: this.boot.initialFetchTimeoutMs,
      streams: this.streams,
      types,
    };
  }

  /** The version a cluster (by name) was accepted in, for /clusters; undefined when not from xDS. */
  clusterVersion(name: string): { readonly version: string; readonly endpointsVersion: string | null } | undefined {
    const c = this.clusters.get(name);
    if (c === undefined) return undefined;
    const v = this.subs.get(TYPE.cluster)!.versions.get(name) ?? "";
    const eds = c.cluster.eds;
    return { version: v, endpointsVersion: eds === null ? null : (this.subs.get(TYPE.endpoint)!.versions.get(eds) ?? null) };
  }

  /** Whether a listener (by name) came from xDS. */
  hasListener(name: string): boolean {
    return this.listeners.has(name);
  }

  /**
   * The state to serve. A route table (RDS, or a listener's inline one) that names a cluster still
   * warming (its CDS is here, its EDS not yet) is held back: the one served before stays until the
   * cluster is ready, so a route never moves to a cluster without endpoints (go-control-plane
   * answers RDS before the EDS that the new CDS makes dojang ask for).
   */
  private state(): XdsState {
    const eds = { endpoints: this.endpoints, missing: this.subs.get(TYPE.endpoint)!.missing };
    const warming = (n: string): boolean => {
      const c = this.clusters.get(n)?.cluster;
      return c !== undefined && isWarming(c, eds);
    };
    const ready = (t: XdsRouteTable): boolean => t.virtualHosts.every((vh) => vh.routes.every((r) => r.clusters.every((c) => !warming(c.name))));
    const routes = new Map<string, XdsRouteTable>();
    for (const [n, t] of this.routes) {
      const prev = this.servedRoutes.get(n);
      if (ready(t) || prev === undefined) routes.set(n, t);
      else routes.set(n, prev);
    }
    const listeners = new Map<string, XdsListener>();
    for (const [n, l] of this.listeners) {
      const prev = this.servedListeners.get(n);
      listeners.set(n, l.inline === null || ready(l.inline) || prev === undefined ? l : prev);
    }
    // (copies: the next state is compared with this one entry by entry)
    return {
      listeners,
      routes,
      clusters: new Map(this.clusters),
      endpoints: new Map(this.endpoints),
      missing: new Set(eds.missing),
    };
  }

  /** The state last applied (what a worker started later is given), or null before any. */
  servedState(): XdsState | null {
    return this.served;
  }

  /**
   * Applies the state; on success, what it served becomes what later states fall back to. A
   * state that differs from the one served only in endpoint sets of served clusters goes to the
   * clusters in place (host.applyEndpoints: no reload; Envoy's EDS changes endpoints the same
   * way, without touching listeners or routes); one that differs in nothing is not applied again.
   */
  private async apply(): Promise<ApplyResult & { readonly how?: AppliedHow; readonly applyCpuMs?: number; readonly applyMs?: number }> {
    // applyCpuMs: the process's CPU while it applies (the event loop thread's work, and what GC
    // helper threads do beside it), by process.cpuUsage(): getrusage's RUSAGE_SELF brings the
    // running thread's time up to date before it sums, where RUSAGE_THREAD
    // (process.threadCpuUsage) reads what was last accounted and so moves in scheduler ticks on
    // Linux (4 ms steps: a 0.3 ms piece of work reads 0 or 4). applyMs: the wall time from the
    // start of the apply to its end (an endpoint update does no I/O, so the event loop is held
    // throughout; more than the CPU when the OS runs something else meanwhile).
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const took = (): { applyCpuMs: number; applyMs: number } => ({ applyCpuMs: cpuMsSince(cpu0), applyMs: Math.round((performance.now() - t0) * 1000) / 1000 });
    const st = this.state();
    const prev = this.served;
    if (prev !== null && this.endpointsInPlace) {
      const only = endpointChanges(prev, st);
      if (only !== null && only.length === 0) {
        this.served = st;
        return { ok: true, how: "none", ...took() };
      }
      if (only !== null && !inWeightedSplit(st, only)) {
        const r = await this.host.applyEndpoints(st, only);
        if (r !== "reload") {
          if (r.ok) this.served = st;
          return r.ok ? { ok: true, how: "endpoints", ...took() } : r;
        }
      }
    }
    const r = await this.host.apply(st);
    if (r.ok) {
      // state() built both maps for this state alone
      this.servedRoutes = st.routes;
      this.servedListeners = st.listeners;
      this.served = st;
      return { ok: true, how: "reload", ...took() };
    }
    return r;
  }

  // === the stream ===

  private connect(): void {
    if (this.closed) return;
    this.sentNode = false;
    this.headers = false;
    this.answered = false;
    this.streams++;
    // waitForReady is a grpc-js call *metadata* option (Metadata's options, read by its
    // LoadBalancingCall and ResolvingCall), not a CallOptions field: without it, a stream opened
    // while the channel is in TRANSIENT_FAILURE fails at once on the cached connection error.
    const md = new grpc.Metadata({ waitForReady: true });
    const s = this.delta ? this.client.DeltaAggregatedResources(md) : this.client.StreamAggregatedResources(md);
    this.stream = s;
    this.refreshConnected();
    this.armSilenceWarning(this.boot.initialFetchTimeoutMs > 0 ? this.boot.initialFetchTimeoutMs : INITIAL_FETCH_TIMEOUT_MS);
    let ended = false;
    const onEnd = (why: string): void => {
      if (ended || this.stream !== s) return;
      ended = true;
      this.stream = undefined;
      this.headers = false;
      this.refreshConnected();
      this.stopTimers();
      if (this.closed) return;
      const wait = Math.min(this.backoffMaxMs, this.backoffBaseMs * 2 ** this.attempt) * (0.5 + Math.random() / 2);
      this.attempt = Math.min(this.attempt + 1, 16);
      this.host.log.warn(
        { server: formatHostPort(this.boot.server), node: this.boot.node.id, why, retryInMs: Math.round(wait) },
        this.accepted
          ? "xds: the ADS stream ended; the config accepted from the control plane keeps serving"
          : "xds: the ADS stream ended before anything from the control plane was accepted; the static config alone serves meanwhile",
      );
      this.reconnectTimer = setTimeout(() => this.connect(), wait);
    };
    s.on("data", (m: Msg) => {
      if (this.stream !== s) return;
      this.attempt = 0;
      this.answered = true;
      this.clearSilenceWarning();
      this.chain = this.chain.then(() => this.onResponse(m)).catch((err: unknown) => this.host.log.error({ err }, "xds: handling a response failed"));
    });
    s.on("error", (err: Error & Partial<grpc.StatusObject>) => onEnd(describeEnd(err)));
    s.on("end", () => onEnd("the control plane closed the stream"));
    s.on("status", () => undefined);
    s.on("metadata", () => {
      if (this.stream !== s) return;
      this.headers = true;
      this.refreshConnected();
    });
    // every subscription again, with the versions accepted so far (a new stream has no nonce)
    for (const t of TYPES) {
      const sub = this.subs.get(t)!;
      sub.nonce = "";
      if (sub.names === null || sub.names.size > 0) {
        if (this.delta) {
          // a new delta stream says what it has, so the server sends only what changed (a wildcard: "*")
          this.sendDelta(t, { subscribe: sub.names === null ? ["*"] : [...sub.names].sort(), initial: Object.fromEntries(sub.versions) });
        } else this.send(t);
      }
    }
  }

  // === what the operator is told ===

  /**
   * A warning while the current stream has had no response, naming the node id, its cluster and
   * the control plane (the usual causes: the control plane serves another node id, or cannot be
   * reached); again after twice the time, up to every 5 min.
   */
  private armSilenceWarning(afterMs: number): void {
    this.clearSilenceWarning();
    const t = setTimeout(() => {
      if (this.closed || this.stream === undefined || this.answered) return;
      // a stream that is open after something was accepted may well be quiet: a control plane
      // that has nothing newer than the versions dojang resumed with need not answer
      if (this.accepted && this.channelState === grpc.connectivityState.READY) return;
      const server = formatHostPort(this.boot.server);
      const { id, cluster } = this.boot.node;
      const waited = afterMs >= 1000 ? `${Math.round(afterMs / 1000)}s` : `${afterMs}ms`;
      const serving = this.accepted ? "the config accepted before keeps serving" : "the static config alone serves";
      const channel = grpc.connectivityState[this.channelState];
      const msg =
        this.channelState === grpc.connectivityState.READY
          ? `xds: the control plane at ${server} has sent nothing in ${waited} for node id ${JSON.stringify(id)} (cluster ${JSON.stringify(cluster)}): does it serve this node id? The ADS stream is open; ${serving}`
          : `xds: the control plane at ${server} has not been reachable in ${waited} (channel ${channel}) for node id ${JSON.stringify(id)} (cluster ${JSON.stringify(cluster)}); ${serving}`;
      this.host.log.warn({ node: id, cluster, server, channel, afterMs }, msg);
      this.armSilenceWarning(Math.min(SILENCE_WARN_MAX_MS, afterMs * 2));
    }, afterMs);
    t.unref();
    this.silenceTimer = t;
  }

  private clearSilenceWarning(): void {
    if (this.silenceTimer !== undefined) clearTimeout(this.silenceTimer);
    this.silenceTimer = undefined;
  }

  /**
   * The types the first fetch still waits for: a wildcard type (LDS, CDS) that has had no
   * response, a named one (RDS, EDS) with a name neither arrived nor marked missing. A refused
   * response completes its type (Envoy ends the initial fetch on a rejected update too).
   */
  private pendingTypes(): TypeUrl[] {
    return TYPES.filter((t) => {
      const sub = this.subs.get(t)!;
      if (sub.last === "rejected") return false;
      return sub.names === null ? sub.last === "none" : [...sub.names].some((n) => !sub.versions.has(n) && !sub.missing.has(n));
    });
  }

  private checkInitialFetch(): void {
    if (this.initialFetch !== "waiting" || this.pendingTypes().length > 0) return;
    this.initialFetch = "complete";
    if (this.initialTimer !== undefined) clearTimeout(this.initialTimer);
    this.host.log.info({ listeners: [...this.listeners.keys()].sort(), clusters: [...this.clusters.keys()].sort() }, "xds: the initial fetch is complete");
  }

  /** initial_fetch_timeout passed: ready with what has arrived (Envoy moves on the same way). */
  private initialFetchTimedOut(): void {
    this.initialTimer = undefined;
    if (this.initialFetch !== "waiting" || this.closed) return;
    this.initialFetch = "timed out";
    this.host.log.warn({ pending: this.pendingTypes().map((t) => SHORT[t]), afterMs: this.boot.initialFetchTimeoutMs }, "xds: the initial fetch did not complete within initial_fetch_timeout: ready with what has arrived");
  }

  private stopTimers(): void {
    this.clearSilenceWarning();
    for (const sub of this.subs.values()) {
      if (sub.nackTimer !== undefined) clearTimeout(sub.nackTimer);
      sub.nackTimer = undefined;
      for (const t of sub.timers.values()) clearTimeout(t);
      sub.timers.clear();
    }
  }

  /** An ACK, or a NACK with `error` (both forms); for delta, also after a change of subscription. */
  private send(type: TypeUrl, error?: string): void {
    if (this.delta) return this.sendDelta(type, error === undefined ? {} : { error });
    const s = this.stream;
    if (s === undefined) return;
    const sub = this.subs.get(type)!;
    const req: Record<string, unknown> = {
      type_url: type,
      version_info: sub.version,
      response_nonce: sub.nonce,
      resource_names: sub.names === null ? [] : [...sub.names].sort(),
    };
    this.write(s, type, req, error);
  }

  private sendDelta(type: TypeUrl, o: { readonly subscribe?: readonly string[]; readonly unsubscribe?: readonly string[]; readonly initial?: Readonly<Record<string, string>>; readonly error?: string }): void {
    const s = this.stream;
    if (s === undefined) return;
    const sub = this.subs.get(type)!;
    const req: Record<string, unknown> = { type_url: type, response_nonce: sub.nonce };
    if (o.subscribe !== undefined && o.subscribe.length > 0) req["resource_names_subscribe"] = o.subscribe;
    if (o.unsubscribe !== undefined && o.unsubscribe.length > 0) req["resource_names_unsubscribe"] = o.unsubscribe;
    if (o.initial !== undefined && Object.keys(o.initial).length > 0) req["initial_resource_versions"] = o.initial;
    this.write(s, type, req, o.error);
  }

  /** What both request forms carry: the node on a stream's first request, a NACK's error_detail. */
  private write(s: AdsStream, type: TypeUrl, req: Record<string, unknown>, error: string | undefined): void {
    if (!this.sentNode) {
      req["node"] = nodeMessage(this.boot);
      this.sentNode = true;
    }
    if (error !== undefined) req["error_detail"] = { code: grpc.status.INVALID_ARGUMENT, message: error };
    s.write(req);
    this.startTimers(type);
  }

  /** The does-not-exist timer for each named resource not here yet (A57). */
  private startTimers(type: TypeUrl): void {
    const sub = this.subs.get(type)!;
    if (sub.names !== null) {
      for (const n of sub.names) {
        if (sub.versions.has(n) || sub.missing.has(n) || sub.timers.has(n)) continue;
        const t = setTimeout(() => this.markMissing(type, n), this.missingAfterMs);
        t.unref();
        sub.timers.set(n, t);
      }
    }
  }

  private markMissing(type: TypeUrl, name: string): void {
    const sub = this.subs.get(type)!;
    sub.timers.delete(name);
    if (sub.versions.has(name) || !(sub.names?.has(name) ?? false)) return;
    sub.missing.add(name);
    this.host.log.warn({ type: SHORT[type], name, afterMs: this.missingAfterMs }, "xds: a resource asked for has not arrived: marked missing");
    this.checkInitialFetch();
    // an EDS cluster is served without endpoints from now on (14 UNAVAILABLE, as Envoy's no healthy upstream)
    if (type === TYPE.endpoint) this.chain = this.chain.then(async () => void (await this.apply()));
  }

  // === a response ===

  /**
   * One response, with gRFC A46's semantics: every resource is checked on its own; the valid
   * ones are applied, the invalid ones are NACKed by name (error_detail lists each with its field)
   * and keep their last good version (one never valid is absent: for RDS and EDS, does-not-exist
   * at once, as gRFC A88 has it). The NACK's version_info is the last version accepted whole (the
   * wire protocol is unchanged: A46); an ACK echoes the response's. A resource whose bytes are
   * those of the one held is not decoded again.
   */
  private async onResponse(m: Msg): Promise<void> {
    const cpu0 = process.cpuUsage();
    const type = String(m["type_url"] ?? "") as TypeUrl;
    const sub = this.subs.get(type);
    const version = String(m[this.delta ? "system_version_info" : "version_info"] ?? "");
    const nonce = String(m["nonce"] ?? "");
    if (sub === undefined) {
      this.host.log.warn({ type }, "xds: a response of a type dojang did not ask for: ignored");
      return;
    }
    sub.nonce = nonce;
    const items = Array.isArray(m["resources"]) ? (m["resources"] as Msg[]) : [];
    const issues: Issue[] = [];
    const notes: string[] = [];
    /** the valid resources by name, in the response's order */
    const good = new Map<string, Resource>();
    /** the invalid ones by name (their issues are in `issues`) */
    const bad = new Set<string>();
    /** invalid ones whose name could not be read: LDS and CDS then delete nothing left out */
    let unnamed = 0;
    /** delta: each resource's own version; removed names (and resources sent without a body) */
    const versions = new Map<string, string>();
    const removed = new Set<string>(this.delta && Array.isArray(m["removed_resources"]) ? (m["removed_resources"] as string[]) : []);
    const cache = this.mappedByDigest.get(type) ?? new Map<string, Mapped1>();
    const fresh = new Map<string, Mapped1>();
    for (const [i, item] of items.entries()) {
      let any = item;
      if (this.delta) {
        if (item["resource"] === undefined || item["resource"] === null) {
          removed.add(String(item["name"] ?? ""));
          continue;
        }
        any = item["resource"] as Msg;
      }
      const r = this.mapCached(type, any, i, cache);
      if (!r.ok) {
        issues.push(...r.issues);
        if (r.name === undefined) unnamed++;
        else {
          bad.add(r.name);
          good.delete(r.name);
        }
        continue;
      }
      if (good.has(r.name) || bad.has(r.name)) {
        issues.push({ path: r.label, message: "sent twice in one response" });
        good.delete(r.name);
        bad.add(r.name);
        continue;
      }
      notes.push(...r.notes);
      good.set(r.name, r.value);
      if (r.digest !== "") fresh.set(r.digest, { name: r.name, value: r.value });
      versions.set(r.name, this.delta ? String(item["version"] ?? version) : version);
    }

    // Take the valid ones and apply. A refusal by the host that names resources of this response
    // (a listener that cannot bind, a name a static resource has) sets those aside as invalid
    // too, and the rest is applied once more; any other refusal refuses the whole response.
    const prev = { listeners: this.listeners, routes: this.routes, clusters: this.clusters, endpoints: this.endpoints };
    const prevMissing = new Set(sub.missing);
    const markNeverValid = (): void => {
      // a named resource (RDS, EDS) never valid: does-not-exist now, not after the 15 s timer
      if (sub.names === null) return;
      for (const n of bad) {
        if (sub.versions.has(n) || !sub.names.has(n)) continue;
        sub.missing.add(n);
        clearTimer(sub, n);
      }
    };
    markNeverValid();
    this.take(type, good, removed, bad, unnamed > 0);
    let applied = await this.apply();
    if (!applied.ok) {
      const named = refusedIn(type, applied.refused).filter((n) => good.has(n));
      ({ listeners: this.listeners, routes: this.routes, clusters: this.clusters, endpoints: this.endpoints } = prev);
      issues.push(...applied.issues);
      if (named.length > 0) {
        for (const n of named) {
          good.delete(n);
          bad.add(n);
        }
        markNeverValid();
        this.take(type, good, removed, bad, unnamed > 0);
        applied = await this.apply();
        if (!applied.ok) {
          ({ listeners: this.listeners, routes: this.routes, clusters: this.clusters, endpoints: this.endpoints } = prev);
          issues.push(...applied.issues);
        }
      }
    }
    if (!applied.ok) {
      // nothing of it applies: what was held before stays, versions and all
      sub.missing = prevMissing;
      for (const n of good.keys()) bad.add(n);
      good.clear();
    } else {
      for (const n of removed) sub.versions.delete(n);
      for (const n of good.keys()) {
        sub.versions.set(n, versions.get(n) ?? version);
        sub.missing.delete(n);
        clearTimer(sub, n);
      }
      // LDS and CDS are complete: a name not sent is gone (unless a resource's name could not be read)
      if (sub.names === null && !this.delta && unnamed === 0) for (const n of [...sub.versions.keys()]) if (!good.has(n) && !bad.has(n)) sub.versions.delete(n);
    }
    this.keepMapped(type, cache, fresh);
    const cpuMs = cpuMsSince(cpu0);
    const how = applied.ok ? (applied.how ?? "none") : "none";
    const applyCpuMs = applied.ok ? (applied.applyCpuMs ?? 0) : 0;
    const applyMs = applied.ok ? (applied.applyMs ?? 0) : 0;
    if (applied.ok) for (const n of new Set(notes)) this.host.log.info({ type: SHORT[type], version }, `xds: ${n}`);

    if (issues.length > 0) {
      const error = issues.map((i) => (i.path === "" ? i.message : `${i.path}: ${i.message}`)).join("; ");
      const again = sub.lastRejected?.version === version && sub.lastRejected.error === error;
      sub.lastRejected = { version, error, resources: [...bad].sort() };
      sub.last = "rejected";
      this.checkInitialFetch();
      this.updates.labels(SHORT[type], "rejected").inc();
      if (applied.ok) this.followReferences(type);
      if (!again) {
        sub.rejectStreak = 0;
        const fields = { type: SHORT[type], version, nonce, error, refused: [...bad].sort(), applied: [...good.keys()].sort(), how, cpuMs, applyCpuMs, applyMs };
        if (good.size > 0 || removed.size > 0) this.host.log.error(fields, "xds: update applied but for the resources refused (NACK): those keep their last accepted version (gRFC A46)");
        else this.host.log.error(fields, "xds: update rejected (NACK); the last accepted config keeps serving");
        this.send(type, error);
        return;
      }
      // A control plane that answers a NACK with the same version at once (go-control-plane's
      // SnapshotCache does: the NACK's version_info is the older one) would make a busy loop:
      // the same NACK again, after a growing pause (the server sends a newer version once asked).
      const wait = Math.min(5_000, 200 * 2 ** sub.rejectStreak);
      sub.rejectStreak = Math.min(sub.rejectStreak + 1, 10);
      if (sub.nackTimer !== undefined) clearTimeout(sub.nackTimer);
      sub.nackTimer = setTimeout(() => {
        sub.nackTimer = undefined;
        if (sub.nonce === nonce) this.send(type, error);
      }, wait);
      sub.nackTimer.unref();
      return;
    }
    sub.rejectStreak = 0;
    sub.last = "accepted";
    this.accepted = true;
    sub.version = version;
    this.updates.labels(SHORT[type], "accepted").inc();
    // how: "endpoints" (applied to the clusters in place), "reload" (the whole-config reload),
    // "none" (nothing changed); cpuMs: this process's CPU for the response, decoding included;
    // applyCpuMs: the process's CPU for applying it (with workers: the primary's part);
    // applyMs: its wall time (apply() says why both)
    this.host.log.info({ type: SHORT[type], version, resources: good.size, how, cpuMs, applyCpuMs, applyMs }, "xds: update accepted (ACK)");
    this.send(type);
    this.followReferences(type);
    this.checkInitialFetch();
  }

  /** What the accepted clusters and listeners refer to is asked for next (EDS, RDS). */
  private followReferences(type: TypeUrl): void {
    if (type === TYPE.cluster) this.resubscribe(TYPE.endpoint, [...this.clusters.values()].map((c) => c.cluster.eds).filter((n): n is string => n !== null));
    if (type === TYPE.listener) this.resubscribe(TYPE.route, [...this.listeners.values()].map((l) => l.rds).filter((n): n is string => n !== null));
  }

  /** mapOne, unless the same bytes were mapped before (then the value held, the same object). */
  private mapCached(
    type: TypeUrl,
    any: Msg,
    i: number,
    cache: ReadonlyMap<string, Mapped1>,
  ): ({ ok: true; name: string; label: string; value: Resource; notes: readonly string[]; digest: string }) | { ok: false; issues: Issue[]; name?: string } {
    const bytes = any["value"];
    if (!this.endpointsInPlace) {
      const r = this.mapOne(type, any, i);
      return r.ok ? { ...r, digest: "" } : r;
    }
    const digest = bytes instanceof Uint8Array ? createHash("sha256").update(bytes).digest("base64") : "";
    const hit = String(any["type_url"] ?? "") === type ? cache.get(digest) : undefined;
    if (hit !== undefined) return { ok: true, name: hit.name, label: labelOf(type, hit.name), value: hit.value, notes: [], digest };
    const r = this.mapOne(type, any, i);
    return r.ok ? { ...r, digest } : r;
  }

  /** Keeps, by digest, the mapped resources the state now holds (the others are forgotten). */
  private keepMapped(type: TypeUrl, before: ReadonlyMap<string, Mapped1>, fresh: ReadonlyMap<string, Mapped1>): void {
    const held: ReadonlyMap<string, unknown> = type === TYPE.listener ? this.listeners : type === TYPE.route ? this.routes : type === TYPE.cluster ? this.clusters : this.endpoints;
    const next = new Map<string, Mapped1>();
    for (const src of [before, fresh]) for (const [d, e] of src) if (held.get(e.name) === e.value) next.set(d, e);
    this.mappedByDigest.set(type, next);
    if (type === TYPE.endpoint) for (const n of [...this.claMemos.keys()]) if (!this.endpoints.has(n)) this.claMemos.delete(n);
  }

  private mapOne(type: TypeUrl, any: Msg, i: number): ({ ok: true; name: string; label: string; value: Resource; notes: readonly string[] }) | { ok: false; issues: Issue[]; name?: string } {
    const kind = type.slice(type.lastIndexOf(".") + 1);
    if (String(any["type_url"] ?? "") !== type) return { ok: false, issues: [{ path: `resources[${i}]`, message: `type ${String(any["type_url"])} in a ${kind} response` }] };
    // a ClusterLoadAssignment: its endpoints seen before are not decoded again (map/endpoint.ts)
    const bytes = any["value"];
    const fast = type === TYPE.endpoint && bytes instanceof Uint8Array && this.endpointsInPlace ? mapClusterLoadAssignmentBytes(bytes, decode, (n) => this.claMemos.get(n)) : undefined;
    let msg: Msg = {};
    if (fast === undefined) {
      try {
        msg = decode(any).value;
      } catch (err) {
        return { ok: false, issues: [{ path: `resources[${i}]`, message: (err as Error).message }] };
      }
    }
    const name = fast !== undefined ? fast.name : String(msg[type === TYPE.endpoint ? "cluster_name" : "name"] ?? "");
    const label = labelOf(type, name);
    const named = name === "" ? {} : { name };
    const prefix = (r: Mapped<unknown>): Issue[] => (r.ok ? [] : r.issues.map((x) => ({ path: x.path === "" ? label : `${label} ${x.path}`, message: x.message })));
    let r: Mapped<Resource>;
    if (fast !== undefined) {
      r = fast.mapped;
      if (fast.memo !== undefined) this.claMemos.set(name, fast.memo);
    } else if (type === TYPE.listener) r = mapListener(msg, decode);
    else if (type === TYPE.route) r = mapRouteConfiguration(msg, decode);
    else if (type === TYPE.endpoint) r = mapClusterLoadAssignment(msg, decode);
    else {
      const c = mapCluster(msg, decode);
      if (!c.ok) return { ok: false, issues: prefix(c), ...named };
      let tls: ClusterTlsConfig | null;
      try {
        tls = this.tlsFiles(c.value);
        // the files are read now, as the cluster will read them: one that cannot be refuses this cluster alone
        if (tls !== null) upstreamTlsOptions(tls, c.value.name);
      } catch (err) {
        const why = err instanceof ConfigError ? err.issues.map((x) => x.message).join("; ") : (err as Error).message;
        return { ok: false, issues: [{ path: `${label} transport_socket`, message: why }], ...named };
      }
      r = { ok: true, value: { cluster: c.value, tls }, notes: c.notes };
    }
    if (!r.ok) return { ok: false, issues: prefix(r), ...named };
    if (name === "") return { ok: false, issues: [{ path: `resources[${i}]`, message: `${kind} without a name` }] };
    return { ok: true, name, label, value: r.value, notes: r.notes };
  }

  /** A cluster's TLS as dojang's config takes it (files); inline PEM goes to private files. */
  private tlsFiles(c: XdsCluster): ClusterTlsConfig | null {
    const t = c.tls;
    if (t === null) return null;
    const file = (s: TlsSource | null, what: string): string | null => {
      if (s === null) return null;
      if ("file" in s) return s.file;
      this.certDir ??= mkdtempSync(join(tmpdir(), "dojang-xds-"));
      // named by content: a changed certificate is a changed config (the cluster is rebuilt and reads it)
      const digest = createHash("sha256").update(s.inline).digest("hex").slice(0, 16);
      const p = join(this.certDir, `${c.name.replace(/[^A-Za-z0-9_.-]/g, "_")}.${what}.${digest}.pem`);
      writeFileSync(p, s.inline, { mode: 0o600 });
      return p;
    };
    return { caFile: file(t.ca, "ca"), certFile: file(t.cert, "cert"), keyFile: file(t.key, "key"), serverName: t.serverName };
  }

  /**
   * Takes a response's valid resources into the state. `refused` (invalid ones) keep what was
   * held for them; with `partial` (a resource whose name could not be read), LDS and CDS delete
   * nothing they leave out.
   */
  private take(type: TypeUrl, got: ReadonlyMap<string, Resource>, removed: ReadonlySet<string>, refused: ReadonlySet<string>, partial: boolean): void {
    // state of the world: LDS and CDS are complete; delta: every type changes by what is sent and removed
    const merge = <T>(cur: Map<string, T>, complete: boolean): Map<string, T> => {
      const wipe = complete && !this.delta && !partial;
      const next = wipe ? new Map<string, T>() : new Map(cur);
      if (wipe) {
        for (const n of refused) {
          const v = cur.get(n);
          if (v !== undefined) next.set(n, v);
        }
      }
      for (const n of removed) next.delete(n);
      for (const [n, v] of got) next.set(n, v as T);
      return next;
    };
    if (type === TYPE.listener) this.listeners = merge(this.listeners, true);
    else if (type === TYPE.cluster) this.clusters = merge(this.clusters, true);
    else if (type === TYPE.route) this.routes = merge(this.routes, false);
    else this.endpoints = merge(this.endpoints, false);
  }

  /** Asks for exactly `names` of a named type (RDS, EDS), forgetting the ones no longer referred to. */
  private resubscribe(type: TypeUrl, names: readonly string[]): void {
    const sub = this.subs.get(type)!;
    const next = new Set(names);
    const cur = sub.names ?? new Set<string>();
    if (next.size === cur.size && [...next].every((n) => cur.has(n))) return;
    for (const n of cur) {
      if (next.has(n)) continue;
      sub.versions.delete(n);
      sub.missing.delete(n);
      clearTimer(sub, n);
      if (type === TYPE.route) this.routes.delete(n);
      else this.endpoints.delete(n);
    }
    const added = [...next].filter((n) => !cur.has(n)).sort();
    const dropped = [...cur].filter((n) => !next.has(n)).sort();
    sub.names = next;
    if (this.delta) this.sendDelta(type, { subscribe: added, unsubscribe: dropped });
    else this.send(type);
  }
}

/**
 * Why a stream ended, for the log: the gRPC code's name and details, without the empty
 * "Resolution note: " grpc-js appends when its resolver had nothing to say.
 */
export function describeEnd(err: Error & Partial<grpc.StatusObject>): string {
  const details = (err.details ?? err.message).replace(/\.? ?Resolution note: ?$/, "");
  return err.code === undefined ? details : `${grpc.status[err.code] ?? err.code}: ${details}`;
}

/** How an update was applied: to the clusters in place, by the whole-config reload, or not at all (nothing changed). */
type AppliedHow = "endpoints" | "reload" | "none";

/** "Cluster \"svc\"": how an issue names a resource. */
function labelOf(type: TypeUrl, name: string): string {
  return `${type.slice(type.lastIndexOf(".") + 1)} ${JSON.stringify(name)}`;
}

/** The names of `type` in a host's refusal (listeners for LDS, clusters for CDS). */
function refusedIn(type: TypeUrl, r: RefusedResources | undefined): readonly string[] {
  if (r === undefined) return [];
  return type === TYPE.listener ? r.listeners : type === TYPE.cluster ? r.clusters : [];
}

/** This process's CPU (user + system, every thread) since `from`, in ms (µs precision). */
function cpuMsSince(from: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(from);
  return Math.round(d.user + d.system) / 1000;
}

/**
 * The change from `prev` to `next` when it is only in endpoint sets (each ClusterLoadAssignment
 * that changed, as a delta; [] when nothing changed at all); null when anything else changed:
 * a listener, route table, cluster or the missing set, or a ClusterLoadAssignment that came or
 * went (a cluster starts or stops warming). Resources that did not change are the same objects
 * (the client keeps what it mapped from the same bytes), so this compares references.
 */
export function endpointChanges(prev: XdsState, next: XdsState): EndpointUpdate[] | null {
  const same = <T>(a: ReadonlyMap<string, T>, b: ReadonlyMap<string, T>): boolean => {
    if (a.size !== b.size) return false;
    for (const [k, v] of a) if (b.get(k) !== v) return false;
    return true;
  };
  if (!same(prev.listeners, next.listeners) || !same(prev.routes, next.routes) || !same(prev.clusters, next.clusters)) return null;
  if (prev.missing.size !== next.missing.size || [...prev.missing].some((n) => !next.missing.has(n))) return null;
  if (prev.endpoints.size !== next.endpoints.size) return null;
  const out: EndpointUpdate[] = [];
  for (const [name, before] of prev.endpoints) {
    const after = next.endpoints.get(name);
    if (after === undefined) return null;
    if (after === before) continue;
    // the mapping's own change when `after` was mapped from `before` (map/endpoint.ts: found
    // from the LbEndpoints that differ, nothing per kept endpoint); else the lists compared
    const known = endpointsChange(after);
    const delta = known !== undefined && known.from === before ? known.delta : diffEndpoints(before.endpoints, before.weights, after.endpoints, after.weights);
    if (!isEmptyDelta(delta)) out.push({ name, delta, value: after });
  }
  return out;
}

/**
 * Whether a changed ClusterLoadAssignment feeds a weighted split: compose builds one cluster of
 * the members' endpoints for it, so the change goes through the whole-config reload.
 */
function inWeightedSplit(st: XdsState, updates: readonly EndpointUpdate[]): boolean {
  const changed = new Set(updates.map((u) => u.name));
  const fed = new Set<string>();
  for (const [name, { cluster }] of st.clusters) if (cluster.eds !== null && changed.has(cluster.eds)) fed.add(name);
  if (fed.size === 0) return false;
  const tables = [...st.routes.values(), ...[...st.listeners.values()].flatMap((l) => (l.inline === null ? [] : [l.inline]))];
  return tables.some((t) => t.virtualHosts.some((vh) => vh.routes.some((r) => r.clusters.length > 1 && r.clusters.some((c) => fed.has(c.name)))));
}

/** Stops a named resource's does-not-exist timer. */
function clearTimer(sub: Sub, name: string): void {
  const t = sub.timers.get(name);
  if (t !== undefined) clearTimeout(t);
  sub.timers.delete(name);
}

/** The xDS metrics (docs/reference/metrics.md), registered on the instance's registry. */
export function registerXdsMetrics(registry: Registry): { readonly updates: Counter<"type" | "result">; readonly connected: Gauge } {
  const registers = [registry];
  return {
    updates: new Counter({ name: "dojang_xds_updates_total", help: "xDS responses by resource type (lds, rds, cds, eds) and result (accepted: ACKed; rejected: NACKed)", labelNames: ["type", "result"], registers }),
    connected: new Gauge({ name: "dojang_xds_connected", help: "1 while the ADS stream to the control plane is established (open on a ready connection, whether or not a response has come)", registers }),
  };
}

function credentialsFor(b: Bootstrap): grpc.ChannelCredentials {
  if (b.tls === null) return grpc.credentials.createInsecure();
  const read = (p: string | null): Buffer | null => (p === null ? null : readFileSync(p));
  return grpc.credentials.createSsl(read(b.tls.caFile), read(b.tls.keyFile), read(b.tls.certFile));
}

/** google.protobuf.Struct from a plain object (the node's metadata). */
function toStruct(o: Readonly<Record<string, unknown>>): Msg {
  const value = (v: unknown): Msg => {
    if (v === null || v === undefined) return { null_value: "NULL_VALUE" };
    if (typeof v === "number") return { number_value: v };
    if (typeof v === "boolean") return { bool_value: v };
    if (typeof v === "string") return { string_value: v };
    if (Array.isArray(v)) return { list_value: { values: v.map(value) } };
    return { struct_value: toStruct(v as Record<string, unknown>) };
  };
  return { fields: Object.fromEntries(Object.entries(o).map(([k, v]) => [k, value(v)])) };
}

function nodeMessage(b: Bootstrap): Msg {
  return {
    id: b.node.id,
    cluster: b.node.cluster,
    metadata: toStruct(b.node.metadata),
    user_agent_name: "dojang",
    user_agent_version: VERSION,
    client_features: ["envoy.lb.does_not_support_overprovisioning"],
  };
}
