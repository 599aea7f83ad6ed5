// Token buckets for local rate limits: `callsPerSecond` refill, `burst` capacity, one bucket per key (route, client address or a metadata value), refilled lazily from the caller's clock.
//
// Pure: the caller passes monotonic milliseconds; a bucket is a small mutable record, and a keyed
// set of buckets evicts the least recently used key past its cap so a client cycling keys cannot
// grow memory without bound.

export interface BucketConfig {
  /** tokens added per second */
  readonly ratePerSecond: number;
  /** the most tokens a bucket holds (and starts with) */
  readonly burst: number;
}

export interface Bucket {
  tokens: number;
  lastMs: number;
}

export function newBucket(cfg: BucketConfig, nowMs: number): Bucket {
  return { tokens: cfg.burst, lastMs: nowMs };
}

/** Takes one token if there is one (refilling first); false = over the limit. */
export function take(b: Bucket, cfg: BucketConfig, nowMs: number): boolean {
  const dt = nowMs - b.lastMs;
  if (dt > 0) {
    b.tokens = Math.min(cfg.burst, b.tokens + (dt * cfg.ratePerSecond) / 1000);
    b.lastMs = nowMs;
  }
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return true;
  }
  return false;
}

/** How long until the next token (ms), for a retry hint; 0 when one is there. */
export function msUntilToken(b: Bucket, cfg: BucketConfig): number {
  if (b.tokens >= 1 || cfg.ratePerSecond <= 0) return 0;
  return Math.ceil(((1 - b.tokens) * 1000) / cfg.ratePerSecond);
}

/**
 * What a refused call is told (issue 18 item 8): Envoy's local rate limit headers (draft RFC
 * RateLimit headers, version 03) and gRPC's retry pushback, from the key's bucket as the refusal
 * left it. `limit` is the bucket's size; `remaining` the whole tokens left (0 on a refusal);
 * `resetSeconds` the whole seconds until a call would be admitted again (at least 1 while none
 * would be); `pushbackMs` the same in milliseconds, rounded up, so a client that waits it finds a
 * token (unless another caller of the same key took it first).
 */
export interface RateLimitHint {
  readonly limit: number;
  readonly remaining: number;
  readonly resetSeconds: number;
  readonly pushbackMs: number;
}

export function rateLimitHint(b: Bucket, cfg: BucketConfig): RateLimitHint {
  const ms = msUntilToken(b, cfg);
  return { limit: cfg.burst, remaining: Math.floor(b.tokens), resetSeconds: Math.ceil(ms / 1000), pushbackMs: ms };
}

/** Buckets by key, at most `maxKeys` (least recently used evicted: a Map keeps insertion order). */
export class KeyedBuckets {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    readonly cfg: BucketConfig,
    readonly maxKeys: number,
  ) {}

  get size(): number {
    return this.buckets.size;
  }

  /** The bucket of `key` as it is (no refill, no use: the least-recently-used order is left as it is). */
  peek(key: string): Bucket | undefined {
    return this.buckets.get(key);
  }

  take(key: string, nowMs: number): boolean {
    let b = this.buckets.get(key);
    if (b === undefined) {
      if (this.buckets.size >= this.maxKeys) {
        const oldest = this.buckets.keys().next().value;
        if (oldest !== undefined) this.buckets.delete(oldest);
      }
      b = newBucket(this.cfg, nowMs);
    } else this.buckets.delete(key);
    this.buckets.set(key, b);
    return take(b, this.cfg, nowMs);
  }
}
