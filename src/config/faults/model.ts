// The fault filter's normalized types: what a rule matches, when it fires and what it does.
// Pure data, no behaviour beyond the small kind tables; imports nothing from node:*.
// faults/parse.ts builds these from unknown input, filters/fault/select.ts picks them per call,
// filters/fault/filter.ts executes them. Lives in the config layer so config/schema.ts can type
// its fault lists without importing src/proxy.

/** Which leg of a call a fault concerns: the client's request stream or the response stream. */
export type Direction = "request" | "response";
export const DIRECTIONS = ["request", "response"] as const satisfies readonly Direction[];

/** Where a rule came from: the config file, the admin API, or a request header (never stored in a set). */
export type FaultSource = "config" | "api" | "header";

// === actions ===

/** Where a `reset` sends RST_STREAM to the client. */
export type ResetPoint = "before_headers" | "after_headers" | "after_messages" | "mid_message";
export const RESET_POINTS = ["before_headers", "after_headers", "after_messages", "mid_message"] as const satisfies readonly ResetPoint[];

/** Wire-shape violations a `shape` fault produces on the response (each on its own). */
export type ShapeKind =
  | "no_trailers"
  | "trailers_without_status"
  | "wrong_content_type"
  | "missing_content_type"
  | "compressed_flag"
  | "truncated_message"
  | "rst_after_trailers";
export const SHAPE_KINDS = [
  "no_trailers",
  "trailers_without_status",
  "wrong_content_type",
  "missing_content_type",
  "compressed_flag",
  "truncated_message",
  "rst_after_trailers",
] as const satisfies readonly ShapeKind[];

/** Where a `delay` waits. */
export type DelayPoint = "request" | "response_headers" | "message" | "trailers";
export const DELAY_POINTS = ["request", "response_headers", "message", "trailers"] as const satisfies readonly DelayPoint[];

/** How long a delay is: fixed, or drawn per delay point from a seeded PRNG (see drawDelayMs). */
export type DelaySpec =
  | { readonly type: "fixed"; readonly ms: number }
  | { readonly type: "uniform"; readonly minMs: number; readonly maxMs: number }
  | { readonly type: "normal"; readonly meanMs: number; readonly stddevMs: number };

export type DeadlineMode = "drop" | "shrink" | "grow";
export const DEADLINE_MODES = ["drop", "shrink", "grow"] as const satisfies readonly DeadlineMode[];

export type GoawayMode = "graceful" | "abrupt";
export const GOAWAY_MODES = ["graceful", "abrupt"] as const satisfies readonly GoawayMode[];

/** End the call with a gRPC status that dojang makes up. */
export interface AbortAction {
  readonly kind: "abort";
  /** 0..16 from config and x-dojang-fault; 0..2^32−1 from x-envoy-fault-abort-grpc-request (Envoy allows any uint32). */
  readonly code: number;
  /** Unencoded text; the call percent-encodes it into grpc-message. */
  readonly message: string;
  /** grpc-status-details-bin value, already base64 (validated, sent as given), or null. */
  readonly details: string | null;
  /**
   * null: Trailers-Only at once, the upstream is never contacted. N ≥ 0: forward the call, send
   * the upstream's response headers and its first N response messages, then trailers with this
   * status (and cancel the upstream stream). 0 is "headers, then trailers", unlike Trailers-Only.
   */
  readonly afterMessages: number | null;
}

/** Answer with a raw HTTP response, bypassing dojang's gRPC translation (e.g. a 503 HTML page). */
export interface HttpAction {
  readonly kind: "http";
  /** 200..599 */
  readonly status: number;
  readonly body: string;
  readonly contentType: string;
}

/** RST_STREAM to the client with any HTTP/2 error code. */
export interface ResetAction {
  readonly kind: "reset";
  /** 0..2^32−1 (RFC 9113 §7: error codes are 32-bit; unknown ones are legal). */
  readonly code: number;
  readonly at: ResetPoint;
  /** after_messages: reset after N whole response messages; mid_message: after N whole, in the middle of message N+1; else 0. */
  readonly messages: number;
}

/** GOAWAY on the client's connection. */
export interface GoawayAction {
  readonly kind: "goaway";
  /** graceful: last-stream-id = the newest stream (this call finishes); abrupt: below every in-flight stream. */
  readonly mode: GoawayMode;
  readonly code: number;
}

/** Close the client's connection once this call has sent `afterBytes` response bytes. */
export interface CloseConnectionAction {
  readonly kind: "close_connection";
  /** Response DATA payload bytes (the 5-byte message prefixes included, HEADERS frames not). */
  readonly afterBytes: number;
}

/** Send a response that breaks the gRPC wire shape in one precise way. */
export interface ShapeAction {
  readonly kind: "shape";
  readonly shape: ShapeKind;
  /** wrong_content_type only (default "text/plain"); null for every other shape. */
  readonly contentType: string | null;
}

export interface DelayAction {
  readonly kind: "delay";
  readonly at: DelayPoint;
  /** at "message": null = before every message, N = only before the N-th (1-based). null elsewhere. */
  readonly message: number | null;
  /** Which stream's messages (at "message"); "request" for at "request", "response" otherwise. */
  readonly direction: Direction;
  readonly delay: DelaySpec;
  /**
   * Seed for this call's jitter draws (mulberry32(jitterSeed), then drawDelayMs per delay point).
   * select() and faultsFromHeaders() fill it from a seeded draw; 0 for a fixed delay.
   */
  readonly jitterSeed: number;
}

/** Throttle one direction of this call's stream to `bytesPerSecond`. */
export interface BandwidthAction {
  readonly kind: "bandwidth";
  readonly bytesPerSecond: number;
  readonly direction: Direction;
}

/** Accept the call and never answer. */
export interface BlackholeAction {
  readonly kind: "blackhole";
}

/** Stop reading one direction, so HTTP/2 flow control stalls the sender. */
export interface StallAction {
  readonly kind: "stall";
  readonly direction: Direction;
}

/** Tamper with the grpc-timeout sent upstream (dojang's own budget keeps the client's value). */
export interface DeadlineAction {
  readonly kind: "deadline";
  readonly mode: DeadlineMode;
  /** shrink: 0 < factor ≤ 1; grow: factor ≥ 1; null when `byMs` is used or mode is drop. */
  readonly factor: number | null;
  /** shrink: subtract (floor 0); grow: add; null when `factor` is used or mode is drop. */
  readonly byMs: number | null;
}

/** Make the upstream look unreachable: finish with 14 UNAVAILABLE without connecting. */
export interface UnreachableAction {
  readonly kind: "unreachable";
}

/** RST_STREAM the upstream stream after `afterRequestMessages` request messages were forwarded. */
export interface UpstreamResetAction {
  readonly kind: "upstream_reset";
  readonly afterRequestMessages: number;
  readonly code: number;
}

export type FaultAction =
  | AbortAction
  | HttpAction
  | ResetAction
  | GoawayAction
  | CloseConnectionAction
  | ShapeAction
  | DelayAction
  | BandwidthAction
  | BlackholeAction
  | StallAction
  | DeadlineAction
  | UnreachableAction
  | UpstreamResetAction;

export type FaultKind = FaultAction["kind"];

/** Every kind, in the order the docs list them. */
export const FAULT_KINDS = [
  "abort",
  "http",
  "reset",
  "goaway",
  "close_connection",
  "shape",
  "delay",
  "bandwidth",
  "blackhole",
  "stall",
  "deadline",
  "unreachable",
  "upstream_reset",
] as const satisfies readonly FaultKind[];

/**
 * Terminal kinds decide how the call (or its connection) ends; a call gets at most one, the
 * first in stacking order. The others (delay, bandwidth, stall, deadline) are modifiers: they
 * change timing, throughput or the upstream's deadline and compose with one terminal action.
 */
export const TERMINAL_KINDS: ReadonlySet<FaultKind> = new Set<FaultKind>([
  "abort",
  "http",
  "reset",
  "goaway",
  "close_connection",
  "shape",
  "blackhole",
  "unreachable",
  "upstream_reset",
]);

export function isTerminalFault(action: FaultAction): boolean {
  return TERMINAL_KINDS.has(action.kind);
}

// === rules ===

/** One metadata (request header) test; `name` is lower-cased. All of a rule's tests must hold. */
export type MetadataMatch =
  | { readonly name: string; readonly equals: string }
  | { readonly name: string; readonly present: boolean }
  /** A JavaScript regular expression matched against the whole value (anchored, like Envoy's safe_regex). */
  | { readonly name: string; readonly regex: string };

/** What calls a rule applies to. null = any. Every non-null field must hold. */
export interface FaultMatch {
  /** Listener name; set by parseFaultList's scope for a listener's `faults:` list. */
  readonly listener: string | null;
  /** Route label as router.ts makes it ("prefix:/", "service:pkg.Svc", "path:/a.B/C", "+@host") or the route's index. */
  readonly route: string | number | null;
  /** Fully-qualified service, "pkg.Svc". */
  readonly service: string | null;
  /** Method name without the service, "Get". */
  readonly method: string | null;
  readonly metadata: readonly MetadataMatch[];
  /**
   * The leg the rule is about. Not a call filter (a call has both legs): it is the default
   * `direction` of bandwidth, stall and delay-at-message actions, and must agree with the action.
   */
  readonly direction: Direction | null;
}

/** When a matched call gets the fault. Every gate must pass. */
export interface FaultFire {
  /** 0..100, drawn from the rule's seeded PRNG. */
  readonly percentage: number;
  /** Inclusive 1-based ranges of the rule's matched-call sequence numbers ("1-2" → [[1, 2]]); null = every call. */
  readonly calls: readonly (readonly [number, number])[] | null;
  /** Fire on every N-th matched call (N, 2N, …); null = every call. Not combined with `calls`. */
  readonly every: number | null;
  /** Stop after firing this many times (until reset); null = no limit. */
  readonly maxTimes: number | null;
  /** Window start, relative to when the rule was added (or the set was reset). */
  readonly afterMs: number;
  /** Window length from its start; null = open-ended. */
  readonly forMs: number | null;
}

export interface FaultRule {
  /** "" until FaultSet.add assigns "fault-<n>"; otherwise [A-Za-z0-9][A-Za-z0-9_.-]*, at most 64, not "reset". */
  readonly id: string;
  readonly description: string | null;
  /** A disabled rule is kept (and listed) but never matched or counted. */
  readonly enabled: boolean;
  readonly match: FaultMatch;
  readonly fire: FaultFire;
  readonly action: FaultAction;
  /** uint32 seed of this rule's PRNG; null = derived from the set's seed and the rule id. */
  readonly seed: number | null;
  readonly source: FaultSource;
}
