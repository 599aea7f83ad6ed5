// envoy.service.ratelimit.v3 on the wire: the RateLimitRequest a call asks, written from a template compiled once per route, and the RateLimitResponse read back.
//
// Messages (envoy/service/ratelimit/v3/rls.proto, envoy/extensions/common/ratelimit/v3/ratelimit.proto):
//   RateLimitRequest    { string domain = 1; repeated RateLimitDescriptor descriptors = 2; uint32 hits_addend = 3; }
//   RateLimitDescriptor { repeated Entry entries = 1; RateLimitOverride limit = 2; }
//   Entry               { string key = 1; string value = 2; }
//   RateLimitResponse   { Code overall_code = 1; repeated DescriptorStatus statuses = 2; … }
//   DescriptorStatus    { Code code = 1; RateLimit current_limit = 2; uint32 limit_remaining = 3;
//                         google.protobuf.Duration duration_until_reset = 4; … }
//   RateLimit           { uint32 requests_per_unit = 1; Unit unit = 2; string name = 3; }
//   Duration            { int64 seconds = 1; int32 nanos = 2; }
//
// The request: the domain, every entry's key and every literal entry are encoded when the route is
// compiled (compileRlsRequest); a call writes its values into one buffer sized first, with the
// gRPC message prefix in front (no other allocation but the values' list), and a route whose
// entries are all literals sends the same request, encoded once, every time. hits_addend is never
// sent (0: one hit, the default). The bytes are what protobufjs and protobuf-go write for the same
// message (test/translate/rls-wire.test.ts checks them against protobufjs).
//
// The response: only what the verdict reads (src/translate/rate-limit-global.ts): overall_code,
// and the statuses when a refusal carries hints; as @grpc/proto-loader would hand them over
// (field names as in the .proto, enums by name), so globalVerdict reads either.
import { writePrefix } from "./framing.js";
import { lenFieldSize, stringField, utf8Size, varintSize, WireError, WireReader, WIRE_LEN, WIRE_VARINT, writeUtf8, writeVarint } from "./proto-wire.js";
import { entryValue, type DescriptorInput, type EntrySpec, type EntrySource, type RlsDescriptorStatus, type RlsResponse } from "./rate-limit-global.js";

/** The gRPC method. */
export const RLS_PATH = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

interface EntryTemplate {
  readonly source: EntrySource;
  /** Entry.key (field 1), encoded */
  readonly key: Uint8Array;
  /** a literal entry whole: its RateLimitDescriptor.entries field (tag, length, key and value); null otherwise */
  readonly whole: Uint8Array | null;
}

/** A route's RateLimitRequest with its per-call values left out. */
export interface RlsRequestTemplate {
  /** RateLimitRequest.domain (field 1), encoded */
  readonly domain: Uint8Array;
  readonly descriptors: readonly (readonly EntryTemplate[])[];
  /** entries over all descriptors */
  readonly entries: number;
  /**
   * every entry a literal: the whole framed request, encoded once and sent by every call (the
   * stream only reads it); null when some value comes from the call
   */
  readonly constant: Uint8Array | null;
}

/** Encodes the constant parts of a route's requests once. */
export function compileRlsRequest(domain: string, specs: readonly (readonly EntrySpec[])[]): RlsRequestTemplate {
  let entries = 0;
  const descriptors = specs.map((spec) =>
    spec.map((e): EntryTemplate => {
      entries++;
      const key = stringField(1, e.key);
      if (e.source.kind !== "literal") return { source: e.source, key, whole: null };
      const value = stringField(2, e.source.value);
      const payload = key.length + value.length;
      const whole = new Uint8Array(lenFieldSize(payload));
      let at = writeVarint(whole, writeVarint(whole, 0, 0x0a), payload);
      whole.set(key, at);
      at += key.length;
      whole.set(value, at);
      return { source: e.source, key, whole };
    }),
  );
  const t = { domain: stringField(1, domain), descriptors, entries, constant: null };
  if (!specs.every((spec) => spec.every((e) => e.source.kind === "literal"))) return t;
  return { ...t, constant: encodeRlsRequest(t, { path: "", clientAddress: "", head: {} }) };
}

/**
 * One call's ShouldRateLimit request, framed (the 5-byte gRPC prefix, then the message): the
 * descriptors whose every entry has a value for this call (buildDescriptors' rule); null when
 * none has (the call asks nothing).
 */
export function encodeRlsRequest(t: RlsRequestTemplate, input: DescriptorInput): Uint8Array | null {
  if (t.constant !== null) return t.constant;
  const ds = t.descriptors;
  // values and their UTF-8 sizes, in entry order; a left-out descriptor's size is -1
  const values = new Array<string>(t.entries);
  const sizes = new Array<number>(t.entries);
  const dsizes = new Array<number>(ds.length);
  let body = t.domain.length;
  let any = false;
  let k = 0;
  for (let d = 0; d < ds.length; d++) {
    const es = ds[d]!;
    let size = 0;
    for (let i = 0; i < es.length; i++, k++) {
      const e = es[i]!;
      if (e.whole !== null) {
        size += e.whole.length;
        continue;
      }
      const v = entryValue(e.source, input);
      if (v === undefined) {
        size = -1;
        k += es.length - i;
        break;
      }
      const n = utf8Size(v);
      values[k] = v;
      sizes[k] = n;
      size += lenFieldSize(e.key.length + 1 + varintSize(n) + n);
    }
    dsizes[d] = size;
    if (size >= 0) {
      any = true;
      body += lenFieldSize(size);
    }
  }
  if (!any) return null;
  const out = new Uint8Array(5 + body);
  writePrefix(out, 0, 0, body);
  out.set(t.domain, 5);
  let at = 5 + t.domain.length;
  k = 0;
  for (let d = 0; d < ds.length; d++) {
    const es = ds[d]!;
    const size = dsizes[d]!;
    if (size < 0) {
      k += es.length;
      continue;
    }
    out[at++] = 0x12; // descriptors (2, length-delimited)
    at = writeVarint(out, at, size);
    for (let i = 0; i < es.length; i++, k++) {
      const e = es[i]!;
      if (e.whole !== null) {
        out.set(e.whole, at);
        at += e.whole.length;
        continue;
      }
      const n = sizes[k]!;
      out[at++] = 0x0a; // entries (1)
      at = writeVarint(out, at, e.key.length + 1 + varintSize(n) + n);
      out.set(e.key, at);
      at += e.key.length;
      out[at++] = 0x12; // value (2)
      at = writeVarint(out, at, n);
      at = writeUtf8(out, at, values[k]!);
    }
  }
  return out;
}

const CODE_NAMES: readonly string[] = ["UNKNOWN", "OK", "OVER_LIMIT"];
const UNIT_NAMES: readonly string[] = ["UNKNOWN", "SECOND", "MINUTE", "HOUR", "DAY", "MONTH", "YEAR"];

/** An enum value by name; a number the .proto does not list stays a number (as protobufjs leaves it). */
function enumName(names: readonly string[], n: number): string {
  return names[n] ?? String(n);
}

/**
 * A RateLimitResponse: overall_code always, the statuses only with `withStatuses` (a refusal's
 * x-ratelimit-* headers); null when the bytes are not a RateLimitResponse (a field runs past the
 * end, a bad tag). Unknown fields are skipped.
 */
export function decodeRlsResponse(b: Uint8Array, withStatuses: boolean): RlsResponse | null {
  try {
    const r = new WireReader(b);
    let overall: string | undefined;
    let statuses: RlsDescriptorStatus[] | undefined;
    for (let f = r.next(); f !== 0; f = r.next()) {
      if (f === 1 && r.wt === WIRE_VARINT) overall = enumName(CODE_NAMES, r.int32());
      else if (f === 2 && r.wt === WIRE_LEN) {
        // (read even when not wanted: its bounds are checked either way)
        const m = r.message();
        if (withStatuses) (statuses ??= []).push(descriptorStatus(m));
      } else r.skip();
    }
    const out: { overall_code?: string; statuses?: RlsDescriptorStatus[] } = {};
    if (overall !== undefined) out.overall_code = overall;
    if (statuses !== undefined) out.statuses = statuses;
    return out;
  } catch (err) {
    if (err instanceof WireError) return null;
    throw err;
  }
}

function descriptorStatus(r: WireReader): RlsDescriptorStatus {
  const s: { code?: string; current_limit?: NonNullable<RlsDescriptorStatus["current_limit"]>; limit_remaining?: number; duration_until_reset?: NonNullable<RlsDescriptorStatus["duration_until_reset"]> } = {};
  for (let f = r.next(); f !== 0; f = r.next()) {
    if (f === 1 && r.wt === WIRE_VARINT) s.code = enumName(CODE_NAMES, r.int32());
    else if (f === 2 && r.wt === WIRE_LEN) s.current_limit = rateLimit(r.message());
    else if (f === 3 && r.wt === WIRE_VARINT) s.limit_remaining = r.uint32();
    else if (f === 4 && r.wt === WIRE_LEN) s.duration_until_reset = duration(r.message());
    else r.skip();
  }
  return s;
}

function rateLimit(r: WireReader): NonNullable<RlsDescriptorStatus["current_limit"]> {
  const l: { requests_per_unit?: number; unit?: string; name?: string } = {};
  for (let f = r.next(); f !== 0; f = r.next()) {
    if (f === 1 && r.wt === WIRE_VARINT) l.requests_per_unit = r.uint32();
    else if (f === 2 && r.wt === WIRE_VARINT) l.unit = enumName(UNIT_NAMES, r.int32());
    else if (f === 3 && r.wt === WIRE_LEN) l.name = r.string();
    else r.skip();
  }
  return l;
}

function duration(r: WireReader): { seconds?: number; nanos?: number } {
  const d: { seconds?: number; nanos?: number } = {};
  for (let f = r.next(); f !== 0; f = r.next()) {
    if (f === 1 && r.wt === WIRE_VARINT) d.seconds = r.int64();
    else if (f === 2 && r.wt === WIRE_VARINT) d.nanos = r.int32();
    else r.skip();
  }
  return d;
}
