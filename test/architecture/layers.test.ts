// Architecture rule (style.md §5, issue 11 step 1): imports under src/ go one way,
// translate ← config ← observe ← upstream ← call ← filters ← listener ← snapshot ← dojang ← main.
// Every import statement of every file under src/ is parsed, both ends are mapped to their layer,
// and no import may reach a higher layer. Same-layer imports are allowed (a type-only cycle inside
// a layer is a file-level matter); this test is about the direction between layers.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const SRC = resolve(import.meta.dirname, "../../src");

/** Lowest first. A file's layer is the first rule whose prefix its path (relative to src/) starts with. */
const LAYERS = ["translate", "config", "observe", "upstream", "call", "filters", "listener", "snapshot", "dojang", "main"] as const;
type Layer = (typeof LAYERS)[number];
const RULES: readonly [prefix: string, layer: Layer][] = [
  ["translate/", "translate"],
  // errors.ts imports nothing; config's issues name it, so it sits at the bottom with translate.
  ["errors.ts", "translate"],
  ["config/", "config"],
  ["proxy/observe/", "observe"],
  ["proxy/upstream/", "upstream"],
  ["proxy/call/", "call"],
  // the route table is what a call matches against: a call-layer concept (generic in its cluster)
  ["proxy/router.ts", "call"],
  ["proxy/filters/", "filters"],
  ["proxy/listener.ts", "listener"],
  // the admin HTTP server is a listener of its own (it knows nothing of calls)
  ["proxy/admin/", "listener"],
  ["proxy/snapshot.ts", "snapshot"],
  ["proxy/dojang.ts", "dojang"],
  // workers run Dojang instances in a cluster of processes
  ["proxy/workers.ts", "dojang"],
  ["main.ts", "main"],
  ["index.ts", "main"],
  ["cli.ts", "main"],
  ["demo.ts", "main"],
  // `dojang health`: a CLI subcommand (reads the config, asks the admin's /ready)
  ["health.ts", "main"],
];

function layerOf(rel: string): Layer | undefined {
  for (const [prefix, layer] of RULES) if (rel === prefix || rel.startsWith(prefix)) return layer;
  return undefined;
}

function listFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? listFiles(join(dir, e.name)) : [join(dir, e.name)]));
}

/** Module specifiers of static imports, `export … from`, and dynamic import("…"), comments removed. */
export function importsOf(text: string): string[] {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
  const out: string[] = [];
  for (const m of code.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s*["']([^"']+)["']/gm)) out.push(m[1]!);
  for (const m of code.matchAll(/^\s*import\s*["']([^"']+)["']/gm)) out.push(m[1]!);
  for (const m of code.matchAll(/\bimport\s*\(\s*["']([^"']+)["']\s*\)/g)) out.push(m[1]!);
  return out;
}

const files = listFiles(SRC)
  .filter((f) => f.endsWith(".ts"))
  .map((f) => relative(SRC, f).split("\\").join("/"));

describe("imports under src/ go one way (translate ← config ← observe ← upstream ← call ← filters ← listener ← snapshot ← dojang ← main)", () => {
  it("finds the source files and every one has a layer", () => {
    expect(files.length).toBeGreaterThan(40);
    expect(files.filter((f) => layerOf(f) === undefined)).toEqual([]);
  });

  it("parses import statements of every form (a check that the parser finds what it must)", () => {
    const sample = [
      'import a from "./a.js";',
      'import type { B } from "../b.js";',
      "import {\n  c,\n  type D,\n} from '../../c.js';",
      'export * from "./e.js";',
      'export { f } from "./f.js";',
      'import "./side-effect.js";',
      'const g = await import("./g.js");',
      '// import h from "./commented.js";',
      '/* import i from "./block-commented.js"; */',
    ].join("\n");
    expect(importsOf(sample)).toEqual(["./a.js", "../b.js", "../../c.js", "./e.js", "./f.js", "./side-effect.js", "./g.js"]);
  });

  it("flags an import against the order (a check that the rule can fail)", () => {
    expect(violations("config/schema.ts", ['import type { X } from "../proxy/filters/fault/model.js";'].join("\n"))).toEqual([
      "config/schema.ts (config) imports proxy/filters/fault/model.ts (filters)",
    ]);
    expect(violations("proxy/call/call.ts", 'import { Y } from "../upstream/cluster.js";')).toEqual([]);
  });

  describe.each(files.map((f) => [f] as const))("%s", (file) => {
    it("imports nothing from a higher layer", () => {
      expect(violations(file, readFileSync(join(SRC, file), "utf8"))).toEqual([]);
    });
  });
});

/** "a (layer) imports b (layer)" for each import of `file` that goes up the order. */
function violations(file: string, text: string): string[] {
  const from = layerOf(file)!;
  const out: string[] = [];
  for (const spec of importsOf(text)) {
    if (!spec.startsWith(".")) continue; // node:*, packages: not layered here (translate's own test bans them there)
    const target = relative(SRC, resolve(SRC, dirname(file), spec)).split("\\").join("/").replace(/\.js$/, ".ts");
    const to = layerOf(target);
    if (to === undefined) {
      out.push(`${file} imports ${target}, which has no layer`);
      continue;
    }
    if (LAYERS.indexOf(to) > LAYERS.indexOf(from)) out.push(`${file} (${from}) imports ${target} (${to})`);
  }
  return out;
}
