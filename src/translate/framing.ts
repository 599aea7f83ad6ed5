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

/** Writes an uncompressed message's 5-byte prefix at the start of `out` (the message follows it). */
export function writeMessagePrefix(out: Uint8Array, len: number, flag = 0): void {
  out[0] = flag & 0xff;
  out[1] = (len >>> 24) & 0xff;
  out[2] = (len >>> 16) & 0xff;
  out[3] = (len >>> 8) & 0xff;
  out[4] = len & 0xff;
}

/** Builds one framed message: 5-byte prefix + payload. Test and demo helper; allocates. */
export function frameMessage(payload: Uint8Array, flag = 0): Uint8Array {
  const len = payload.length;
  const out = new Uint8Array(PREFIX_BYTES + len);
  writeMessagePrefix(out, len, flag);
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
