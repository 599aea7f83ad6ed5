// PROTOTYPE, bench only (docs/contributing/cpu-profile.md): a preload that makes node:http2 send a
// response's trailers in the same write as its last DATA frame, to measure what the extra loop
// turn costs. Needs node's internals: run with `--expose-internals --import <this file>`.
//
// Two things in node's JS layer hold the trailers back by one loop turn, and this patches both
// on server streams opened with waitForTrailers:
//   1. Writable.end() calls _final (which shuts the writable side of the nghttp2 stream down)
//      only after the last write's callback, i.e. after that DATA went out: end() here shuts
//      the handle down at once when nothing is left in the JS write queue (the last chunk
//      already sits in nghttp2's queue), so nghttp2 asks for the trailers ('wantTrailers') in
//      the same send as that DATA.
//   2. sendTrailers() submits them in a setImmediate ("so we don't do it on nghttp2 stack");
//      here they are submitted at once (nghttp2's own documented way: submit trailers from the
//      data source callback), and node's deferred submit becomes a no-op for that stream.
// Not for production: it leans on private symbols and on process.binding().
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { Http2Stream } = require("internal/http2/core");
const { buildNgHeaderString } = require("internal/http2/util");
const { ShutdownWrap } = process.binding("stream_wrap");

const STREAM_FLAGS_HAS_TRAILERS = 0x20;
let kHandle;
let kState;
const noop = () => 0;
const afterShutdown = () => {};

function symbols(s) {
  if (kHandle !== undefined) return;
  for (const x of Object.getOwnPropertySymbols(s)) {
    if (x.description === "kHandle") kHandle = x;
    else if (x.description === "state") kState = x;
  }
}

const origEnd = Http2Stream.prototype.end;
Http2Stream.prototype.end = function end(...args) {
  const r = origEnd.apply(this, args);
  if (this.session?.type !== 0 /* server */) return r;
  symbols(this);
  const st = this[kState];
  const h = this[kHandle];
  const ws = this._writableState;
  if (h === undefined || st === undefined || st.shutdownWritableCalled || (st.flags & STREAM_FLAGS_HAS_TRAILERS) === 0) return r;
  // only when every byte written so far has reached the handle (nothing queued in JS)
  if (ws.corked !== 0 || ws.buffered.length - ws.bufferedIndex !== 0) return r;
  st.shutdownWritableCalled = true; // node's _final then finds it done and calls back at once
  const req = new ShutdownWrap();
  req.oncomplete = afterShutdown;
  req.handle = h;
  h.shutdown(req);
  return r;
};

const origSendTrailers = Http2Stream.prototype.sendTrailers;
Http2Stream.prototype.sendTrailers = function sendTrailers(headers) {
  origSendTrailers.call(this, headers); // checks, records, and schedules node's own submit
  symbols(this);
  const h = this[kHandle];
  if (h === undefined) return;
  const ret = h.trailers(buildNgHeaderString(headers));
  if (ret === 0) h.trailers = noop; // node's setImmediate(finishSendTrailers) finds nothing left to do
};
