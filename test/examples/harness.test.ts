// The README's "dojang as a test harness" example, kept runnable: a @grpc/grpc-js client's retry
// policy and deadline handling tested against faults that dojang injects.
import { afterAll, beforeAll, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import { startDojang, type DojangHandle } from "../../src/index.js";
import { echoClient, startGrpcServer, unary, type GrpcServer } from "../helpers/peers.js";

let server: GrpcServer;
let dojang: DojangHandle;

beforeAll(async () => {
  server = await startGrpcServer({ Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, call.request) });
  dojang = await startDojang({
    logLevel: "silent",
    config: {
      admin: { address: "127.0.0.1:0" },
      listeners: [{ name: "main", address: "127.0.0.1:0", routes: [{ match: { prefix: "/" }, cluster: "app" }] }],
      clusters: [{ name: "app", endpoints: [server.address] }],
    },
  });
});
afterAll(async () => {
  await dojang.close(0);
  await server.close();
});

it("retries UNAVAILABLE twice and then succeeds", async () => {
  dojang.faults.add({ id: "flaky", fire: { calls: "1-2" }, action: { kind: "abort", code: "UNAVAILABLE", message: "try again" } });
  const serviceConfig = {
    methodConfig: [
      {
        name: [{ service: "test.Echo" }],
        retryPolicy: { maxAttempts: 4, initialBackoff: "0.01s", maxBackoff: "0.1s", backoffMultiplier: 2, retryableStatusCodes: ["UNAVAILABLE"] },
      },
    ],
  };
  const client = echoClient(dojang.address, { "grpc.enable_retries": 1, "grpc.service_config": JSON.stringify(serviceConfig) });
  const r = await unary(client, Buffer.from("hello"));
  client.close();

  expect(r.err).toBeNull();
  expect(r.res?.toString()).toBe("hello");
  const calls = dojang.calls.slice(-3);
  expect(calls.map((c) => [c.attempt, c.grpc_status, c.decided_by])).toEqual([
    [1, "UNAVAILABLE", "fault"],
    [2, "UNAVAILABLE", "fault"],
    [3, "OK", "upstream"],
  ]);
  expect(dojang.faults.list().find((f) => f.rule.id === "flaky")).toMatchObject({ matched: 3, fired: 2 });
  dojang.faults.remove("flaky");
});

it("gives up at the client's deadline when the upstream never answers", async () => {
  dojang.faults.add({ id: "hole", action: { kind: "blackhole" } });
  const client = echoClient(dojang.address);
  const r = await unary(client, Buffer.from("hello"), new grpc.Metadata(), { deadline: Date.now() + 300 });
  client.close();

  expect(r.err?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
  dojang.faults.remove("hole");
});
