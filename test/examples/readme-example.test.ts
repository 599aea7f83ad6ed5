// The test harness guide's example (docs/guides/test-harness.md; in the README until issue 19) is
// what a user copies into their project, so it must be the file
// this repository runs (test/examples/harness.test.ts), byte for byte, and import nothing a user
// does not have: only dojang, @grpc/grpc-js and vitest. test/process/pack.test.ts runs the same
// block against the packed, installed package.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { DOC_PAGES, HARNESS_MARKER, readDoc, readmeBlockAfter } from "../helpers/readme.js";

const readme = readDoc(DOC_PAGES.testHarness);

describe("the test harness guide's example", () => {
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
