// `npm run demo`: ten seconds to see what dojang is for. A @grpc/grpc-js upstream, a broken
// upstream that answers HTTP 503 with an HTML page (what a load balancer in trouble does), and
// dojang in front of both; four calls, what the client saw, and what /metrics counted.
// (Uses the @grpc/grpc-js dev dependency; not part of the production image.)
import * as grpc from "@grpc/grpc-js";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { startDojang } from "./index.js";

const id = (b: Buffer): Buffer => b;
const method = (name: string): grpc.MethodDefinition<Buffer, Buffer> => ({
  path: `/demo.Echo/${name}`,
  requestStream: false,
  responseStream: false,
  requestSerialize: id,
  requestDeserialize: id,
  responseSerialize: id,
  responseDeserialize: id,
});
const SERVICE = { Echo: method("Echo"), Slow: method("Slow") };
const BROKEN: grpc.ServiceDefinition = {
  Echo: { ...method("Echo"), path: "/demo.Broken/Echo" },
};

async function main(): Promise<void> {
  // 1. a real gRPC upstream
  const server = new grpc.Server();
  server.addService(SERVICE, {
    Echo: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, call.request),
    Slow: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      const t = setTimeout(() => cb(null, call.request), 2000);
      call.on("cancelled", () => clearTimeout(t));
    },
  });
  const grpcPort = await new Promise<number>((res, rej) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))),
  );
  // 2. an upstream that is not well: HTTP 503 and an HTML page; and one that never answers Slow
  // (the grpc-js server above would end it itself at the grpc-timeout dojang sends, racing
  // dojang's own route timeout for who decides the 4; this one leaves the decision to dojang)
  const broken = http2.createServer();
  broken.on("stream", (s, h) => {
    s.on("error", () => {});
    if (h[":path"] === "/demo.Echo/Slow") return; // held until dojang cancels it
    s.respond({ ":status": 503, "content-type": "text/html" });
    s.end("<html><body><h1>503 Service Unavailable</h1></body></html>");
  });
  await new Promise<void>((r) => broken.listen(0, "127.0.0.1", r));
  const brokenPort = (broken.address() as AddressInfo).port;

  // 3. dojang in front
  const d = await startDojang({
    logLevel: "silent",
    config: {
      admin: { address: "127.0.0.1:0" },
      listeners: [
        {
          name: "main",
          address: "127.0.0.1:0",
          routes: [
            { match: { service: "demo.Broken" }, cluster: "broken" },
            { match: { path: "/demo.Echo/Slow" }, cluster: "broken", timeout: "500ms" },
            { match: { prefix: "/" }, cluster: "echo", timeout: "500ms", maxRequestMessageBytes: "64KiB" },
          ],
        },
      ],
      clusters: [
        { name: "echo", endpoints: [`127.0.0.1:${grpcPort}`] },
        { name: "broken", endpoints: [`127.0.0.1:${brokenPort}`] },
      ],
    },
  });
  const Client = grpc.makeGenericClientConstructor({ ...SERVICE }, "Echo");
  const BrokenClient = grpc.makeGenericClientConstructor(BROKEN, "Broken");
  const c = new Client(d.address, grpc.credentials.createInsecure()) as unknown as Record<string, Function>;
  const b = new BrokenClient(d.address, grpc.credentials.createInsecure()) as unknown as Record<string, Function>;
  const call = (client: Record<string, Function>, m: string, body: Buffer): Promise<string> =>
    new Promise((resolve) =>
      client[m]!.call(client, body, (err: grpc.ServiceError | null, res?: Buffer) =>
        resolve(err ? `${grpc.status[err.code]} (${err.code}): ${err.details}` : `OK, ${res?.length} bytes back`),
      ),
    );

  console.log(`dojang ${d.address} → grpc-js upstream 127.0.0.1:${grpcPort}, broken upstream 127.0.0.1:${brokenPort}\n`);
  const rows: [string, string][] = [
    ["Echo, 12 bytes", await call(c, "Echo", Buffer.from("hello dojang"))],
    ["Broken upstream (HTTP 503 + HTML)", await call(b, "Echo", Buffer.from("hi"))],
    ["Slow (2 s) with route timeout 500ms", await call(c, "Slow", Buffer.from("zzz"))],
    ["Echo, 1 MiB (limit 64 KiB)", await call(c, "Echo", Buffer.alloc(1 << 20))],
  ];
  console.log("what the client saw:");
  for (const [what, saw] of rows) console.log(`  ${what.padEnd(38)} ${saw}`);

  const metrics = await (await fetch(`http://${d.adminAddress}/metrics`)).text();
  console.log("\nwhat /metrics counted (dojang_calls_total):");
  for (const line of metrics.split("\n")) if (line.startsWith("dojang_calls_total{")) console.log("  " + line);
  console.log("\ndecided_by says who set the status: the upstream itself, or dojang (and why).");

  c["close"]!.call(c);
  b["close"]!.call(b);
  await d.close(0);
  server.forceShutdown();
  broken.close();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
