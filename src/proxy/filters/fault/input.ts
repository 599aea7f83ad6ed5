// The input shape of a fault rule: what `faults.add()`, `POST /faults` and a config's `faults:`
// lists accept (src/config/faults/parse.ts's zod schema, parseFaultRule), written out as types so a harness
// user's editor completes and checks a rule. The types are a little narrower than the parser,
// which also takes the spellings that arrive as text from YAML, `${VAR}` expansion and
// x-dojang-fault ("12.5%", "deadline-exceeded", "0x8", "true"): every value these types allow,
// the parser accepts (test/examples/fault-input-types.test.ts checks both directions).
// Types only: nothing here exists at run time.

import type { DeadlineMode, DelayPoint, Direction, GoawayMode, ResetPoint, ShapeKind } from "../../../config/faults/model.js";

/**
 * Text with a unit: "250ms", "1.5s", "2m", "1h", compounds largest unit first ("1m30s"). A number
 * without a unit is refused (250 ms or 250 s?), but for 0.
 */
export type DurationInput = 0 | `${number}${"ms" | "s" | "m" | "h"}` | `${number}${"h" | "m"}${number}${string}`;

/** Bytes as a number, or text with a binary (KiB, MiB, GiB) or decimal (B, KB, MB, GB) unit: "64KiB". */
export type SizeInput = number | `${number}` | `${number}${"B" | "KB" | "MB" | "GB" | "KiB" | "MiB" | "GiB"}`;

/** gRPC status names (grpc-go's CANCELED spelling is accepted too). */
export type GrpcCodeName =
  | "OK"
  | "CANCELLED"
  | "CANCELED"
  | "UNKNOWN"
  | "INVALID_ARGUMENT"
  | "DEADLINE_EXCEEDED"
  | "NOT_FOUND"
  | "ALREADY_EXISTS"
  | "PERMISSION_DENIED"
  | "RESOURCE_EXHAUSTED"
  | "FAILED_PRECONDITION"
  | "ABORTED"
  | "OUT_OF_RANGE"
  | "UNIMPLEMENTED"
  | "INTERNAL"
  | "UNAVAILABLE"
  | "DATA_LOSS"
  | "UNAUTHENTICATED";

/** A gRPC status: 0..16 or its name. */
export type GrpcCodeInput = number | GrpcCodeName;

/** RFC 9113 §7 error code names. */
export type H2ErrorName =
  | "NO_ERROR"
  | "PROTOCOL_ERROR"
  | "INTERNAL_ERROR"
  | "FLOW_CONTROL_ERROR"
  | "SETTINGS_TIMEOUT"
  | "STREAM_CLOSED"
  | "FRAME_SIZE_ERROR"
  | "REFUSED_STREAM"
  | "CANCEL"
  | "COMPRESSION_ERROR"
  | "CONNECT_ERROR"
  | "ENHANCE_YOUR_CALM"
  | "INADEQUATE_SECURITY"
  | "HTTP_1_1_REQUIRED";

/** An HTTP/2 error code: any uint32 (unknown codes are legal on the wire) or its name. */
export type H2CodeInput = number | H2ErrorName;

// === actions (one `kind` each) ===

export interface AbortInput {
  readonly kind: "abort";
  readonly code: GrpcCodeInput;
  /** grpc-message (unencoded); default "injected fault" */
  readonly message?: string;
  /** grpc-status-details-bin, base64 */
  readonly details?: string;
  /** absent: Trailers-Only at once, the upstream never contacted; N: forward, pass N response messages, then this status */
  readonly afterMessages?: number;
}

export interface HttpInput {
  readonly kind: "http";
  /** 200..599 */
  readonly status: number;
  readonly body?: string;
  /** default text/html */
  readonly contentType?: string;
}

/** RST_STREAM to the client; `messages` is required with at after_messages / mid_message, refused otherwise. */
export type ResetInput =
  | { readonly kind: "reset"; readonly code: H2CodeInput; readonly at?: Extract<ResetPoint, "before_headers" | "after_headers"> }
  | { readonly kind: "reset"; readonly code: H2CodeInput; readonly at: Extract<ResetPoint, "after_messages" | "mid_message">; readonly messages: number };

export interface GoawayInput {
  readonly kind: "goaway";
  /** default graceful */
  readonly mode?: GoawayMode;
  /** default NO_ERROR */
  readonly code?: H2CodeInput;
}

export interface CloseConnectionInput {
  readonly kind: "close_connection";
  /** response DATA bytes (message prefixes included) before the close; default 0 */
  readonly afterBytes?: SizeInput;
}

export type ShapeInput =
  | { readonly kind: "shape"; readonly shape: Exclude<ShapeKind, "wrong_content_type"> }
  | { readonly kind: "shape"; readonly shape: "wrong_content_type"; /** default text/plain */ readonly contentType?: string };

/** A delay's length: a fixed `delay`, or a `jitter` drawn from the rule's seeded PRNG. */
export type DelayLengthInput =
  | { readonly delay: DurationInput; readonly jitter?: never }
  | {
      readonly delay?: never;
      readonly jitter:
        | { readonly uniform: readonly [DurationInput, DurationInput] }
        | { readonly normal: { readonly mean: DurationInput; readonly stddev: DurationInput } };
    };

/**
 * `at`: request (default; before the request goes upstream), response_headers, trailers, or
 * message (before every message of `direction`, or only the `message`-th, 1-based).
 */
export type DelayInput =
  | ({ readonly kind: "delay"; readonly at?: Exclude<DelayPoint, "message"> } & DelayLengthInput)
  | ({ readonly kind: "delay"; readonly at: "message"; readonly message?: number; readonly direction?: Direction } & DelayLengthInput);

export interface BandwidthInput {
  readonly kind: "bandwidth";
  readonly bytesPerSecond: SizeInput;
  /** default response */
  readonly direction?: Direction;
}

export interface BlackholeInput {
  readonly kind: "blackhole";
}

export interface StallInput {
  readonly kind: "stall";
  /** default request */
  readonly direction?: Direction;
}

/** drop: no grpc-timeout upstream; shrink (0 < factor ≤ 1) / grow (factor ≥ 1): `factor` or `by`, not both. */
export type DeadlineInput =
  | { readonly kind: "deadline"; readonly mode: Extract<DeadlineMode, "drop"> }
  | { readonly kind: "deadline"; readonly mode: Exclude<DeadlineMode, "drop">; readonly factor: number; readonly by?: never }
  | { readonly kind: "deadline"; readonly mode: Exclude<DeadlineMode, "drop">; readonly by: DurationInput; readonly factor?: never };

export interface UnreachableInput {
  readonly kind: "unreachable";
}

export interface UpstreamResetInput {
  readonly kind: "upstream_reset";
  /** default 0 */
  readonly afterRequestMessages?: number;
  /** default CANCEL */
  readonly code?: H2CodeInput;
}

export type FaultActionInput =
  | AbortInput
  | HttpInput
  | ResetInput
  | GoawayInput
  | CloseConnectionInput
  | ShapeInput
  | DelayInput
  | BandwidthInput
  | BlackholeInput
  | StallInput
  | DeadlineInput
  | UnreachableInput
  | UpstreamResetInput;

// === match and fire ===

/** One request-metadata test (header names are case-insensitive); all of a rule's tests must hold. */
export type MetadataMatchInput =
  | { readonly name: string; readonly equals: string }
  | { readonly name: string; readonly present: boolean }
  /** a JavaScript regular expression that must match the whole value */
  | { readonly name: string; readonly regex: string };

export interface FaultMatchInput {
  readonly listener?: string;
  /** a route label as the logs show it ("prefix:/", "service:pkg.Svc", "path:/pkg.Svc/Method") or the route's index */
  readonly route?: string | number;
  /** "pkg.Svc" */
  readonly service?: string;
  /** "Get" (without the service) */
  readonly method?: string;
  readonly metadata?: readonly MetadataMatchInput[];
  /** the default direction of bandwidth, stall and delay-at-message actions (only those kinds) */
  readonly direction?: Direction;
}

export interface FaultFireInput {
  /** 0..100 (default 100), drawn from the rule's seeded PRNG */
  readonly percentage?: number;
  /** 1-based matched-call numbers: 3, "1-2", "1-2,5", "5-" (open-ended), or a list; not with `every` */
  readonly calls?: number | string | readonly (number | string)[];
  /** every N-th matched call */
  readonly every?: number;
  /** stop after firing this many times (until reset) */
  readonly maxTimes?: number;
  /** the window opens this long after the rule was added (or the set reset) */
  readonly after?: DurationInput;
  /** and stays open this long */
  readonly for?: DurationInput;
}

/** A fault rule as `faults.add()`, `POST /faults` and a config's `faults:` lists take it. */
export interface FaultRuleInput {
  /** letters, digits, "_", "." and "-", at most 64; default "fault-<n>" */
  readonly id?: string;
  readonly description?: string;
  /** default true; a disabled rule is listed but never matched */
  readonly enabled?: boolean;
  /** uint32; default derived from faultInjection.seed and the id */
  readonly seed?: number;
  /** absent: every call */
  readonly match?: FaultMatchInput;
  /** absent: every matched call */
  readonly fire?: FaultFireInput;
  readonly action: FaultActionInput;
}
