// Issue 33 item 0, "a long stream fast and safe at once": the upstream stream window dojang
// advertises grows for a stream whose client reads (it doubles each time a window's worth was read
// with no stream paused) and never for one whose client does not, seen from the upstream's side
// of the wire: a raw-frame upstream that sends exactly as far as dojang's windows let it and
// records the most credit each stream ever had (test/helpers/window-upstream.ts). The cluster's
// initialWindowSize stays the default (64 KiB). Clients: node:http2 (reads as fast as it can) and
// a raw-frame client at window 0 (never reads); dojang in process, all on loopback; h2c, and TLS
// with two calls at once on the one upstream session.
import http2 from "node:http2";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { DojangHandle } from "../../src/index.js";
import { startProxy } from "../helpers/peers.js";
import { CertDir } from "../helpers/certs.js";
import { connectRawH2, grpcRequestFields, type RawH2Client } from "../helpers/raw-h2-client.js";
import { SETTING } from "../helpers/h2-frames.js";
import { startWindowUpstream, type WindowStream, type WindowUpstream } from "../helpers/window-upstream.js";

/** what the upstream answers each call with: 16 MiB in 64 KiB messages */
const RESPONSE_BYTES = 16 * 1024 * 1024;
/** HTTP/2's default stream window, the cluster's initialWindowSize default */
const DEFAULT_WINDOW = 65_536;
/** the credit a read stream must reach (four default windows: the estimator doubles it at least twice) */
const GROWN = 262_144;
const PATH = "/test.Big/Stream";

let up: WindowUpstream;
let proxy: DojangHandle;
const raws: RawH2Client[] = [];
const sessions: http2.ClientHttp2Session[] = [];

beforeAll(async () => {
  up = await startWindowUpstream(RESPONSE_BYTES);
});
afterEach(async () => {
  for (const r of raws.splice(0)) r.close();
  for (const s of sessions.splice(0)) s.destroy();
  await proxy?.close(0);
  up.streams.length = 0;
  up.initialWindows.length = 0;
});
afterAll(async () => {
  await up.close();
});

/** One server-streaming call read as fast as node reads (`window`: the client's stream window). */
function openCall(address: string, window = 16 * 1024 * 1024): { stream: http2.ClientHttp2Stream; done: Promise<{ bytes: number; status: string | undefined }> } {
  const s = http2.connect(`http://${address}`, { settings: { initialWindowSize: window } });
  sessions.push(s);
  s.on("error", () => {});
  s.once("connect", () => s.setLocalWindowSize(64 * 1024 * 1024));
  const st = s.request({ ":method": "POST", ":path": PATH, "content-type": "application/grpc", te: "trailers" });
  st.end(Buffer.from([0, 0, 0, 0, 0]));
  let bytes = 0;
  let status: string | undefined;
  st.on("data", (c: Buffer) => (bytes += c.length));
  st.on("trailers", (t) => (status = t["grpc-status"] as string | undefined));
  const done = new Promise<{ bytes: number; status: string | undefined }>((resolve, reject) => {
    st.on("error", reject);
    st.on("close", () => resolve({ bytes, status }));
  });
  return { stream: st, done };
}

function readCall(address: string): Promise<{ bytes: number; status: string | undefined }> {
  return openCall(address).done;
}

/** One call from a client whose window is 0 (it never reads). */
async function unreadCall(address: string): Promise<RawH2Client> {
  const r = await connectRawH2(address, { settings: [[SETTING.INITIAL_WINDOW_SIZE, 0]] });
  raws.push(r);
  r.headers(1, grpcRequestFields(PATH));
  r.data(1, Buffer.from([0, 0, 0, 0, 0]), true);
  return r;
}

async function until(what: string, ok: () => boolean, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const describeStream = (s: WindowStream | undefined): string => (s === undefined ? "none" : `stream ${s.id}: opened at ${s.openedAt}, max credit ${s.maxCredit}, sent ${s.sent}`);

describe("the upstream stream window: grown for a client that reads, never for one that does not", () => {
  it("a stream its client reads: the upstream is given more than 64 KiB at once, and the window goes back when the stream ends", { timeout: 60_000 }, async () => {
    proxy = await startProxy(up.address);
    const r = await readCall(proxy.address);
    const s = up.streams[0];
    console.log(`read stream: ${describeStream(s)}; SETTINGS_INITIAL_WINDOW_SIZE seen ${up.initialWindows.join(", ")}`);
    expect(r).toEqual({ bytes: RESPONSE_BYTES, status: "0" });
    expect(s!.openedAt).toBe(DEFAULT_WINDOW);
    expect(s!.maxCredit).toBeGreaterThanOrEqual(GROWN);
    // the last stream gone, the session's window is the cluster's again
    await until("the window back at 64 KiB", () => up.initialWindows.at(-1) === DEFAULT_WINDOW, 5000);
  });

  it("a long stream grows from its start: the upstream is given more than 64 KiB before it has sent 1 MiB", { timeout: 60_000 }, async () => {
    // (issue 33 item 0: a 64 MiB call read at ~800 MiB/s lasts ~80 ms; a window that waits for a
    // timer's tick or two before it first grows spends a good part of the call at 64 KiB)
    proxy = await startProxy(up.address);
    const r = await readCall(proxy.address);
    const s = up.streams[0];
    console.log(`read stream: ${describeStream(s)}, first given more than it opened with after ${s?.sentWhenGrown} bytes; SETTINGS_INITIAL_WINDOW_SIZE seen ${up.initialWindows.join(", ")}`);
    expect(r).toEqual({ bytes: RESPONSE_BYTES, status: "0" });
    expect(s!.openedAt).toBe(DEFAULT_WINDOW);
    expect(s!.sentWhenGrown).toBeGreaterThan(0);
    expect(s!.sentWhenGrown).toBeLessThanOrEqual(1024 * 1024);
  });

  it("the window grows once the stream's first window came in: an upstream that sends 80 KiB and then waits for more credit than it opened with is given it, and the call completes", { timeout: 60_000 }, async () => {
    const held = await startWindowUpstream(RESPONSE_BYTES, { holdUntilGrown: 80 * 1024 });
    try {
      proxy = await startProxy(held.address);
      const t0 = performance.now();
      const call = openCall(proxy.address);
      await until("the held stream given more than it opened with", () => (held.streams[0]?.sentWhenGrown ?? -1) >= 0, 10_000);
      const ms = performance.now() - t0;
      const r = await Promise.race([call.done, new Promise<string>((res) => setTimeout(() => res("the upstream still waits"), 10_000))]);
      const s = held.streams[0];
      console.log(`held upstream: ${describeStream(s)}, grown after ${s?.sentWhenGrown} bytes and ${ms.toFixed(1)} ms; SETTINGS_INITIAL_WINDOW_SIZE seen ${held.initialWindows.join(", ")}`);
      call.stream.close(http2.constants.NGHTTP2_CANCEL);
      expect(r).toEqual({ bytes: RESPONSE_BYTES, status: "0" });
      expect(s!.openedAt).toBe(DEFAULT_WINDOW);
      // grown while the upstream held at 80 KiB: on the first window read, not after more came
      expect(s!.sentWhenGrown).toBeLessThanOrEqual(80 * 1024);
      expect(s!.maxCredit).toBeGreaterThanOrEqual(GROWN);
    } finally {
      await held.close();
    }
  });

  it("a stream opened after the session's window grew starts at 64 KiB, and its client not reading holds it there", { timeout: 60_000 }, async () => {
    proxy = await startProxy(up.address);
    const reading = readCall(proxy.address);
    await until("the read stream's window grown", () => (up.streams[0]?.maxCredit ?? 0) >= GROWN);
    await unreadCall(proxy.address);
    await until("the unread stream opened upstream", () => up.streams.length === 2);
    const r = await reading;
    await new Promise((res) => setTimeout(res, 300));
    const [read, unread] = up.streams;
    console.log(`read ${describeStream(read)}; unread ${describeStream(unread)}; SETTINGS_INITIAL_WINDOW_SIZE seen ${up.initialWindows.join(", ")}`);
    expect(r).toEqual({ bytes: RESPONSE_BYTES, status: "0" });
    // one session: both calls rode the same upstream connection, the second after the growth
    expect(unread!.openedAt).toBe(DEFAULT_WINDOW);
    expect(unread!.maxCredit).toBe(DEFAULT_WINDOW);
    expect(unread!.sent).toBeLessThanOrEqual(DEFAULT_WINDOW);
  });

  it("a stream whose client stops reading after its window grew: the window goes back to 64 KiB while it is open, and the upstream sends no more", { timeout: 60_000 }, async () => {
    proxy = await startProxy(up.address);
    // the client's own stream window is 1 MiB: once it stops reading, dojang's writes to it stall soon
    const call = openCall(proxy.address, 1024 * 1024);
    call.done.catch(() => {});
    await until("the read stream's window grown", () => (up.streams[0]?.maxCredit ?? 0) >= GROWN);
    call.stream.pause();
    await until("the window lowered while the stream is open", () => up.initialWindows.at(-1) === DEFAULT_WINDOW, 5000);
    const s = up.streams[0]!;
    // what was in flight arrives; then nothing more is sent to the paused stream
    await new Promise((res) => setTimeout(res, 500));
    const sent = s.sent;
    await new Promise((res) => setTimeout(res, 500));
    console.log(`stopped reader: ${describeStream(s)}; SETTINGS_INITIAL_WINDOW_SIZE seen ${up.initialWindows.join(", ")}`);
    expect(s.done).toBe(false);
    expect(s.sent).toBe(sent);
    expect(s.sent).toBeLessThan(RESPONSE_BYTES);
    call.stream.close(http2.constants.NGHTTP2_CANCEL);
  });

  it("over TLS, two calls at once on one upstream session: both are given more than 64 KiB", { timeout: 60_000 }, async () => {
    const certs = new CertDir();
    const ca = certs.ca("window-ca");
    const leaf = certs.leaf(ca, "window-upstream", { cn: "backend.internal", dns: ["backend.internal"] });
    const tlsUp = await startWindowUpstream(RESPONSE_BYTES, { tls: { cert: leaf.cert, key: leaf.key } });
    try {
      proxy = await startProxy(tlsUp.address, { cluster: { tls: { caFile: ca.certFile, serverName: "backend.internal" } } });
      const [a, b] = await Promise.all([readCall(proxy.address), readCall(proxy.address)]);
      console.log(`TLS, two at once: ${tlsUp.streams.map(describeStream).join("; ")}; SETTINGS_INITIAL_WINDOW_SIZE seen ${tlsUp.initialWindows.join(", ")}`);
      expect(a).toEqual({ bytes: RESPONSE_BYTES, status: "0" });
      expect(b).toEqual({ bytes: RESPONSE_BYTES, status: "0" });
      expect(tlsUp.streams.map((s) => s.id)).toEqual([1, 3]);
      for (const s of tlsUp.streams) expect(s.maxCredit).toBeGreaterThanOrEqual(GROWN);
    } finally {
      await tlsUp.close();
      certs.remove();
    }
  });

  it("a stream whose client does not read keeps the whole session from growing: it is never given more than 64 KiB", { timeout: 60_000 }, async () => {
    proxy = await startProxy(up.address);
    await unreadCall(proxy.address);
    await until("the unread stream's window used", () => (up.streams[0]?.sent ?? 0) === DEFAULT_WINDOW);
    const r = await readCall(proxy.address);
    await new Promise((res) => setTimeout(res, 300));
    const [unread, read] = up.streams;
    console.log(`unread ${describeStream(unread)}; read ${describeStream(read)}; SETTINGS_INITIAL_WINDOW_SIZE seen ${up.initialWindows.join(", ") || "none after the first"}`);
    expect(r).toEqual({ bytes: RESPONSE_BYTES, status: "0" });
    expect(unread!.maxCredit).toBe(DEFAULT_WINDOW);
    expect(unread!.sent).toBe(DEFAULT_WINDOW);
  });
});
