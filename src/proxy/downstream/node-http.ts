// node:http, taken with require() rather than an ES import. An ES import of a built-in builds its
// module namespace, which reads every export, and node:http's WebSocket, CloseEvent and
// MessageEvent are lazy getters that load undici, node's fetch: ~4 MiB of RSS (2.4 MiB anonymous)
// that dojang never uses (measured on Node 24 with /proc/self/smaps_rollup, an idle process with
// and without it). Types still come from `import type`.
import { createRequire } from "node:module";

export const http = createRequire(import.meta.url)("node:http") as typeof import("node:http");

/** node:https the same way, and only when a TLS listener has an http1Address (loaded on first use). */
let httpsModule: typeof import("node:https") | undefined;
export function https(): typeof import("node:https") {
  httpsModule ??= createRequire(import.meta.url)("node:https") as typeof import("node:https");
  return httpsModule;
}
