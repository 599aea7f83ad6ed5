// The trailers-turn probe, server side (docs/contributing/cpu-profile.md): answers every call in one
// of several node:http2 patterns. "hack"/"hack2" use node internals (run with --expose-internals).
import http2 from "node:http2";
const mode = process.argv[2];
const body = Buffer.alloc(105, 0x61);
let ShutdownWrap;
import { createRequire } from "node:module";
const require = createRequire(import.meta.url);
let buildNgHeaderString;
try { ({ buildNgHeaderString } = require("internal/http2/util")); } catch (e) { console.error("no internals", e.message); }
try { ShutdownWrap = process.binding("stream_wrap").ShutdownWrap; } catch (e) { console.error("no ShutdownWrap", e.message); }
const srv = http2.createServer();
let handleSym, stateSym;
srv.on("stream", (s) => {
  s.on("data", () => {});
  s.on("end", () => {
    if (mode === "endstream") { s.respond({ ":status": 200, "content-type": "application/grpc" }); s.end(body); return; }
    if (mode === "trailersonly") { s.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": "0" }, { endStream: true }); return; }
    s.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
    s.once("wantTrailers", () => s.sendTrailers({ "grpc-status": "0" }));
    if (mode === "trailers") { s.end(body); return; }
    if (mode === "hack2") {
      // hack + trailers submitted inside nghttp2's data callback (what nghttp2's docs describe;
      // node defers sendTrailers() to setImmediate instead)
      handleSym ??= Object.getOwnPropertySymbols(s).find((x) => x.description === "kHandle");
      stateSym ??= Object.getOwnPropertySymbols(s).find((x) => x.description === "state");
      s.removeAllListeners("wantTrailers");
      s.once("wantTrailers", () => {
        s[stateSym].flags &= ~0x8; // STREAM_FLAGS_HAS_TRAILERS (not needed for the wire)
        s[handleSym].trailers(buildNgHeaderString({ "grpc-status": "0" }));
      });
      s.write(body);
      const h = s[handleSym];
      const req = new ShutdownWrap();
      req.oncomplete = () => {};
      req.handle = h;
      s[stateSym].shutdownWritableCalled = true;
      h.shutdown(req);
      s.end();
      return;
    }
    if (mode === "hack") {
      // shut the writable side down in the same tick as the last write (what Writable's _final
      // would do after the write's callback): nghttp2 then asks for trailers in the same send
      handleSym ??= Object.getOwnPropertySymbols(s).find((x) => x.description === "kHandle");
      stateSym ??= Object.getOwnPropertySymbols(s).find((x) => x.description === "state");
      s.write(body);
      const h = s[handleSym];
      const req = new ShutdownWrap();
      req.oncomplete = () => {};
      req.handle = h;
      s[stateSym].shutdownWritableCalled = true;
      h.shutdown(req);
      s.end();
    }
  });
});
srv.listen(Number(process.argv[3] ?? 0), "127.0.0.1", () => console.log(JSON.stringify({ port: srv.address().port })));
