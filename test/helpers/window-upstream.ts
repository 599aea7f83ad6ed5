// A raw-frame gRPC upstream that sends DATA exactly as far as its client's flow-control windows
// allow (RFC 9113 §6.9): each stream's window starts at the client's SETTINGS_INITIAL_WINDOW_SIZE,
// moves by the delta of a later one (§6.9.2) and by each WINDOW_UPDATE. It records, per stream,
// the most credit the client ever gave it (the bytes it could have had in flight at once) and what
// it sent: the peer's view of a proxy's upstream window, which node:http2 servers do not show.
// Every stream is answered with `responseBytes` of 64 KiB gRPC messages, then grpc-status 0.
// PINGs and SETTINGS are ACKed at once (SETTINGS before any DATA sent under them, as nghttp2,
// Go's and grpc-go's servers do). Over h2c, or TLS with ALPN h2 (`tls`: its certificate and key).
// `holdUntilGrown`: a connection sends no stream more than that many bytes before its client
// raises SETTINGS_INITIAL_WINDOW_SIZE above the one it opened with (a sender whose client grows
// windows only on a timer's tick waits for the tick).
// Test-only; imports nothing from src.
import net from "node:net";
import tls from "node:tls";
import { FLAG_ACK, FLAG_END_HEADERS, FLAG_END_STREAM, FRAME, FrameReader, SETTING, encodeFrame, encodeHeaderBlock, frameHeader } from "./h2-frames.js";

export interface WindowStream {
  readonly id: number;
  /** the stream's window when it opened (the client's initial window then) */
  readonly openedAt: number;
  /** the most the window ever allowed in flight at once */
  maxCredit: number;
  /** DATA bytes sent */
  sent: number;
  /** the sum of the client's WINDOW_UPDATE increments for it */
  updated: number;
  /** DATA bytes sent when its credit first went past the window it opened with (-1: never) */
  sentWhenGrown: number;
  done: boolean;
}

export interface WindowUpstream {
  readonly address: string;
  /** streams in the order they opened, over all connections */
  readonly streams: WindowStream[];
  /** every SETTINGS_INITIAL_WINDOW_SIZE the clients sent, in order */
  readonly initialWindows: number[];
  /** PINGs the clients sent (not ACKs) */
  pings: number;
  close(): Promise<void>;
}

const MESSAGE = 64 * 1024;
const MAX_FRAME = 16 * 1024;

export async function startWindowUpstream(responseBytes: number, opts: { tls?: { cert: Buffer; key: Buffer }; holdUntilGrown?: number } = {}): Promise<WindowUpstream> {
  const streams: WindowStream[] = [];
  const initialWindows: number[] = [];
  const hold = opts.holdUntilGrown ?? Infinity;
  const sockets = new Set<net.Socket>();
  // one 64 KiB message (5-byte prefix + payload), sliced into DATA frames cyclically
  const msg = Buffer.alloc(MESSAGE, 0x61);
  msg[0] = 0;
  msg.writeUInt32BE(MESSAGE - 5, 1);
  const serve = (sock: net.Socket): void => {
    sockets.add(sock);
    sock.on("close", () => sockets.delete(sock));
    sock.on("error", () => {});
    sock.write(frameHeader(0, FRAME.SETTINGS, 0, 0));
    const reader = new FrameReader(true);
    let initial = 65_535;
    let conn = 65_535;
    let grown = false;
    let first = -1;
    const open = new Map<number, WindowStream & { win: number }>();
    const pump = (): void => {
      for (const s of open.values()) {
        const limit = grown ? responseBytes : Math.min(responseBytes, hold);
        while (s.sent < limit && s.win > 0 && conn > 0) {
          const at = s.sent % MESSAGE;
          const n = Math.min(MAX_FRAME, MESSAGE - at, limit - s.sent, s.win, conn);
          sock.write(encodeFrame(FRAME.DATA, 0, s.id, msg.subarray(at, at + n)));
          s.sent += n;
          s.win -= n;
          conn -= n;
        }
        if (s.sent === responseBytes && !s.done) {
          s.done = true;
          sock.write(encodeFrame(FRAME.HEADERS, FLAG_END_HEADERS | FLAG_END_STREAM, s.id, encodeHeaderBlock([["grpc-status", "0"]])));
          open.delete(s.id);
        }
      }
    };
    const credit = (s: WindowStream & { win: number }): void => {
      if (s.win > s.maxCredit) s.maxCredit = s.win;
      if (s.sentWhenGrown < 0 && s.win > s.openedAt) s.sentWhenGrown = s.sent;
    };
    sock.on("data", (d: Buffer) => {
      for (const f of reader.push(d)) {
        if (f.type === FRAME.SETTINGS && (f.flags & FLAG_ACK) === 0) {
          const p = f.payload ?? Buffer.alloc(0);
          for (let o = 0; o + 6 <= p.length; o += 6) {
            if (p.readUInt16BE(o) !== SETTING.INITIAL_WINDOW_SIZE) continue;
            const v = p.readUInt32BE(o + 2);
            initialWindows.push(v);
            if (first < 0) first = v;
            else if (v > first) grown = true;
            for (const s of open.values()) {
              s.win += v - initial;
              credit(s);
            }
            initial = v;
          }
          sock.write(frameHeader(0, FRAME.SETTINGS, FLAG_ACK, 0));
        } else if (f.type === FRAME.PING && (f.flags & FLAG_ACK) === 0) {
          up.pings++;
          sock.write(encodeFrame(FRAME.PING, FLAG_ACK, 0, f.payload));
        }
        else if (f.type === FRAME.HEADERS && !open.has(f.streamId)) {
          const s = { id: f.streamId, openedAt: initial, maxCredit: initial, sent: 0, updated: 0, sentWhenGrown: -1, done: false, win: initial };
          streams.push(s);
          open.set(s.id, s);
          sock.write(encodeFrame(FRAME.HEADERS, FLAG_END_HEADERS, s.id, encodeHeaderBlock([[":status", "200"], ["content-type", "application/grpc"]])));
        } else if (f.type === FRAME.WINDOW_UPDATE && f.payload !== undefined) {
          const inc = f.payload.readUInt32BE(0) & 0x7fffffff;
          if (f.streamId === 0) conn += inc;
          else {
            const s = open.get(f.streamId);
            if (s !== undefined) {
              s.win += inc;
              s.updated += inc;
              credit(s);
            }
          }
        } else if (f.type === FRAME.RST_STREAM) {
          const s = open.get(f.streamId);
          if (s !== undefined) s.done = true;
          open.delete(f.streamId);
        }
      }
      pump();
    });
  };
  const server = opts.tls === undefined ? net.createServer(serve) : tls.createServer({ ...opts.tls, ALPNProtocols: ["h2"] }, serve);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  const up: WindowUpstream = {
    address: `127.0.0.1:${port}`,
    streams,
    initialWindows,
    pings: 0,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
  return up;
}
