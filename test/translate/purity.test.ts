// Architecture rule (style.md §3.8, §3.10): src/translate is pure — no Node modules, logger, metrics, clock, timers or randomness.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = new URL("../../src/translate/", import.meta.url);

function listFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? listFiles(join(dir, e.name)) : [join(dir, e.name)],
  );
}

const files = listFiles(ROOT.pathname).filter((f) => f.endsWith(".ts"));

const FORBIDDEN: readonly [string, RegExp][] = [
  ["a node: import", /["']node:/],
  ["pino", /\bpino\b/],
  ["prom-client", /prom-client/],
  ["Date.now", /\bDate\.now\b/],
  ["new Date", /\bnew\s+Date\b/],
  ["Math.random", /\bMath\.random\b/],
  ["setTimeout", /\bsetTimeout\b/],
  ["setInterval", /\bsetInterval\b/],
  ["setImmediate", /\bsetImmediate\b/],
  ["performance.now", /\bperformance\.now\b/],
  ["process.", /\bprocess\./],
  ["require()", /\brequire\s*\(/],
  ["Buffer", /\bBuffer\b/],
];

/** Packages as pure as translate itself: the protobuf runtime (descriptors, the proto3 JSON mapping; no I/O), for transcode.ts. */
const PURE_PACKAGES = new Set(["@bufbuild/protobuf", "@bufbuild/protobuf/wkt"]);

describe("src/translate purity", () => {
  it("has source files to check", () => {
    expect(files.length).toBeGreaterThanOrEqual(10);
  });

  describe.each(files.map((f) => [f.slice(ROOT.pathname.length), f] as const))("%s", (_name, file) => {
    const text = readFileSync(file, "utf8");

    it.each(FORBIDDEN)("contains no %s", (_what, re) => {
      expect(text).not.toMatch(re);
    });

    it("imports only sibling translate modules", () => {
      for (const m of text.matchAll(/\b(?:from|import)\s*\(?\s*["']([^"']+)["']/g)) {
        if (PURE_PACKAGES.has(m[1]!)) continue;
        expect(m[1]).toMatch(/^\.\/[a-z0-9-]+\.js$/);
      }
    });

    it("opens with a one-line comment saying what it owns", () => {
      expect(text.split("\n", 1)[0]).toMatch(/^\/\/ \S/);
    });
  });

  it("keeps the framing scanner free of payload copies", () => {
    const framing = readFileSync(new URL("framing.ts", ROOT), "utf8");
    const code = framing.replace(/\/\*[\s\S]*?\*\//g, "").replace(/\/\/.*$/gm, "");
    expect(code).not.toMatch(/\.(subarray|slice)\(|\bnew\s+Uint8Array\(.*chunk/);
  });
});
