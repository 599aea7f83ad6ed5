// For the Endpoint and UpstreamSession tests: a cluster's config from a few YAML lines, a real
// node:http2 server on loopback, and a SlotWaiter that records what it is told.
import http2, { type Http2Server, type ServerHttp2Session } from "node:http2";
import type { AddressInfo } from "node:net";
import { configFromText, type ClusterConfig } from "../../../src/config/index.js";
import type { SlotWaiter } from "../../../src/proxy/upstream/session.js";

const cleanup: (() => void)[] = [];

/** Closes every server h2Server started (afterEach). */
export function closeServers(): void {
  for (const f of cleanup.splice(0)) f();
}

/** The `backend` cluster of a one-route config, with `extra` lines under it (a placeholder endpoint unless they name `endpoints:`). */
export function clusterCfg(extra: string): ClusterConfig {
  const text = [
    "listeners:",
    "  - name: main",
    "    address: 127.0.0.1:0",
    "    routes:",
    '      - match: { prefix: "/" }',
    "        cluster: backend",
    "clusters:",
    "  - name: backend",
    ...(/^\s*endpoints:/m.test(extra) ? [] : ['    endpoints: ["127.0.0.1:1"]']),
    ...extra.split("\n").map((l) => `    ${l}`),
    "",
  ].join("\n");
  return configFromText(text, "test.yaml").clusters[0]!;
}

/** A node:http2 server on 127.0.0.1 announcing `maxConcurrentStreams`; its sessions are kept. */
export async function h2Server(maxConcurrentStreams: number): Promise<{ port: number; sessions: ServerHttp2Session[] }> {
  const server: Http2Server = http2.createServer({ settings: { maxConcurrentStreams } });
  const sessions: ServerHttp2Session[] = [];
  server.on("session", (s) => sessions.push(s));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  cleanup.push(() => {
    for (const s of sessions) s.destroy();
    server.close();
  });
  return { port: (server.address() as AddressInfo).port, sessions };
}

/** A SlotWaiter that records what it was told. */
export function recordingWaiter(log: string[], name: string): SlotWaiter {
  return {
    onSlot: () => void log.push(`${name} slot`),
    onSessionFailed: () => void log.push(`${name} session failed`),
    onSlotFailed: (why) => void log.push(`${name} slot failed: ${why}`),
    abandoned: false,
    qPrev: undefined,
    qNext: undefined,
  };
}

