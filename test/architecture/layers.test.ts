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
  // the listening sockets `dojang upgrade` hands from one process to the next (what listen() takes)
  ["proxy/upgrade-sockets.ts", "listener"],
  ["proxy/snapshot.ts", "snapshot"],
  // the xDS client and the mapping of xDS resources onto the config (issue 20): it hands Dojang a
  // config to reload, so it sits below dojang and knows nothing of the snapshot
  ["xds/", "xds"],
  ["proxy/dojang.ts", "dojang"],
  // the whole-config reload transaction, run by Dojang on its own state (a ReloadHost)
  ["proxy/reload.ts", "dojang"],
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
  // `dojang stat`, `top`, `tap`: CLI subcommands reading the admin listener (GET /stats, /tap)
  ["views/", "main"],
  ["pid-file.ts", "main"],
  // --stop-with-parent's record of who started dojang, taken first in src/cli.ts and src/main.ts
  ["parent.ts", "main"],
  // `dojang upgrade`: the processes' side (upgrade.ts) and the command (upgrade-command.ts)
  ["upgrade.ts", "main"],
  ["upgrade-command.ts", "main"],
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
 * file may import the values of the files before it only; a type-only import may go up the order
 * (request-body.ts names retry.ts's RetryController), but no file names the Call: each helper
 * declares the host it sees and call.ts implements them (the cycle rule below, issue 30 item 2).
 */
const CALL_ORDER = [
  "headers.ts",
  "downstream.ts",
  "active.ts",
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
    values: ["node:http2", "node:http", "node:https", "node:net", "node:tls", "node:crypto", "node:events", "node:stream", "node:module", "node:fs", "node:path", "node:diagnostics_channel"],
    types: ["pino"],
  },
  snapshot: { values: [], types: ["pino"] },
  xds: { values: ["@grpc/grpc-js", "prom-client", "yaml", "node:fs", "node:os", "node:path", "node:crypto"], types: ["pino"] },
  dojang: { values: ["node:fs", "node:path", "node:net", "node:cluster", "prom-client"], types: ["pino"] },
  // node:child_process, node:crypto and node:os: `dojang upgrade` starts the new process, names its request, reads signal numbers
  main: { values: ["@grpc/grpc-js", "node:http2", "node:net", "node:util", "node:fs", "node:path", "yaml", "node:child_process", "node:crypto", "node:os"], types: ["pino"] },
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

/**
 * One concept, one place (house review 3, change 1): gRPC's 5-byte message prefix is read and
 * written by src/translate/framing.ts only (writePrefix, prefixFlag, messageLength, prefixAcross,
 * the scanner), and a bridged call is made in one place, downstream/bridge.ts startCall, from the
 * one head builder (bridgeHead); the listener reaches the bridges only through its table,
 * downstream/dispatch.ts.
 */
const HAND_PREFIX: readonly [string, RegExp][] = [
  ["readUInt32BE", /\breadUInt32BE\b/],
  ["writeUInt32BE", /\bwriteUInt32BE\b/],
  ["a 5-byte buffer", /\balloc(?:Unsafe)?\(\s*5\s*\)/],
  ["a length from bytes 1..4", /\[\s*(?:\w+\s*\+\s*)?1\s*\]\s*\*\s*0x1000000|<<\s*24\b/],
];

function handPrefixes(text: string): string[] {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/\/\/.*$/gm, "");
  return HAND_PREFIX.filter(([, re]) => re.test(code)).map(([what]) => what);
}

describe("one prefix reader and writer, one way a bridged call starts", () => {
  it("finds a hand-made prefix when there is one (a check that the rule can fail)", () => {
    expect(handPrefixes("const p = Buffer.allocUnsafe(5);\np.writeUInt32BE(n, 1);")).toEqual(["writeUInt32BE", "a 5-byte buffer"]);
    expect(handPrefixes("const len = b.readUInt32BE(1);")).toEqual(["readUInt32BE"]);
    expect(handPrefixes("const n = (b[1] << 24) | b[2];")).toEqual(["a length from bytes 1..4"]);
    expect(handPrefixes("// b.readUInt32BE(1) in a comment\nconst f = messageLength(b);")).toEqual([]);
  });

  describe.each(files.filter((f) => f !== "translate/framing.ts").map((f) => [f] as const))("%s", (file) => {
    it("reads and writes no message prefix by hand", () => {
      expect(handPrefixes(readFileSync(join(SRC, file), "utf8"))).toEqual([]);
    });
  });

  it("only call.ts and downstream/bridge.ts make a Call, and only the listener's table names a bridge's entry", () => {
    const makers = files.filter((f) => /\bnew Call\s*\(/.test(readFileSync(join(SRC, f), "utf8")));
    expect(makers.sort()).toEqual(["proxy/call/call.ts", "proxy/downstream/bridge.ts"]);
    const bridges = ["proxy/downstream/grpc-web.ts", "proxy/downstream/connect.ts", "proxy/downstream/transcode.ts"];
    const importers = files.filter((f) => importsOf(readFileSync(join(SRC, f), "utf8")).some((s) => bridges.some((b) => relative(SRC, resolve(SRC, dirname(f), s)).replace(/\.js$/, ".ts") === b)));
    expect(importers.sort()).toEqual(["proxy/downstream/dispatch.ts"]);
  });
});

/**
 * One writer for every call field (issue 30 item 2; house review 3 §3: 20 of Call's fields were
 * assigned outside call.ts, 10 of them from two files, `done` among them). Each mutable field of
 * Call has the one file that may assign it, written here as a literal: call.ts for most (the status
 * in settle() only, `responded` and `pendingTrailers` through markResponded() and
 * setPendingTrailers()), and the helper that owns a piece of the call's state for the rest. A
 * helper sees the call through a narrow host it declares (RetryHost, ClockHost, RespondHost, …);
 * TypeScript keeps a `readonly` field of a host unwritten, so the rule is: a host may declare a call
 * field writable only in the field's own file. A text scan of the assignments backs it up.
 */
const CALL_FIELD_WRITERS: Readonly<Record<string, string>> = {
  requestId: "call.ts",
  prevAttempts: "call.ts",
  route: "call.ts",
  attempt: "call.ts",
  // the controller, made at the start (a route's policy) or for a transparent retry
  retry: "retry.ts",
  attempts: "call.ts",
  // the request side: what a transparent retry may replay, and the request's end
  replayChunk: "request-body.ts",
  reqEnded: "request-body.ts",
  headBase: "call.ts",
  countedCall: "call.ts",
  // the clocks: the deadline and its timer, the idle watch
  deadlineAt: "deadline.ts",
  budgetInMs: "call.ts",
  budgetOutMs: "deadline.ts",
  timer: "deadline.ts",
  idleGroup: "deadline.ts",
  idleMs: "deadline.ts",
  idleSeen: "idle.ts",
  idleSlot: "idle.ts",
  activeSlot: "active.ts",
  responded: "call.ts",
  // the status: settle() only
  done: "call.ts",
  code: "call.ts",
  message: "call.ts",
  messageEncoded: "call.ts",
  decidedBy: "call.ts",
  pendingTrailers: "call.ts",
  filters: "call.ts",
  held: "call.ts",
  responseTakenOver: "call.ts",
  trailersHeld: "call.ts",
  upHeaders: "call.ts",
  upEndStream: "call.ts",
  // the upstream's trailers, held until its body has ended
  upTrailers: "response-body.ts",
  reading: "call.ts",
  downDrainHooked: "call.ts",
  countedAtHead: "call.ts",
  trace: "call.ts",
  replyType: "call.ts",
};

interface Member {
  readonly name: string;
  readonly readonly: boolean;
}

const uncomment = (text: string): string => text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/\/\/.*$/gm, "");

/** The fields (not methods) of the class or interface body that starts at `at` (its members at two spaces' indent). */
function membersAt(code: string, at: number): Member[] {
  const open = code.indexOf("{", at);
  const end = code.indexOf("\n}", open);
  const body = code.slice(open + 1, end);
  const out: Member[] = [];
  for (const m of body.matchAll(/^ {2}((?:readonly |private |public |protected |static )*)([A-Za-z_$][\w$]*)[?!]?\s*(?::|=)/gm)) {
    out.push({ name: m[2]!, readonly: m[1]!.includes("readonly") });
  }
  return out;
}

/** Call's fields, parsed from call.ts; `implements`: the interfaces it names. */
function callClass(text: string): { fields: Member[]; implements: string[] } {
  const code = uncomment(text);
  const at = code.search(/export class Call\b/);
  const head = code.slice(at, code.indexOf("{", at));
  const impl = /\bimplements\b([\s\S]*)$/.exec(head)?.[1] ?? "";
  return { fields: membersAt(code, at), implements: impl.split(",").map((s) => s.trim()).filter((s) => s !== "") };
}

interface Iface {
  readonly file: string;
  readonly extends: readonly string[];
  readonly props: readonly Member[];
}

/** The interfaces a file declares, by name. */
function interfacesIn(file: string, text: string): Map<string, Iface> {
  const code = uncomment(text);
  const out = new Map<string, Iface>();
  for (const m of code.matchAll(/^(?:export )?interface ([A-Za-z_$][\w$]*)(?:<[^>{]*>)?(?:\s+extends\s+([^{]+))?\s*\{/gm)) {
    const ext = (m[2] ?? "").split(",").map((s) => s.trim().replace(/<.*$/, "")).filter((s) => s !== "");
    out.set(m[1]!, { file, extends: ext, props: membersAt(code, m.index) });
  }
  return out;
}

/** "Host (file) lets field be written" for each host of Call that exposes a call field as writable outside its one file. */
function hostViolations(fields: readonly Member[], roots: readonly string[], ifaces: ReadonlyMap<string, readonly Iface[]>): string[] {
  const mutable = new Set(fields.filter((f) => !f.readonly).map((f) => f.name));
  const out: string[] = [];
  const seen = new Set<string>();
  const todo = [...roots];
  while (todo.length > 0) {
    const name = todo.pop()!;
    if (seen.has(name)) continue;
    seen.add(name);
    for (const i of ifaces.get(name) ?? []) {
      todo.push(...i.extends);
      for (const p of i.props) {
        if (p.readonly || !mutable.has(p.name)) continue;
        const writer = CALL_FIELD_WRITERS[p.name];
        if (writer === undefined || i.file !== `proxy/call/${writer}`) out.push(`${name} (${i.file}) lets ${p.name} be written (its writer: ${writer ?? "none named"})`);
      }
    }
  }
  return out;
}

/** "field: file" for each assignment of a call field through a call's name (`this` in call.ts; `c`, `call`, `host`, `this.call` in call/; `call`, `this.call` elsewhere). */
function fieldWrites(file: string, text: string, names: readonly string[]): string[] {
  const code = uncomment(text);
  const recv = file === "proxy/call/call.ts" ? "this" : file.startsWith("proxy/call/") ? "(?:c|call|host|this\\.call)" : "(?:call|this\\.call)";
  const out: string[] = [];
  for (const name of names) {
    const re = new RegExp(`(?<![\\w$.])${recv}!?\\.${name}\\s*(?:=(?!=)|\\+=|-=|\\?\\?=|\\|\\|=|&&=|\\+\\+|--)|(?:\\+\\+|--)\\s*${recv}\\.${name}\\b`, "g");
    if (re.test(code)) out.push(`${name}: ${file}`);
  }
  return out;
}

describe("one writer for every call field (each mutable field of Call is assigned in one file)", () => {
  const callText = readFileSync(join(SRC, "proxy/call/call.ts"), "utf8");
  const call = callClass(callText);
  const mutable = call.fields.filter((f) => !f.readonly).map((f) => f.name);
  const ifaces = new Map<string, Iface[]>();
  for (const f of files) for (const [name, i] of interfacesIn(f, readFileSync(join(SRC, f), "utf8"))) ifaces.set(name, [...(ifaces.get(name) ?? []), i]);

  it("names the one writer of every mutable field, and only of those", () => {
    expect(call.fields.length).toBeGreaterThan(40);
    expect([...mutable].sort()).toEqual(Object.keys(CALL_FIELD_WRITERS).sort());
    for (const w of new Set(Object.values(CALL_FIELD_WRITERS))) expect(files, w).toContain(`proxy/call/${w}`);
  });

  it("finds a host that lets a field be written, and a write from the wrong file (a check that the rule can fail)", () => {
    const sample = interfacesIn("proxy/call/wire.ts", "export interface WireHost extends Base {\n  readonly down: Downstream;\n  done: boolean;\n  settle(code: number): boolean;\n}\ninterface Base {\n  responded: boolean;\n  readonly code: number;\n}\n");
    const m = new Map([...sample].map(([n, i]) => [n, [i]]));
    expect(hostViolations(call.fields, ["WireHost"], m)).toEqual([
      "WireHost (proxy/call/wire.ts) lets done be written (its writer: call.ts)",
      "Base (proxy/call/wire.ts) lets responded be written (its writer: call.ts)",
    ]);
    const own = interfacesIn("proxy/call/deadline.ts", "export interface ClockHost {\n  deadlineAt: number;\n  readonly done: boolean;\n}\n");
    expect(hostViolations(call.fields, ["ClockHost"], new Map([...own].map(([n, i]) => [n, [i]])))).toEqual([]);
    // (in the order of Call's fields)
    expect(fieldWrites("proxy/call/respond.ts", "c.done = true;\nc.responded ||= true;\nif (c.code === 0) c.attempts++;\n// c.message = 'x';\nx.c.held = undefined;", mutable)).toEqual([
      "attempts: proxy/call/respond.ts",
      "responded: proxy/call/respond.ts",
      "done: proxy/call/respond.ts",
    ]);
    expect(fieldWrites("proxy/call/call.ts", "this.done = true;\nc.done = true;", mutable)).toEqual(["done: proxy/call/call.ts"]);
    expect(fieldWrites("proxy/downstream/bridge.ts", "call.decidedBy = 'x';\nc.decidedBy = 'y';", mutable)).toEqual(["decidedBy: proxy/downstream/bridge.ts"]);
  });

  it("no host of Call lets a field be written outside its one file", () => {
    expect(call.implements).toEqual(expect.arrayContaining(["RetryHost", "RespondHost", "WireHost", "ClockHost"]));
    expect(hostViolations(call.fields, call.implements, ifaces)).toEqual([]);
  });

  it("every assignment of a call field is in the field's file", () => {
    const wrong: string[] = [];
    for (const f of files.filter((f) => f.startsWith("proxy/"))) {
      for (const w of fieldWrites(f, readFileSync(join(SRC, f), "utf8"), mutable)) {
        const [name] = w.split(":");
        if (f !== `proxy/call/${CALL_FIELD_WRITERS[name!]}`) wrong.push(w);
      }
    }
    expect(wrong).toEqual([]);
  });

  it("only call.ts and downstream/bridge.ts (which makes a bridged call) name the Call class itself", () => {
    const namesCall = (text: string): boolean => /\bimport\b[^;]*\bCall\b[^;]*\bfrom\s*["'][^"']*\bcall\.js["']/.test(uncomment(text));
    expect(namesCall('import type { Call } from "./call.js";')).toBe(true);
    expect(namesCall('import { handleStream, type CallContext } from "./call/call.js";')).toBe(false);
    expect(files.filter((f) => f !== "proxy/call/call.ts" && namesCall(readFileSync(join(SRC, f), "utf8")))).toEqual(["proxy/downstream/bridge.ts"]);
  });
});

describe("no import cycle inside proxy/call/, type imports included (each helper declares the host it sees)", () => {
  const callFiles = files.filter((f) => f.startsWith("proxy/call/"));
  const callImports = (file: string, text: string): string[] =>
    importsOf(text)
      .filter((s) => s.startsWith("."))
      .map((s) => relative(SRC, resolve(SRC, dirname(file), s)).split("\\").join("/").replace(/\.js$/, ".ts"))
      .filter((t) => t.startsWith("proxy/call/"));

  it("finds none", () => {
    expect(callFiles.length).toBeGreaterThan(15);
    expect(runtimeCycles(new Map(callFiles.map((f) => [f, callImports(f, readFileSync(join(SRC, f), "utf8"))])))).toEqual([]);
  });

  it("counts a type import of the Call as an edge (a check that the rule can fail)", () => {
    const g = new Map([
      ["proxy/call/call.ts", callImports("proxy/call/call.ts", 'import { recordCall } from "./record.js";')],
      ["proxy/call/record.ts", callImports("proxy/call/record.ts", 'import type { Call } from "./call.js";')],
    ]);
    expect(runtimeCycles(g)).toEqual(["proxy/call/call.ts -> proxy/call/record.ts -> proxy/call/call.ts"]);
  });
});
