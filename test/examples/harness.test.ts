// harness.test.ts: a @grpc/grpc-js client's retry policy and deadline handling, tested against
// faults that dojang injects. Needs only `dojang`, `@grpc/grpc-js` and vitest.
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import { startDojang, type DojangHandle } from "dojang";

// A tiny echo service without .proto files: messages are raw bytes.
const raw = { serialize: (b: Buffer) => b, deserialize: (b: Buffer) => b };
const Echo: grpc.ServiceDefinition = {
  Unary: {
    path: "/test.Echo/Unary",
    requestStream: false,
    responseStream: false,
    requestSerialize: raw.serialize,
    requestDeserialize: raw.deserialize,
    responseSerialize: raw.serialize,
    responseDeserialize: raw.deserialize,
  },
};

function echo(client: grpc.Client, text: string, metadata = new grpc.Metadata(), options: grpc.CallOptions = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest("/test.Echo/Unary", raw.serialize, raw.deserialize, Buffer.from(text), metadata, options, (err, res) =>
      err ? reject(err) : resolve(String(res)),
    );
  });
}

let server: grpc.Server;
let dojang: DojangHandle;

beforeAll(async () => {
  server = new grpc.Server();
  server.addService(Echo, { Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, call.request) });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  dojang = await startDojang({
    logLevel: "silent",
    config: {
      listeners: [{ name: "main", address: "127.0.0.1:0", routes: [{ match: { prefix: "/" }, cluster: "app" }] }],
      clusters: [{ name: "app", endpoints: [`127.0.0.1:${port}`] }],
    },
  });
});
afterAll(async () => {
  await dojang?.close(0);
  server?.forceShutdown();
});
// Every test's fault rules end with the test, also when it fails halfway: a rule left behind
// would fire on the next test's calls and fail that test too.
afterEach(() => dojang?.faults.reset());

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
  const client = new grpc.Client(dojang.address, grpc.credentials.createInsecure(), {
    "grpc.enable_retries": 1,
    "grpc.service_config": JSON.stringify(serviceConfig),
  });
  const reply = await echo(client, "hello");
  client.close();

  expect(reply).toBe("hello");
  const calls = dojang.calls.slice(-3);
  expect(calls.map((c) => [c.attempt, c.grpc_status, c.decided_by])).toEqual([
    [1, "UNAVAILABLE", "fault"],
    [2, "UNAVAILABLE", "fault"],
    [3, "OK", "upstream"],
  ]);
  expect(dojang.faults.list().find((f) => f.rule.id === "flaky")).toMatchObject({ matched: 3, fired: 2 });
});

it("gives up at the client's deadline when the upstream never answers", async () => {
  // only calls that carry `x-chaos: hole` are swallowed
  dojang.faults.add({ id: "hole", match: { metadata: [{ name: "x-chaos", equals: "hole" }] }, action: { kind: "blackhole" } });
  const client = new grpc.Client(dojang.address, grpc.credentials.createInsecure());
  const chaos = new grpc.Metadata();
  chaos.set("x-chaos", "hole");
  const err = await echo(client, "hello", chaos, { deadline: Date.now() + 300 }).catch((e: grpc.ServiceError) => e);
  const spared = await echo(client, "still here");
  client.close();

  expect(err).toMatchObject({ code: grpc.status.DEADLINE_EXCEEDED });
  expect(spared).toBe("still here");
});
