// Pickers: which endpoint the next attempt goes to. A picker is built over an immutable list of
// endpoints (grpc-js picker.ts: a new picker replaces the old one when the list changes, so a
// call in flight never sees a list change under it). Pure apart from its cursor; no node:*.

export interface Picker<E> {
  /** the endpoint for the next attempt; undefined when there is none (an empty list) */
  pick(): E | undefined;
  readonly endpoints: readonly E[];
}

/** Round robin, in list order. */
export function roundRobinPicker<E>(endpoints: readonly E[]): Picker<E> {
  const eps = Object.freeze([...endpoints]);
  let next = 0;
  return {
    endpoints: eps,
    pick(): E | undefined {
      if (eps.length === 0) return undefined;
      const e = eps[next]!;
      next = next + 1 === eps.length ? 0 : next + 1;
      return e;
    },
  };
}
