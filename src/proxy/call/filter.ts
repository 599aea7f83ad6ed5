// The filter contract: per-call hooks at the points of a call's life where a filter may look,
// change, hold or end it (Envoy's http filter callbacks, fastify's hook arrays). The call runs
// them in chain order; a listener whose chain is empty gives its calls `filters === null`, so a
// call without filters pays one null test per hook point. Filters live in src/proxy/filters and
// reach the call only through FilterCall; the call never imports them.
import type { ClientHttp2Stream } from "node:http2";
import type { DecidedBy, Outcome } from "../../translate/index.js";
import type { AccessRecord } from "../observe/log.js";
import type { CompiledRoute } from "../router.js";
import type { Cluster } from "../upstream/cluster.js";
import type { Attempt } from "./attempt.js";
import type { Downstream } from "./downstream.js";
import type { ClientPeer, OutgoingHeaders } from "./headers.js";

/**
 * What a filter sees of its call and may ask of it (implemented by Call). A hook that returned
 * false ("held") resumes the chain with the matching continue*(this) call, from the next filter.
 * No raw node stream is reachable from here: a filter that acts on the wire itself declares
 * `CallFilter.wire` and asks for `wire()`.
 */
export interface FilterCall {
  /** the call's status is fixed: nothing more goes out */
  readonly done: boolean;
  readonly requestId: string;
  readonly series: { readonly service: string; readonly method: string };
  /**
   * the call's one canonical method name ("/pkg.Svc/Method", src/translate/grpc-path.ts): what a
   * rule compares, never the client's raw :path (a filter runs only for a call that has one)
   */
  readonly path: string;
  /** who the client is (its connection's facts: address, verified certificate); undefined when unknown */
  readonly peer: ClientPeer | undefined;
  /** the client's address ("" when unknown; a rate limit keyed by it) */
  readonly clientAddress: string;
  /** the current attempt (null before the first one starts) */
  readonly attempt: Attempt | null;
  /** the request head attempts start from; undefined once the first attempt has taken it */
  readonly upHeaders: OutgoingHeaders | undefined;
  continueRequestHead(from: CallFilter): void;
  continueResponseHead(from: CallFilter): void;
  continueTrailers(from: CallFilter, block: OutgoingHeaders): void;
  continueRequestEnd(from: CallFilter): void;
  /**
   * The filter failed attempt `a` as an upstream would (an injected unreachable endpoint or
   * upstream reset): the call retries it as it would a real one (per the route's policy, or
   * transparently for unreachable), else ends with `o`.
   */
  failAttempt(a: Attempt, o: Outcome, kind: "unreachable" | "reset", extra?: OutgoingHeaders): void;
  /** dojang's own status, decided by the filter (a local reply; `extra` replaces the chain's statusExtra) */
  finishLocal(o: Outcome, extra?: OutgoingHeaders): void;
  /** The wire capability (CallWire), for a filter that declares `wire` (the fault filter). */
  wire(): CallWire;
}

/**
 * The one optional capability: what only a filter that puts frames, resets and ends on the wire
 * itself needs (the fault filter). The call's two streams, and the ways to record an end the
 * filter has already put on the wire.
 */
export interface CallWire {
  /** the client side */
  readonly down: Downstream;
  /** the current attempt's upstream stream (undefined until it is open) */
  readonly upstream: ClientHttp2Stream | undefined;
  /** the filter has put the call's end on the wire itself: record it, send nothing more */
  recordEnd(code: number, message: string, decidedBy: DecidedBy): void;
  /** end the response with this trailer block as it is (no grpc-status checks), recording this status */
  endWithTrailers(block: OutgoingHeaders, code: number, message: string, decidedBy: DecidedBy): void;
  /** the filter owns the rest of the response: the upstream's data, trailers and close are dropped */
  takeOverResponse(): void;
  /** the lowest stream id of the calls in flight on this call's client connection */
  lowestStreamIdOnSession(): number;
}

/** What a wire-acting filter (CallFilter.wire) needs of the call that runs it. */
export interface WireNeeds {
  /** the upstream request must be resettable with any code (opened with waitForTrailers) */
  readonly resetsWithCodes: boolean;
  /** the fault_rule label of the call metric (undefined: none) */
  readonly faultRule: string | undefined;
}

/** One filter's per-call hooks; all optional. Booleans: true = go on, false = held or ended. */
export interface CallFilter {
  /** header fields every status of this call carries (local replies, Trailers-Only, trailers) */
  readonly statusExtra?: OutgoingHeaders | undefined;
  /** present on a filter that acts on the wire itself (it may call `wire()`): what it needs */
  readonly wire?: WireNeeds;
  /** request head, before any attempt (the head is `call.upHeaders`) */
  onRequestHead?(c: FilterCall): boolean;
  /** an attempt is about to open its stream (`a.headers` may be changed); false: the filter ended it */
  onAttemptStart?(c: FilterCall, a: Attempt): boolean;
  /** the attempt's stream is open */
  onAttemptOpen?(c: FilterCall, a: Attempt): void;
  /** the response head arrived (held: the call keeps it until continueResponseHead) */
  onResponseHead?(c: FilterCall): boolean;
  /** the header block about to go to the client */
  shapeResponseHead?(c: FilterCall, out: OutgoingHeaders): void;
  /** the response headers went out */
  onResponseHeadSent?(c: FilterCall): void;
  /** a request chunk (already size-checked); true: the filter took it and writes it on itself */
  onRequestData?(c: FilterCall, chunk: Buffer): boolean;
  /** the request body ended */
  onRequestEnd?(c: FilterCall): boolean;
  /** a response chunk (already size-checked); true: the filter took it and writes it on itself */
  onResponseData?(c: FilterCall, chunk: Buffer): boolean;
  /** the upstream's trailers (not Trailers-Only), as they will be forwarded */
  onTrailers?(c: FilterCall, block: OutgoingHeaders): boolean;
  /** the trailers went out */
  onTrailersSent?(c: FilterCall): void;
  /** the call's client stream closed: release timers and counters */
  onEnd?(c: FilterCall): void;
  /** add this filter's fields to the call's access record */
  annotate?(rec: AccessRecord): void;
}

/** Built once per listener (or route) from config; picks the per-call filter, or null (nothing to do). */
export interface FilterFactory {
  forCall(c: FilterCall, route: CompiledRoute<Cluster>, raw: readonly string[]): CallFilter | null;
}

/** A chain compiled once: empty → null, so the call tests one field (fastify's habit). */
export function compileFilterChain(factories: readonly FilterFactory[]): readonly FilterFactory[] | null {
  return factories.length === 0 ? null : Object.freeze([...factories]);
}
