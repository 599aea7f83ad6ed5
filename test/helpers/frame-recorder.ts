// An HTTP/2 upstream that only listens: plain TCP, just enough of the protocol for a client to
// open streams (its SETTINGS, the ACKs), and a record of every stream frame the client sends
// with its flags. node:http2 servers hide what the tests here are about: whether END_STREAM
// rode on a DATA frame, and whether a reset came with or without one.
import net from "node:net";

export const FRAME = { DATA: 0, HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, PING: 6 } as const;
export const FLAG_END_STREAM = 0x1;
const FLAG_ACK = 0x1;
const PREFACE_LENGTH = 24;

export interface SeenFrame {
  readonly type: number;
  readonly flags: number;
  readonly streamId: number;
  readonly length: number;
  /** RST_STREAM's error code */
  readonly errorCode?: number;
}

export interface FrameRecorder {
  readonly address: string;
  /** stream frames (stream id > 0) in arrival order, over all connections */
  readonly frames: SeenFrame[];
  close(): Promise<void>;
}

function frameHeader(length: number, type: number, flags: number, streamId: number): Buffer {
  const b = Buffer.alloc(9);
  b.writeUIntBE(length, 0, 3);
  b[3] = type;
  b[4] = flags;
  b.writeUInt32BE(streamId & 0x7fffffff, 5);
  return b;
}

export async function startFrameRecorder(): Promise<FrameRecorder> {
  const frames: SeenFrame[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((sock) => {
    sockets.add(sock);
    sock.on("close", () => sockets.delete(sock));
    sock.on("error", () => {});
    sock.write(frameHeader(0, FRAME.SETTINGS, 0, 0)); // our (empty) SETTINGS
    let buf = Buffer.alloc(0);
    let prefaceSeen = false;
    sock.on("data", (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (!prefaceSeen) {
        if (buf.length < PREFACE_LENGTH) return;
        buf = buf.subarray(PREFACE_LENGTH);
        prefaceSeen = true;
      }
      while (buf.length >= 9) {
        const length = buf.readUIntBE(0, 3);
        if (buf.length < 9 + length) break;
        const type = buf[3]!;
        const flags = buf[4]!;
        const streamId = buf.readUInt32BE(5) & 0x7fffffff;
        const payload = buf.subarray(9, 9 + length);
        if (type === FRAME.SETTINGS && (flags & FLAG_ACK) === 0) sock.write(frameHeader(0, FRAME.SETTINGS, FLAG_ACK, 0));
        if (type === FRAME.PING && (flags & FLAG_ACK) === 0) sock.write(Buffer.concat([frameHeader(8, FRAME.PING, FLAG_ACK, 0), payload]));
        if (streamId > 0) frames.push({ type, flags, streamId, length, ...(type === FRAME.RST_STREAM ? { errorCode: payload.readUInt32BE(0) } : {}) });
        buf = buf.subarray(9 + length);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    frames,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** "HEADERS DATA(END_STREAM) RST_STREAM(8)": one stream's frames, for readable assertions. */
export function describeFrames(frames: readonly SeenFrame[]): string {
  return frames
    .map((f) => {
      if (f.type === FRAME.RST_STREAM) return `RST_STREAM(${f.errorCode})`;
      const name = f.type === FRAME.DATA ? "DATA" : f.type === FRAME.HEADERS ? "HEADERS" : `type${f.type}`;
      return (f.flags & FLAG_END_STREAM) !== 0 && (f.type === FRAME.DATA || f.type === FRAME.HEADERS) ? `${name}(END_STREAM)` : name;
    })
    .join(" ");
}
