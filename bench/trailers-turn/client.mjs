// The trailers-turn probe, client side: N sequential unary-shaped calls on one session; p50/p90.
import http2 from "node:http2";
const [port, N] = process.argv.slice(2).map(Number);
const body = Buffer.alloc(105, 0x61);
const c = http2.connect(`http://127.0.0.1:${port}`);
const one = () => new Promise((res, rej) => {
  const r = c.request({ ":method": "POST", ":path": "/x", "content-type": "application/grpc" });
  let gs; r.on("trailers", (t) => (gs = t["grpc-status"])); r.on("response", (h) => { if (h["grpc-status"]) gs = h["grpc-status"]; });
  r.on("data", () => {}); r.on("close", () => res(gs)); r.end(body);
});
for (let i = 0; i < 2000; i++) await one();
const lat = [];
let ok = 0;
for (let i = 0; i < N; i++) { const t = performance.now(); if ((await one()) === "0") ok++; lat.push(performance.now() - t); }
lat.sort((a, b) => a - b);
console.log(JSON.stringify({ p50us: Math.round(lat[N >> 1] * 1000), p90us: Math.round(lat[Math.floor(N * 0.9)] * 1000), ok }));
c.close();
