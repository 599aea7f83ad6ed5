// What the calls of one listener share: the swap point of its config snapshot's routes and
// filters (a reload stores a new one; a call keeps the one it started with), and the listener's
// metrics, loggers, clock, journal and drain bookkeeping. Types only.
import type { Logger } from "pino";
import type { RedactableField } from "../../config/index.js";
import type { Journal } from "../observe/log.js";
import type { TapHub } from "../observe/tap.js";
import type { Stats } from "../observe/windows.js";
import type { Metrics } from "../observe/metrics.js";
import type { Tracing } from "../observe/tracing.js";
import type { Router } from "../router.js";
import type { Cluster } from "../upstream/cluster.js";
import type { ActiveCalls } from "./active.js";
import type { FilterFactory } from "./filter.js";

/**
 * One listener's part of a config snapshot (src/proxy/snapshot.ts): its compiled routes and
 * filter chain. Immutable; a call keeps the one it started with until it ends.
 */
export interface ListenerRoutes {
  readonly router: Router<Cluster>;
  /** the filter chain, compiled once; null when empty (one test per call) */
  readonly filters: readonly FilterFactory[] | null;
}

/**
 * The swap point: Dojang stores the current snapshot's ListenerRoutes here (a reload stores a
 * new one); each call reads it once, when its stream arrives.
 */
export interface RoutesCell {
  current: ListenerRoutes;
}

/** What every call on one listener shares; built once at start. */
export interface CallContext {
  readonly listener: string;
  readonly routes: RoutesCell;
  readonly metrics: Metrics;
  readonly log: Logger;
  /** where access lines go (asynchronous) */
  readonly access: Logger;
  readonly accessLog: boolean;
  /** config accessLogRedact: the record fields shown as "<redacted>" (access log, journal, span); null when none */
  readonly accessLogRedact: readonly RedactableField[] | null;
  /** monotonic milliseconds */
  readonly now: () => number;
  /** draws in [0, 1): the retry decision's jitter (translate/retry.ts `draw`) */
  readonly rand: () => number;
  /** recent calls (GET /calls); size 0 keeps none */
  readonly journal: Journal;
  /** the last failed calls (`failedCalls`, GET /calls?failed); size 0 keeps none */
  readonly failed: Journal;
  /** the windowed stats (`stats`); null when off: each call pays one test */
  readonly stats: Stats | null;
  /** live tap subscribers (GET /tap): with none, a call pays one length test */
  readonly tap: TapHub;
  /** calls in flight on this listener (drain: what is left at the timeout gets 14 "shutdown") */
  readonly active: ActiveCalls;
  /** called when a call's downstream stream has closed (drain bookkeeping) */
  readonly onCallClosed: () => void;
  /** OpenTelemetry traces (config `tracing`); null when off: each call pays one test */
  readonly tracing: Tracing | null;
  /** the listener's streamIdleTimeout (ms, 0 = never; set by Listener from its config) */
  readonly streamIdleTimeoutMs?: number;
  /** the listener's attemptsHeader: x-dojang-attempts (upstream attempts made) on each response head */
  readonly attemptsHeader?: boolean;
}
