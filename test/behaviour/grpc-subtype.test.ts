// A status dojang writes itself keeps the request's gRPC content-type subtype (issue 0.5.1 item
// 6). The judge is connect-go's gRPC-protocol client with its JSON codec
// (test/engines/connect-go-client): it sends application/grpc+json and reads a reply of any other
// content-type as 13 INTERNAL, so it sees dojang's real code only when the reply says
// application/grpc+json. The calls dojang ends itself: no route (12), the route's timeout (4), the
// route's rate limit (8); the same calls with the proto codec (plain application/grpc) alongside.
import { describe, expect, it } from "vitest";
import type { DojangHandle } from "../../src/index.js";
import { engineBinary } from "../helpers/engines.js";
import { useFixtures } from "../helpers/fixtures.js";
import { runGroup } from "../helpers/process.js";

const f = useFixtures();

interface Result {
  code: number;
  message: string;
  contentType: string;
}

async function connectGo(px: DojangHandle, procedure: string, codec: "json" | "proto", n = 1): Promise<Result[]> {
  const r = await runGroup(engineBinary("connect-go-client"), ["-url", `http://${px.address}`, "-procedure", procedure, "-codec", codec, "-n", String(n)], {}, 20_000);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Result);
}

/** An upstream that takes the call and never answers (dojang's own limits end it). */
async function silentUpstream(): Promise<string> {
  const up = await f.rawUpstream(() => {});
  return up.address;
}

describe("dojang's own statuses to a client of application/grpc+json (connect-go, gRPC protocol, JSON codec)", () => {
  it("no route: 12 UNIMPLEMENTED, the reply in application/grpc+json", { timeout: 30_000 }, async () => {
    const px = await f.proxyFor(await silentUpstream(), { route: { match: { prefix: "/test.Echo/" } } });
    const [json] = await connectGo(px, "/other.Svc/Method", "json");
    expect(json).toEqual({ code: 12, message: "no route for /other.Svc/Method on listener main", contentType: "application/grpc+json" });
    const [proto] = await connectGo(px, "/other.Svc/Method", "proto");
    expect(proto).toEqual({ code: 12, message: "no route for /other.Svc/Method on listener main", contentType: "application/grpc" });
  });

  it("the route's timeout: 4 DEADLINE_EXCEEDED", { timeout: 30_000 }, async () => {
    const px = await f.proxyFor(await silentUpstream(), { route: { timeout: "300ms" } });
    const [json] = await connectGo(px, "/test.Echo/Unary", "json");
    expect(json?.code).toBe(4);
    expect(json?.contentType).toBe("application/grpc+json");
    const [proto] = await connectGo(px, "/test.Echo/Unary", "proto");
    expect(proto?.code).toBe(4);
    expect(proto?.contentType).toBe("application/grpc");
  });

  it("the route's rate limit: 8 RESOURCE_EXHAUSTED once the bucket is empty", { timeout: 30_000 }, async () => {
    // one call a minute: the first takes the token (and ends at the route's timeout), the next two are refused
    const px = await f.proxyFor(await silentUpstream(), { route: { timeout: "300ms", rateLimit: { callsPerSecond: 0.0167, burst: 1 } } });
    const codes = (await connectGo(px, "/test.Echo/Unary", "json", 3)).map((r) => [r.code, r.contentType]);
    expect(codes).toEqual([
      [4, "application/grpc+json"],
      [8, "application/grpc+json"],
      [8, "application/grpc+json"],
    ]);
  });
});
