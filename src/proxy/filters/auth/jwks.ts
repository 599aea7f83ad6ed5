// A route's JWT verification keys (jwt.jwks): a JWKS file read when the config is loaded, or a
// JWKS URL fetched over HTTPS and cached. No timer: a call that finds the keys older than
// refreshInterval starts one fetch in the background and verifies with the keys it has; a token
// whose kid is not in the set fetches at once (key rotation), at most once a second; after a
// failed refresh the last good keys serve until refreshInterval + staleWhileError has passed since
// the last good fetch, and past that every call waits for a fetch (failed fetches are retried at
// most once a second). Nothing about the keys is logged beyond the URL and the error's kind.
// Each fetch is a side call (upstream/side-call.ts): it ends within `timeout` from its start,
// whatever the server does (node's own `timeout` is an idle timer a trickling server never
// trips), and is counted once in dojang_jwks_fetches_total.
import { readFileSync } from "node:fs";
import { request } from "node:https";
import type { createLocalJWKSet, JSONWebKeySet, JWTVerifyGetKey } from "jose";
import type { Logger } from "pino";
import type { JwksSource } from "../../../config/index.js";
import { DojangError } from "../../../errors.js";
import type { JwksResult, Metrics } from "../../observe/metrics.js";
import { failureOfNodeError, sideCall, type SideOutcome } from "../../upstream/side-call.js";

/** The most bytes a JWKS response may have. */
const MAX_JWKS_BYTES = 1_048_576;
/** An unknown kid fetches again at most this often; so does a failed fetch. */
const REFETCH_MS = 1000;

type KeySet = ReturnType<typeof createLocalJWKSet>;

/** An error that carries the code jwtFailureMessage maps (claims.ts). */
class KeysUnavailable extends Error {
  readonly code = "DOJANG_JWKS_UNAVAILABLE";
}

/** jose, loaded on first use: a process whose routes have no jwt never evaluates it. */
let jose: Promise<typeof import("jose")> | undefined;
export function joseModule(): Promise<typeof import("jose")> {
  return (jose ??= import("jose"));
}

function checkJwks(json: unknown): JSONWebKeySet {
  if (typeof json !== "object" || json === null || !Array.isArray((json as { keys?: unknown }).keys)) throw new Error("not a JWKS document (no keys list)");
  return json as JSONWebKeySet;
}

async function keySetOf(json: unknown): Promise<KeySet> {
  const doc = checkJwks(json);
  return (await joseModule()).createLocalJWKSet(doc);
}

/** How a fetch's end is counted (dojang_jwks_fetches_total, bound once per URL). */
export type JwksCounters = Record<JwksResult, { inc(): void }>;

/**
 * GET `url` over HTTPS (verified against `ca`, else the system CAs) as JSON: settles within
 * `timeoutMs` of its start (a side call), counted once in `counters`.
 */
export function fetchJwks(url: string, ca: Buffer | undefined, timeoutMs: number, counters?: JwksCounters): Promise<unknown> {
  return new Promise((resolve, reject) => {
    sideCall<unknown>(timeoutMs, (settle) => startFetch(url, ca, settle), (o: SideOutcome<unknown>) => {
      // (a fetch is never cancelled: no call owns it)
      if (o.result === "cancelled") return reject(new Error(o.detail));
      counters?.[o.result].inc();
      if (o.result === "ok") resolve(o.value);
      else reject(new Error(o.detail));
    });
  });
}

/** The request itself; every way it can end reaches `settle` (the first one counts). */
function startFetch(url: string, ca: Buffer | undefined, settle: (o: SideOutcome<unknown>) => void): () => void {
  const req = request(url, { method: "GET", ca, headers: { accept: "application/json" } }, (res) => {
    if (res.statusCode !== 200) {
      res.resume();
      settle({ result: "error", detail: `HTTP ${res.statusCode}` });
      return;
    }
    const chunks: Buffer[] = [];
    let n = 0;
    res.on("data", (c: Buffer) => {
      n += c.length;
      if (n > MAX_JWKS_BYTES) {
        settle({ result: "error", detail: `larger than ${MAX_JWKS_BYTES} bytes` });
        req.destroy();
      } else chunks.push(c);
    });
    res.on("end", () => {
      try {
        settle({ result: "ok", value: checkJwks(JSON.parse(Buffer.concat(chunks).toString("utf8"))) });
      } catch (err) {
        settle({ result: "error", detail: err instanceof SyntaxError ? "not JSON" : (err as Error).message });
      }
    });
    res.on("error", (err) => settle(failureOfNodeError(err)));
    // the connection went before the body ended (after "end" this settles nothing)
    res.on("close", () => settle({ result: "unavailable", detail: "connection closed before the response ended" }));
  });
  req.on("error", (err) => settle(failureOfNodeError(err)));
  req.end();
  return () => req.destroy();
}

/** The keys of one route's jwt block: `getKey` is what jose's jwtVerify asks. */
export interface Jwks {
  readonly getKey: JWTVerifyGetKey;
  /** the keys are usable without waiting (a cached verified token is trusted only then); starts a refresh that is due */
  fresh(): boolean;
}

/** A JWKS file: read and parsed now (a bad file is a config error). */
function fileJwks(file: string): Jwks {
  let doc: JSONWebKeySet;
  try {
    doc = checkJwks(JSON.parse(readFileSync(file, "utf8")));
  } catch (err) {
    throw new DojangError("DOJANG_ERR_CONFIG", `jwt.jwks.file ${file}: ${(err as Error).message}`);
  }
  let set: Promise<KeySet> | undefined;
  return { getKey: async (header, token) => (await (set ??= keySetOf(doc)))(header, token), fresh: () => true };
}

/** A JWKS URL: fetched, cached, refreshed (see the header). */
export class RemoteJwks implements Jwks {
  private set: KeySet | null = null;
  private goodAt = -Infinity;
  private triedAt = -Infinity;
  private inflight: Promise<void> | null = null;
  private readonly ca: Buffer | undefined;
  readonly getKey: JWTVerifyGetKey;

  constructor(
    private readonly src: Extract<JwksSource, { url: string }>,
    private readonly now: () => number,
    private readonly log: Logger,
    private readonly fetchJson: typeof fetchJwks = fetchJwks,
    private readonly counters?: JwksCounters,
  ) {
    try {
      this.ca = src.caFile === null ? undefined : readFileSync(src.caFile);
    } catch (err) {
      throw new DojangError("DOJANG_ERR_CONFIG", `jwt.jwks.caFile ${src.caFile}: ${(err as Error).message}`);
    }
    this.getKey = (header, token) => this.keyFor(header, token);
    // warm: the first call should not wait for the first fetch
    void this.refresh().catch(() => undefined);
  }

  fresh(): boolean {
    return this.current(this.now()) !== null;
  }

  /** The keys when they may serve at `t` without waiting (starting a refresh that is due), else null. */
  private current(t: number): KeySet | null {
    const age = t - this.goodAt;
    const src = this.src;
    if (this.set === null || age > src.refreshIntervalMs + src.staleWhileErrorMs) return null;
    // due for a refresh: one fetch in the background; these keys serve meanwhile
    if (age > src.refreshIntervalMs && this.inflight === null && t - this.triedAt >= REFETCH_MS) void this.refresh().catch(() => undefined);
    return this.set;
  }

  private refresh(): Promise<void> {
    if (this.inflight !== null) return this.inflight;
    this.triedAt = this.now();
    // (a document that is not a JWKS fails like a fetch: the last good keys stay)
    const p = this.fetchJson(this.src.url, this.ca, this.src.timeoutMs, this.counters).then(keySetOf).then(
      (set) => {
        this.set = set;
        this.goodAt = this.now();
      },
      (err: unknown) => {
        this.log.warn({ jwks_url: this.src.url, err: (err as Error).message }, "JWKS fetch failed");
        throw new KeysUnavailable("JWKS fetch failed");
      },
    );
    this.inflight = p.finally(() => {
      this.inflight = null;
    });
    return this.inflight;
  }

  /** The keys, fetched first when there are none usable; null when none can be had. */
  private async usable(): Promise<KeySet> {
    const t = this.now();
    const keys = this.current(t);
    if (keys !== null) return keys;
    // none, or too old: wait for a fetch (the one in flight, or a new one unless one just failed)
    if (this.inflight !== null) await this.inflight;
    else if (t - this.triedAt >= REFETCH_MS) await this.refresh();
    else throw new KeysUnavailable("JWKS unavailable");
    if (this.set === null) throw new KeysUnavailable("JWKS unavailable");
    return this.set;
  }

  private async keyFor(header: Parameters<KeySet>[0], token: Parameters<KeySet>[1]): ReturnType<KeySet> {
    const set = await this.usable();
    try {
      return await set(header, token);
    } catch (err) {
      // rotation: a kid the set does not know fetches the set again (at most once a second)
      if ((err as { code?: string }).code !== "ERR_JWKS_NO_MATCHING_KEY" || this.now() - this.triedAt < REFETCH_MS) throw err;
      await this.refresh().catch(() => undefined);
      return this.set!(header, token);
    }
  }
}

export function jwksFor(src: JwksSource, now: () => number, log: Logger, metrics?: Metrics): Jwks {
  return "file" in src ? fileJwks(src.file) : new RemoteJwks(src, now, log, fetchJwks, metrics?.jwksCounters(src.url));
}
