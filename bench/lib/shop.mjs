// The JSON benches' shop: the tests' shop.proto compiled by protoc (scripts/engines.mjs installs
// it) into a descriptor set, and the one Item every JSON bench sends, POSTed to
// /v1/items/{id}:archive with body "*" (bench/json-transcoding.mjs, bench/transcoder.mjs).
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Compiles test/fixtures/transcode/shop.proto (with its google/api imports) into `dir`; returns the descriptor set's path. */
export function compileShop(dir) {
  const require = createRequire(import.meta.url);
  const googleapis = join(dirname(require.resolve("@grpc/grpc-js-xds/package.json")), "deps", "googleapis");
  const protoDir = join(REPO, "test", "fixtures", "transcode");
  const setFile = join(dir, "shop.binpb");
  execFileSync("protoc", ["-I", protoDir, "-I", googleapis, "--include_imports", `--descriptor_set_out=${setFile}`, join(protoDir, "shop.proto")]);
  return setFile;
}

/** The Item the benches send: every plain field kind of the shop's message, one nested message. */
export const ITEM = Object.freeze({ id: "item-1", title: "A Tale of Two Cities", priceCents: "1999", color: "RED", tags: ["classic", "novel"], inStock: true, size: { width: 12.5, weightGrams: "420" } });
