// An HTTP/2 upstream that only listens: plain TCP, just enough of the protocol for a client to
// open streams (its SETTINGS, the ACKs), and a record of every stream frame the client sends
// with its flags. node:http2 servers hide what the tests here are about: whether END_STREAM
// rode on a DATA frame, and whether a reset came with or without one.
import net from "node:net";
import { FLAG_ACK, FRAME, FrameReader, encodeFrame, frameHeader, type SeenFrame } from "./h2-frames.js";

export { FLAG_END_STREAM, FRAME, type SeenFrame } from "./h2-frames.js";

export interface FrameRecorder {
  readonly address: string;
  /** stream frames (stream id > 0) in arrival order, over all connections */
  readonly frames: SeenFrame[];
  close(): Promise<void>;
}

export async function startFrameRecorder(): Promise<FrameRecorder> {
  const frames: SeenFrame[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((sock) => {
    sockets.add(sock);
    sock.on("close", () => sockets.delete(sock));
    sock.on("error", () => {});
    sock.write(frameHeader(0, FRAME.SETTINGS, 0, 0)); // our (empty) SETTINGS
    const reader = new FrameReader(true);
    sock.on("data", (d: Buffer) => {
      for (const f of reader.push(d)) {
        if (f.type === FRAME.SETTINGS && (f.flags & FLAG_ACK) === 0) sock.write(frameHeader(0, FRAME.SETTINGS, FLAG_ACK, 0));
        if (f.type === FRAME.PING && (f.flags & FLAG_ACK) === 0) sock.write(encodeFrame(FRAME.PING, FLAG_ACK, 0, f.payload));
        if (f.streamId > 0) frames.push(f);
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
      return (f.flags & 0x1) !== 0 && (f.type === FRAME.DATA || f.type === FRAME.HEADERS) ? `${name}(END_STREAM)` : name;
    })
    .join(" ");
}
