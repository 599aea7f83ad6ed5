// The trailers-turn probe in one process (client and server share the loop): loop turns and p50
// per call for the answer patterns of server.mjs without the internals (trailers, nodata-trailers,
// endstream, trailersonly). node bench/trailers-turn/one-process.mjs MODE N
import http2 from "node:http2";
const mode = process.argv[2] ?? "trailers";
const N = Number(process.argv[3] ?? 5000);
const body = Buffer.alloc(105, 1);
const srv = http2.createServer();
srv.on("stream", (s) => {
  s.on("data", () => {});
  s.on("end", () => {
    if (mode === "trailers") {
      s.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      s.once("wantTrailers", () => s.sendTrailers({ "grpc-status": "0" }));
      s.end(body);
    } else if (mode === "nodata-trailers") {
      s.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      s.once("wantTrailers", () => s.sendTrailers({ "grpc-status": "0" }));
      s.end();
    } else if (mode === "endstream") {
      s.respond({ ":status": 200, "content-type": "application/grpc" });
      s.end(body);
    } else if (mode === "trailersonly") {
      s.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": "0" }, { endStream: true });
    }
  });
});
srv.listen(0, "127.0.0.1", async () => {
  const port = srv.address().port;
  const c = http2.connect(`http://127.0.0.1:${port}`);
  const one = () => new Promise((res) => {
    const r = c.request({ ":method": "POST", ":path": "/x", "content-type": "application/grpc" });
    r.on("data", () => {}); r.on("close", res); r.end(body);
  });
  for (let i = 0; i < 2000; i++) await one();
  const lat = [];
  const uv0 = performance.nodeTiming.uvMetricsInfo.loopCount;
  for (let i = 0; i < N; i++) { const t = performance.now(); await one(); lat.push(performance.now() - t); }
  const uv1 = performance.nodeTiming.uvMetricsInfo.loopCount;
  lat.sort((a, b) => a - b);
  console.log(JSON.stringify({ mode, p50us: +(lat[N >> 1] * 1000).toFixed(1), turnsPerCallBoth: +((uv1 - uv0) / N).toFixed(2) }));
  c.close(); srv.close();
});
