// The page's script (bundled with esbuild by grpc-web.browser.test.ts at test time): a maintained
// gRPC-Web client, @connectrpc/connect-web's gRPC-Web transport, calling test.Echo through dojang.
// Messages are google.protobuf.StringValue (the upstream's tiny codec reads field 1).
import { create, createFileRegistry } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, file_google_protobuf_wrappers } from "@bufbuild/protobuf/wkt";
import { ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";

const file = create(FileDescriptorProtoSchema, {
  name: "echo.proto",
  package: "test",
  syntax: "proto3",
  dependency: ["google/protobuf/wrappers.proto"],
  service: [
    {
      name: "Echo",
      method: [
        { name: "Unary", inputType: ".google.protobuf.StringValue", outputType: ".google.protobuf.StringValue" },
        { name: "ServerStream", inputType: ".google.protobuf.StringValue", outputType: ".google.protobuf.StringValue", serverStreaming: true },
      ],
    },
  ],
});
const registry = createFileRegistry(file, (name) => (name === "google/protobuf/wrappers.proto" ? file_google_protobuf_wrappers : undefined));
const Echo = registry.getService("test.Echo");

function failure(e) {
  const c = ConnectError.from(e);
  return { ok: false, code: c.code, message: c.rawMessage };
}

/** Runs one scenario against dojang at `baseUrl`; the result is what the test asserts. */
globalThis.runScenario = async (baseUrl, name) => {
  const client = createClient(Echo, createGrpcWebTransport({ baseUrl, useBinaryFormat: true }));
  try {
    switch (name) {
      case "unary": {
        const r = await client.unary({ value: "hello from the browser" });
        return { ok: true, value: r.value };
      }
      case "stream": {
        const got = [];
        for await (const m of client.serverStream({ value: "tick" })) got.push(m.value);
        return { ok: true, values: got };
      }
      case "error":
        await client.unary({ value: "fail" });
        return { ok: true };
      case "deadline":
        // The deadline as grpc-timeout alone (connect's timeoutMs would also arm the page's own
        // timer, which would abort the fetch first): dojang's deadline decides and the page reads it.
        await client.unary({ value: "slow" }, { headers: { "grpc-timeout": "400m" } });
        return { ok: true };
      default:
        return { ok: false, code: -1, message: `unknown scenario ${name}` };
    }
  } catch (e) {
    return failure(e);
  }
};
