// What the served process evaluates when it starts: the modules src/main.ts reaches through
// static imports (esbuild's own resolution of the real sources, type-only imports dropped; a
// dynamic import() is a later, optional load). Two rules keep the idle process small
// (README, Memory budget):
// - the config parsers (zod, yaml, the schema and the fault rule parser) are not among them:
//   the launcher hands the parsed config over and src/config/parsers.ts loads them on first use;
// - no module ES-imports node:http: that builds node:http's namespace, whose lazy WebSocket
//   getter loads undici (src/proxy/downstream/node-http.ts).
import { build, type Metafile } from "esbuild";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../..");

async function metafile(entry: string): Promise<Metafile> {
  const r = await build({ absWorkingDir: ROOT, entryPoints: [entry], bundle: true, platform: "node", format: "esm", write: false, metafile: true, logLevel: "silent", outdir: "out" });
  return r.metafile;
}

/** Each module reached from `entry` through static imports only, with the chain that reaches it. */
function eager(meta: Metafile, entry: string): Map<string, string[]> {
  const chains = new Map<string, string[]>([[entry, [entry]]]);
  const queue = [entry];
  while (queue.length > 0) {
    const from = queue.shift()!;
    for (const i of meta.inputs[from]?.imports ?? []) {
      if (i.kind !== "import-statement" || i.external === true || chains.has(i.path)) continue;
      chains.set(i.path, [...chains.get(from)!, i.path]);
      queue.push(i.path);
    }
  }
  return chains;
}

const PARSERS = /^(node_modules\/(zod|yaml)\/|src\/config\/(schema|parse|load|default|index|json-schema)\.ts$|src\/config\/schema\/|src\/config\/faults\/(parse|format)\.ts$|src\/config\/faults\/schema\/)/;

describe("the served process's start-up imports", () => {
  it("leave the config parsers out: they are in the bundle, behind import()", async () => {
    const meta = await metafile("src/main.ts");
    const chains = eager(meta, "src/main.ts");
    const loaded = [...chains.entries()].filter(([p]) => PARSERS.test(p)).map(([, chain]) => chain.join(" -> "));
    expect(loaded).toEqual([]);
    // jose (the jwt filter's JOSE library) is loaded on first use too: a process without jwt routes never evaluates it
    expect([...chains.keys()].filter((p) => p.startsWith("node_modules/jose/"))).toEqual([]);
    // sanity: the walk does reach the proxy, and the parsers are in the bundle, behind import()
    expect(chains.has("src/proxy/dojang.ts")).toBe(true);
    expect(Object.keys(meta.inputs).some((p) => p.startsWith("node_modules/zod/"))).toBe(true);
  });

  it("leave JSON transcoding out (a listener with jsonTranscoding loads it): @bufbuild/protobuf is behind import()", async () => {
    const meta = await metafile("src/main.ts");
    const chains = eager(meta, "src/main.ts");
    const loaded = [...chains.entries()].filter(([p]) => p.startsWith("node_modules/@bufbuild/") || p === "src/proxy/downstream/transcode.ts").map(([, chain]) => chain.join(" -> "));
    expect(loaded).toEqual([]);
    expect(Object.keys(meta.inputs).some((p) => p.startsWith("node_modules/@bufbuild/protobuf/"))).toBe(true);
  });

  it("never ES-import node:http (its namespace loads undici)", async () => {
    const meta = await metafile("src/main.ts");
    const offenders = Object.entries(meta.inputs)
      .filter(([p]) => p.startsWith("src/"))
      .filter(([, input]) => input.imports.some((i) => i.external === true && (i.path === "node:http" || i.path === "http") && i.kind === "import-statement"))
      .map(([p]) => p);
    expect(offenders).toEqual([]);
  });
});
