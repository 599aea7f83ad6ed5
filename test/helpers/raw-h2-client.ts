// A client that speaks just enough HTTP/2 over a plain TCP socket to send what node:http2's
// client refuses to: header names and values HTTP/2 forbids, a wrong content-length, more
// streams than the peer allows, a message cut short. It ACKs the peer's SETTINGS and PINGs,
// tells the peer SETTINGS_HEADER_TABLE_SIZE 0 (so the answers can be decoded without a
// dynamic table) and records every frame it receives. Test-only; imports nothing from src.
import net from "node:net";
import {
  FLAG_ACK,
  FLAG_END_HEADERS,
  FLAG_END_STREAM,
  FRAME,
  FrameReader,
  PREFACE,
  SETTING,
  decodeHeaderBlock,
  encodeFrame,
  encodeHeaderBlock,
  settingsFrame,
  type SeenFrame,
} from "./h2-frames.js";

export interface RawH2Client {
  /** every frame received, in order */
  readonly frames: SeenFrame[];
  /** the socket has closed */
  readonly closed: boolean;
  /** the peer's SETTINGS ACK for ours has arrived */
  readonly settingsAcked: boolean;
  /** the peer's first SETTINGS frame, identifier → value */
  readonly peerSettings: ReadonlyMap<number, number> | undefined;
  /** HEADERS (END_HEADERS set) on `streamId`; `endStream` sets END_STREAM */
  headers(streamId: number, fields: readonly (readonly [string, string])[], endStream?: boolean): void;
  data(streamId: number, payload: Buffer, endStream?: boolean): void;
  rst(streamId: number, code: number): void;
  /** raw bytes (several frames in one write) */
  write(b: Buffer): void;
  /**
   * The frames `send` writes leave in one write (the socket corked meanwhile): the peer reads them
   * together, in order, whatever the machine's load does to this process between two of them.
   */
  together(send: () => void): void;
  /** the frames received on one stream */
  on(streamId: number): SeenFrame[];
  /** the stream has ended from the peer's side (END_STREAM or RST_STREAM) */
  ended(streamId: number): boolean;
  /** header blocks received on one stream, decoded (see decodeHeaderBlock) */
  headerBlocks(streamId: number): [string, string][][];
  /** the first GOAWAY received, if any */
  goaway(): SeenFrame | undefined;
  /** ACKs the peer's SETTINGS now (with `holdSettingsAck`, nothing ACKs them before) */
  ackSettings(): void;
  close(): void;
}

/** A gRPC request's header fields, in the order a client sends them. */
export function grpcRequestFields(path: string, extra: readonly (readonly [string, string])[] = []): [string, string][] {
  return [
    [":method", "POST"],
    [":scheme", "http"],
    [":path", path],
    [":authority", "localhost"],
    ["content-type", "application/grpc"],
    ["te", "trailers"],
    ...extra.map(([n, v]) => [n, v] as [string, string]),
  ];
}

export interface RawH2Options {
  /** more SETTINGS entries to send */
  readonly settings?: readonly (readonly [number, number])[];
  /** do not ACK the peer's SETTINGS until ackSettings() (the peer's limits are then not yet in force for it) */
  readonly holdSettingsAck?: boolean;
}

/** Connects to "host:port", sends the preface and SETTINGS, resolves once the peer's SETTINGS are ACKed. */
export async function connectRawH2(address: string, opts: RawH2Options = {}): Promise<RawH2Client> {
  const i = address.lastIndexOf(":");
  const sock = net.connect(Number(address.slice(i + 1)), address.slice(0, i).replace(/^\[|\]$/g, ""));
  const frames: SeenFrame[] = [];
  const reader = new FrameReader(false);
  let closed = false;
  let acked = false;
  let peerSettingsSeen = false;
  let peerSettings: Map<number, number> | undefined;
  const hold = opts.holdSettingsAck === true;
  sock.on("error", () => {});
  sock.on("close", () => (closed = true));
  sock.on("data", (d: Buffer) => {
    for (const f of reader.push(d)) {
      frames.push(f);
      if (f.type === FRAME.SETTINGS) {
        if ((f.flags & FLAG_ACK) === 0 && peerSettings === undefined && f.payload !== undefined) {
          peerSettings = new Map();
          for (let o = 0; o + 6 <= f.payload.length; o += 6) peerSettings.set(f.payload.readUInt16BE(o), f.payload.readUInt32BE(o + 2));
        }
        if ((f.flags & FLAG_ACK) !== 0) acked = true;
        else if (hold) peerSettingsSeen = true;
        else sock.write(encodeFrame(FRAME.SETTINGS, FLAG_ACK, 0));
      }
      if (f.type === FRAME.PING && (f.flags & FLAG_ACK) === 0) sock.write(encodeFrame(FRAME.PING, FLAG_ACK, 0, f.payload));
    }
  });
  await new Promise<void>((resolve, reject) => {
    sock.once("connect", resolve);
    sock.once("error", reject);
  });
  sock.write(Buffer.concat([PREFACE, settingsFrame([[SETTING.HEADER_TABLE_SIZE, 0], [SETTING.ENABLE_PUSH, 0], ...(opts.settings ?? [])])]));
  const end = performance.now() + 5000;
  while (!acked || (hold && !peerSettingsSeen)) {
    if (performance.now() > end || closed) throw new Error("raw h2 client: no SETTINGS ACK from the peer");
    await new Promise((r) => setTimeout(r, 2));
  }
  const on = (id: number): SeenFrame[] => frames.filter((f) => f.streamId === id);
  return {
    frames,
    get closed() {
      return closed;
    },
    get settingsAcked() {
      return acked;
    },
    get peerSettings() {
      return peerSettings;
    },
    headers: (id, fields, endStream = false) =>
      sock.write(encodeFrame(FRAME.HEADERS, FLAG_END_HEADERS | (endStream ? FLAG_END_STREAM : 0), id, encodeHeaderBlock(fields))),
    data: (id, payload, endStream = false) => sock.write(encodeFrame(FRAME.DATA, endStream ? FLAG_END_STREAM : 0, id, payload)),
    rst: (id, code) => {
      const p = Buffer.alloc(4);
      p.writeUInt32BE(code);
      sock.write(encodeFrame(FRAME.RST_STREAM, 0, id, p));
    },
    write: (b) => sock.write(b),
    together: (send) => {
      sock.cork();
      try {
        send();
      } finally {
        sock.uncork();
      }
    },
    on,
    ended: (id) => on(id).some((f) => f.type === FRAME.RST_STREAM || ((f.flags & FLAG_END_STREAM) !== 0 && (f.type === FRAME.DATA || f.type === FRAME.HEADERS))),
    headerBlocks: (id) => on(id).filter((f) => f.type === FRAME.HEADERS).map((f) => decodeHeaderBlock(f.payload!)),
    goaway: () => frames.find((f) => f.type === FRAME.GOAWAY),
    ackSettings: () => sock.write(encodeFrame(FRAME.SETTINGS, FLAG_ACK, 0)),
    close: () => sock.destroy(),
  };
}

/** The value of the first field named `name` in a decoded header block. */
export function field(block: readonly (readonly [string, string])[] | undefined, name: string): string | undefined {
  return block?.find(([n]) => n === name)?.[1];
}
