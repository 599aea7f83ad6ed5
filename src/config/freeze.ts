// deepFreeze, on its own so that what needs it (the served process taking the launcher's config,
// src/config/handover.ts) does not load the parser (src/config/parse.ts and its zod schemas).

/** Recursively freezes plain objects and arrays; the returned Config can be shared across the process. */
export function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
