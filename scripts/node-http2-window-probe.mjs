// Probe: what node:http2 lets a client do with its receive windows, seen from a raw-frame server
// that sends DATA exactly as far as the client's windows allow. What dojang's upstream session
// (src/proxy/upstream/session.ts, the adaptive stream window) relies on; the findings are in
// docs/concepts/node-http2.md and this script's output on Node 24 in
// docs/concepts/node24-window-probe.txt.
//
// Run: node scripts/node-http2-window-probe.mjs   (loopback only, ephemeral ports, bounded)
//
// W1  a stream read as it arrives: the WINDOW_UPDATEs node sends (sizes), at the 64 KiB default
// W2  a paused stream: what node takes into JS while paused, and the WINDOW_UPDATEs (none expected)
// W3  session.settings({ initialWindowSize }) raised while a paused stream is open: does the open
//     stream's window grow (per stream, or every stream of the session), and does node accept
//     DATA the server sends under the new window BEFORE it ACKs the SETTINGS
// W4  lowered again, then a new stream opened in the same turn: the order of SETTINGS and HEADERS
//     on the wire, and the new stream's window
// W5  the per-stream levers node exposes (methods on a client stream and a session)
// W6  how many SETTINGS node lets wait for their ACK (maxOutstandingSettings)
import http2 from "node:http2";
import net from "node:net";

const T = { DATA: 0, HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8 };
const PREFACE_LEN = 24;
const KiB = 1024;
const MiB = 1024 * KiB;

function frame(type, flags, id, payload = Buffer.alloc(0)) {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(id, 5);
  return Buffer.concat([h, payload]);
}
// ":status: 200" from HPACK's static table (index 8), indexed
const STATUS_200 = Buffer.from([0x88]);

/**
 * A raw server: answers every stream with HEADERS and then DATA, 16 KiB frames, as far as the
 * stream's and the connection's windows allow (never past them), `total` bytes per stream.
 * `eager`: a SETTINGS that raises INITIAL_WINDOW_SIZE is applied and used (DATA sent) before its ACK.
 */
async function rawServer({ total = 16 * MiB, eager = false, holdAck = false } = {}) {
  const log = [];
  let sockRef;
  const server = net.createServer((sock) => {
    sockRef = sock;
    sock.on("error", () => {});
    let buf = Buffer.alloc(0);
    let preface = PREFACE_LEN;
    let iw = 65535;
    let conn = 65535;
    const streams = new Map();
    sock.write(frame(T.SETTINGS, 0, 0));
    // the client's connection window (node's client raises it with setLocalWindowSize) is not the subject here
    const pump = () => {
      for (const [id, s] of streams) {
        while (s.left > 0 && s.win > 0 && conn > 0) {
          const n = Math.min(16 * KiB, s.left, s.win, conn);
          s.left -= n;
          s.win -= n;
          conn -= n;
          s.sent += n;
          sock.write(frame(T.DATA, s.left === 0 ? 1 : 0, id, Buffer.alloc(n, 1)));
        }
        s.maxCredit = Math.max(s.maxCredit, s.win);
      }
    };
    sock.on("data", (d) => {
      buf = Buffer.concat([buf, d]);
      if (preface > 0) {
        const k = Math.min(preface, buf.length);
        buf = buf.subarray(k);
        preface -= k;
      }
      while (buf.length >= 9) {
        const len = buf.readUIntBE(0, 3);
        if (buf.length < 9 + len) break;
        const type = buf[3];
        const flags = buf[4];
        const id = buf.readUInt32BE(5) & 0x7fffffff;
        const p = buf.subarray(9, 9 + len);
        buf = buf.subarray(9 + len);
        if (type === T.SETTINGS && (flags & 1) === 0) {
          let newIw;
          for (let o = 0; o + 6 <= p.length; o += 6) if (p.readUInt16BE(o) === 4) newIw = p.readUInt32BE(o + 2);
          log.push(`SETTINGS${newIw !== undefined ? `(initialWindowSize ${newIw})` : ""}`);
          if (newIw !== undefined) {
            const delta = newIw - iw;
            iw = newIw;
            for (const s of streams.values()) s.win += delta;
          }
          if (eager) pump();
          if (!holdAck) sock.write(frame(T.SETTINGS, 1, 0));
          pump();
        } else if (type === T.PING && (flags & 1) === 0) sock.write(frame(T.PING, 1, 0, p));
        else if (type === T.HEADERS) {
          log.push(`HEADERS(stream ${id}, its window ${iw})`);
          streams.set(id, { win: iw, left: total, sent: 0, updates: [], maxCredit: iw });
          sock.write(frame(T.HEADERS, 4, id, STATUS_200));
          pump();
        } else if (type === T.WINDOW_UPDATE) {
          const inc = p.readUInt32BE(0) & 0x7fffffff;
          if (id === 0) conn += inc;
          else if (streams.has(id)) {
            const s = streams.get(id);
            s.win += inc;
            s.updates.push(inc);
          }
          pump();
        } else if (type === T.RST_STREAM) streams.delete(id);
        else if (type === T.GOAWAY) log.push(`GOAWAY(${p.readUInt32BE(4)})`);
      }
    });
    server.streams = streams;
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { server, log, port: server.address().port, close: () => new Promise((r) => (sockRef?.destroy(), server.close(r))) };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const out = (s) => console.log(s);

async function connect(port, extra = {}) {
  const s = http2.connect(`http://127.0.0.1:${port}`, { settings: { initialWindowSize: 64 * KiB, enablePush: false }, ...extra });
  s.on("error", (e) => out(`  session error: ${e.code ?? e.message}`));
  await new Promise((r) => s.once("remoteSettings", r));
  s.setLocalWindowSize(64 * MiB);
  return s;
}

async function w1w2() {
  const srv = await rawServer({ total: 4 * MiB });
  const s = await connect(srv.port);
  const read = s.request({ ":path": "/read" });
  let got = 0;
  read.on("data", (c) => (got += c.length));
  await new Promise((r) => read.once("end", r));
  const st1 = srv.server.streams.get(1);
  const sizes = new Map();
  for (const u of st1?.updates ?? []) sizes.set(u, (sizes.get(u) ?? 0) + 1);
  out(`W1 read stream, window 64 KiB: got ${got} bytes; WINDOW_UPDATE sizes ${[...sizes].map(([k, v]) => `${k}×${v}`).join(", ")}; the server never had more than ${st1?.maxCredit} bytes of credit`);
  const paused = s.request({ ":path": "/paused" });
  paused.pause();
  let held = 0;
  paused.on("data", (c) => (held += c.length));
  await sleep(300);
  const st3 = srv.server.streams.get(3);
  out(`W2 paused stream, window 64 KiB: ${st3.sent} bytes sent by the server, ${paused.readableLength} bytes in the paused stream's readable buffer, WINDOW_UPDATEs ${st3.updates.length}`);
  paused.close(http2.constants.NGHTTP2_CANCEL);
  s.close();
  await srv.close();
}

async function w3w4() {
  const srv = await rawServer({ total: 4 * MiB });
  const s = await connect(srv.port);
  const a = s.request({ ":path": "/a" });
  a.pause();
  const b = s.request({ ":path": "/b" });
  b.pause();
  await sleep(200);
  const sa = srv.server.streams.get(1);
  const sb = srv.server.streams.get(3);
  const beforeA = sa.sent;
  const beforeB = sb.sent;
  let acked = false;
  s.settings({ initialWindowSize: 1 * MiB }, () => (acked = true));
  for (let t = 0; t < 40 && !(acked && sa.sent === MiB && sb.sent === MiB); t++) await sleep(50);
  out(
    `W3 settings({ initialWindowSize: 1 MiB }) with two paused streams open (the server ACKs, then sends under it): stream 1 ${beforeA} → ${sa.sent} bytes, stream 3 ${beforeB} → ${sb.sent} bytes; ACK callback ran ${acked}; session ${s.destroyed ? "destroyed" : "alive"}; localSettings.initialWindowSize ${s.localSettings.initialWindowSize}; a.state.localWindowSize ${a.state?.localWindowSize}`,
  );
  // W4: lower it again and open a stream in the same turn
  srv.log.length = 0;
  s.settings({ initialWindowSize: 64 * KiB });
  const c = s.request({ ":path": "/c" });
  c.pause();
  await sleep(300);
  out(`W4 settings({ initialWindowSize: 64 KiB }) then request() in the same turn: the server saw ${srv.log.join(", ")}; stream 5 was sent ${srv.server.streams.get(5)?.sent} bytes`);
  out(`   the paused streams after the lower: stream 1 ${sa.sent} bytes sent, stream 3 ${sb.sent} (nothing more: their windows went down by the same delta)`);
  for (const x of [a, b, c]) {
    x.on("error", () => {});
    x.close(http2.constants.NGHTTP2_CANCEL);
  }
  await sleep(50);
  s.close();
  await srv.close();
}

async function w3eager() {
  const srv = await rawServer({ total: 4 * MiB, eager: true });
  const s = await connect(srv.port);
  let err = "none";
  s.removeAllListeners("error");
  s.on("error", (e) => (err = e.code ?? e.message));
  const a = s.request({ ":path": "/a" });
  a.on("error", () => {});
  a.pause();
  await sleep(200);
  s.settings({ initialWindowSize: 1 * MiB });
  await sleep(300);
  out(`W3' the same, but the server sends under the new window BEFORE its ACK: session error ${err}, GOAWAY seen by the server: ${srv.log.filter((l) => l.startsWith("GOAWAY")).join(", ") || "none"}`);
  s.destroy();
  await srv.close();
}

async function w5() {
  const srv = await rawServer({ total: 64 * KiB });
  const s = await connect(srv.port);
  const a = s.request({ ":path": "/a" });
  const streamLevers = ["setLocalWindowSize", "consume", "setWindowSize", "windowUpdate"].filter((m) => typeof a[m] === "function");
  const sessionLevers = ["setLocalWindowSize", "settings", "consume"].filter((m) => typeof s[m] === "function");
  out(`W5 window levers: on a client stream [${streamLevers.join(", ") || "none"}]; on the session [${sessionLevers.join(", ")}] (setLocalWindowSize is the connection window, stream 0, only)`);
  a.close(http2.constants.NGHTTP2_CANCEL);
  s.close();
  await srv.close();
}

async function w6() {
  const srv = await rawServer({ total: 0, holdAck: true });
  const s = await connect(srv.port);
  let n = 0;
  let err = "";
  try {
    for (; n < 20; n++) s.settings({ initialWindowSize: 64 * KiB + n });
  } catch (e) {
    err = e.code ?? e.message;
  }
  out(`W6 SETTINGS without their ACK: ${n} accepted, then ${err || "no error"}`);
  s.destroy();
  await srv.close();
}

const timer = setTimeout(() => {
  out("probe: hard stop after 20 s");
  process.exit(1);
}, 20_000);
out(`node ${process.version} (nghttp2 ${process.versions.nghttp2})`);
await w1w2();
await w3w4();
await w3eager();
await w5();
await w6();
clearTimeout(timer);
