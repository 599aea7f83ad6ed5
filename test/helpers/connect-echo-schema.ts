// test.Echo's schema for connect-es (Node tests and the browser page alike: no node: imports here).
// Messages are google.protobuf.StringValue; Unary is marked idempotent so a client may use GET.
import { create, createFileRegistry } from "@bufbuild/protobuf";
import { createClient, type CallOptions, type Transport } from "@connectrpc/connect";
import { FileDescriptorProtoSchema, MethodOptions_IdempotencyLevel, file_google_protobuf_wrappers } from "@bufbuild/protobuf/wkt";

export function echoFile() {
  return create(FileDescriptorProtoSchema, {
    name: "echo.proto",
    package: "test",
    syntax: "proto3",
    dependency: ["google/protobuf/wrappers.proto"],
    service: [
      {
        name: "Echo",
        method: [
          { name: "Unary", inputType: ".google.protobuf.StringValue", outputType: ".google.protobuf.StringValue", options: { idempotencyLevel: MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS } },
          { name: "ServerStream", inputType: ".google.protobuf.StringValue", outputType: ".google.protobuf.StringValue", serverStreaming: true },
          { name: "ClientStream", inputType: ".google.protobuf.StringValue", outputType: ".google.protobuf.StringValue", clientStreaming: true },
          { name: "Bidi", inputType: ".google.protobuf.StringValue", outputType: ".google.protobuf.StringValue", clientStreaming: true, serverStreaming: true },
        ],
      },
    ],
  });
}

export function echoService() {
  const registry = createFileRegistry(echoFile(), (name) => (name === "google/protobuf/wrappers.proto" ? file_google_protobuf_wrappers : undefined));
  return registry.getService("test.Echo")!;
}


/** The two methods the tests call, typed (a schema built at run time gives connect-es no types). */
export interface EchoCalls {
  unary(req: { value: string }, opts?: CallOptions): Promise<{ value: string }>;
  serverStream(req: { value: string }, opts?: CallOptions): AsyncIterable<{ value: string }>;
}

export function echoClient(transport: Transport): EchoCalls {
  return createClient(echoService(), transport) as unknown as EchoCalls;
}
