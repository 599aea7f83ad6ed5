// Just enough HTTP/2 framing (RFC 9113 §4.1, §6) and HPACK (RFC 7541) for the raw-frame peers
// in test/helpers: frame headers, an incremental frame reader, HPACK literal fields without
// indexing for sending, and a decoder for what a peer that was told SETTINGS_HEADER_TABLE_SIZE 0
// sends back (static-table entries and plain literals; Huffman-coded strings stay unread).
// Test-only; imports nothing from src.

export const FRAME = { DATA: 0, HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8, CONTINUATION: 9 } as const;
export const FLAG_END_STREAM = 0x1;
export const FLAG_ACK = 0x1;
export const FLAG_END_HEADERS = 0x4;
export const SETTING = { HEADER_TABLE_SIZE: 1, ENABLE_PUSH: 2, MAX_CONCURRENT_STREAMS: 3, INITIAL_WINDOW_SIZE: 4 } as const;
export const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

/** One frame as read off the wire. */
export interface SeenFrame {
  readonly type: number;
  readonly flags: number;
  readonly streamId: number;
  readonly length: number;
  /** RST_STREAM's or GOAWAY's error code */
  readonly errorCode?: number;
  /** the payload (a copy); kept for HEADERS, CONTINUATION, SETTINGS, GOAWAY, PING and WINDOW_UPDATE */
  readonly payload?: Buffer;
}

export function frameHeader(length: number, type: number, flags: number, streamId: number): Buffer {
  const b = Buffer.alloc(9);
  b.writeUIntBE(length, 0, 3);
  b[3] = type;
  b[4] = flags;
  b.writeUInt32BE(streamId & 0x7fffffff, 5);
  return b;
}

export function encodeFrame(type: number, flags: number, streamId: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  return Buffer.concat([frameHeader(payload.length, type, flags, streamId), payload]);
}

export function settingsFrame(settings: readonly (readonly [number, number])[]): Buffer {
  const p = Buffer.alloc(6 * settings.length);
  settings.forEach(([id, v], i) => {
    p.writeUInt16BE(id, 6 * i);
    p.writeUInt32BE(v, 6 * i + 2);
  });
  return encodeFrame(FRAME.SETTINGS, 0, 0, p);
}

/**
 * Reads frames from a byte stream split anywhere: push() each chunk, get the complete frames.
 * `skipPreface` for the server side (a client's 24-byte preface comes before its first frame).
 */
export class FrameReader {
  private buf = Buffer.alloc(0);
  private prefaceLeft: number;
  constructor(skipPreface: boolean) {
    this.prefaceLeft = skipPreface ? PREFACE.length : 0;
  }
  push(d: Buffer): SeenFrame[] {
    this.buf = Buffer.concat([this.buf, d]);
    if (this.prefaceLeft > 0) {
      const n = Math.min(this.prefaceLeft, this.buf.length);
      this.buf = this.buf.subarray(n);
      this.prefaceLeft -= n;
    }
    const out: SeenFrame[] = [];
    while (this.buf.length >= 9) {
      const length = this.buf.readUIntBE(0, 3);
      if (this.buf.length < 9 + length) break;
      const type = this.buf[3]!;
      const flags = this.buf[4]!;
      const streamId = this.buf.readUInt32BE(5) & 0x7fffffff;
      const payload = this.buf.subarray(9, 9 + length);
      const errorCode = type === FRAME.RST_STREAM ? payload.readUInt32BE(0) : type === FRAME.GOAWAY ? payload.readUInt32BE(4) : undefined;
      const keep = type === FRAME.HEADERS || type === FRAME.CONTINUATION || type === FRAME.SETTINGS || type === FRAME.GOAWAY || type === FRAME.PING || type === FRAME.WINDOW_UPDATE;
      out.push({ type, flags, streamId, length, ...(errorCode === undefined ? {} : { errorCode }), ...(keep ? { payload: Buffer.from(payload) } : {}) });
      this.buf = this.buf.subarray(9 + length);
    }
    return out;
  }
}

// --- HPACK (RFC 7541) ---

/** §5.1 integer with an N-bit prefix; `first` holds the bits above the prefix. */
function encodeInt(value: number, prefixBits: number, first: number): number[] {
  const max = (1 << prefixBits) - 1;
  if (value < max) return [first | value];
  const out = [first | max];
  value -= max;
  while (value >= 128) {
    out.push((value % 128) + 128);
    value = Math.floor(value / 128);
  }
  out.push(value);
  return out;
}

/**
 * A header block of "literal header field without indexing — new name" fields (§6.2.2), the
 * strings raw (no Huffman), names and values byte for byte as given (latin1): the one way to
 * put an upper-case name, a NUL or a CR/LF on the wire, which node:http2's client refuses.
 */
export function encodeHeaderBlock(fields: readonly (readonly [string, string])[]): Buffer {
  const bytes: number[] = [];
  for (const [name, value] of fields) {
    bytes.push(0x00);
    for (const s of [name, value]) {
      const b = Buffer.from(s, "latin1");
      bytes.push(...encodeInt(b.length, 7, 0x00));
      for (const x of b) bytes.push(x);
    }
  }
  return Buffer.from(bytes);
}

/** RFC 7541 Appendix A, entries 1..61. */
const STATIC_TABLE: readonly (readonly [string, string])[] = [
  [":authority", ""], [":method", "GET"], [":method", "POST"], [":path", "/"], [":path", "/index.html"],
  [":scheme", "http"], [":scheme", "https"], [":status", "200"], [":status", "204"], [":status", "206"],
  [":status", "304"], [":status", "400"], [":status", "404"], [":status", "500"], ["accept-charset", ""],
  ["accept-encoding", "gzip, deflate"], ["accept-language", ""], ["accept-ranges", ""], ["accept", ""],
  ["access-control-allow-origin", ""], ["age", ""], ["allow", ""], ["authorization", ""], ["cache-control", ""],
  ["content-disposition", ""], ["content-encoding", ""], ["content-language", ""], ["content-length", ""],
  ["content-location", ""], ["content-range", ""], ["content-type", ""], ["cookie", ""], ["date", ""], ["etag", ""],
  ["expect", ""], ["expires", ""], ["from", ""], ["host", ""], ["if-match", ""], ["if-modified-since", ""],
  ["if-none-match", ""], ["if-range", ""], ["if-unmodified-since", ""], ["last-modified", ""], ["link", ""],
  ["location", ""], ["max-forwards", ""], ["proxy-authenticate", ""], ["proxy-authorization", ""], ["range", ""],
  ["referer", ""], ["refresh", ""], ["retry-after", ""], ["server", ""], ["set-cookie", ""],
  ["strict-transport-security", ""], ["transfer-encoding", ""], ["user-agent", ""], ["vary", ""], ["via", ""],
  ["www-authenticate", ""],
];

/** A Huffman-coded string this decoder does not read. */
export const HUFFMAN = "<huffman>";

/**
 * Decodes a header block sent to a peer that advertised SETTINGS_HEADER_TABLE_SIZE 0 (so no
 * dynamic-table entries can be referenced). Huffman strings come back as HUFFMAN; node sends
 * `:status` as a static-table index, and short values such as grpc-status raw.
 */
export function decodeHeaderBlock(block: Buffer): [string, string][] {
  const out: [string, string][] = [];
  let i = 0;
  const int = (prefixBits: number): number => {
    const max = (1 << prefixBits) - 1;
    let v = block[i++]! & max;
    if (v < max) return v;
    let m = 1;
    let b: number;
    do {
      b = block[i++]!;
      v += (b & 127) * m;
      m *= 128;
    } while (b & 128);
    return v;
  };
  const str = (): string => {
    const huff = (block[i]! & 0x80) !== 0;
    const len = int(7);
    const s = huff ? HUFFMAN : block.subarray(i, i + len).toString("latin1");
    i += len;
    return s;
  };
  const nameAt = (idx: number): string => STATIC_TABLE[idx - 1]?.[0] ?? `<dynamic ${idx}>`;
  while (i < block.length) {
    const b = block[i]!;
    if (b & 0x80) {
      const idx = int(7);
      const e = STATIC_TABLE[idx - 1];
      out.push(e === undefined ? [`<dynamic ${idx}>`, ""] : [e[0], e[1]]);
    } else if ((b & 0xe0) === 0x20) {
      int(5); // dynamic table size update
    } else {
      const prefix = (b & 0xc0) === 0x40 ? 6 : 4; // with incremental indexing : without / never indexed
      const idx = int(prefix);
      const name = idx === 0 ? str() : nameAt(idx);
      out.push([name, str()]);
    }
  }
  return out;
}
