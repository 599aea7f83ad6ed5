// Every UTF-8 decoder in src/ reads protocol text (protobuf strings, names, messages), never a file:
// a leading U+FEFF there is a character, and the peers that judge dojang keep it (protobufjs,
// grpc-go, connect-go). The WHATWG TextDecoder drops it unless built with ignoreBOM: true, which is
// how proto-wire.ts once read a header value differently from protobufjs; this holds the class.
import { readFileSync, readdirSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const SRC = resolve(import.meta.dirname, "../../src");

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith(".ts") && !e.name.endsWith(".gen.ts") ? [join(dir, e.name)] : []));
}

describe("UTF-8 decoders", () => {
  it("each is built with ignoreBOM: true", () => {
    const found: string[] = [];
    const wrong: string[] = [];
    for (const f of sources(SRC)) {
      for (const m of readFileSync(f, "utf8").matchAll(/new TextDecoder\(([^)]*)\)/g)) {
        const args = m[1]!;
        if (/latin1|ascii|utf-16/i.test(args)) continue;
        found.push(relative(SRC, f));
        if (!/ignoreBOM:\s*true/.test(args)) wrong.push(`${relative(SRC, f)}: new TextDecoder(${args})`);
      }
    }
    expect(found.length).toBeGreaterThanOrEqual(5);
    expect(wrong).toEqual([]);
  });
});
