// The shared upstream connection's reset budget (upstream/session.ts noteReset): every call a
// client cancels becomes a RST_STREAM dojang sends on the upstream connection that carries every
// other client's calls too, and an upstream may end a connection that resets too much (node's
// nghttp2, and so every grpc-js server: a reset rate limit; Envoy: its premature-reset budget).
// Many clients cancelling calls (each under dojang's own rapid-reset budget) must not get that
// connection, and the bystander's calls on it, ended: dojang retires an upstream connection
// after RESET_RETIRE_MIN resets and opens a fresh one. Real peers: a node:http2 upstream (its
// nghttp2 enforces the rate limit), raw-frame clients that cancel, a grpc-js bystander.
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { echoClient, startProxy } from "../helpers/peers.js";
import { echoOr, runBystander } from "../helpers/bystander.js";
import { connectRawH2, grpcRequestFields, type RawH2Client } from "../helpers/raw-h2-client.js";
import { CANCEL } from "../helpers/attacks.js";
import { sleep } from "../helpers/process.js";
import { RESET_RETIRE_MIN } from "../../src/proxy/upstream/session.js";
import type { DojangHandle } from "../../src/index.js";

let server: http2.Http2Server;
let upstream: string;
const sessionErrors: string[] = [];
let sessions = 0;
let held = 0;
beforeAll(async () => {
  server = http2.createServer();
  server.on("session", (s) => {
    sessions++;
    s.on("error", (e) => sessionErrors.push(e.message));
  });
  // every call but the bystander's is held open until its caller cancels it
  server.on(
    "stream",
    echoOr((s) => {
      held++;
      s.on("error", () => {});
    }),
  );
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  upstream = `127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise<void>((r) => server.close(() => r()));
});

describe("the shared upstream connection's reset budget", () => {
  it(`20 clients cancelling 90 calls each (1,800 upstream resets) never get the upstream connection ended: dojang retires it after ${RESET_RETIRE_MIN} resets; a bystander's calls all succeed`, { timeout: 60_000 }, async () => {
    const px: DojangHandle = await startProxy(upstream);
    const raws: RawH2Client[] = [];
    const by = echoClient(px.address);
    try {
      await runBystander(by, 20, 5);
      const sessionsBefore = sessions;
      const bystander = runBystander(by, 400, 10);
      for (let round = 0; round < 20; round++) {
        const c = await connectRawH2(px.address);
        raws.push(c);
        const heldBefore = held;
        for (let i = 0; i < 90; i++) c.headers(1 + 2 * i, grpcRequestFields("/test.Stream/Held"));
        // cancel once dojang has opened them upstream, so each cancel is an upstream reset
        const t0 = performance.now();
        while (held - heldBefore < 90 && performance.now() - t0 < 5000) await sleep(5);
        for (let i = 0; i < 90; i++) c.rst(1 + 2 * i, CANCEL);
      }
      const r = await bystander;
      await sleep(200);
      console.log(`upstream reset budget: ${held} calls held and cancelled; upstream connections ${sessions - sessionsBefore + 1}; upstream session errors ${JSON.stringify(sessionErrors)}`);
      expect(held).toBeGreaterThanOrEqual(1800);
      expect(sessionErrors).toEqual([]);
      // 1,800 resets, a retirement every RESET_RETIRE_MIN or more (the bystander's calls count
      // among the streams opened): several fresh connections
      expect(sessions - sessionsBefore).toBeGreaterThanOrEqual(3);
      expect(r.failures).toEqual([]);
      // none of the cancelling clients was cut as a rapid-reset attacker (90 < its budget)
      for (const c of raws) expect(c.goaway()).toBeUndefined();
    } finally {
      by.close();
      for (const c of raws) c.close();
      await px.close(0);
    }
  });
});
