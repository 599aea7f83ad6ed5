// Per-test peers that close themselves: call useFixtures() once at the top of a test file, then
// start peers through the returned functions; everything started in a test is closed after it,
// last started first.
import { afterEach, expect } from "vitest";
import type * as grpc from "@grpc/grpc-js";
import type { DojangHandle } from "../../src/index.js";
import {
  echoClient,
  sample,
  scrape,
  startGrpcServer,
  startProxy,
  startRawUpstream,
  type EchoClient,
  type GrpcServer,
  type RawUpstream,
} from "./peers.js";

export interface Fixtures {
  track<T>(value: T, close: (v: T) => unknown): T;
  proxyFor(upstream: string, o?: Parameters<typeof startProxy>[1]): Promise<DojangHandle>;
  rawUpstream(onStream: Parameters<typeof startRawUpstream>[0], settings?: Parameters<typeof startRawUpstream>[1]): Promise<RawUpstream>;
  grpcServer(impl: grpc.UntypedServiceImplementation): Promise<GrpcServer>;
  client(address: string): EchoClient;
}

/** Closers run last-added first; one that throws does not stop the rest. */
export class Cleanup {
  private readonly fns: (() => unknown)[] = [];
  add<T>(value: T, close: (v: T) => unknown): T {
    this.fns.push(() => close(value));
    return value;
  }
  async run(): Promise<void> {
    while (this.fns.length > 0) {
      const fn = this.fns.pop()!;
      try {
        await fn();
      } catch {
        /* keep closing the rest */
      }
    }
  }
}

export function useFixtures(): Fixtures {
  const cleanup = new Cleanup();
  afterEach(() => cleanup.run());
  const track = <T>(value: T, close: (v: T) => unknown): T => cleanup.add(value, close);
  return {
    track,
    proxyFor: async (upstream, o = {}) => track(await startProxy(upstream, o), (p) => p.close(0)),
    rawUpstream: async (onStream, settings) => track(await startRawUpstream(onStream, settings), (u) => u.close()),
    grpcServer: async (impl) => track(await startGrpcServer(impl), (s) => s.close()),
    client: (address) => track(echoClient(address), (c) => c.close()),
  };
}

/** Polls `pred` every 2 ms until it holds; fails naming `what` after `timeoutMs`. */
export async function waitFor(what: string, pred: () => boolean, timeoutMs = 5000): Promise<void> {
  const end = performance.now() + timeoutMs;
  while (!pred()) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** Polls /metrics until the sample equals `want` (3 s), then asserts it. */
export async function waitForMetric(px: DojangHandle, name: string, labels: Record<string, string>, want: number): Promise<void> {
  let last = -1;
  const end = performance.now() + 3000;
  while (performance.now() < end) {
    last = sample(await scrape(px.adminAddress), name, labels);
    if (last === want) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  expect(last, `${name} ${JSON.stringify(labels)}`).toBe(want);
}

/** Counts TCP connections accepted by dojang's (first) listener from now on. */
export function connections(px: DojangHandle): () => number {
  let n = 0;
  px.instance.listeners[0]!.server.on("connection", () => n++);
  return () => n;
}
