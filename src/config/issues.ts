// Helpers for human config messages: key paths (`listeners[0].routes[1].cluster`), value
// descriptions and "did you mean" suggestions. Pure; imports nothing.

export type PathSegment = string | number;

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$-]*$/;

/** `["listeners", 0, "routes", 1, "cluster"]` → `listeners[0].routes[1].cluster`; odd keys are quoted (`a["b c"]`). */
export function formatPath(path: readonly PathSegment[]): string {
  let out = "";
  for (const seg of path) {
    if (typeof seg === "number") out += `[${seg}]`;
    else if (IDENTIFIER.test(seg)) out += out === "" ? seg : `.${seg}`;
    else out += `[${JSON.stringify(seg)}]`;
  }
  return out;
}

/** A short description of a value for "expected X, got Y" messages. */
export function describeValue(v: unknown): string {
  if (v === null) return "null";
  if (v === undefined) return "nothing";
  if (Array.isArray(v)) return "a list";
  switch (typeof v) {
    case "string":
      return v.length > 60 ? `"${v.slice(0, 57)}..."` : JSON.stringify(v);
    case "number":
    case "boolean":
    case "bigint":
      return String(v);
    case "object":
      return "a mapping";
    default:
      return `a ${typeof v}`;
  }
}

/** Levenshtein distance, small inputs only (config keys and names). */
function editDistance(a: string, b: string): number {
  const prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0] ?? 0;
    prev[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const up = prev[j] ?? 0;
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      prev[j] = Math.min(up + 1, (prev[j - 1] ?? 0) + 1, diag + cost);
      diag = up;
    }
  }
  return prev[b.length] ?? 0;
}

/**
 * The candidate closest to `word` (case-insensitive), if it is close enough to be a typo:
 * at most a third of the longer word's length, and at most 3 edits.
 */
export function closestMatch(word: string, candidates: Iterable<string>): string | undefined {
  const w = word.toLowerCase();
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const c of candidates) {
    const lc = c.toLowerCase();
    // A shortened or lengthened word ("warning" for "warn", "route" for "routes") counts as one edit.
    const prefix = Math.min(w.length, lc.length) >= 3 && (w.startsWith(lc) || lc.startsWith(w));
    const d = prefix ? 1 : editDistance(w, lc);
    const limit = Math.min(3, Math.max(1, Math.floor(Math.max(w.length, c.length) / 3)));
    if (d <= limit && d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  return best;
}

/** ` (did you mean "x"?)` or "". */
export function didYouMean(word: string, candidates: Iterable<string>): string {
  const m = closestMatch(word, candidates);
  return m === undefined ? "" : ` (did you mean "${m}"?)`;
}

const TYPE_NAMES: Readonly<Record<string, string>> = {
  string: "a string",
  number: "a number",
  boolean: "true or false",
  array: "a list",
  object: "a mapping",
  null: "null",
};

/** zod's invalid_type, said for people: "is required", or "expected a list, got 3". */
export function invalidTypeMessage(expected: string, input: unknown): string {
  if (input === undefined) return "is required";
  return `expected ${TYPE_NAMES[expected] ?? expected}, got ${describeValue(input)}`;
}
