// Public surface of src/translate: pure gRPC semantics, re-exported for the proxy.

export * from "./codes.js";
export * from "./http-status.js";
export * from "./rst-code.js";
export * from "./timeout.js";
export * from "./grpc-message.js";
export * from "./framing.js";
export * from "./content-type.js";
export * from "./headers.js";
export * from "./metadata.js";
export * from "./outcome.js";
export * from "./local-reply.js";
export * from "./grpc-path.js";
export * from "./unary-end.js";
