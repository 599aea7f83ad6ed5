// JSON to the wire and back without a message object, for the plain part of the proto3 JSON mapping.
//
// The full path (transcode.ts: proto-json.ts's reader and printer around @bufbuild/protobuf's
// fromJson/toBinary and fromBinary/toJson) stays the mapping and the judge of every edge. This
// file takes only a message it writes exactly as that path writes it, byte for byte one way and
// value for value the other, and answers undefined for anything else, which the caller then sends
// the full way: a well-known type, a map, bytes, a closed enum, a group, an extension, a number
// written as a string beyond ±2^53, a string that is not well-formed UTF-16 (or UTF-8 on the wire),
// an unknown key, a JSON type the field does not take, a field named twice, a oneof set twice, a
// message field seen twice on the wire (a merge), bytes that are not a message. Which fields it
// takes is decided once per message type; whether a value is one it takes, per value.
//
// What it saves is the message object and the second walk: fromJson builds a message that toBinary
// then walks, and fromBinary builds one that toJson walks. Here the JSON is checked and sized in one
// walk and written in a second over a flat list of what to write (no lookups), into one array of
// the exact size with room for the gRPC prefix in front; and the wire is read straight into the
// JSON object. test/translate/json-wire.test.ts holds it to the full path on random messages and
// random damage; the real grpc-gateway judges both through test/behaviour/json-transcoding-gateway.test.ts.
//
// Pure: no I/O.
import { ScalarType, type DescField, type DescMessage, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { float32Text, rawJSON } from "./proto-json.js";
import { int32Size, utf8Size, varintSize, WIRE_I32, WIRE_I64, WIRE_LEN, WIRE_START_GROUP, WIRE_VARINT, WireError, WireReader, writeDouble, writeFixed32, writeFixed64, writeFloat, writeInt64, writeUtf8, writeVarint } from "./proto-wire.js";

// String.prototype.isWellFormed (ES2024) is not in TypeScript's es2023 lib.
const isWellFormed = (s: string): boolean => (s as unknown as { isWellFormed(): boolean }).isWellFormed();

/** A field's value kind beyond the scalar types (ScalarType's numbers are 1..18). */
const ENUM = 100;
const MESSAGE = 101;
/** a field this file leaves to the full path */
const NONE = 0;

/** Deeper than this, the full path decides (and refuses where it must). */
const MAX_DEPTH = 64;

interface Field {
  readonly no: number;
  /** ScalarType, ENUM, MESSAGE or NONE */
  readonly kind: number;
  readonly list: boolean;
  /** a list written packed */
  readonly packed: boolean;
  /** implicit presence: a zero value is not written (and not printed) */
  readonly implicit: boolean;
  /** the index of its (real) oneof in its message, or -1 */
  readonly oneof: number;
  readonly jsonName: string;
  /** the wire type of one value */
  readonly wire: number;
  /** the tag of one value, and of the field as a length-delimited whole (a packed list) */
  readonly tag: number;
  readonly lenTag: number;
  /** an enum's numbers by name, names by number, and its zero */
  readonly numbers: Map<string, number> | undefined;
  readonly names: Map<number, string> | undefined;
  readonly zero: number;
  readonly message: DescMessage | undefined;
  /** its place in Plan.fields */
  readonly index: number;
  /** what toJson prints for it when it is not set and implicit fields are emitted (emitDefaults), or undefined: nothing */
  readonly dflt: JsonValue | undefined;
}

interface Plan {
  /** by number */
  readonly fields: readonly Field[];
  /** by JSON name and by proto name */
  readonly byKey: Map<string, Field>;
  readonly byNumber: Map<number, Field>;
  readonly oneofs: number;
}

/** Writes of one message (a flat list, in wire order). */
const W_VARINT = 1; // a non-negative integer below 2^53
const W_NEG = 2; // a negative integer, as 64-bit two's complement (10 bytes)
const W_FIX32 = 3;
const W_FIX64 = 4; // an integer within ±2^53
const W_F32 = 5;
const W_F64 = 6;
const W_STR = 7; // a string; n: its UTF-8 length
const W_LEN = 8; // a length prefix; n: the length (a message's, a packed list's)

const INT32_MIN = -2147483648;
const INT32_MAX = 2147483647;
const UINT32_MAX = 4294967295;
const TWO_32 = 4294967296;

/** an integer in a string: canonical, at most 16 digits (exact in a double when it is a safe integer, which each use checks) */
const INT_TEXT = /^(?:0|-?[1-9][0-9]{0,15})$/;

function wireOf(kind: number): number {
  switch (kind) {
    case ScalarType.DOUBLE:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return WIRE_I64;
    case ScalarType.FLOAT:
    case ScalarType.FIXED32:
    case ScalarType.SFIXED32:
      return WIRE_I32;
    case ScalarType.STRING:
    case MESSAGE:
      return WIRE_LEN;
    default:
      return WIRE_VARINT;
  }
}

/** The kind this file writes a field's values as, or NONE. */
function kindOf(f: DescField): number {
  if (f.fieldKind === "map" || f.presence === 3 /* LEGACY_REQUIRED */ || f.jsonName === "__proto__") return NONE;
  const k = f.fieldKind === "list" ? f.listKind : f.fieldKind;
  if (k === "scalar") return f.scalar === ScalarType.BYTES ? NONE : f.scalar!;
  if (k === "enum") return f.enum!.open && f.enum!.typeName !== "google.protobuf.NullValue" ? ENUM : NONE;
  // message: the well-known types have JSON of their own; a group is not length-delimited
  return f.message!.typeName.startsWith("google.protobuf.") || (f as { delimitedEncoding?: boolean }).delimitedEncoding === true ? NONE : MESSAGE;
}

const NO_ITEMS: JsonValue = Object.freeze([]) as unknown as JsonValue;
const NO_ENTRIES: JsonValue = Object.freeze({}) as unknown as JsonValue;

/** What toJson prints, with alwaysEmitImplicit, for a field that is not set (undefined: nothing, as for a message or a oneof). */
function defaultOf(f: DescField): JsonValue | undefined {
  if (f.fieldKind === "list") return NO_ITEMS;
  if (f.fieldKind === "map") return NO_ENTRIES;
  if (f.oneof !== undefined || f.presence !== 2 /* IMPLICIT */) return undefined;
  if (f.fieldKind === "enum") return f.enum.typeName === "google.protobuf.NullValue" ? null : (f.enum.value[f.enum.values[0]!.number]?.name ?? f.enum.values[0]!.number);
  return f.fieldKind === "scalar" ? scalarZeroJson(f.scalar) : undefined;
}

/** A scalar's zero value as toJson prints it (64-bit integers as strings). */
export function scalarZeroJson(scalar: ScalarType): JsonValue {
  switch (scalar) {
    case ScalarType.STRING:
    case ScalarType.BYTES:
      return "";
    case ScalarType.BOOL:
      return false;
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.SINT64:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return "0";
    default:
      return 0;
  }
}

function planOf(desc: DescMessage): Plan | null {
  // an extension would be printed by name from the registry: the full path's
  if (desc.proto.extensionRange.length > 0) return null;
  const sorted = desc.fields.concat().sort((a, b) => a.number - b.number);
  const oneofs = desc.oneofs;
  const byKey = new Map<string, Field>();
  const byNumber = new Map<number, Field>();
  const fields = sorted.map((f, index): Field => {
    const kind = kindOf(f);
    const list = f.fieldKind === "list";
    const wire = wireOf(kind);
    const e = kind === ENUM ? f.enum! : undefined;
    const field: Field = {
      no: f.number,
      kind,
      list,
      packed: list && f.packed,
      implicit: !list && f.presence === 2 /* IMPLICIT */,
      oneof: f.oneof === undefined ? -1 : oneofs.indexOf(f.oneof),
      jsonName: f.jsonName,
      wire,
      tag: ((f.number << 3) | wire) >>> 0,
      lenTag: ((f.number << 3) | WIRE_LEN) >>> 0,
      numbers: e === undefined ? undefined : new Map(e.values.map((v) => [v.name, v.number])),
      // (by number as toJson looks a value up: an alias does not replace the first name)
      names: e === undefined ? undefined : new Map(e.values.map((v) => [v.number, e.value[v.number]!.name])),
      zero: e === undefined ? 0 : e.values[0]!.number,
      message: kind === MESSAGE ? f.message : undefined,
      index,
      dflt: defaultOf(f),
    };
    byKey.set(f.jsonName, field);
    byKey.set(f.name, field);
    byNumber.set(f.number, field);
    return field;
  });
  return { fields, byKey, byNumber, oneofs: oneofs.length };
}

/**
 * One per descriptor set's transcoder. Not reentrant (one message at a time, as JavaScript runs
 * it); the per-type plans are made on first use.
 */
export class JsonWire {
  private readonly plans = new Map<DescMessage, Plan | null>();
  // the writes of the message being encoded
  private wk: number[] = [];
  private wt: number[] = [];
  private wv: unknown[] = [];
  private wn: number[] = [];
  private count = 0;

  constructor(
    private readonly ignoreUnknownFields: boolean,
    /** print implicit fields that are not set, with their zero value (toJson's alwaysEmitImplicit) */
    private readonly emitDefaults = false,
  ) {}

  private plan(desc: DescMessage): Plan | null {
    let p = this.plans.get(desc);
    if (p === undefined) this.plans.set(desc, (p = planOf(desc)));
    return p;
  }

  // === JSON → wire ===

  /**
   * The binary `desc` message of `json` (JSON.parse's value, with no long numbers), after
   * `headroom` zero bytes; or undefined: the full path decides.
   */
  encode(desc: DescMessage, json: JsonObject, headroom: number): Uint8Array | undefined {
    this.count = 0;
    const p = this.plan(desc);
    const size = p === null ? -1 : this.message(p, json, 0);
    let out: Uint8Array | undefined;
    if (size >= 0) {
      out = new Uint8Array(headroom + size);
      this.write(out, headroom);
    }
    this.wv.fill(undefined, 0, this.count); // no string outlives its call here
    return out;
  }

  private push(kind: number, tag: number, v: unknown, n: number): number {
    const i = this.count++;
    this.wk[i] = kind;
    this.wt[i] = tag;
    this.wv[i] = v;
    this.wn[i] = n;
    return i;
  }

  /** Plans the writes of one message; its size, or -1. */
  private message(p: Plan, obj: JsonObject, depth: number): number {
    if (depth > MAX_DEPTH) return -1;
    const vals: (JsonValue | undefined)[] = new Array<JsonValue | undefined>(p.fields.length);
    for (const key in obj) {
      const f = p.byKey.get(key);
      if (f === undefined) {
        // "[ext]" names an extension, "@type" an Any's: the full path's
        if (this.ignoreUnknownFields && key.charCodeAt(0) !== 0x5b && key.charCodeAt(0) !== 0x40) continue;
        return -1;
      }
      if (vals[f.index] !== undefined) return -1; // by its JSON name and its proto name
      vals[f.index] = obj[key];
    }
    let oneofs: boolean[] | undefined;
    let size = 0;
    for (let i = 0; i < vals.length; i++) {
      const v = vals[i];
      if (v === undefined) continue;
      const f = p.fields[i]!;
      if (f.oneof >= 0) {
        if (v === null) return -1;
        oneofs ??= new Array<boolean>(p.oneofs).fill(false);
        if (oneofs[f.oneof]) return -1;
        oneofs[f.oneof] = true;
      }
      if (f.kind === NONE) return -1; // (null too: a Value's null is a value)
      if (v === null) continue; // the field's default: not written
      let s: number;
      if (f.list) {
        if (!Array.isArray(v)) return -1;
        if (v.length === 0) continue;
        s = f.packed ? this.packed(f, v) : this.unpacked(f, v, depth);
      } else s = this.value(f, v, f.tag, f.implicit, depth);
      if (s < 0) return -1;
      size += s;
    }
    return size;
  }

  private packed(f: Field, v: JsonValue[]): number {
    const at = this.push(W_LEN, f.lenTag, undefined, 0);
    let n = 0;
    for (let j = 0; j < v.length; j++) {
      const e = v[j]!;
      if (e === null) return -1;
      const s = this.value(f, e, 0, false, 0);
      if (s < 0) return -1;
      n += s;
    }
    this.wn[at] = n;
    return varintSize(f.lenTag) + varintSize(n) + n;
  }

  private unpacked(f: Field, v: JsonValue[], depth: number): number {
    let size = 0;
    for (let j = 0; j < v.length; j++) {
      const e = v[j]!;
      if (e === null) return -1;
      const s = this.value(f, e, f.tag, false, depth);
      if (s < 0) return -1;
      size += s;
    }
    return size;
  }

  /**
   * Plans one value with its tag (0: none, in a packed list); its size, 0 for an implicit zero
   * (not written), or -1.
   */
  private value(f: Field, v: JsonValue, tag: number, implicit: boolean, depth: number): number {
    const tagSize = tag === 0 ? 0 : varintSize(tag);
    const k = f.kind;
    if (k === ScalarType.STRING) {
      if (typeof v !== "string") return -1;
      if (implicit && v === "") return 0;
      if (!isWellFormed(v)) return -1;
      const n = utf8Size(v);
      this.push(W_STR, tag, v, n);
      return tagSize + varintSize(n) + n;
    }
    if (k === ScalarType.BOOL) {
      if (typeof v !== "boolean") return -1;
      if (implicit && !v) return 0;
      this.push(W_VARINT, tag, v ? 1 : 0, 0);
      return tagSize + 1;
    }
    if (k === MESSAGE) {
      if (typeof v !== "object" || Array.isArray(v)) return -1;
      const p = this.plan(f.message!);
      if (p === null) return -1;
      const at = this.push(W_LEN, tag, undefined, 0);
      const n = this.message(p, v as JsonObject, depth + 1);
      if (n < 0) return -1;
      this.wn[at] = n;
      return tagSize + varintSize(n) + n;
    }
    if (k === ScalarType.DOUBLE || k === ScalarType.FLOAT) {
      // "NaN", "1.5" and the like, as strings, are the full path's
      // (1e309 is Infinity to JSON.parse, and too large for protojson)
      if (typeof v !== "number" || !Number.isFinite(v)) return -1;
      // a float beyond float32's range (its rounding to 32 bits is infinite) is refused by the full path
      if (k === ScalarType.FLOAT && !Number.isFinite(Math.fround(v))) return -1;
      if (implicit && Object.is(v, 0)) return 0;
      this.push(k === ScalarType.FLOAT ? W_F32 : W_F64, tag, v, 0);
      return tagSize + (k === ScalarType.FLOAT ? 4 : 8);
    }
    // an integer: a JSON number, or a short canonical one in a string
    let n: number;
    if (typeof v === "number") {
      if (!Number.isInteger(v)) return -1;
      n = v;
    } else if (typeof v === "string") {
      if (k === ENUM) {
        const e = f.numbers!.get(v);
        if (e === undefined) return -1;
        n = e;
      } else {
        if (!INT_TEXT.test(v)) return -1;
        n = Number(v);
      }
    } else return -1;
    if (k === ENUM) {
      if (n < INT32_MIN || n > INT32_MAX) return -1;
      if (implicit && n === f.zero) return 0;
    } else if (implicit && n === 0) return 0;
    switch (k) {
      case ENUM:
      case ScalarType.INT32:
        if (n < INT32_MIN || n > INT32_MAX) return -1;
        return this.varint(tag, tagSize, n);
      case ScalarType.UINT32:
        if (n < 0 || n > UINT32_MAX) return -1;
        return this.varint(tag, tagSize, n);
      case ScalarType.SINT32:
        if (n < INT32_MIN || n > INT32_MAX) return -1;
        return this.varint(tag, tagSize, ((n << 1) ^ (n >> 31)) >>> 0);
      case ScalarType.FIXED32:
        if (n < 0 || n > UINT32_MAX) return -1;
        this.push(W_FIX32, tag, n, 0);
        return tagSize + 4;
      case ScalarType.SFIXED32:
        if (n < INT32_MIN || n > INT32_MAX) return -1;
        this.push(W_FIX32, tag, n >>> 0, 0);
        return tagSize + 4;
      case ScalarType.INT64:
        if (!Number.isSafeInteger(n)) return -1;
        return this.varint(tag, tagSize, n);
      case ScalarType.UINT64:
        if (n < 0 || !Number.isSafeInteger(n)) return -1;
        return this.varint(tag, tagSize, n);
      case ScalarType.SINT64:
        // zigzag doubles it: exact only below 2^52
        if (n >= 4503599627370496 || n <= -4503599627370496) return -1;
        return this.varint(tag, tagSize, n >= 0 ? 2 * n : -2 * n - 1);
      case ScalarType.FIXED64:
        if (n < 0 || !Number.isSafeInteger(n)) return -1;
        this.push(W_FIX64, tag, n, 0);
        return tagSize + 8;
      case ScalarType.SFIXED64:
        if (!Number.isSafeInteger(n)) return -1;
        this.push(W_FIX64, tag, n, 0);
        return tagSize + 8;
    }
    return -1;
  }

  private varint(tag: number, tagSize: number, n: number): number {
    this.push(n < 0 ? W_NEG : W_VARINT, tag, n, 0);
    return tagSize + int32Size(n);
  }

  /** Writes the planned writes into `out` from `pos`. */
  private write(out: Uint8Array, pos: number): void {
    const { wk, wt, wv, wn } = this;
    for (let i = 0; i < this.count; i++) {
      const tag = wt[i]!;
      if (tag !== 0) pos = writeVarint(out, pos, tag);
      switch (wk[i]) {
        case W_VARINT:
          pos = writeVarint(out, pos, wv[i] as number);
          break;
        case W_LEN:
          pos = writeVarint(out, pos, wn[i]!);
          break;
        case W_STR:
          pos = writeUtf8(out, writeVarint(out, pos, wn[i]!), wv[i] as string);
          break;
        case W_NEG:
          pos = writeInt64(out, pos, wv[i] as number);
          break;
        case W_FIX32:
          pos = writeFixed32(out, pos, wv[i] as number);
          break;
        case W_FIX64:
          pos = writeFixed64(out, pos, wv[i] as number);
          break;
        case W_F32:
          pos = writeFloat(out, pos, wv[i] as number);
          break;
        case W_F64:
          pos = writeDouble(out, pos, wv[i] as number);
          break;
      }
    }
  }

  // === wire → JSON ===

  /**
   * The JSON of the binary `desc` message in `bytes`, as toJson and the printer give it (fields by
   * number; floats printed as protojson prints them; with emitDefaults, toJson's
   * alwaysEmitImplicit); or undefined: the full path decides.
   */
  decode(desc: DescMessage, bytes: Uint8Array): JsonObject | undefined {
    const p = this.plan(desc);
    if (p === null) return undefined;
    try {
      return this.read(p, new WireReader(bytes), 0);
    } catch (err) {
      if (err instanceof WireError) return undefined;
      throw err;
    }
  }

  /** One message's JSON; undefined: the full path's. Bytes that are not a message throw WireError. */
  private read(p: Plan, r: WireReader, depth: number): JsonObject | undefined {
    if (depth > MAX_DEPTH) return undefined;
    const vals: (JsonValue | undefined)[] = new Array<JsonValue | undefined>(p.fields.length);
    let oneofs: number[] | undefined;
    for (let no = r.next(); no !== 0; no = r.next()) {
      const f = p.byNumber.get(no);
      if (f === undefined) {
        if (r.wt === WIRE_START_GROUP) return undefined; // (how a group must end is the full path's to judge)
        r.skip(); // an unknown field: toJson prints none
        continue;
      }
      if (f.kind === NONE) return undefined;
      if (f.oneof >= 0) {
        oneofs ??= new Array<number>(p.oneofs).fill(-1);
        const seen = oneofs[f.oneof]!;
        if (seen !== -1 && seen !== f.index) return undefined; // a second member: the full path's
        oneofs[f.oneof] = f.index;
      }
      const wire = r.wt;
      if (f.list) {
        let list = vals[f.index] as JsonValue[] | undefined;
        if (list === undefined) vals[f.index] = list = [];
        if (wire === WIRE_LEN && f.wire !== WIRE_LEN) {
          // packed (read whichever way it was written)
          const run = r.message();
          while (run.pos < run.end) list.push(this.readValue(f, run, depth)!);
          continue;
        }
        if (wire !== f.wire) return undefined;
        const v = this.readValue(f, r, depth);
        if (v === undefined) return undefined;
        list.push(v);
        continue;
      }
      if (wire !== f.wire) return undefined;
      if (f.kind === MESSAGE && vals[f.index] !== undefined) return undefined; // a merge: the full path's
      const v = this.readValue(f, r, depth);
      if (v === undefined) return undefined;
      vals[f.index] = v;
    }
    const out: JsonObject = {};
    const emitDefaults = this.emitDefaults;
    for (let i = 0; i < vals.length; i++) {
      const v = vals[i];
      const f = p.fields[i]!;
      if (v === undefined) {
        if (emitDefaults && f.dflt !== undefined) out[f.jsonName] = f.dflt;
        continue;
      }
      // a zero is printed only with emitDefaults (and a packed run may hold no element)
      if (!emitDefaults && (f.implicit ? isZero(f, v) : f.list && (v as JsonValue[]).length === 0)) continue;
      out[f.jsonName] = v;
    }
    return out;
  }

  /** One value of `f` as its JSON (undefined only for a message the full path must read). */
  private readValue(f: Field, r: WireReader, depth: number): JsonValue | undefined {
    switch (f.kind) {
      case ScalarType.STRING:
        return r.string(true);
      case MESSAGE: {
        const p = this.plan(f.message!);
        return p === null ? undefined : this.read(p, r.message(), depth + 1);
      }
      case ScalarType.BOOL:
        return r.bool();
      case ScalarType.INT32:
        return r.int32();
      case ScalarType.UINT32:
        return r.uint32();
      case ScalarType.SINT32: {
        const u = r.uint32();
        return (u >>> 1) ^ -(u & 1);
      }
      case ENUM: {
        const n = r.int32();
        return f.names!.get(n) ?? n;
      }
      case ScalarType.INT64:
        r.varint64();
        return int64Text(r.lo, r.hi);
      case ScalarType.UINT64:
        r.varint64();
        return uint64Text(r.lo, r.hi);
      case ScalarType.SINT64: {
        r.varint64();
        // zigzag on 64 bits: (n >>> 1) ^ -(n & 1)
        const neg = r.lo & 1;
        const lo = ((r.lo >>> 1) | (r.hi << 31)) >>> 0;
        const hi = r.hi >>> 1;
        return neg ? int64Text(~lo >>> 0, ~hi >>> 0) : int64Text(lo, hi);
      }
      case ScalarType.FIXED32:
        return r.fixed32();
      case ScalarType.SFIXED32:
        return r.fixed32() | 0;
      case ScalarType.FIXED64:
        r.fixed64();
        return uint64Text(r.lo, r.hi);
      case ScalarType.SFIXED64:
        r.fixed64();
        return int64Text(r.lo, r.hi);
      case ScalarType.DOUBLE:
        return numberJson(r.double(), false);
      case ScalarType.FLOAT:
        return numberJson(r.float(), true);
    }
    return undefined;
  }
}

/** An implicit field's zero value, as this file reads it (the full path prints none of them). */
function isZero(f: Field, v: JsonValue): boolean {
  switch (f.kind) {
    case ScalarType.STRING:
      return v === "";
    case ScalarType.BOOL:
      return v === false;
    case ENUM:
      return v === f.zero || v === f.names!.get(f.zero);
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.SINT64:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return v === "0";
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      // +0 only: -0 is printed, as a raw "-0" (an object here)
      return v === 0;
    default:
      return v === 0;
  }
}

/** A double or float as toJson and the printer give it: NaN and the infinities as strings, -0 as -0, a float as its shortest decimal. */
function numberJson(v: number, float: boolean): JsonValue {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "Infinity";
  if (v === -Infinity) return "-Infinity";
  if (Object.is(v, -0)) return rawJSON("-0") as JsonValue;
  return float && v !== 0 ? (rawJSON(float32Text(v)) as JsonValue) : v;
}

function int64Text(lo: number, hi: number): string {
  if (hi === 0) return String(lo);
  if (hi >= 0xffe00000) {
    // negative, within -2^53
    const v = (hi - TWO_32) * TWO_32 + lo;
    if (v >= -9007199254740991) return String(v);
  }
  if (hi < 0x200000) return String(hi * TWO_32 + lo);
  return BigInt.asIntN(64, (BigInt(hi) << 32n) | BigInt(lo)).toString();
}

function uint64Text(lo: number, hi: number): string {
  if (hi < 0x200000) return String(hi * TWO_32 + lo);
  return ((BigInt(hi) << 32n) | BigInt(lo)).toString();
}
