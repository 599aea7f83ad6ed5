import { afterEach, describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import { echoClient, startGrpcServer, startProxy, unary, scrape, sample, type GrpcServer } from "../helpers/peers.js";
import type { DojangHandle } from "../../src/index.js";

let up: GrpcServer | undefined;
let px: DojangHandle | undefined;
afterEach(async () => {
  await px?.close(0);
  await up?.close();
  px = undefined;
  up = undefined;
});

describe("unary forwarding", () => {
  it("forwards a unary call and its response byte for byte", async () => {
    up = await startGrpcServer({ Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.concat([Buffer.from("echo:"), call.request])) });
    px = await startProxy(up.address);
    const c = echoClient(px.address);
    const r = await unary(c, Buffer.from("hi"));
    expect(r.err).toBeNull();
    expect(r.res?.toString()).toBe("echo:hi");
    c.close();
    const m = await scrape(px.adminAddress);
    expect(sample(m, "dojang_calls_total", { grpc_code: "OK", decided_by: "upstream", grpc_method: "Unary" })).toBe(1);
  });
});
