// Seeded randomness for fault selection and jitter: mulberry32 and a 32-bit string hash.
// Pure (no Math.random, no clock), so a test run with the same seed replays identically.

/**
 * mulberry32 (Tommy Ettinger's 32-bit generator, public domain): returns a function giving floats
 * in [0, 1). Period 2^32, which is plenty for picking faults; not for cryptography.
 */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** FNV-1a over UTF-16 code units, then murmur3's fmix32 so nearby strings land far apart. */
export function hash32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** A rule's PRNG seed when it gives none: the set's seed mixed with the rule id (stable across runs). */
export function ruleSeed(setSeed: number, ruleId: string): number {
  return hash32(`${setSeed >>> 0}:${ruleId}`);
}

/** A uint32 from a [0, 1) draw, for seeding a per-call generator (jitter). */
export function seedFromDraw(draw: number): number {
  return Math.floor(draw * 4294967296) >>> 0;
}
