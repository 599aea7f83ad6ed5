// Pure helpers the call uses while executing fault actions: compiling a call's action list into
// what each hook point looks at, delay draws and grpc-timeout tampering.
// Randomness comes in as an argument; no clock, timers or node:* imports.

import { MAX_DURATION_MS } from "../../../config/units.js";
import { MAX_INT64_NS } from "../../../translate/timeout.js";
import type {
  AbortAction,
  CloseConnectionAction,
  DeadlineAction,
  DelayAction,
  DelaySpec,
  FaultAction,
  GoawayAction,
  ResetAction,
  ShapeAction,
  UpstreamResetAction,
} from "../../../config/faults/model.js";

/**
 * Milliseconds to wait for one delay point. `rand` gives floats in [0, 1): use
 * `mulberry32(action.jitterSeed)` once per call and draw from it at each delay point, so a
 * seeded run replays the same delays. A fixed delay draws nothing. The result is clamped to
 * 0..MAX_DURATION_MS (Node turns longer timers into 1 ms).
 */
export function drawDelayMs(spec: DelaySpec, rand: () => number): number {
  switch (spec.type) {
    case "fixed":
      return spec.ms;
    case "uniform":
      return clampMs(spec.minMs + Math.floor(rand() * (spec.maxMs - spec.minMs + 1)));
    case "normal": {
      // Box–Muller; 1 − u keeps the log argument in (0, 1].
      const u1 = 1 - rand();
      const u2 = rand();
      const z = Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
      return clampMs(Math.round(spec.meanMs + z * spec.stddevMs));
    }
    default:
      return 0;
  }
}

function clampMs(ms: number): number {
  if (!Number.isFinite(ms) || ms < 0) return 0;
  return ms > MAX_DURATION_MS ? MAX_DURATION_MS : ms;
}

const NS_PER_MS = 1_000_000n;

/**
 * The grpc-timeout (bigint ns, as decodeTimeout gives it) to send upstream under a `deadline`
 * fault; null = send no grpc-timeout. A request without one stays without one (shrink and grow
 * have nothing to work on). The result is within 0..MaxInt64 ns; encode it with encodeTimeout.
 */
export function tamperTimeoutNs(action: DeadlineAction, ns: bigint | null): bigint | null {
  if (action.mode === "drop" || ns === null) return null;
  let out: bigint;
  if (action.factor !== null) {
    // Doubles are exact to 2^53 ns (~104 days); beyond that a factor is approximate anyway.
    const scaled = Number(ns) * action.factor;
    out = scaled >= Number(MAX_INT64_NS) ? MAX_INT64_NS : BigInt(Math.round(scaled));
  } else {
    const by = BigInt(action.byMs ?? 0) * NS_PER_MS;
    out = action.mode === "shrink" ? ns - by : ns + by;
  }
  if (out < 0n) return 0n;
  return out > MAX_INT64_NS ? MAX_INT64_NS : out;
}

/** A call's fault actions, sorted by the hook point that applies them (compileActions). */
export interface CompiledActions {
  /** abort (Trailers-Only) | http | unreachable | blackhole | reset before_headers */
  readonly before: FaultAction | null;
  readonly abortAfter: AbortAction | null;
  /** after_headers | after_messages | mid_message */
  readonly reset: ResetAction | null;
  readonly shape: ShapeAction | null;
  readonly closeConn: CloseConnectionAction | null;
  readonly goaway: GoawayAction | null;
  readonly deadline: DeadlineAction | null;
  readonly upReset: UpstreamResetAction | null;
  readonly delays: readonly DelayAction[];
  readonly bandwidth: { readonly request: number; readonly response: number };
  readonly stall: { readonly request: boolean; readonly response: boolean };
  /** the last delay's non-zero jitterSeed (its draws replay), or null: the call's own seed */
  readonly jitterSeed: number | null;
  /** the response body needs a pump (message-level work on it) */
  readonly responseWork: boolean;
  /** the request body needs a pump */
  readonly requestWork: boolean;
}

/**
 * Sorts a call's actions by hook point. The first action of each kind wins (a later one of the
 * same kind is ignored: docs/reference/faults.md, stacking); delays all apply, each at its point.
 */
export function compileActions(actions: readonly FaultAction[]): CompiledActions {
  let before: FaultAction | null = null;
  let abortAfter: AbortAction | null = null;
  let reset: ResetAction | null = null;
  let shape: ShapeAction | null = null;
  let closeConn: CloseConnectionAction | null = null;
  let goaway: GoawayAction | null = null;
  let deadline: DeadlineAction | null = null;
  let upReset: UpstreamResetAction | null = null;
  let jitterSeed: number | null = null;
  const delays: DelayAction[] = [];
  const bandwidth = { request: 0, response: 0 };
  const stall = { request: false, response: false };
  for (const a of actions) {
    switch (a.kind) {
      case "abort":
        if (a.afterMessages === null) before ??= a;
        else abortAfter ??= a;
        break;
      case "http":
      case "unreachable":
      case "blackhole":
        before ??= a;
        break;
      case "reset":
        if (a.at === "before_headers") before ??= a;
        else reset ??= a;
        break;
      case "shape":
        shape ??= a;
        break;
      case "close_connection":
        closeConn ??= a;
        break;
      case "goaway":
        goaway ??= a;
        break;
      case "deadline":
        deadline ??= a;
        break;
      case "upstream_reset":
        upReset ??= a;
        break;
      case "delay":
        delays.push(a);
        if (a.jitterSeed !== 0) jitterSeed = a.jitterSeed;
        break;
      case "bandwidth":
        if (bandwidth[a.direction] === 0) bandwidth[a.direction] = a.bytesPerSecond;
        break;
      case "stall":
        stall[a.direction] = true;
        break;
    }
  }
  const responseWork =
    abortAfter !== null ||
    (reset !== null && reset.at !== "after_headers") ||
    closeConn !== null ||
    bandwidth.response > 0 ||
    stall.response ||
    (shape !== null && (shape.shape === "compressed_flag" || shape.shape === "truncated_message")) ||
    delays.some((d) => d.at === "message" && d.direction === "response");
  const requestWork = upReset !== null || bandwidth.request > 0 || stall.request || delays.some((d) => d.at === "message" && d.direction === "request");
  return { before, abortAfter, reset, shape, closeConn, goaway, deadline, upReset, delays, bandwidth, stall, jitterSeed, responseWork, requestWork };
}
