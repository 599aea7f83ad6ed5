// The pure half of the global rate limit (issue 20 part 3, `rateLimit.global`): the descriptors a
// call sends to an Envoy RateLimitService (envoy.service.ratelimit.v3, ShouldRateLimit), built
// from the call's facts, and what the service's answer means for the call: admitted, or refused
// with x-ratelimit-* headers (Envoy's enable_x_ratelimit_headers: DRAFT_VERSION_03). No I/O, no
// clock: the filter (src/proxy/filters/rate-limit/global.ts) carries the call over gRPC.
import { splitMethodPath } from "./grpc-path.js";

/** Where one descriptor entry's value comes from. */
export type EntrySource =
  | { readonly kind: "client_address" }
  | { readonly kind: "header"; readonly name: string }
  | { readonly kind: "service" }
  | { readonly kind: "method" }
  | { readonly kind: "literal"; readonly value: string };

export interface EntrySpec {
  readonly key: string;
  readonly source: EntrySource;
}

/** One descriptor as the RLS protocol carries it (RateLimitDescriptor.entries). */
export interface Descriptor {
  readonly entries: readonly { readonly key: string; readonly value: string }[];
}

/** The call's facts a descriptor is built from. */
export interface DescriptorInput {
  /** the call's one canonical method path ("/pkg.Svc/Method", grpc-path.ts), the name routing and rbac read too */
  readonly path: string;
  /** the client's address ("" when unknown) */
  readonly clientAddress: string;
  /**
   * the call's request head as the filters before the limit left it (names lower-case; a
   * repeated field a list): a header a stage before set or removed counts as set or removed,
   * whatever the client sent (Envoy's filters see the headers the filters before them left)
   */
  readonly head: Readonly<Record<string, string | readonly string[] | number>>;
}

/** A field's first value in the head; undefined when absent. */
function headField(head: DescriptorInput["head"], name: string): string | undefined {
  const v = head[name];
  return v === undefined ? undefined : typeof v === "object" ? v[0] : String(v);
}

/** One entry's value for this call; undefined when its source is absent (the descriptor is then not sent, as Envoy does). */
export function entryValue(s: EntrySource, input: DescriptorInput): string | undefined {
  switch (s.kind) {
    case "literal":
      return s.value;
    case "client_address":
      return input.clientAddress === "" ? undefined : input.clientAddress;
    case "header": {
      const v = headField(input.head, s.name);
      return v === undefined || v === "" ? undefined : v;
    }
    // (the call's canonical name, never the client's raw :path: issue 0.5.1 item 1)
    case "service":
      return splitMethodPath(input.path)?.[0];
    case "method":
      return splitMethodPath(input.path)?.[1];
  }
}

/**
 * The descriptors of one call: each configured descriptor whose every entry has a value (a
 * descriptor with an absent header, an unknown client address or a path that is not
 * /service/method is left out whole, as Envoy leaves out a descriptor whose action produced
 * nothing). An empty list means the call asks nothing of the service.
 */
export function buildDescriptors(specs: readonly (readonly EntrySpec[])[], input: DescriptorInput): Descriptor[] {
  const out: Descriptor[] = [];
  outer: for (const spec of specs) {
    const entries: { key: string; value: string }[] = [];
    for (const e of spec) {
      const v = entryValue(e.source, input);
      if (v === undefined) continue outer;
      entries.push({ key: e.key, value: v });
    }
    if (entries.length > 0) out.push({ entries });
  }
  return out;
}

/** RateLimitResponse as @grpc/proto-loader hands it (keepCase, enums as strings, defaults: false). */
export interface RlsResponse {
  readonly overall_code?: string;
  readonly statuses?: readonly RlsDescriptorStatus[];
}
export interface RlsDescriptorStatus {
  readonly code?: string;
  readonly current_limit?: { readonly requests_per_unit?: number; readonly unit?: string; readonly name?: string } | null;
  readonly limit_remaining?: number;
  readonly duration_until_reset?: { readonly seconds?: string | number; readonly nanos?: number } | null;
}

/** RateLimitResponse.RateLimit.Unit in seconds (Envoy's own table: a month is 30 days, a year 365). */
export const UNIT_SECONDS: Readonly<Record<string, number>> = Object.freeze({
  SECOND: 1,
  MINUTE: 60,
  HOUR: 3600,
  DAY: 86_400,
  MONTH: 30 * 86_400,
  YEAR: 365 * 86_400,
});

/** The draft-03 RateLimit headers of a response; undefined when no status carries a limit. */
export interface RateLimitHeaders {
  readonly "x-ratelimit-limit": string;
  readonly "x-ratelimit-remaining": string;
  readonly "x-ratelimit-reset": string;
}

/** What a quoted name may not carry: quotes, backslashes, anything outside printable ASCII (a header value must stay valid). */
const NAME_UNSAFE = /[^\x20\x21\x23-\x5b\x5d-\x7e]/g;

function durationSeconds(d: RlsDescriptorStatus["duration_until_reset"]): number {
  if (d === undefined || d === null) return 0;
  const s = Number(d.seconds ?? 0);
  const n = d.nanos ?? 0;
  const total = (Number.isFinite(s) ? s : 0) + n / 1e9;
  return total > 0 ? Math.ceil(total) : 0;
}

/**
 * x-ratelimit-limit / -remaining / -reset as Envoy writes them (DRAFT_VERSION_03): the status
 * with the fewest calls remaining among those that carry a current_limit decides the limit, the
 * remaining count and the reset (whole seconds, rounded up); the limit is followed by the quota
 * policy of every limit that applied, `<n>;w=<window seconds>` (with `;name="<name>"` when the
 * service named it), comma-separated.
 */
export function rateLimitHeaders(statuses: readonly RlsDescriptorStatus[] | undefined): RateLimitHeaders | undefined {
  if (statuses === undefined) return undefined;
  let min: RlsDescriptorStatus | undefined;
  let policy = "";
  for (const st of statuses) {
    const l = st.current_limit;
    if (l === undefined || l === null) continue;
    if (min === undefined || (st.limit_remaining ?? 0) < (min.limit_remaining ?? 0)) min = st;
    const w = UNIT_SECONDS[l.unit ?? ""] ?? 0;
    if (w === 0) continue; // UNKNOWN: no window to state
    policy += `, ${l.requests_per_unit ?? 0};w=${w}${l.name !== undefined && l.name !== "" ? `;name="${l.name.replace(NAME_UNSAFE, "")}"` : ""}`;
  }
  if (min === undefined) return undefined;
  return {
    "x-ratelimit-limit": `${min.current_limit!.requests_per_unit ?? 0}${policy}`,
    "x-ratelimit-remaining": String(min.limit_remaining ?? 0),
    "x-ratelimit-reset": String(durationSeconds(min.duration_until_reset)),
  };
}

/** What the service's answer means for the call. */
export type GlobalVerdict = { readonly over: false } | { readonly over: true; readonly headers: Readonly<Record<string, string>> | undefined };

const ADMIT: GlobalVerdict = Object.freeze({ over: false });

/**
 * OVER_LIMIT refuses the call; OK and UNKNOWN admit it (Envoy's client reads only OVER_LIMIT as a
 * refusal). With `hints` a refusal carries the x-ratelimit-* headers and grpc-retry-pushback-ms
 * (the milliseconds until the deciding limit resets, gRFC A6), when the service sent a limit.
 */
export function globalVerdict(r: RlsResponse, hints: boolean): GlobalVerdict {
  if (r.overall_code !== "OVER_LIMIT") return ADMIT;
  if (!hints) return { over: true, headers: undefined };
  const h = rateLimitHeaders(r.statuses);
  if (h === undefined) return { over: true, headers: undefined };
  return { over: true, headers: { ...h, "grpc-retry-pushback-ms": String(Number(h["x-ratelimit-reset"]) * 1000) } };
}
