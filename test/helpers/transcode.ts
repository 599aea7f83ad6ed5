// JSON transcoding fixtures: the test services' descriptor sets, compiled by protoc (Debian's
// protobuf-compiler, installed by scripts/engines.mjs) from test/fixtures/transcode/*.proto with
// the google/api files dojang ships in protos/, a generic grpc-js upstream for shop.proto, and the
// real grpc-gateway and its grpc-go upstream for judge.proto (test/engines/grpc-gateway).
// The shop upstream's behaviour:
//   Fail     → the status {code, message} of its request
//   Stream   → `count` copies of `item`; an item titled "then-fail" is followed by ABORTED
//   any other method → its request as its response (request and response types are the same)
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, renameSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { create, createFileRegistry, fromBinary, toBinary, type DescMessage, type FileRegistry } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { engineBinary, systemBinary } from "./engines.js";
import { spawnGroup } from "./process.js";

const ROOT = join(import.meta.dirname, "..", "..");
const PROTO_DIR = join(ROOT, "test", "fixtures", "transcode");
export const SHOP_SERVICE = "dojang.test.shop.v1.Shop";

/** The include path that holds google/api/annotations.proto, http.proto and httpbody.proto: the copies dojang ships (protos/). */
export function googleapisDir(): string {
  return join(ROOT, "protos");
}

/** .engines/<out>, the descriptor set of the .proto file `src` (with the google/api files dojang ships), compiled when missing or older than it. */
export function descriptorSet(src: string, out: string): string {
  const file = join(ROOT, ".engines", out);
  if (!existsSync(file) || statSync(file).mtimeMs < statSync(src).mtimeMs) {
    mkdirSync(dirname(file), { recursive: true });
    // (written beside, then renamed: test files that compile it at once never read half a file)
    const tmp = `${file}.${process.pid}`;
    execFileSync(systemBinary("protoc"), ["-I", dirname(src), "-I", googleapisDir(), "--include_imports", `--descriptor_set_out=${tmp}`, src], { stdio: "pipe" });
    renameSync(tmp, file);
  }
  return file;
}

/** .engines/shop.binpb (test/fixtures/transcode/shop.proto). */
export function shopDescriptorSet(): string {
  return descriptorSet(join(PROTO_DIR, "shop.proto"), "shop.binpb");
}

/** .engines/judge.binpb (test/fixtures/transcode/judge.proto, the corpus the real grpc-gateway judges). */
export function judgeDescriptorSet(): string {
  return descriptorSet(join(PROTO_DIR, "judge.proto"), "judge.binpb");
}

export function shopRegistry(): FileRegistry {
  return createFileRegistry(fromBinary(FileDescriptorSetSchema, readFileSync(shopDescriptorSet())));
}

/** A grpc-js server for Shop (generic, see the top of this file). */
export async function startShopGrpcJs(): Promise<{ address: string; close: () => Promise<void>; seen: { path: string; metadata: grpc.Metadata }[] }> {
  const reg = shopRegistry();
  const svc = reg.getService(SHOP_SERVICE)!;
  const msg = (name: string): DescMessage => reg.getMessage(`dojang.test.shop.v1.${name}`)!;
  const definition: Record<string, grpc.MethodDefinition<Buffer, Buffer>> = {};
  const impl: grpc.UntypedServiceImplementation = {};
  const seen: { path: string; metadata: grpc.Metadata }[] = [];
  const id = (b: Buffer): Buffer => b;
  for (const m of svc.methods) {
    const path = `/${SHOP_SERVICE}/${m.name}`;
    definition[m.name] = {
      path,
      requestStream: false,
      responseStream: m.methodKind === "server_streaming",
      requestSerialize: id,
      requestDeserialize: id,
      responseSerialize: id,
      responseDeserialize: id,
    };
    if (m.name === "Fail") {
      impl[m.name] = (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        seen.push({ path, metadata: call.metadata });
        const r = fromBinary(msg("FailRequest"), call.request) as unknown as { code: number; message: string };
        cb({ code: r.code, details: r.message, metadata: new grpc.Metadata() });
      };
    } else if (m.name === "Stream") {
      impl[m.name] = (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
        seen.push({ path, metadata: call.metadata });
        const r = fromBinary(msg("StreamRequest"), call.request) as unknown as { count: number; item?: { title: string } };
        const item = toBinary(msg("Item"), (r.item ?? create(msg("Item"))) as never);
        for (let i = 0; i < r.count; i++) call.write(Buffer.from(item));
        if (r.item?.title === "then-fail") call.emit("error", { code: grpc.status.ABORTED, details: "stopped after the items" });
        else call.end();
      };
    } else {
      impl[m.name] = (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        seen.push({ path, metadata: call.metadata });
        cb(null, call.request);
      };
    }
  }
  const server = new grpc.Server();
  server.addService(definition as grpc.ServiceDefinition, impl);
  const port = await new Promise<number>((resolve, reject) => server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
  return { address: `127.0.0.1:${port}`, seen, close: () => new Promise<void>((r) => server.tryShutdown(() => r())).then(() => server.forceShutdown()) };
}

/**
 * The grpc-gateway engine (test/engines/grpc-gateway: protoc-gen-grpc-gateway's handlers for
 * judge.proto on runtime.NewServeMux, or its grpc-go upstream) in one of its modes, started as a
 * process group; resolves with the first line it printed ("listening on ..."). `args`: -upstream
 * for the gateway.
 */
export async function startJudge(mode: "upstream" | "gateway", args: readonly string[] = []): Promise<string> {
  const child = spawnGroup(engineBinary("grpc-gateway"), [mode, "-listen", "127.0.0.1:0", ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let err = "";
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  return new Promise<string>((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`grpc-gateway ${mode} did not start in 30 s: ${err}`)), 30_000);
    child.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      const nl = out.indexOf("\n");
      if (nl >= 0) {
        clearTimeout(timer);
        resolve(out.slice(0, nl));
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`grpc-gateway ${mode} exited ${code}: ${err}`));
    });
  });
}
