// The edge issue's attacks (issue 12), as bounded functions over real sockets on loopback, shared
// by the per-attack tests (test/behaviour/attack-*.test.ts) and the battery that fires them all at
// one real dojang process under a memory budget (test/process/attack-battery.test.ts). Test-only;
// imports nothing from src.
import { readFileSync } from "node:fs";
import type http2 from "node:http2";
import net from "node:net";
import { FRAME, PREFACE, encodeFrame, encodeHeaderBlock, FLAG_END_HEADERS, settingsFrame } from "./h2-frames.js";
import { grpcRequestFields, type RawH2Client } from "./raw-h2-client.js";
import { configYaml, freePort, sleep, spawnDojang, waitReady, type DojangProcess } from "./process.js";

/** A process's VmRSS and RssAnon (heap, buffers: what a container is charged for beyond shared code), MiB. */
export function memMiB(pid: number): { rss: number; anon: number } {
  const st = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = (k: string): number => Number(new RegExp(`${k}:\\s+(\\d+) kB`).exec(st)?.[1] ?? NaN);
  return { rss: kib("VmRSS") / 1024, anon: kib("RssAnon") / 1024 };
}

/** A process's VmRSS, MiB. */
export function rssMiB(pid: number): number {
  return memMiB(pid).rss;
}

export interface Target {
  readonly p: DojangProcess;
  /** the listener, host:port */
  readonly address: string;
  /** the admin listener, host:port */
  readonly admin: string;
}

/**
 * A real dojang process to attack (dist/cli.js, or ATTACK_CLI: another build's, to measure the
 * figure before), on the process helpers' config for `upstream`; `edit` changes its YAML (a
 * listener or cluster key, a top-level key). Resolves once /ready answers.
 */
export async function startTarget(dir: { write(name: string, text: string): string }, upstream: string, edit: (yaml: string) => string = (y) => y, extraTop?: string): Promise<Target> {
  const port = await freePort();
  const admin = await freePort();
  const yaml = configYaml({ listenPort: port, adminPort: admin, upstream, logLevel: "warn", ...(extraTop === undefined ? {} : { extraTop }) });
  const cfg = dir.write(`target-${port}.yaml`, edit(yaml));
  const p = spawnDojang(["--config", cfg], undefined, process.env["ATTACK_CLI"]);
  await waitReady(p, `127.0.0.1:${admin}`);
  return { p, address: `127.0.0.1:${port}`, admin: `127.0.0.1:${admin}` };
}

export const CANCEL = 0x8;

/** n copies of one frame in one buffer (nghttp2 takes them in one read). */
export const manyFrames = (frame: Buffer, n: number): Buffer => Buffer.concat(Array.from({ length: n }, () => frame));

/**
 * Rapid reset: HEADERS then RST_STREAM(code) on `n` streams, as fast as the socket takes them;
 * stops once closed (and, with `untilGoaway`, once a GOAWAY arrived: how many it sent before says
 * when the cut came). Resolves with the number of streams sent.
 */
export async function resetFlood(c: RawH2Client, n: number, code = CANCEL, untilGoaway = false): Promise<number> {
  let sent = 0;
  for (let i = 0; i < n && !c.closed && !(untilGoaway && c.goaway() !== undefined); i++) {
    const id = 1 + 2 * i;
    c.headers(id, grpcRequestFields("/test.Stream/Reset"));
    c.rst(id, code);
    sent++;
    if (i % 50 === 49) await sleep(1); // let dojang's replies in (GOAWAY) between bursts
  }
  return sent;
}

/**
 * Rapid reset written at once: HEADERS then RST_STREAM(code) on `n` streams (ids from `first`), in
 * one write, so that they arrive together and the server's reads are as large as the socket
 * allows (resetFlood lets the server's replies in between bursts of 50). What an attacker
 * that does not wait for the GOAWAY sends.
 */
export function resetBurst(c: RawH2Client, n: number, code = CANCEL, first = 1): void {
  const block = encodeHeaderBlock(grpcRequestFields("/test.Stream/Reset"));
  const rst = Buffer.alloc(4);
  rst.writeUInt32BE(code);
  const frames: Buffer[] = [];
  for (let i = 0; i < n; i++) {
    const id = first + 2 * i;
    frames.push(encodeFrame(FRAME.HEADERS, FLAG_END_HEADERS, id, block), encodeFrame(FRAME.RST_STREAM, 0, id, rst));
  }
  c.write(Buffer.concat(frames));
}

/** The floods nghttp2 stops (20,000 frames each, one write). */
export const NGHTTP2_FLOODS: readonly { readonly name: string; readonly bytes: () => Buffer }[] = [
  { name: "PING", bytes: () => manyFrames(encodeFrame(FRAME.PING, 0, 0, Buffer.alloc(8)), 20_000) },
  { name: "SETTINGS", bytes: () => manyFrames(settingsFrame([]), 20_000) },
  {
    name: "empty DATA",
    bytes: () => Buffer.concat([encodeFrame(FRAME.HEADERS, FLAG_END_HEADERS, 1, encodeHeaderBlock(grpcRequestFields("/test.Stream/Flood"))), manyFrames(encodeFrame(FRAME.DATA, 0, 1), 20_000)]),
  },
  {
    name: "CONTINUATION without end",
    bytes: () => Buffer.concat([encodeFrame(FRAME.HEADERS, 0, 1, encodeHeaderBlock(grpcRequestFields("/test.Stream/Flood"))), manyFrames(encodeFrame(FRAME.CONTINUATION, 0, 1, Buffer.from([0x40, 0x01, 0x61, 0x01, 0x62])), 20_000)]),
  },
];

/** A WINDOW_UPDATE frame. */
export function windowUpdate(streamId: number, increment: number): Buffer {
  const p = Buffer.alloc(4);
  p.writeUInt32BE(increment);
  return encodeFrame(FRAME.WINDOW_UPDATE, 0, streamId, p);
}

/**
 * Zero-window stall: opens `n` server-streaming calls to `path` (the upstream floods them) on a
 * connection whose client window is 0 (connect it with SETTINGS_INITIAL_WINDOW_SIZE 0), request
 * ended. Returns the stream ids.
 */
export function openStalledStreams(atk: RawH2Client, n: number, path = "/test.Stream/Flood", first = 1): number[] {
  const ids: number[] = [];
  for (let i = 0; i < n; i++) {
    const id = first + 2 * i;
    ids.push(id);
    atk.headers(id, grpcRequestFields(path));
    atk.data(id, Buffer.from([0, 0, 0, 0, 0]), true);
  }
  return ids;
}

/** one whole gRPC message of 64 KiB (5-byte prefix + payload) */
const CHUNK = Buffer.alloc(64 * 1024, 7);
CHUNK[0] = 0;
CHUNK.writeUInt32BE(CHUNK.length - 5, 1);

/**
 * An upstream handler that streams 64 KiB messages as long as its flow control lets it (what a
 * zero-window stall makes dojang hold); `onSent` counts the bytes handed to dojang.
 */
export function streamFlood(stream: http2.ServerHttp2Stream, onSent: (bytes: number) => void = () => {}): void {
  stream.on("error", () => {});
  stream.respond({ ":status": 200, "content-type": "application/grpc" });
  const pump = (): void => {
    while (!stream.destroyed && !stream.closed) {
      onSent(CHUNK.length);
      if (!stream.write(CHUNK)) return void stream.once("drain", pump);
    }
  };
  pump();
}

export interface IdleConnection {
  readonly sock: net.Socket;
  closedAt(): number | undefined;
}

/**
 * Slowloris: a TCP connection to `address` that, with `preface`, sends the HTTP/2 preface and an
 * empty SETTINGS, then nothing. Resolves once connected.
 */
export function idleConnection(address: string, preface: boolean): Promise<IdleConnection> {
  const [host, port] = address.split(":") as [string, string];
  return new Promise((resolve, reject) => {
    let closedAt: number | undefined;
    const sock = net.connect(Number(port), host, () => {
      if (preface) sock.write(Buffer.concat([PREFACE, settingsFrame([])]));
      resolve({ sock, closedAt: () => closedAt });
    });
    sock.on("data", () => {}); // the server's SETTINGS, GOAWAY
    sock.on("error", () => {});
    sock.on("close", () => (closedAt ??= performance.now()));
    sock.once("error", reject);
  });
}

/** Connection churn: `n` connections opened (half with the preface) and closed again, `batch` at a time. */
export async function churn(address: string, n: number, batch = 200): Promise<void> {
  for (let done = 0; done < n; done += batch) {
    const conns = await Promise.all(Array.from({ length: Math.min(batch, n - done) }, (_, i) => idleConnection(address, i % 2 === 0)));
    await sleep(5);
    for (const c of conns) c.sock.destroy();
  }
}
