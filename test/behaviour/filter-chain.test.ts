// Contract (issue 11, step 1): "Faults become filters with real hooks (request head, upstream
// attempt start, response head, messages each way, trailers)". Two small filters written here are
// put in a running dojang's chain (through a snapshot swap); a real grpc-js client and upstream.
// A filter that holds a stage resumes the chain from the next filter; local replies and extra
// status fields reach the client.
import * as grpc from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import type { DojangHandle } from "../../src/index.js";
import type { CallFilter, FilterCall, FilterFactory } from "../../src/proxy/call/filter.js";
import { outcome } from "../../src/translate/index.js";
import { unary } from "../helpers/peers.js";
import { useFixtures } from "../helpers/fixtures.js";

const fx = useFixtures();

/** Puts `factories` in front of every call on the listener "main" (a new snapshot, same routes and clusters). */
function useChain(px: DojangHandle, factories: readonly FilterFactory[]): void {
  const d = px.instance;
  const snap = d.snapshot;
  const main = snap.listeners.get("main")!;
  d.swapSnapshot({ ...snap, version: snap.version + 1, listeners: new Map([["main", { router: main.router, filters: factories }]]) });
}

/** Holds request head, response head and trailers for a moment each, then lets the chain go on. */
function holder(name: string, log: string[]): FilterFactory {
  return {
    forCall(): CallFilter {
      const f: CallFilter = {
        statusExtra: { [`x-${name}`]: "seen" },
        onRequestHead(c: FilterCall) {
          log.push(`${name}:request-head`);
          setTimeout(() => {
            log.push(`${name}:request-head-continue`);
            c.continueRequestHead(f);
          }, 20);
          return false;
        },
        onResponseHead(c: FilterCall) {
          log.push(`${name}:response-head`);
          setTimeout(() => c.continueResponseHead(f), 20);
          return false;
        },
        onTrailers(c: FilterCall, block) {
          log.push(`${name}:trailers`);
          block[`x-${name}-trailer`] = "held";
          setTimeout(() => c.continueTrailers(f, block), 20);
          return false;
        },
      };
      return f;
    },
  };
}

/** Records every hook it is given; never holds. */
function recorder(name: string, log: string[]): FilterFactory {
  return {
    forCall(): CallFilter {
      const seen = (what: string) => log.push(`${name}:${what}`);
      return {
        statusExtra: undefined,
        onRequestHead: () => (seen("request-head"), true),
        onAttemptStart: (_c, a) => (seen(`attempt-start ${a.endpoint.label === undefined ? "?" : "endpoint"}`), true),
        onAttemptOpen: () => seen("attempt-open"),
        onResponseHead: () => (seen("response-head"), true),
        onResponseHeadSent: () => seen("response-head-sent"),
        onRequestData: () => (seen("request-data"), false),
        onRequestEnd: () => (seen("request-end"), true),
        onResponseData: () => (seen("response-data"), false),
        onTrailers: () => (seen("trailers"), true),
        onTrailersSent: () => seen("trailers-sent"),
        onEnd: () => seen("end"),
      };
    },
  };
}

async function echoUpstream() {
  let calls = 0;
  const s = await fx.grpcServer({
    Unary: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      calls++;
      cb(null, c.request);
    },
  });
  return { address: s.address, calls: () => calls };
}

describe('"Faults become filters with real hooks (request head, upstream attempt start, response head, messages each way, trailers)"', () => {
  it("runs every hook in call order, and a held stage resumes the chain from the next filter", async () => {
    const up = await echoUpstream();
    const px = await fx.proxyFor(up.address);
    const log: string[] = [];
    useChain(px, [holder("a", log), recorder("b", log)]);
    const r = await unary(fx.client(px.address), Buffer.from("ping"));
    expect(r.err).toBeNull();
    expect(r.res?.toString()).toBe("ping");
    // the holder's trailer field and its status extra reach the client
    expect(r.status?.metadata.get("x-a-trailer")).toEqual(["held"]);
    await new Promise((res) => setTimeout(res, 50)); // the client stream's close runs onEnd
    const at = (e: string) => log.indexOf(e);
    expect(log.slice(0, 4)).toEqual(["a:request-head", "a:request-head-continue", "b:request-head", "b:attempt-start endpoint"]);
    for (const e of ["b:attempt-open", "b:request-data", "b:request-end", "b:response-head", "b:response-head-sent", "b:response-data", "b:trailers", "b:trailers-sent", "b:end"]) {
      expect(log, e).toContain(e);
    }
    expect(at("a:response-head")).toBeLessThan(at("b:response-head"));
    expect(at("b:response-head")).toBeLessThan(at("b:response-head-sent"));
    expect(at("a:trailers")).toBeLessThan(at("b:trailers"));
    expect(at("b:trailers")).toBeLessThan(at("b:trailers-sent"));
    expect(log[log.length - 1]).toBe("b:end");
    // each hook once per call (a held stage is not asked again when more upstream events arrive)
    expect(log.filter((e) => e === "a:trailers")).toHaveLength(1);
    expect(log.filter((e) => e === "a:response-head")).toHaveLength(1);
    expect(up.calls()).toBe(1);
  });

  it("ends a call with a filter's local reply, carrying the chain's status fields, and the upstream never sees it", async () => {
    const up = await echoUpstream();
    const px = await fx.proxyFor(up.address);
    const refuser: FilterFactory = {
      forCall: (c) => ({
        statusExtra: { "x-refused-by": "test-filter" },
        onRequestHead: () => {
          c.finishLocal(outcome(grpc.status.PERMISSION_DENIED, "not you", "fault"));
          return false;
        },
      }),
    };
    useChain(px, [refuser]);
    const r = await unary(fx.client(px.address), Buffer.from("ping"));
    expect(r.err?.code).toBe(grpc.status.PERMISSION_DENIED);
    expect(r.err?.details).toBe("not you");
    expect(r.status?.metadata.get("x-refused-by")).toEqual(["test-filter"]);
    expect(up.calls()).toBe(0);
  });

  it("lets a factory decline a call (null): that call runs as if the chain were empty", async () => {
    const up = await echoUpstream();
    const px = await fx.proxyFor(up.address);
    let asked = 0;
    useChain(px, [{ forCall: () => (asked++, null) }]);
    const r = await unary(fx.client(px.address), Buffer.from("ping"));
    expect(r.res?.toString()).toBe("ping");
    expect([asked, up.calls()]).toEqual([1, 1]);
  });
});
