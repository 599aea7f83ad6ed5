// The README's harness example is what a user copies into their project, so it must be the file
// this repository runs (test/examples/harness.test.ts), byte for byte, and import nothing a user
// does not have: only dojang, @grpc/grpc-js and vitest. test/process/pack.test.ts runs the same
// block against the packed, installed package.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");

/** The first ```ts block after `marker` in the README. */
export function readmeBlockAfter(text: string, marker: string): string {
  const at = text.indexOf(marker);
  if (at < 0) throw new Error(`README has no "${marker}"`);
  const open = text.indexOf("```ts\n", at);
  const close = text.indexOf("\n```\n", open);
  if (open < 0 || close < 0) throw new Error(`no \`\`\`ts block after "${marker}"`);
  return text.slice(open + "```ts\n".length, close + 1);
}

export const HARNESS_MARKER = "A vitest file that tests a @grpc/grpc-js client's retry policy";

describe("the README's harness example", () => {
  const block = readmeBlockAfter(readme, HARNESS_MARKER);

  it("is test/examples/harness.test.ts byte for byte", () => {
    expect(block).toBe(readFileSync(new URL("./harness.test.ts", import.meta.url), "utf8"));
  });

  it("imports only dojang, @grpc/grpc-js and vitest", () => {
    const imports = [...block.matchAll(/^import .* from "([^"]+)";$/gm)].map((m) => m[1]);
    expect(imports.sort()).toEqual(["@grpc/grpc-js", "dojang", "vitest"]);
    expect(block).not.toMatch(/helpers|\.\.\/|src\//);
  });
});
