// The proto3 JSON mapping read and printed as protojson does it (google.golang.org/protobuf's
// encoding/protojson, which grpc-gateway runs; the judge in
// test/behaviour/json-transcoding-gateway.test.ts), where @bufbuild/protobuf's fromJson/toJson are
// looser or lossy. @bufbuild/protobuf stays the mapping; this file owns its edges:
//
// - reading: numbers with more digits than a double holds keep their source text (JSON.parse's
//   reviver context, only when the text has such a number), duplicate object keys are refused, and
//   a walk over the fields that need it (compiled once per message type) checks and normalises what
//   fromJson would take wrongly: 64-bit integers (exactly, from their text), numbers written as
//   strings (JSON number syntax only: no " 1", "0x1"), base64 (protojson's alphabet and padding
//   rules), Timestamp (RFC 3339: real dates, hour < 24, offset within ±23:59, 0001..9999), Duration
//   (protojson's grammar, no trailing text, ±315576000000 s, 9 fractional digits), FieldMask paths,
//   map keys, Any without @type.
// - printing: float fields as the shortest decimal of their 32-bit value, -0 as -0.
//
// Pure: no I/O, no clock.
import { ScalarType, type DescEnum, type DescField, type DescMessage, type JsonObject, type JsonValue, type Registry } from "@bufbuild/protobuf";

/** A JSON body or value the message cannot be made of (the caller answers 400 INVALID_ARGUMENT). */
export class ProtoJsonError extends Error {}

/** A JSON number whose text has more digits than a double may hold: its source and its double. */
class LongNumber {
  constructor(
    readonly source: string,
    readonly value: number,
  ) {}
}

// JSON.parse's reviver context and JSON.rawJSON (V8 since 11.4: Node 22 and 24) are not in TypeScript's es2023 lib.
type Reviver = (this: unknown, key: string, value: unknown, context?: { source?: string }) => unknown;
/** JSON.rawJSON: a value JSON.stringify prints as the given text (json-wire.ts prints with it too). */
export const rawJSON = (JSON as unknown as { rawJSON(text: string): unknown }).rawJSON;

/** A run of 16 digits (dots between allowed): only then may a number lose digits in a double. */
const LONG_NUMBER = /[0-9][0-9.]{15}/;

const keepSource: Reviver = (_key, value, context) =>
  typeof value === "number" && context?.source !== undefined && context.source.length >= 16 ? new LongNumber(context.source, value) : value;

export interface ParsedJson {
  readonly value: JsonValue;
  /** the value holds LongNumbers (the text had a number a double may not hold exactly) */
  readonly long: boolean;
}

/** Parses JSON text: numbers keep their digits where a double may not, duplicate keys are refused. Throws ProtoJsonError. */
export function parseJson(text: string): ParsedJson {
  const long = LONG_NUMBER.test(text);
  let value: JsonValue;
  try {
    value = long ? (JSON.parse(text, keepSource as Parameters<typeof JSON.parse>[1]) as JsonValue) : (JSON.parse(text) as JsonValue);
  } catch (err) {
    throw new ProtoJsonError(`not JSON: ${(err as Error).message}`);
  }
  // Every key has its colon; when the text has no more colons than the value has keys, no key
  // was repeated (and none of its strings holds a colon). Only otherwise is the text scanned.
  if (typeof value === "object" && value !== null && colons(text) !== keyCount(value)) {
    const dup = duplicateKey(text);
    if (dup !== undefined) throw new ProtoJsonError(`duplicate key ${JSON.stringify(dup)}`);
  }
  return { value, long };
}

function colons(text: string): number {
  let n = 0;
  for (let i = text.indexOf(":"); i >= 0; i = text.indexOf(":", i + 1)) n++;
  return n;
}

function keyCount(v: JsonValue): number {
  let n = 0;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const x = v[i]!;
      if (typeof x === "object" && x !== null) n += keyCount(x);
    }
  } else if (!(v instanceof LongNumber)) {
    for (const k in v as JsonObject) {
      n++;
      const x = (v as JsonObject)[k]!;
      if (typeof x === "object" && x !== null) n += keyCount(x);
    }
  }
  return n;
}

/**
 * The first key an object of `text` (valid JSON) repeats, or undefined. JSON.parse keeps the last
 * of two equal keys; protojson refuses them (RFC 8259 §4: names SHOULD be unique), and a proxy
 * that reads one value where the upstream or another reader takes the other is a way around checks.
 */
export function duplicateKey(text: string): string | undefined {
  // the keys of each open object (a short list: most objects have few keys)
  const open: string[][] = [];
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 123 /* { */) open.push([]);
    else if (c === 125 /* } */) open.pop();
    else if (c === 34 /* " */) {
      // the closing quote: the next one not escaped by an odd run of backslashes
      let end = text.indexOf('"', i + 1);
      for (;;) {
        let k = end - 1;
        while (text.charCodeAt(k) === 92 /* \ */) k--;
        if ((end - 1 - k) % 2 === 0) break;
        end = text.indexOf('"', end + 1);
      }
      let j = end + 1;
      while (j < n && isSpace(text.charCodeAt(j))) j++;
      if (text.charCodeAt(j) === 58 /* : */) {
        const raw = text.slice(i + 1, end);
        const name = raw.includes("\\") ? (JSON.parse(text.slice(i, end + 1)) as string) : raw;
        const keys = open[open.length - 1]!;
        if (keys.includes(name)) return name;
        keys.push(name);
      }
      i = end;
    }
  }
  return undefined;
}

function isSpace(c: number): boolean {
  return c === 32 || c === 9 || c === 10 || c === 13;
}

// === numbers, base64, Timestamp, Duration, FieldMask as protojson reads them ===

const JSON_NUMBER = /^(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?$/;

/** Is `s` a JSON number (RFC 8259 §6), nothing around it? */
export function isJsonNumber(s: string): boolean {
  return JSON_NUMBER.test(s);
}

const SHORT_DECIMAL = /^(?:0|-?[1-9][0-9]*)$/;

const INT_RANGE = {
  int32: [-(2n ** 31n), 2n ** 31n - 1n],
  uint32: [0n, 2n ** 32n - 1n],
  int64: [-(2n ** 63n), 2n ** 63n - 1n],
  uint64: [0n, 2n ** 64n - 1n],
} as const;
export type IntKind = keyof typeof INT_RANGE;

/**
 * The integer a JSON number's text denotes, as a decimal string, or null when it is not a JSON
 * number, not an integer, or out of `kind`'s range. As protojson (internal/encoding/json
 * normalizeToIntString): exponents and zero fractions are fine ("1e3", "1.0", "1.5e1").
 */
export function intFromJsonNumber(s: string, kind: IntKind): string | null {
  // the common case: a plain decimal short enough to be in range (9 digits for 32 bits, 18 for 64)
  if (SHORT_DECIMAL.test(s) && s.length - (s.charCodeAt(0) === 45 ? 1 : 0) <= (kind === "int32" || kind === "uint32" ? 9 : 18)) {
    return s.charCodeAt(0) === 45 && (kind === "uint32" || kind === "uint64") ? null : s;
  }
  const m = JSON_NUMBER.exec(s);
  if (m === null) return null;
  const intp = m[2] === "0" ? "" : m[2]!;
  const frac = (m[3] ?? "").replace(/0+$/, "");
  let digits: string;
  if (intp === "" && frac === "") digits = "0";
  else {
    const exp = m[4] === undefined ? 0 : Number(m[4]);
    if (!Number.isSafeInteger(exp) || Math.abs(exp) > 2 ** 31) return null;
    if (exp >= 0) {
      if (frac.length > exp || intp.length + exp > 20) return null;
      digits = intp + frac + "0".repeat(exp - frac.length);
    } else {
      const point = intp.length + exp;
      if (frac.length > 0 || point < 0 || /[^0]/.test(intp.slice(point))) return null;
      digits = intp.slice(0, point);
    }
    if (digits === "") digits = "0";
    if (m[1] === "-") digits = "-" + digits;
  }
  // (protojson's unsigned parse refuses a sign even on zero: "-0" is 0 only without a fraction or exponent)
  if (digits.startsWith("-") && (kind === "uint32" || kind === "uint64")) return null;
  const n = BigInt(digits);
  const [lo, hi] = INT_RANGE[kind];
  return n < lo || n > hi ? null : n.toString();
}

/** Is `s` base64 as protojson reads bytes: URL-safe if it has "-" or "_", padded if its length is a multiple of 4, CR and LF ignored. */
export function isProtoBase64(s: string): boolean {
  const url = s.includes("-") || s.includes("_");
  const t = s.includes("\n") || s.includes("\r") ? s.replace(/[\r\n]/g, "") : s;
  if (s.length % 4 === 0) return (url ? PADDED_URL : PADDED_STD).test(t) && t.length % 4 === 0;
  return (url ? BARE_URL : BARE_STD).test(t) && t.length % 4 !== 1;
}
const PADDED_STD = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const PADDED_URL = /^(?:[A-Za-z0-9\-_]{4})*(?:[A-Za-z0-9\-_]{2}==|[A-Za-z0-9\-_]{3}=)?$/;
const BARE_STD = /^[A-Za-z0-9+/]*$/;
const BARE_URL = /^[A-Za-z0-9\-_]*$/;

/** Seconds since the epoch of 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z (google/protobuf/timestamp.proto's range). */
const TS_MIN = -62135596800;
const TS_MAX = 253402300799;
const RFC3339 = /^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?(?:Z|([+-])([0-9]{2}):([0-9]{2}))$/;

/** Days from 1970-01-01 to y-m-d of the proleptic Gregorian calendar (H. Hinnant's days_from_civil). */
function daysFromCivil(y: number, m: number, d: number): number {
  const yy = m <= 2 ? y - 1 : y;
  const era = Math.floor(yy / 400);
  const yoe = yy - era * 400;
  const doy = Math.floor((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5) + d - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

function daysInMonth(y: number, m: number): number {
  if (m === 2) return y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0) ? 29 : 28;
  return m === 4 || m === 6 || m === 9 || m === 11 ? 30 : 31;
}

/**
 * A Timestamp's JSON string (RFC 3339 §5.6, as google/protobuf/timestamp.proto uses it) as
 * {seconds, nanos}, or null: a date that exists, hour 00-23, minute and second 00-59, up to 9
 * fractional digits after ".", "Z" or an offset within ±23:59, in 0001-01-01..9999-12-31 UTC.
 */
export function parseTimestamp(s: string): { seconds: number; nanos: number } | null {
  const m = RFC3339.exec(s);
  if (m === null) return null;
  const [y, mo, d, h, mi, se] = [m[1], m[2], m[3], m[4], m[5], m[6]].map(Number) as [number, number, number, number, number, number];
  if (mo < 1 || mo > 12 || d < 1 || d > daysInMonth(y, mo) || h > 23 || mi > 59 || se > 59) return null;
  let offset = 0;
  if (m[8] !== undefined) {
    const oh = Number(m[9]);
    const om = Number(m[10]);
    if (oh > 23 || om > 59) return null;
    offset = (m[8] === "-" ? -1 : 1) * (oh * 3600 + om * 60);
  }
  const seconds = daysFromCivil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se - offset;
  if (seconds < TS_MIN || seconds > TS_MAX) return null;
  return { seconds, nanos: m[7] === undefined ? 0 : Number(m[7].padEnd(9, "0")) };
}

/** google/protobuf/duration.proto's range: ±10,000 years in seconds. */
const DURATION_MAX = 315576000000;

/**
 * A Duration's JSON string as protojson's parseDuration reads it ("1s", "1.5s", "-.5s", "+1s",
 * "1.s", even ".s"; the integer part without leading zeros, at most 9 fractional digits, "s" last
 * and nothing after it) within ±315,576,000,000 s, as {seconds, nanos} (nanos with the sign of the
 * whole), or null.
 */
export function parseDuration(s: string): { seconds: number; nanos: number } | null {
  const m = /^([+-]?)(0|[1-9][0-9]*)?(?:\.([0-9]{0,9}))?s$/.exec(s);
  if (m === null || (m[2] === undefined && m[3] === undefined)) return null;
  const secs = m[2] === undefined ? 0 : Number(m[2]);
  if (secs > DURATION_MAX) return null;
  const nanos = m[3] === undefined || m[3] === "" ? 0 : Number(m[3].padEnd(9, "0"));
  const sign = m[1] === "-" ? -1 : 1;
  // (+ 0: a zero part is 0, not -0)
  return { seconds: sign * secs + 0, nanos: sign * nanos + 0 };
}

/** The canonical JSON string of a Duration (what @bufbuild/protobuf reads back exactly). */
function durationText(d: { seconds: number; nanos: number }): string {
  const neg = d.seconds < 0 || d.nanos < 0;
  return `${neg ? "-" : ""}${Math.abs(d.seconds)}.${String(Math.abs(d.nanos)).padStart(9, "0")}s`;
}

const PATH_NAME = /^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$/;

/**
 * A FieldMask's JSON string with its paths checked as protojson checks them (lowerCamel names, no
 * "_", each a valid dotted name once snake_cased; spaces around the whole trimmed), or null.
 */
export function fieldMaskText(s: string): string | null {
  const t = s.trim();
  if (t === "") return t;
  for (const p of t.split(",")) {
    if (p.includes("_") || !PATH_NAME.test(p.replace(/[A-Z]/g, (c) => "_" + c.toLowerCase()))) return null;
  }
  return t;
}

// === reading: a walk over the JSON of a message ===

const INT_KIND: Partial<Record<ScalarType, IntKind>> = {
  [ScalarType.INT32]: "int32",
  [ScalarType.SINT32]: "int32",
  [ScalarType.SFIXED32]: "int32",
  [ScalarType.UINT32]: "uint32",
  [ScalarType.FIXED32]: "uint32",
  [ScalarType.INT64]: "int64",
  [ScalarType.SINT64]: "int64",
  [ScalarType.SFIXED64]: "int64",
  [ScalarType.UINT64]: "uint64",
  [ScalarType.FIXED64]: "uint64",
};

/** The wrappers (google/protobuf/wrappers.proto): the scalar each wraps. */
const WRAPPED: Record<string, ScalarType> = {
  "google.protobuf.DoubleValue": ScalarType.DOUBLE,
  "google.protobuf.FloatValue": ScalarType.FLOAT,
  "google.protobuf.Int64Value": ScalarType.INT64,
  "google.protobuf.UInt64Value": ScalarType.UINT64,
  "google.protobuf.Int32Value": ScalarType.INT32,
  "google.protobuf.UInt32Value": ScalarType.UINT32,
  "google.protobuf.BoolValue": ScalarType.BOOL,
  "google.protobuf.StringValue": ScalarType.STRING,
  "google.protobuf.BytesValue": ScalarType.BYTES,
};

/** Types whose JSON is not an object of fields (and, in an Any, sit under "value"). */
const CUSTOM_JSON = new Set([
  ...Object.keys(WRAPPED),
  "google.protobuf.Any",
  "google.protobuf.Timestamp",
  "google.protobuf.Duration",
  "google.protobuf.FieldMask",
  "google.protobuf.Struct",
  "google.protobuf.Value",
  "google.protobuf.ListValue",
]);

/** What one value in the JSON is: a scalar, an enum or a message (a field's, a list element's or a map value's). */
type Slot = { readonly scalar: ScalarType } | { readonly enum: DescEnum } | { readonly message: DescMessage };

interface Entry {
  readonly field: DescField;
  /** the single value's slot, a list element's or a map value's */
  readonly slot: Slot;
  /** a map's key type */
  readonly mapKey: ScalarType | undefined;
}

function slotOf(field: DescField): Slot {
  switch (field.fieldKind) {
    case "scalar":
      return { scalar: field.scalar };
    case "enum":
      return { enum: field.enum };
    case "message":
      return { message: field.message };
    case "list":
      return field.listKind === "scalar" ? { scalar: field.scalar } : field.listKind === "enum" ? { enum: field.enum } : { message: field.message };
    case "map":
      return field.mapKind === "scalar" ? { scalar: field.scalar } : field.mapKind === "enum" ? { enum: field.enum } : { message: field.message };
  }
}

/** An integer map key as protojson reads it (strconv.ParseInt / ParseUint: a sign for signed kinds, leading zeros), canonical; or null. */
function mapKeyOf(key: string, kind: IntKind): string | null {
  const signed = kind === "int32" || kind === "int64";
  if (!(signed ? /^[+-]?[0-9]+$/ : /^[0-9]+$/).test(key)) return null;
  const n = BigInt(key.startsWith("+") ? key.slice(1) : key);
  const [lo, hi] = INT_RANGE[kind];
  return n < lo || n > hi ? null : n.toString();
}

/** Strings and bools need nothing (a wrong JSON type is fromJson's to refuse). */
function plain(slot: Slot): boolean {
  return "scalar" in slot && (slot.scalar === ScalarType.STRING || slot.scalar === ScalarType.BOOL);
}

/**
 * Reads JSON as protojson would, ahead of @bufbuild/protobuf's fromJson: checks and rewrites in
 * place what fromJson would take wrongly (see the top of this file). One per descriptor set; the
 * per-type plans are compiled on first use.
 */
export class ProtoJsonReader {
  /** per message type: its fields that need a look, by JSON name and by proto name */
  private readonly plans = new Map<DescMessage, Map<string, Entry>>();
  /**
   * The last message() read an Any whose type URL is not type.googleapis.com/<name>: fromJson
   * packs every Any under that prefix, so the caller puts the URL back as written (protojson
   * keeps it; transcode.ts keepTypeUrls). Per call; false for nearly every body.
   */
  foreignTypeUrl = false;

  constructor(
    private readonly registry: Registry,
    private readonly ignoreUnknownFields: boolean,
  ) {}

  /** Checks and normalises `json`, the JSON of a `desc` message (whatever it holds: fromJson refuses a wrong shape). */
  message(desc: DescMessage, json: JsonValue, long: boolean): JsonValue {
    this.foreignTypeUrl = false;
    return this.slot({ message: desc }, json, long, desc.typeName);
  }

  private plan(desc: DescMessage): Map<string, Entry> {
    let p = this.plans.get(desc);
    if (p === undefined) {
      p = new Map();
      for (const field of desc.fields) {
        const slot = slotOf(field);
        const mapKey = field.fieldKind === "map" ? field.mapKey : undefined;
        if (plain(slot) && (mapKey === undefined || mapKey === ScalarType.STRING)) continue;
        const e: Entry = { field, slot, mapKey };
        p.set(field.jsonName, e);
        p.set(field.name, e);
      }
      this.plans.set(desc, p);
    }
    return p;
  }

  private fields(desc: DescMessage, obj: JsonObject, long: boolean): void {
    const plan = this.plan(desc);
    if (plan.size === 0) return;
    for (const key in obj) {
      const e = plan.get(key);
      if (e === undefined) continue;
      const v = obj[key]!;
      if (v === null) continue;
      const where = `${desc.typeName}.${e.field.name}`;
      if (e.field.fieldKind === "list") {
        if (Array.isArray(v)) for (let i = 0; i < v.length; i++) v[i] = this.slot(e.slot, v[i]!, long, where);
      } else if (e.field.fieldKind === "map") {
        if (typeof v === "object" && !Array.isArray(v)) obj[key] = this.map(e, v, long, where);
      } else obj[key] = this.slot(e.slot, v, long, where);
    }
  }

  private map(e: Entry, obj: JsonObject, long: boolean, where: string): JsonObject {
    const kind = e.mapKey === undefined ? undefined : INT_KIND[e.mapKey];
    // a copy with canonical keys ("01" is 1), made at the first key that is not
    let out: JsonObject | undefined;
    const keys = Object.keys(obj);
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      let k = key;
      if (kind !== undefined) {
        const c = mapKeyOf(key, kind);
        if (c === null) throw new ProtoJsonError(`${where}: invalid map key ${JSON.stringify(key)}`);
        k = c;
      }
      const v = obj[key]!;
      const val = v === null || plain(e.slot) ? v : this.slot(e.slot, v, long, where);
      if (out === undefined && k !== key) {
        out = {};
        for (let j = 0; j < i; j++) out[keys[j]!] = obj[keys[j]!]!;
      }
      if (out === undefined) obj[key] = val;
      else {
        if (Object.hasOwn(out, k)) throw new ProtoJsonError(`${where}: duplicate map key ${JSON.stringify(k)}`);
        out[k] = val;
      }
    }
    return out ?? obj;
  }

  private slot(slot: Slot, v: JsonValue, long: boolean, where: string): JsonValue {
    if (v instanceof LongNumber) {
      if ("scalar" in slot) {
        const kind = INT_KIND[slot.scalar];
        if (kind !== undefined) return this.int(kind, v.source, where);
        return v.value;
      }
      if ("enum" in slot) return v.value;
      const w = WRAPPED[slot.message.typeName];
      if (w !== undefined) return this.slot({ scalar: w }, v, long, where);
      if (slot.message.typeName === "google.protobuf.Value") return v.value;
      throw new ProtoJsonError(`${where}: a number is not a ${slot.message.typeName}`);
    }
    if ("scalar" in slot) {
      if (typeof v !== "string") return v;
      const t = slot.scalar;
      const kind = INT_KIND[t];
      if (kind !== undefined) return this.int(kind, v, where);
      if (t === ScalarType.DOUBLE || t === ScalarType.FLOAT) {
        if (v === "NaN" || v === "Infinity" || v === "-Infinity" || JSON_NUMBER.test(v)) return v;
        throw new ProtoJsonError(`${where}: invalid number ${JSON.stringify(v)}`);
      }
      if (t === ScalarType.BYTES) {
        if (!isProtoBase64(v)) throw new ProtoJsonError(`${where}: invalid base64 ${JSON.stringify(v)}`);
        return v.includes("\n") || v.includes("\r") ? v.replace(/[\r\n]/g, "") : v;
      }
      return v;
    }
    if ("enum" in slot) return v;
    const desc = slot.message;
    switch (desc.typeName) {
      case "google.protobuf.Timestamp":
        if (typeof v === "string" && parseTimestamp(v) === null) throw new ProtoJsonError(`${where}: invalid Timestamp ${JSON.stringify(v)} (RFC 3339, 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z)`);
        return v;
      case "google.protobuf.Duration": {
        if (typeof v !== "string") return v;
        const d = parseDuration(v);
        if (d === null) throw new ProtoJsonError(`${where}: invalid Duration ${JSON.stringify(v)} (seconds with an "s", at most 9 fractional digits, within ±315576000000s)`);
        return durationText(d);
      }
      case "google.protobuf.FieldMask": {
        if (typeof v !== "string") return v;
        const t = fieldMaskText(v);
        if (t === null) throw new ProtoJsonError(`${where}: invalid FieldMask ${JSON.stringify(v)}`);
        return t;
      }
      case "google.protobuf.Any":
        return this.any(v, long, where);
      case "google.protobuf.Struct":
      case "google.protobuf.Value":
      case "google.protobuf.ListValue":
        return long ? plainNumbers(v) : v;
      case "google.protobuf.Empty":
        return v;
    }
    const w = WRAPPED[desc.typeName];
    if (w !== undefined) return this.slot({ scalar: w }, v, long, where);
    if (typeof v === "object" && v !== null && !Array.isArray(v)) this.fields(desc, v, long);
    return v;
  }

  private int(kind: IntKind, text: string, where: string): string {
    // a string holds a JSON number and nothing else (protojson: no spaces, no "0x")
    const n = intFromJsonNumber(text, kind);
    if (n === null) throw new ProtoJsonError(`${where}: ${JSON.stringify(text)} is not an ${kind}`);
    return n;
  }

  private any(v: JsonValue, long: boolean, where: string): JsonValue {
    if (typeof v !== "object" || v === null || Array.isArray(v)) return v;
    const url = v["@type"];
    if (url === undefined) {
      // protojson: {} is an empty Any; other fields without "@type" are unknown fields
      if (Object.keys(v).length === 0) return v;
      if (this.ignoreUnknownFields) return {};
      throw new ProtoJsonError(`${where}: an Any without "@type"`);
    }
    if (typeof url !== "string") return v;
    const desc = this.registry.getMessage(url.slice(url.lastIndexOf("/") + 1));
    if (desc === undefined) return v;
    if (!url.startsWith(DEFAULT_TYPE_URL_PREFIX) || url.length !== DEFAULT_TYPE_URL_PREFIX.length + desc.typeName.length) this.foreignTypeUrl = true;
    if (CUSTOM_JSON.has(desc.typeName)) {
      if (!this.ignoreUnknownFields) {
        for (const k in v) if (k !== "@type" && k !== "value") throw new ProtoJsonError(`${where}: unknown field ${JSON.stringify(k)} in an Any of ${desc.typeName}`);
      }
      if ("value" in v) v["value"] = this.slot({ message: desc }, v["value"]!, long, `${where}.value`);
      return v;
    }
    this.fields(desc, v, long);
    return v;
  }
}

/** The prefix @bufbuild/protobuf's fromJson gives every Any's type URL (anyPack). */
const DEFAULT_TYPE_URL_PREFIX = "type.googleapis.com/";

/** A Struct, Value or ListValue's JSON with its LongNumbers back to numbers (a Value's number is a double). */
function plainNumbers(v: JsonValue): JsonValue {
  if (v instanceof LongNumber) return v.value;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) v[i] = plainNumbers(v[i]!);
  } else if (typeof v === "object" && v !== null) {
    for (const k in v) v[k] = plainNumbers(v[k]!);
  }
  return v;
}

// === printing ===

/** The shortest decimal that reads back as the same 32-bit float (what protojson prints for a float field). */
export function float32Text(v: number): string {
  for (let p = 1; p < 9; p++) {
    const s = v.toPrecision(p);
    if (Math.fround(Number(s)) === v) return String(Number(s));
  }
  return String(Number(v.toPrecision(9)));
}

/**
 * Polishes toJson's output the way protojson prints: a float field's value as the shortest
 * decimal of its 32-bit value (toJson prints the double: 0.1f as 0.10000000149011612), and -0
 * as -0 (JSON.stringify prints 0). Fields that cannot hold either are not looked at (a plan per
 * message type, empty for most).
 */
export class ProtoJsonPrinter {
  private readonly plans = new Map<DescMessage, Map<string, Entry> | null>();

  constructor(private readonly registry: Registry) {}

  /** Rewrites `json` (toJson's output for `desc`) in place; returns it (or its replacement, for a bare value). */
  message(desc: DescMessage, json: JsonValue): JsonValue {
    return this.slot({ message: desc }, json);
  }

  /** The fields of `desc` that may hold a float or a double, or null when none can (through any depth). */
  private plan(desc: DescMessage, visiting: Set<DescMessage> = new Set()): Map<string, Entry> | null {
    const known = this.plans.get(desc);
    if (known !== undefined) return known;
    if (visiting.has(desc)) return new Map(); // a cycle: assume it may (decided where it started)
    visiting.add(desc);
    const p = new Map<string, Entry>();
    for (const field of desc.fields) {
      const slot = slotOf(field);
      if (this.mayHoldFloat(slot, visiting)) p.set(field.jsonName, { field, slot, mapKey: undefined });
    }
    visiting.delete(desc);
    const out = p.size === 0 ? null : p;
    this.plans.set(desc, out);
    return out;
  }

  private mayHoldFloat(slot: Slot, visiting: Set<DescMessage>): boolean {
    if ("scalar" in slot) return slot.scalar === ScalarType.FLOAT || slot.scalar === ScalarType.DOUBLE;
    if ("enum" in slot) return false;
    const t = slot.message.typeName;
    if (t === "google.protobuf.Any" || t === "google.protobuf.Struct" || t === "google.protobuf.Value" || t === "google.protobuf.ListValue") return true;
    const w = WRAPPED[t];
    if (w !== undefined) return w === ScalarType.FLOAT || w === ScalarType.DOUBLE;
    if (CUSTOM_JSON.has(t)) return false;
    return this.plan(slot.message, visiting) !== null;
  }

  private slot(slot: Slot, v: JsonValue): JsonValue {
    if (v === null) return v;
    if ("scalar" in slot) {
      if (typeof v !== "number") return v;
      if (slot.scalar === ScalarType.FLOAT) return rawJSON(Object.is(v, -0) ? "-0" : float32Text(v)) as JsonValue;
      return Object.is(v, -0) ? (rawJSON("-0") as JsonValue) : v;
    }
    if ("enum" in slot) return v;
    const t = slot.message.typeName;
    const w = WRAPPED[t];
    if (w !== undefined) return this.slot({ scalar: w }, v);
    if (t === "google.protobuf.Struct" || t === "google.protobuf.Value" || t === "google.protobuf.ListValue") return negativeZeros(v);
    if (t === "google.protobuf.Any") {
      if (typeof v !== "object" || Array.isArray(v)) return v;
      const url = v["@type"];
      const desc = typeof url === "string" ? this.registry.getMessage(url.slice(url.lastIndexOf("/") + 1)) : undefined;
      if (desc === undefined) return v;
      if (CUSTOM_JSON.has(desc.typeName)) {
        if ("value" in v) v["value"] = this.slot({ message: desc }, v["value"]!);
      } else this.fields(desc, v);
      return v;
    }
    if (typeof v === "object" && !Array.isArray(v)) this.fields(slot.message, v);
    return v;
  }

  private fields(desc: DescMessage, obj: JsonObject): void {
    const plan = this.plan(desc);
    if (plan === null) return;
    for (const key in obj) {
      const e = plan.get(key);
      if (e === undefined) continue;
      const v = obj[key]!;
      if (e.field.fieldKind === "list") {
        if (Array.isArray(v)) for (let i = 0; i < v.length; i++) v[i] = this.slot(e.slot, v[i]!);
      } else if (e.field.fieldKind === "map") {
        if (typeof v === "object" && v !== null && !Array.isArray(v)) for (const k in v) v[k] = this.slot(e.slot, v[k]!);
      } else obj[key] = this.slot(e.slot, v);
    }
  }
}

/** -0 in a Struct, Value or ListValue printed as -0. */
function negativeZeros(v: JsonValue): JsonValue {
  if (typeof v === "number") return Object.is(v, -0) ? (rawJSON("-0") as JsonValue) : v;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) v[i] = negativeZeros(v[i]!);
  } else if (typeof v === "object" && v !== null) {
    for (const k in v) v[k] = negativeZeros(v[k]!);
  }
  return v;
}
