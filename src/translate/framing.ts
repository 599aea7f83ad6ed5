// Incremental scanner for gRPC's 5-byte length prefix (spec sheet §3): counts messages and enforces the wire-length limit without touching payloads.

/*
 * Layout (SPEC "Length-Prefixed-Message"; grpc-go rpc_util.go msgHeader):
 *
 *   byte 0      compressed flag (uint8)
 *   bytes 1..4  message length (uint32, big-endian)
 *   bytes 5..   message, `length` bytes
 *
 * DATA frames split and join messages arbitrarily, so the scanner is a byte-level state
 * machine that carries a partial prefix or body across chunks. It reads prefix bytes by index
 * and skips bodies arithmetically: payload bytes are never copied, sliced or viewed. The length
 * is assembled with multiplication (never `<< 24`), so 0xFFFFFFFF stays 4294967295.
 */

export interface FrameScanner {
  /** bytes still missing from the current 5-byte prefix (1..5); 0 while inside a message body */
  headerLeft: number;
  /** declared length being accumulated / of the current message */
  length: number;
  /** compressed-flag byte of the current message */
  flag: number;
  /** payload bytes of the current message not yet seen */
  bodyLeft: number;
  /** number of messages whose prefix has completed */
  messages: number;
  /** total bytes scanned */
  bytes: number;
  /** declared length of the first message above the limit, else -1 */
  overLimit: number;
  /** where in the refused chunk the over-limit message's prefix starts (0 when it began in an
   * earlier chunk): the bytes before it are whole messages the caller may still forward */
  overLimitAt: number;
  /** bytes of the refused chunk from overLimitAt on: what the caller read but never forwarded */
  refusedBytes: number;
  /** stream offset of the refused chunk's overLimitAt */
  refusedAt: number;
  /** prefixes completed in the refused chunk, the refused message's included */
  refusedChunkMessages: number;
}

const PREFIX_BYTES = 5;

/** A scanner at a message boundary. All fields are set here so every scanner has one shape. */
export function newScanner(): FrameScanner {
  return { headerLeft: PREFIX_BYTES, length: 0, flag: 0, bodyLeft: 0, messages: 0, bytes: 0, overLimit: -1, overLimitAt: 0, refusedBytes: 0, refusedAt: 0, refusedChunkMessages: 0 };
}

/**
 * Scans one chunk. Returns true if every prefix completed in it declares <= limit bytes; on the
 * first one that declares more, sets s.overLimit and returns false at once (the caller then
 * refuses the call). limit may be Infinity. A scanner that has flagged a message stays
 * flagged: later calls return false without scanning. grpc-go fails only when
 * `length > max` (exactly max passes), spec sheet §3.2.
 */
export function scanChunk(s: FrameScanner, chunk: Uint8Array, limit: number): boolean {
  if (s.overLimit >= 0) return false;
  const n = chunk.length;
  let i = 0;
  let headerLeft = s.headerLeft;
  let length = s.length;
  let bodyLeft = s.bodyLeft;
  const messages0 = s.messages;
  while (i < n) {
    if (headerLeft === 0) {
      // Inside a body: skip it, or as much of it as this chunk holds.
      const avail = n - i;
      if (avail < bodyLeft) {
        bodyLeft -= avail;
        i = n;
        break;
      }
      i += bodyLeft;
      bodyLeft = 0;
      headerLeft = PREFIX_BYTES;
      continue;
    }
    if (headerLeft === PREFIX_BYTES && n - i >= PREFIX_BYTES) {
      // Whole prefix in this chunk (the common case).
      s.flag = chunk[i] as number;
      length =
        (chunk[i + 1] as number) * 0x1000000 +
        (((chunk[i + 2] as number) << 16) | ((chunk[i + 3] as number) << 8) | (chunk[i + 4] as number));
      i += PREFIX_BYTES;
      headerLeft = 0;
    } else {
      // Prefix split across chunks: one byte at a time.
      const b = chunk[i++] as number;
      if (headerLeft === PREFIX_BYTES) {
        s.flag = b;
        length = 0;
      } else {
        length = length * 256 + b;
      }
      if (--headerLeft !== 0) continue;
    }
    // Prefix complete: the message's length is known before any of its body is seen.
    s.messages++;
    bodyLeft = length;
    if (length > limit) {
      s.overLimit = length;
      s.overLimitAt = i > PREFIX_BYTES ? i - PREFIX_BYTES : 0;
      s.refusedBytes = n - s.overLimitAt;
      s.refusedAt = s.bytes + s.overLimitAt;
      s.refusedChunkMessages = s.messages - messages0;
      s.headerLeft = 0;
      s.length = length;
      s.bodyLeft = bodyLeft;
      s.bytes += i;
      return false;
    }
    if (length === 0) headerLeft = PREFIX_BYTES; // empty message: already at the next boundary
  }
  s.headerLeft = headerLeft;
  s.length = length;
  s.bodyLeft = bodyLeft;
  s.bytes += i;
  return true;
}

/**
 * What a caller passed on (the access log's req_/resp_ counters, issue 10 item 8): every chunk
 * scanned, except after a refusal. `partial`: the caller still forwards the whole messages
 * before overLimitAt in the refused chunk (dojang's response side); otherwise it drops that
 * chunk whole (the request side). The refused message is never counted: its prefix did not
 * reach the peer whole (a prefix split across chunks had its first bytes sent earlier, and
 * those bytes are counted).
 */
export function forwardedBytes(s: FrameScanner, partial: boolean): number {
  if (s.overLimit < 0) return s.bytes;
  return partial ? s.refusedAt : s.refusedAt - s.overLimitAt;
}

export function forwardedMessages(s: FrameScanner, partial: boolean): number {
  if (s.overLimit < 0) return s.messages;
  return partial ? s.messages - 1 : s.messages - s.refusedChunkMessages;
}

/** Bytes read but not passed on (0 unless a message was refused); see forwardedBytes. */
export function refusedBytes(s: FrameScanner, partial: boolean): number {
  if (s.overLimit < 0) return 0;
  return partial ? s.refusedBytes : s.refusedBytes + s.overLimitAt;
}

/** No partial prefix or body pending: the stream may legally end here (else grpc-go reports 13 unexpected EOF). */
export function atMessageBoundary(s: FrameScanner): boolean {
  return s.headerLeft === PREFIX_BYTES;
}

// === one prefix, read and written here only ===

/** The prefix's length in bytes (flag + uint32 length). */
export const MESSAGE_PREFIX_BYTES = PREFIX_BYTES;

/** Writes a prefix (`flag`, `length`) into `out` at `at` (5 bytes). */
export function writePrefix(out: Uint8Array, at: number, flag: number, length: number): void {
  out[at] = flag & 0xff;
  out[at + 1] = (length >>> 24) & 0xff;
  out[at + 2] = (length >>> 16) & 0xff;
  out[at + 3] = (length >>> 8) & 0xff;
  out[at + 4] = length & 0xff;
}

/** The flag byte of the prefix at `at` (bit 0: compressed; gRPC-Web's 0x80: a trailer frame; Connect's 0x02: end of stream). */
export function prefixFlag(b: Uint8Array, at = 0): number {
  return b[at] as number;
}

/** The message length declared by the prefix at `at` (5 bytes must be there): 0..4294967295, never negative. */
export function messageLength(b: Uint8Array, at = 0): number {
  return (b[at + 1] as number) * 0x1000000 + (((b[at + 2] as number) << 16) | ((b[at + 3] as number) << 8) | (b[at + 4] as number));
}

/**
 * The prefix that starts the bytes `chunks` hold in turn (it may span them): `out.flag` and
 * `out.length` set, true; false when fewer than 5 bytes are there.
 */
export function prefixAcross(chunks: readonly Uint8Array[], out: { flag: number; length: number }): boolean {
  let k = 0;
  let flag = 0;
  let length = 0;
  for (const c of chunks) {
    for (let i = 0; i < c.length && k < PREFIX_BYTES; i++, k++) {
      if (k === 0) flag = c[i] as number;
      else length = length * 256 + (c[i] as number);
    }
    if (k === PREFIX_BYTES) {
      out.flag = flag;
      out.length = length;
      return true;
    }
  }
  return false;
}

/** Builds one framed message: 5-byte prefix + payload (a copy of it). */
export function frameMessage(payload: Uint8Array, flag = 0): Uint8Array {
  const len = payload.length;
  const out = new Uint8Array(PREFIX_BYTES + len);
  writePrefix(out, 0, flag, len);
  out.set(payload, PREFIX_BYTES);
  return out;
}

/**
 * For the fault path only: scans `chunk` from `from` up to the end of the first message that
 * completes there and returns the offset just past it, or chunk.length when none completes.
 * Lets a caller cut a chunk at message boundaries (with views, no copies) to act between
 * messages. Uses the same state as scanChunk (no limit: limits are checked separately).
 */
export function nextBoundary(s: FrameScanner, chunk: Uint8Array, from: number): number {
  const n = chunk.length;
  let i = from;
  while (i < n) {
    if (s.headerLeft === 0) {
      const avail = n - i;
      if (avail < s.bodyLeft) {
        s.bodyLeft -= avail;
        s.bytes += avail;
        return n;
      }
      i += s.bodyLeft;
      s.bytes += s.bodyLeft;
      s.bodyLeft = 0;
      s.headerLeft = PREFIX_BYTES;
      return i;
    }
    const b = chunk[i++] as number;
    s.bytes++;
    if (s.headerLeft === PREFIX_BYTES) {
      s.flag = b;
      s.length = 0;
    } else {
      s.length = s.length * 256 + b;
    }
    if (--s.headerLeft === 0) {
      s.messages++;
      s.bodyLeft = s.length;
      if (s.length === 0) {
        s.headerLeft = PREFIX_BYTES;
        return i;
      }
    }
  }
  return n;
}

/** Messages fully seen by a scanner (a message whose prefix is in but whose body is not yet, excluded). */
export function completedMessages(s: FrameScanner): number {
  return s.headerLeft === PREFIX_BYTES ? s.messages : s.headerLeft === 0 ? s.messages - 1 : s.messages;
}
