// Architecture rule (style.md §5, issue 11 step 1): imports under src/ go one way,
// translate ← config ← observe ← upstream ← call ← filters ← listener ← snapshot ← xds ← dojang ← main.
// Every import statement of every file under src/ is parsed, both ends are mapped to their layer,
// and no import may reach a higher layer. Same-layer imports are allowed (a type-only cycle inside
// a layer is a file-level matter); this test is about the direction between layers.
// Also here (issue 19): no run-time import cycle, dynamic import() included; which packages each
// layer may import; no clock or randomness read directly in call/ and upstream/ (injected, as in
// translate/, whose own purity test is test/translate/purity.test.ts).
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const SRC = resolve(import.meta.dirname, "../../src");

/** Lowest first. A file's layer is the first rule whose prefix its path (relative to src/) starts with. */
const LAYERS = ["translate", "config", "observe", "protos", "upstream", "call", "filters", "listener", "snapshot", "xds", "dojang", "main"] as const;
type Layer = (typeof LAYERS)[number];
const RULES: readonly [prefix: string, layer: Layer][] = [
  ["translate/", "translate"],
  // errors.ts imports nothing; config's issues name it, so it sits at the bottom with translate.
  ["errors.ts", "translate"],
  // the version string, which imports nothing (src/main.ts's --version, the library entry)
  ["version.ts", "translate"],
  ["config/", "config"],
  ["proxy/observe/", "observe"],
  // the protobuf services dojang calls (xDS, rate-limit, authorization): descriptors generated at build
  ["protos/", "protos"],
  ["proxy/upstream/", "upstream"],
  ["proxy/call/", "call"],
  // the route table is what a call matches against: a call-layer concept (generic in its cluster)
  ["proxy/router.ts", "call"],
  ["proxy/filters/", "filters"],
  ["proxy/listener.ts", "listener"],
  // the client side of a listener: TLS (tls.ts), gRPC-Web, protections; each may use call/
  ["proxy/downstream/", "listener"],
  // the admin HTTP server is a listener of its own (it knows nothing of calls)
  ["proxy/admin/", "listener"],
  ["proxy/snapshot.ts", "snapshot"],
  // the xDS client and the mapping of xDS resources onto the config (issue 20): it hands Dojang a
  // config to reload, so it sits below dojang and knows nothing of the snapshot
  ["xds/", "xds"],
  ["proxy/dojang.ts", "dojang"],
  // workers run Dojang instances in a cluster of processes
  ["proxy/workers.ts", "dojang"],
  ["main.ts", "main"],
  ["index.ts", "main"],
  ["cli.ts", "main"],
  ["demo.ts", "main"],
  // `dojang health`: a CLI subcommand (reads the config, asks the admin's /ready)
  ["health.ts", "main"],
  // the launcher's part that reads the config before node is re-executed (src/cli.ts)
  ["launch.ts", "main"],
  // `dojang reload` (a CLI subcommand) and the pid file it and the CLI share
  ["reload-command.ts", "main"],
  ["pid-file.ts", "main"],
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

describe("imports under src/ go one way (translate ← config ← observe ← upstream ← call ← filters ← listener ← snapshot ← xds ← dojang ← main)", () => {
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

describe("no import cycles at run time (grpc-js runs madge -c; type-only imports are erased and may cycle)", () => {
  it("finds none among the value imports of src/", () => {
    expect(runtimeCycles(new Map(files.map((f) => [f, valueImports(f, readFileSync(join(SRC, f), "utf8"))])))).toEqual([]);
  });

  it("finds a cycle when there is one (a check that the search can fail)", () => {
    const g = new Map([
      ["a.ts", ["b.ts"]],
      ["b.ts", ["c.ts"]],
      ["c.ts", ["a.ts"]],
      ["d.ts", ["a.ts"]],
    ]);
    expect(runtimeCycles(g)).toEqual(["a.ts -> b.ts -> c.ts -> a.ts"]);
    expect(valueImports("x/y.ts", 'import type { A } from "./a.js";\nexport type { B } from "../b.js";\nimport { c } from "./c.js";')).toEqual(["x/c.ts"]);
    // a module loaded on demand is an edge; a type written as typeof import() is not
    expect(valueImports("x/y.ts", 'const m = await import("./d.js");\ntype E = typeof import("./e.js");')).toEqual(["x/d.ts"]);
    const lazy = new Map([
      ["config/parsers.ts", valueImports("config/parsers.ts", 'export const load = () => import("./index.js");')],
      ["config/index.ts", ["config/parsers.ts"]],
    ]);
    expect(runtimeCycles(lazy)).toEqual(["config/parsers.ts -> config/index.ts -> config/parsers.ts"]);
  });
});

/**
 * Inside proxy/call/ (one layer), the files are ordered too, lowest first (house review §5): a
 * file may import the values of the files before it only; a type-only import may go either way
 * (record.ts, retry.ts and the others name the Call type; call.ts brings them together).
 */
const CALL_ORDER = [
  "headers.ts",
  "downstream.ts",
  "context.ts",
  "idle.ts",
  "retry-buffer.ts",
  "held.ts",
  "attempt.ts",
  "filter.ts",
  "request-head.ts",
  "deadline.ts",
  "filter-run.ts",
  "request-body.ts",
  "record.ts",
  "respond.ts",
  "response-body.ts",
  "retry.ts",
  "wire.ts",
  "call.ts",
] as const;

/** "a imports b" for each value import of a call/ file that goes up (or out of) CALL_ORDER. */
function callOrderViolations(file: string, text: string): string[] {
  const name = file.slice("proxy/call/".length);
  const out: string[] = [];
  for (const target of valueImports(file, text)) {
    if (!target.startsWith("proxy/call/")) continue;
    const t = target.slice("proxy/call/".length);
    const ti = (CALL_ORDER as readonly string[]).indexOf(t);
    if (ti < 0 || ti >= (CALL_ORDER as readonly string[]).indexOf(name)) out.push(`${name} imports ${t}`);
  }
  return out;
}

describe(`files inside proxy/call/ import one way (${CALL_ORDER.join(" < ")})`, () => {
  const callFiles = files.filter((f) => f.startsWith("proxy/call/"));

  it("lists every file of proxy/call/ in the order", () => {
    expect(callFiles.map((f) => f.slice("proxy/call/".length)).sort()).toEqual([...CALL_ORDER].sort());
  });

  it("flags a value import against the order, and lets a type import through (a check that the rule can fail)", () => {
    expect(callOrderViolations("proxy/call/attempt.ts", 'import { Call } from "./call.js";')).toEqual(["attempt.ts imports call.ts"]);
    expect(callOrderViolations("proxy/call/attempt.ts", 'import type { Call } from "./call.js";')).toEqual([]);
  });

  describe.each(callFiles.map((f) => [f] as const))("%s", (file) => {
    it("imports the values of earlier files only", () => {
      expect(callOrderViolations(file, readFileSync(join(SRC, file), "utf8"))).toEqual([]);
    });
  });
});

/**
 * Inside proxy/upstream/, no import cycle at all, type imports counted (house review §2, issue 19):
 * cluster → endpoint → session by value, and what a session or an endpoint needs from above is an
 * interface it declares itself (SessionOwner, EndpointHost), so each can be built and tested alone.
 */
function upstreamImports(file: string, text: string): string[] {
  return importsOf(text)
    .filter((s) => s.startsWith("."))
    .map((s) => relative(SRC, resolve(SRC, dirname(file), s)).split("\\").join("/").replace(/\.js$/, ".ts"))
    .filter((t) => t.startsWith("proxy/upstream/"));
}

describe("no import cycle inside proxy/upstream/, type imports included", () => {
  const upstreamFiles = files.filter((f) => f.startsWith("proxy/upstream/"));

  it("finds the files and none of their cycles", () => {
    expect(upstreamFiles).toEqual(expect.arrayContaining(["proxy/upstream/cluster.ts", "proxy/upstream/endpoint.ts", "proxy/upstream/session.ts"]));
    expect(runtimeCycles(new Map(upstreamFiles.map((f) => [f, upstreamImports(f, readFileSync(join(SRC, f), "utf8"))])))).toEqual([]);
  });

  it("counts a type import as an edge (a check that the rule can fail)", () => {
    const g = new Map([
      ["proxy/upstream/cluster.ts", upstreamImports("proxy/upstream/cluster.ts", 'import { Endpoint } from "./endpoint.js";')],
      ["proxy/upstream/endpoint.ts", upstreamImports("proxy/upstream/endpoint.ts", 'import type { Cluster } from "./cluster.js";\nimport type { Config } from "../../config/index.js";')],
    ]);
    expect(runtimeCycles(g)).toEqual(["proxy/upstream/cluster.ts -> proxy/upstream/endpoint.ts -> proxy/upstream/cluster.ts"]);
  });
});

/**
 * The packages (node: built-ins and npm packages) each layer may import. `values`: imported for
 * their code (import, export … from, import(), require()); `types`: also allowed as `import type`.
 * A package in neither list is refused: e.g. zod and yaml stay in config/ (and the CLI), prom-client
 * and pino values in observe/ (and the process assembly), node:http2 out of config/ and observe/.
 */
const PACKAGES: Record<Layer, { readonly values: readonly string[]; readonly types?: readonly string[] }> = {
  // transcode.ts: descriptors and the proto3 JSON mapping (JSON transcoding)
  translate: { values: ["@bufbuild/protobuf", "@bufbuild/protobuf/wkt"] },
  // node:crypto and node:tls: tls-files.ts loads certificates and keys as a start does (--check)
  config: { values: ["zod", "yaml", "node:fs", "node:path", "node:net", "node:v8", "node:crypto", "node:tls"] },
  // node:crypto (span ids); node:http and node:https (the OTLP/HTTP export, taken with require()
  // through node:module, never ES-imported: served-imports.test.ts): tracing.ts and otlp-export.ts,
  // loaded by import() when `tracing` is on
  observe: { values: ["pino", "prom-client", "node:fs", "node:os", "node:v8", "node:vm", "node:perf_hooks", "node:crypto", "node:module", "node:http", "node:https"] },
  protos: { values: ["@grpc/grpc-js", "@grpc/proto-loader", "protobufjs"] },
  upstream: { values: ["node:http2", "node:dns", "node:fs", "node:tls"], types: ["pino", "prom-client"] },
  call: { values: ["node:http2", "node:stream", "node:crypto"], types: ["pino", "node:net"] },
  // auth (issue 21): jose verifies tokens, node:https and node:fs read the JWKS, grpc-js asks the Authorization service
  filters: { values: ["node:http2", "jose", "node:https", "node:fs", "@grpc/grpc-js"], types: ["pino", "node:crypto"] },
  listener: {
    values: ["node:http2", "node:http", "node:https", "node:net", "node:tls", "node:crypto", "node:events", "node:stream", "node:module", "node:fs", "node:path"],
    types: ["pino"],
  },
  snapshot: { values: [], types: ["pino"] },
  xds: { values: ["@grpc/grpc-js", "prom-client", "yaml", "node:fs", "node:os", "node:path", "node:crypto"], types: ["pino"] },
  dojang: { values: ["node:fs", "node:path", "node:net", "node:cluster", "prom-client"], types: ["pino"] },
  main: { values: ["@grpc/grpc-js", "node:http2", "node:net", "node:util", "node:fs", "node:path", "yaml"], types: ["pino"] },
};

/** The packages `text` imports: [name, type-only]. */
function packageImports(text: string): [string, boolean][] {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
  const out: [string, boolean][] = [];
  for (const m of code.matchAll(/^\s*(?:import|export)(\s+type\b)?[^;]*?\bfrom\s*["']([^"']+)["']/gm)) out.push([m[2]!, m[1] !== undefined]);
  for (const m of code.matchAll(/^\s*import\s*["']([^"']+)["']/gm)) out.push([m[1]!, false]);
  for (const m of code.matchAll(/(?<!\btypeof\s+)\bimport\s*\(\s*["']([^"']+)["']\s*\)/g)) out.push([m[1]!, false]);
  for (const m of code.matchAll(/\brequire\s*\(\s*["']([^"']+)["']\s*\)/g)) out.push([m[1]!, false]);
  return out.filter(([p]) => !p.startsWith("."));
}

/** "file (layer) imports pkg" for each package import the layer's list does not allow. */
function packageViolations(file: string, text: string): string[] {
  const layer = layerOf(file)!;
  const allowed = PACKAGES[layer];
  return packageImports(text)
    .filter(([p, typeOnly]) => !allowed.values.includes(p) && !(typeOnly && (allowed.types ?? []).includes(p)))
    .map(([p, typeOnly]) => `${file} (${layer}) imports ${typeOnly ? "types of " : ""}${p}`);
}

describe("each layer imports only the packages it is allowed", () => {
  it("finds a package the layer may not import (a check that the rule can fail)", () => {
    expect(packageViolations("config/x.ts", 'import http2 from "node:http2";\nimport type { Logger } from "pino";')).toEqual(["config/x.ts (config) imports node:http2", "config/x.ts (config) imports types of pino"]);
    expect(packageViolations("proxy/call/x.ts", 'import { Registry } from "prom-client";\nconst z = await import("zod");\nconst h = require("node:http");')).toEqual([
      "proxy/call/x.ts (call) imports prom-client",
      "proxy/call/x.ts (call) imports zod",
      "proxy/call/x.ts (call) imports node:http",
    ]);
    expect(packageViolations("proxy/call/x.ts", 'import type { Logger } from "pino";\nimport http2 from "node:http2";')).toEqual([]);
  });

  describe.each(files.map((f) => [f] as const))("%s", (file) => {
    it("imports only its layer's packages", () => {
      expect(packageViolations(file, readFileSync(join(SRC, file), "utf8"))).toEqual([]);
    });
  });
});

/**
 * call/ and upstream/ read no clock and draw no random number themselves: both are injected (the
 * call's ctx.now, a cluster's now/rand), so that a test can drive them, as in translate/. The
 * default of an injected parameter is the one place the real one is named (`?? Math.random`,
 * `= performance.now.bind(performance)`). `new Date(t)` formats a time it was given and is fine.
 */
const CLOCK_DIRS = ["proxy/call/", "proxy/upstream/", "proxy/router.ts"];
const CLOCK_READS: readonly [string, RegExp][] = [
  ["Date.now()", /\bDate\.now\b/g],
  ["new Date()", /\bnew\s+Date\s*\(\s*\)/g],
  ["performance.now()", /\bperformance\.now\b/g],
  ["process.hrtime", /\bprocess\.hrtime\b/g],
  ["Math.random", /\bMath\.random\b/g],
];
/** The default of an injected clock or random source: `?? x`, `= x` (a parameter default), `rand: x`. */
const INJECTED_DEFAULT = /(?:\?\?|=|\brand:)\s*(?:performance\.now\.bind\(performance\)|Math\.random(?![\w$]|\s*\()|Date\.now(?![\w$]|\s*\())/g;
/**
 * Reads that are still direct, each with how many times the file has it. Empty: the last two (the
 * retry draw, now CallContext.rand; /clusters' wall clock, now ClusterOptions.wall) were injected.
 * A new entry needs a reason, and goes once its file takes the clock or random source injected.
 */
const CLOCK_ALLOWED: Readonly<Record<string, Readonly<Record<string, number>>>> = {};

/** "what" → count of direct clock and random reads in `text` (injected defaults left out). */
function clockReads(text: string): Record<string, number> {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/\/\/.*$/gm, "").replace(INJECTED_DEFAULT, "");
  const out: Record<string, number> = {};
  for (const [what, re] of CLOCK_READS) {
    const n = [...code.matchAll(re)].length;
    if (n > 0) out[what] = n;
  }
  return out;
}

describe("call/ and upstream/ take their clock and randomness injected", () => {
  const clockFiles = files.filter((f) => CLOCK_DIRS.some((d) => f === d || f.startsWith(d)));

  it("finds the files, and a direct read when there is one (a check that the rule can fail)", () => {
    expect(clockFiles.length).toBeGreaterThan(10);
    expect(clockReads("const t = Date.now();\nconst u = performance.now() + Math.random();\nconst d = new Date();")).toEqual({ "Date.now()": 1, "new Date()": 1, "performance.now()": 1, "Math.random": 1 });
    expect(clockReads("this.now = opts.now ?? performance.now.bind(performance);\nthis.rand = opts.rand ?? Math.random;\nconstructor(private readonly now: () => number = performance.now.bind(performance)) {}\nconst p = buildPicker({ rand: Math.random });\nconst at = new Date(ms).toISOString();")).toEqual({});
    // an injected default is not a place to draw from: calling it is a read
    expect(clockReads("const x = opts.rand ?? Math.random();")).toEqual({ "Math.random": 1 });
  });

  it("the allow-list names only files that still need it", () => {
    for (const [file, allowed] of Object.entries(CLOCK_ALLOWED)) expect(clockReads(readFileSync(join(SRC, file), "utf8")), file).toEqual(allowed);
  });

  describe.each(clockFiles.map((f) => [f] as const))("%s", (file) => {
    it("reads no clock and draws no random number of its own", () => {
      expect(clockReads(readFileSync(join(SRC, file), "utf8"))).toEqual(CLOCK_ALLOWED[file] ?? {});
    });
  });
});

/**
 * The src-relative files `file` imports for their values (`import type` / `export type` left
 * out), dynamic `import("…")` included: a module loaded on demand is still loaded, and a cycle
 * through it works or not depending on which side was evaluated first (`typeof import("…")` is a
 * type and left out).
 */
function valueImports(file: string, text: string): string[] {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
  const specs: string[] = [];
  for (const m of code.matchAll(/^\s*(?:import|export)(\s+type\b)?[^;]*?\bfrom\s*["']([^"']+)["']/gm)) if (m[1] === undefined) specs.push(m[2]!);
  for (const m of code.matchAll(/(?<!\btypeof\s+)\bimport\s*\(\s*["']([^"']+)["']\s*\)/g)) specs.push(m[1]!);
  return specs.filter((s) => s.startsWith(".")).map((s) => relative(SRC, resolve(SRC, dirname(file), s)).split("\\").join("/").replace(/\.js$/, ".ts"));
}

/** Each cycle once, as "a -> b -> a", found by a depth-first search. */
function runtimeCycles(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const state = new Map<string, 1 | 2>();
  const stack: string[] = [];
  const found: string[] = [];
  const visit = (n: string): void => {
    state.set(n, 1);
    stack.push(n);
    for (const m of graph.get(n) ?? []) {
      if (state.get(m) === 1) found.push([...stack.slice(stack.indexOf(m)), m].join(" -> "));
      else if (!state.has(m)) visit(m);
    }
    stack.pop();
    state.set(n, 2);
  };
  for (const n of graph.keys()) if (!state.has(n)) visit(n);
  return found;
}

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
