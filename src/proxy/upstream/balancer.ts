// Pickers: which endpoint the next attempt goes to. A picker is built over an immutable list of
// endpoints and what is known of them at that moment (usable or not, weights), and replaced
// whenever that changes: the cluster rebuilds it when endpoints, weights, health or ejections
// change, never per call (grpc-js picker.ts hands out immutable pickers the same way). The
// arithmetic is src/translate/pick.ts; the draws come from an injected `rand`, so tests fix them.

import {
  cumulativeWeights,
  eligible,
  pickLeastRequest,
  pickRandom,
  roundRobinSchedule,
  type LbPolicy,
  type Rotation,
} from "../../translate/pick.js";

export interface Picker<E extends object> {
  /**
   * The endpoint for the next attempt; undefined when there is none (an empty list). `avoid` is
   * skipped when another eligible endpoint exists (a retry should not go back where it failed).
   */
  pick(avoid?: E): E | undefined;
  /** every endpoint the picker was built over (eligible or not) */
  readonly endpoints: readonly E[];
  /** the endpoints that get calls */
  readonly eligible: readonly E[];
  /** none was usable, so all get calls (Envoy's panic mode) */
  readonly panic: boolean;
}

export interface PickerInput<E extends object> {
  readonly policy: LbPolicy;
  readonly endpoints: readonly E[];
  /** healthy and not ejected, per endpoint */
  readonly usable: readonly boolean[];
  /** whole numbers ≥ 1, per endpoint */
  readonly weights: readonly number[];
  /** calls in flight on an endpoint (least_request) */
  readonly active: (e: E) => number;
  /** a draw in [0, 1) */
  readonly rand: () => number;
  /**
   * usable and weights with what is derived from them, kept by the cluster across changes
   * (patchRotation); when given, `usable` and `weights` are not read and nothing is recomputed
   * over the whole list
   */
  readonly rotation?: Rotation;
  /**
   * `endpoints` (and the rotation's lists) are the caller's own, patched in place by a change
   * after which it builds a new picker at once (the cluster's): taken as they are, not copied
   */
  readonly live?: boolean;
}

/** Round robin, in list order, every endpoint eligible (the simple picker of a cluster without policies). */
export function roundRobinPicker<E extends object>(endpoints: readonly E[]): Picker<E> {
  return buildPicker({ policy: "round_robin", endpoints, usable: endpoints.map(() => true), weights: [], active: () => 0, rand: Math.random });
}

export function buildPicker<E extends object>(input: PickerInput<E>): Picker<E> {
  // (a frozen list is the caller's own snapshot, a live one the cluster's own list: neither is copied again)
  const eps = input.live === true || Object.isFrozen(input.endpoints) ? input.endpoints : Object.freeze([...input.endpoints]);
  const rot = input.rotation;
  const { indices, panic } = rot ?? eligible(input.usable);
  const weights = rot?.weights ?? input.weights;
  // the eligible endpoints as a list: made when first asked for (/clusters, a retry's last resort),
  // not on each change
  let elig: readonly E[] | undefined = indices.length === eps.length ? eps : undefined;
  const eligibleList = (): readonly E[] => (elig ??= Object.freeze(indices.map((i) => eps[i]!)));
  const n = indices.length;
  const rand = input.rand;
  let pickIndex: () => number;
  if (n === 0) {
    pickIndex = () => -1;
  } else if (input.policy === "round_robin") {
    // (no endpoint weighs 2 or more: the schedule is the eligible indices, without a pass to find that out)
    const schedule = rot !== undefined && rot.heavy === 0 ? indices : roundRobinSchedule(indices, weights);
    // Start at a random place in the schedule, so that many dojang processes (workers, replicas)
    // rebuilt at the same moment do not all send their next call to the same endpoint.
    let next = Math.floor(rand() * schedule.length) % schedule.length;
    pickIndex = () => {
      const i = schedule[next]!;
      next = next + 1 === schedule.length ? 0 : next + 1;
      return i;
    };
  } else {
    // (no endpoint weighs 2 or more: no sums to make, pickRandom draws the place directly)
    const cumulative = rot !== undefined && rot.heavy === 0 ? null : cumulativeWeights(indices, weights);
    if (input.policy === "random") pickIndex = () => pickRandom(indices, cumulative, rand());
    else {
      const active = input.active;
      const activeAt = (i: number): number => active(eps[i]!);
      pickIndex = () => pickLeastRequest(indices, cumulative, weights, activeAt, rand(), rand());
    }
  }
  return {
    endpoints: eps,
    get eligible(): readonly E[] {
      return eligibleList();
    },
    panic,
    pick(avoid?: E): E | undefined {
      const i = pickIndex();
      if (i < 0) return undefined;
      const e = eps[i]!;
      if (avoid === undefined || e !== avoid || n < 2) return e;
      // A few more draws (a weighted schedule may repeat the avoided endpoint), then the next
      // eligible endpoint after it in list order.
      for (let k = 0; k < 4; k++) {
        const j = pickIndex();
        if (eps[j] !== avoid) return eps[j];
      }
      const list = eligibleList();
      return list[(list.indexOf(avoid) + 1) % n];
    },
  };
}
