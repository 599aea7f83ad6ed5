// A listener's schema: its routes, HTTP/2 settings, timeouts, TLS, gRPC-Web and CORS
// (src/proxy/downstream/grpc-web.ts, cors.ts).

import { z } from "zod";
import { describeValue } from "../issues.js";
import { DEFAULTS, LIMITS } from "../types.js";
import { count, durationMs, expected, flag, hostPort, name, sizeBytes } from "./scalars.js";
import { route } from "./route.js";
import { listenerTls } from "./tls.js";

/** "*", an origin "https://app.example.com(:port)", or a wildcard "https://*.example.com" / "*.example.com". */
const ORIGIN_RE = /^(\*|([a-z][a-z0-9+.-]*:\/\/)?(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*(:[0-9]{1,5})?)$/;
const corsOrigin = z.string({ error: expected('an origin like "https://app.example.com", "*.example.com" or "*"') }).transform((v, ctx) => {
  const o = v.trim().toLowerCase();
  if (!ORIGIN_RE.test(o)) {
    ctx.addIssue({ code: "custom", message: `expected an origin like "https://app.example.com", "*.example.com" or "*", got ${describeValue(v)}` });
    return z.NEVER;
  }
  return o;
});
const cors = z.strictObject(
  { allowOrigins: z.array(corsOrigin, { error: expected("a list of origins") }).min(1, "needs at least one origin") },
  { error: expected('a mapping like { allowOrigins: ["https://app.example.com"] }') },
);

const MiB = 1_048_576;
/** jsonTranscoding (src/proxy/downstream/transcode.ts): the descriptor set is read when the listener starts. */
const jsonTranscoding = z.strictObject(
  {
    descriptorSet: z.string({ error: expected("a descriptor set file path") }).min(1, "must not be empty"),
    unknownPaths: z.enum(["passthrough", "notFound"], { error: expected('"passthrough" or "notFound"') }).default("notFound"),
    streamFormat: z.enum(["array", "ndjson"], { error: expected('"array" or "ndjson"') }).default("array"),
    emitDefaults: flag.default(false),
    ignoreUnknownFields: flag.default(false),
    maxBodyBytes: sizeBytes({ min: 1, max: 64 * MiB }).default(4 * MiB),
  },
  { error: expected("a mapping like { descriptorSet: api.binpb }") },
);

export const listener = z.strictObject(
  {
    name,
    address: hostPort(true),
    routes: z.array(route, { error: expected("a list of routes") }).min(1, "needs at least one route"),
    maxConcurrentStreams: count(LIMITS.maxConcurrentStreams).default(DEFAULTS.listener.maxConcurrentStreams),
    maxHeaderListPairs: count(LIMITS.maxHeaderListPairs).default(DEFAULTS.listener.maxHeaderListPairs),
    maxHeaderListSize: sizeBytes(LIMITS.maxHeaderListSize).default(DEFAULTS.listener.maxHeaderListSize),
    initialWindowSize: sizeBytes(LIMITS.initialWindowSize).default(DEFAULTS.listener.initialWindowSize),
    connectionWindowSize: sizeBytes(LIMITS.connectionWindowSize).default(DEFAULTS.listener.connectionWindowSize),
    maxSessionMemoryMiB: count(LIMITS.maxSessionMemoryMiB).default(DEFAULTS.listener.maxSessionMemoryMiB),
    faults: z.array(z.unknown(), { error: expected("a list of fault rules") }).default([]),
    faultHeaders: flag.default(false),
    faultTrailer: flag.default(false),
    streamIdleTimeout: durationMs(0).default(DEFAULTS.listener.streamIdleTimeoutMs),
    maxConnectionAge: durationMs(1).nullable().default(DEFAULTS.listener.maxConnectionAgeMs),
    maxConnectionAgeGrace: durationMs(0).default(DEFAULTS.listener.maxConnectionAgeGraceMs),
    idleTimeout: durationMs(1).nullable().default(DEFAULTS.listener.idleTimeoutMs),
    maxConnections: count(LIMITS.maxConnections).nullable().default(DEFAULTS.listener.maxConnections),
    requestHeadersTimeout: durationMs(1).nullable().default(DEFAULTS.listener.requestHeadersTimeoutMs),
    healthService: flag.default(DEFAULTS.listener.healthService),
    attemptsHeader: flag.default(DEFAULTS.listener.attemptsHeader),
    tls: listenerTls.nullable().default(DEFAULTS.listener.tls),
    grpcWeb: flag.default(DEFAULTS.listener.grpcWeb),
    jsonTranscoding: jsonTranscoding.nullable().default(DEFAULTS.listener.jsonTranscoding),
    connect: flag.default(DEFAULTS.listener.connect),
    cors: cors.nullable().default(DEFAULTS.listener.cors),
    http1Address: hostPort(true).nullable().default(DEFAULTS.listener.http1Address),
  },
  { error: expected("a listener mapping") },
).superRefine((l, ctx) => {
  // These serve gRPC-Web and Connect (cors), and gRPC-Web, Connect and JSON (http1Address) only:
  // without one of them they would be a key with nothing behind it.
  if (!l.grpcWeb && !l.connect && l.cors !== null) ctx.addIssue({ code: "custom", path: ["cors"], message: "cors needs grpcWeb: true or connect: true (it answers browsers' gRPC-Web and Connect calls)" });
  if (!l.grpcWeb && !l.connect && l.jsonTranscoding === null && l.http1Address !== null) {
    ctx.addIssue({ code: "custom", path: ["http1Address"], message: "http1Address needs grpcWeb: true, connect: true or jsonTranscoding (it serves gRPC-Web, Connect and JSON over HTTP/1.1)" });
  }
});
