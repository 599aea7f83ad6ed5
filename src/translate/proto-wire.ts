// The Protocol Buffers wire format as dojang's hand-written codecs use it: varint and UTF-8 sizes and writers, and a checked reader.
//
// Source: protobuf.dev/programming-guides/encoding (varints, tags `field << 3 | wire type`,
// length-delimited fields, ZigZag not used here). The writers emit what every canonical encoder
// does (protobufjs, @bufbuild/protobuf, protobuf-go): minimal varints, fields in the order the
// caller writes them (the codecs write them in field-number order). The reader checks every length
// against what is left, rejects the wire types that do not exist (6, 7) and field number 0, and
// skips unknown fields, groups (3 … 4) included, as protobuf requires. A known field that arrives
// with another wire type is skipped as unknown, as protobuf-go and C++ do (the codecs test `wt`).
//
// Strings: UTF-8, a lone surrogate written as U+FFFD (what TextEncoder and node's buffers write);
// read back leniently (an invalid sequence becomes U+FFFD, as protobufjs reads it).

export const WIRE_VARINT = 0;
export const WIRE_I64 = 1;
export const WIRE_LEN = 2;
export const WIRE_START_GROUP = 3;
export const WIRE_END_GROUP = 4;
export const WIRE_I32 = 5;

/** The tag of `field` with wire type `wt` (one byte for fields 1..15). */
export function tag(field: number, wt: number): number {
  return field * 8 + wt;
}

/** Bytes of `n` (a whole number in 0 .. 2^53) as a varint. */
export function varintSize(n: number): number {
  if (n < 0x80) return 1;
  if (n < 0x4000) return 2;
  if (n < 0x200000) return 3;
  if (n < 0x10000000) return 4;
  let size = 4;
  n = Math.floor(n / 0x10000000);
  while (n > 0) {
    size++;
    n = Math.floor(n / 128);
  }
  return size;
}

/** Writes `n` (a whole number in 0 .. 2^53) as a varint at `at`; returns the index after it. */
export function writeVarint(out: Uint8Array, at: number, n: number): number {
  while (n >= 0x80) {
    out[at++] = (n & 0x7f) | 0x80;
    n = n < 0x80000000 ? n >>> 7 : Math.floor(n / 128);
  }
  out[at++] = n;
  return at;
}

/** Bytes of an int32 as protobuf writes it: a negative one is sign-extended to ten bytes. */
export function int32Size(n: number): number {
  return n < 0 ? 10 : varintSize(n);
}

/** Writes an int32 (a negative one as ten bytes, two's complement over 64 bits). */
export function writeInt32(out: Uint8Array, at: number, n: number): number {
  return writeInt64(out, at, n);
}

/** Writes an int64 within ±2^53 (int32Size gives its size): a negative one as ten bytes, two's complement over 64 bits. */
export function writeInt64(out: Uint8Array, at: number, n: number): number {
  if (n >= 0) return writeVarint(out, at, n);
  const hiWord = Math.floor(n / 0x100000000);
  let lo = (n - hiWord * 0x100000000) >>> 0;
  let hi = hiWord >>> 0;
  // seven bits at a time over the 64-bit word: 28 from lo, one byte across, then hi's; ten bytes in all
  for (let i = 0; i < 4; i++) {
    out[at++] = (lo & 0x7f) | 0x80;
    lo >>>= 7;
  }
  out[at++] = (lo & 0x0f) | ((hi & 0x07) << 4) | 0x80;
  hi >>>= 3;
  for (let i = 0; i < 4; i++) {
    out[at++] = (hi & 0x7f) | 0x80;
    hi >>>= 7;
  }
  out[at++] = hi & 0x01;
  return at;
}

/** Writes a fixed32 (or sfixed32's bits: `n >>> 0`), four bytes little-endian; returns the index after it. */
export function writeFixed32(out: Uint8Array, at: number, n: number): number {
  out[at] = n & 0xff;
  out[at + 1] = (n >>> 8) & 0xff;
  out[at + 2] = (n >>> 16) & 0xff;
  out[at + 3] = (n >>> 24) & 0xff;
  return at + 4;
}

/** Writes a fixed64 or sfixed64 within ±2^53 (two's complement), eight bytes little-endian. */
export function writeFixed64(out: Uint8Array, at: number, n: number): number {
  const hi = Math.floor(n / 0x100000000);
  return writeFixed32(out, writeFixed32(out, at, (n - hi * 0x100000000) >>> 0), hi >>> 0);
}

/** Writes a float (rounded to 32 bits), four bytes little-endian. */
export function writeFloat(out: Uint8Array, at: number, v: number): number {
  f32f[0] = v;
  return writeFixed32(out, at, f32[0]!);
}

/** Writes a double, eight bytes little-endian. */
export function writeDouble(out: Uint8Array, at: number, v: number): number {
  f64d[0] = v;
  return writeFixed32(out, writeFixed32(out, at, f64[LO]!), f64[1 - LO]!);
}

// a float's and a double's bits as words (the words go to and from the wire little-endian, above and in WireReader)
const f32 = new Uint32Array(1);
const f32f = new Float32Array(f32.buffer);
const f64 = new Uint32Array(2);
const f64d = new Float64Array(f64.buffer);
/** the platform's order of a double's two words: the low one's index */
const LO = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1 ? 0 : 1;

/** Bytes of `s` in UTF-8 (a lone surrogate counts as U+FFFD: three bytes). */
export function utf8Size(s: string): number {
  const n = s.length;
  let size = n;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) size += 1;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < n && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      // a pair: four bytes for two UTF-16 units
      size += 2;
      i++;
    } else size += 2;
  }
  return size;
}

/** Writes `s` as UTF-8 at `at` (utf8Size(s) bytes); returns the index after it. */
export function writeUtf8(out: Uint8Array, at: number, s: string): number {
  const n = s.length;
  for (let i = 0; i < n; i++) {
    let c = s.charCodeAt(i);
    if (c < 0x80) {
      out[at++] = c;
      continue;
    }
    if (c < 0x800) {
      out[at++] = 0xc0 | (c >> 6);
      out[at++] = 0x80 | (c & 0x3f);
      continue;
    }
    if (c >= 0xd800 && c <= 0xdfff) {
      const d = i + 1 < n ? s.charCodeAt(i + 1) : 0;
      if (c <= 0xdbff && (d & 0xfc00) === 0xdc00) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        i++;
        out[at++] = 0xf0 | (c >> 18);
        out[at++] = 0x80 | ((c >> 12) & 0x3f);
        out[at++] = 0x80 | ((c >> 6) & 0x3f);
        out[at++] = 0x80 | (c & 0x3f);
        continue;
      }
      c = 0xfffd;
    }
    out[at++] = 0xe0 | (c >> 12);
    out[at++] = 0x80 | ((c >> 6) & 0x3f);
    out[at++] = 0x80 | (c & 0x3f);
  }
  return at;
}

/** Bytes of a length-delimited field (tag under 16) whose payload is `len` bytes. */
export function lenFieldSize(len: number): number {
  return 1 + varintSize(len) + len;
}

/** A length-delimited field of a string, encoded once (a template's constant part). */
export function stringField(field: number, s: string): Uint8Array {
  const len = utf8Size(s);
  const out = new Uint8Array(varintSize(tag(field, WIRE_LEN)) + varintSize(len) + len);
  writeUtf8(out, writeVarint(out, writeVarint(out, 0, tag(field, WIRE_LEN)), len), s);
  return out;
}

function decodeUtf8(bytes: Uint8Array, strict: boolean): string {
  if (!strict) return utf8.decode(bytes);
  try {
    return utf8Strict.decode(bytes);
  } catch {
    throw new WireError("a string that is not UTF-8");
  }
}

/** Why a message did not decode. */
export class WireError extends Error {}

// ignoreBOM: a leading U+FEFF in a field is text (protobufjs and grpc-go keep it); the WHATWG default drops it
const utf8 = new TextDecoder("utf-8", { ignoreBOM: true });
const utf8Strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
/** Strings up to this many bytes are read a byte at a time (WireReader.string). */
const SHORT_STRING = 24;

/**
 * Reads a message's fields in order: `next()` gives each field's number (0 at the end) and leaves
 * its wire type in `wt`; the caller reads the value with the matching method, or `skip()`s it.
 * Every read is checked against the end of the message it is in; a malformed byte sequence
 * throws WireError (the decoders catch it and say "malformed").
 */
export class WireReader {
  pos: number;
  wt = 0;
  constructor(
    readonly b: Uint8Array,
    pos = 0,
    public end: number = b.length,
  ) {
    this.pos = pos;
  }

  /** The next field's number, 0 when the message is done. */
  next(): number {
    if (this.pos >= this.end) return 0;
    const t = this.varint();
    const field = Math.floor(t / 8);
    const wt = t & 7;
    if (field === 0 || field > 0x1fffffff || wt === 6 || wt === 7 || wt === WIRE_END_GROUP) throw new WireError(`bad tag ${t}`);
    this.wt = wt;
    return field;
  }

  /** A varint as a number (exact up to 2^53; beyond, the nearest double). */
  varint(): number {
    const b = this.b;
    let value = 0;
    let mul = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new WireError("varint runs past the end");
      const x = b[this.pos++]!;
      value += (x & 0x7f) * mul;
      if (x < 0x80) return value;
      mul *= 128;
    }
    throw new WireError("varint longer than ten bytes");
  }

  /** A uint32 (or an enum): the varint's low 32 bits, as protobuf reads a wider value. */
  uint32(): number {
    const b = this.b;
    let value = 0;
    let shift = 0;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new WireError("varint runs past the end");
      const x = b[this.pos++]!;
      if (shift < 32) value |= (x & 0x7f) << shift;
      if (x < 0x80) return value >>> 0;
      shift += 7;
    }
    throw new WireError("varint longer than ten bytes");
  }

  /** An int32 or an enum value (the low 32 bits, signed). */
  int32(): number {
    return this.uint32() | 0;
  }

  /** An int64 as a number: exact within ±2^53. */
  int64(): number {
    this.varint64();
    return (this.hi | 0) * 0x100000000 + this.lo;
  }

  bool(): boolean {
    return this.varint() !== 0;
  }

  /** The low and high 32 bits (unsigned) of the last varint64() or fixed64(). */
  lo = 0;
  hi = 0;

  /** A varint of any 64 bits, into lo and hi (int64, uint64 and sint64 beyond 2^53). */
  varint64(): void {
    const b = this.b;
    let lo = 0;
    let hi = 0;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new WireError("varint runs past the end");
      const x = b[this.pos++]!;
      if (i < 4) lo |= (x & 0x7f) << (7 * i);
      else if (i === 4) {
        lo |= (x & 0x0f) << 28;
        hi |= (x & 0x7f) >> 4;
      } else hi |= (x & 0x7f) << (7 * i - 32);
      if (x < 0x80) {
        this.lo = lo >>> 0;
        this.hi = hi >>> 0;
        return;
      }
    }
    throw new WireError("varint longer than ten bytes");
  }

  /** A fixed32, sfixed32's bits, or a float's: four bytes, little-endian, as a uint32. */
  fixed32(): number {
    this.fixed(4);
    const b = this.b;
    const p = this.pos - 4;
    return (b[p]! | (b[p + 1]! << 8) | (b[p + 2]! << 16)) + b[p + 3]! * 0x1000000;
  }

  /** A fixed64 or sfixed64, into lo and hi. */
  fixed64(): void {
    this.lo = this.fixed32();
    this.hi = this.fixed32();
  }

  float(): number {
    f32[0] = this.fixed32();
    return f32f[0]!;
  }

  double(): number {
    f64[LO] = this.fixed32();
    f64[1 - LO] = this.fixed32();
    return f64d[0]!;
  }

  /** A length-delimited field's bounds: [start, end) of its payload; pos moves past it. */
  private span(): number {
    const len = this.varint();
    const start = this.pos;
    if (len > this.end - start) throw new WireError("length runs past the end");
    this.pos = start + len;
    return start;
  }

  /** A string; `strict`: invalid UTF-8 throws WireError (proto3's strings) where it would become U+FFFD. */
  string(strict = false): string {
    const start = this.span();
    const end = this.pos;
    const b = this.b;

    // A long string in one decoder call: built a character at a time, 700 ASCII bytes (the header
    // Istio's ext_authz sample answers with) took ~8 µs against ~1.5 µs (a string appended to
    // 700 times); below ~24 bytes the loop is the cheaper (no view, no call into C++).
    if (end - start > SHORT_STRING) return decodeUtf8(b.subarray(start, end), strict);
    // ASCII, the usual case, without a view or a decoder call: the codes gathered, then one string
    // (appending a character at a time made a string per character: 6 and 20 bytes took ~2.5x as long)
    const n = end - start;
    const codes = new Array<number>(n);
    for (let i = 0; i < n; i++) {
      const c = b[start + i]!;
      if (c >= 0x80) return decodeUtf8(b.subarray(start, end), strict);
      codes[i] = c;
    }
    return String.fromCharCode.apply(null, codes);
  }

  bytes(): Uint8Array {
    const start = this.span();
    return this.b.subarray(start, this.pos);
  }

  /** A nested message: a reader over its payload (pos moves past it). */
  message(): WireReader {
    const start = this.span();
    return new WireReader(this.b, start, this.pos);
  }

  /** Skips the value of the field `next()` just read. */
  skip(): void {
    this.skipType(this.wt, 0);
  }

  private skipType(wt: number, depth: number): void {
    switch (wt) {
      case WIRE_VARINT:
        this.varint();
        return;
      case WIRE_I64:
        this.fixed(8);
        return;
      case WIRE_LEN:
        this.span();
        return;
      case WIRE_I32:
        this.fixed(4);
        return;
      case WIRE_START_GROUP: {
        if (depth > 64) throw new WireError("groups nested too deep");
        for (;;) {
          if (this.pos >= this.end) throw new WireError("group runs past the end");
          const t = this.varint();
          const inner = t & 7;
          if (inner === WIRE_END_GROUP) return;
          if (Math.floor(t / 8) === 0 || inner === 6 || inner === 7) throw new WireError(`bad tag ${t}`);
          this.skipType(inner, depth + 1);
        }
      }
      default:
        throw new WireError(`bad wire type ${wt}`);
    }
  }

  private fixed(n: number): void {
    if (n > this.end - this.pos) throw new WireError("fixed-size value runs past the end");
    this.pos += n;
  }
}
