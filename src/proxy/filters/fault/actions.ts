// Pure helpers the call uses while executing fault actions: delay draws and grpc-timeout tampering.
// Randomness comes in as an argument; no clock, timers or node:* imports.

import { MAX_DURATION_MS } from "../../../config/units.js";
import { MAX_INT64_NS } from "../../../translate/timeout.js";
import type { DeadlineAction, DelaySpec } from "../../../config/faults/model.js";

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
