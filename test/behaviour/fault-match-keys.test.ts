// A fault rule's match.listener, match.route and match.service, each shown choosing the calls
// it faults: a rule that names one listener, route or service aborts those calls and leaves the
// others, on the same proxy, to reach the upstream (which counts what reaches it). The rules
// come through the library's faults.add(), as the admin API's POST /faults takes them.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDojang, type DojangHandle } from "../../src/index.js";
import { echoAll, h2Call } from "../helpers/auth.js";
import type { RawUpstream } from "../helpers/peers.js";

let upstream: RawUpstream;
let px: DojangHandle;
const ABORT = { kind: "abort", code: "UNAVAILABLE", message: "chosen" } as const;

beforeAll(async () => {
  upstream = await echoAll();
  px = await startDojang({
    config: {
      admin: { address: "127.0.0.1:0" },
      listeners: [
        { name: "a", address: "127.0.0.1:0", routes: [{ match: { service: "test.Echo" }, cluster: "backend" }, { match: { prefix: "/" }, cluster: "backend" }] },
        { name: "b", address: "127.0.0.1:0", routes: [{ match: { prefix: "/" }, cluster: "backend" }] },
      ],
      clusters: [{ name: "backend", endpoints: [upstream.address] }],
    },
  });
}, 30_000);
afterAll(async () => {
  await px.close(0);
  await upstream.close();
});

/** the status of one call, and whether it reached the upstream */
async function call(listener: "a" | "b", path: string): Promise<{ status: string | undefined; reached: boolean }> {
  const before = upstream.seen.length;
  const r = await h2Call(px.instance.address(listener), path);
  return { status: r.status, reached: upstream.seen.length > before };
}

describe("<faultRule>.match: which calls a rule faults", () => {
  it("match.listener: a rule for listener b aborts b's calls; a's, to the same route and cluster, reach the upstream", async () => {
    px.faults.add({ id: "on-b", match: { listener: "b" }, action: ABORT });
    try {
      expect(await call("a", "/other.Svc/Get")).toEqual({ status: "0", reached: true });
      expect(await call("b", "/other.Svc/Get")).toEqual({ status: "14", reached: false });
    } finally {
      px.faults.remove("on-b");
    }
  });

  it("match.route: a rule for route prefix:/ (by its label, and by its index 1) leaves the service route's calls alone", async () => {
    for (const which of ["prefix:/", 1]) {
      px.faults.add({ id: "on-prefix", match: { listener: "a", route: which }, action: ABORT });
      try {
        expect(await call("a", "/test.Echo/Unary")).toEqual({ status: "0", reached: true });
        expect(await call("a", "/other.Svc/Get")).toEqual({ status: "14", reached: false });
      } finally {
        px.faults.remove("on-prefix");
      }
    }
  });

  it("match.service: a rule for other.Svc aborts its calls, not test.Echo's on the same route", async () => {
    px.faults.add({ id: "on-svc", match: { service: "other.Svc" }, action: ABORT });
    try {
      expect(await call("b", "/test.Echo/Unary")).toEqual({ status: "0", reached: true });
      expect(await call("b", "/other.Svc/Get")).toEqual({ status: "14", reached: false });
      expect(await call("b", "/other.Svc.V2/Get")).toEqual({ status: "0", reached: true });
    } finally {
      px.faults.remove("on-svc");
    }
  });
});
