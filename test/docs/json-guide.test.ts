// The JSON transcoding guide says where google/api/annotations.proto and http.proto come from
// (issue "a fleet operator's first hour", item 7: it said `-I path/to/googleapis` and no more).
// The sentence after <!-- google-api-protos --> names both files, where they come from and the
// copies dojang ships in protos/; the guide's protoc line, run as written in a folder laid out as
// the sentence says (the shipped protos/ folder as dojang/protos), compiles the test service,
// whose rules use them.
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { systemBinary } from "../helpers/engines.js";
import { REPO_ROOT, tempDir } from "../helpers/process.js";
import { readDoc } from "../helpers/readme.js";

const guide = readDoc("docs/guides/json-transcoding.md");
const tmp = tempDir();
afterAll(() => tmp.remove());

describe("docs/guides/json-transcoding.md, compiling a descriptor set", () => {
  const at = guide.indexOf("<!-- google-api-protos -->");
  const sentence = at < 0 ? "" : guide.slice(at, guide.indexOf("```sh", at));
  const command = at < 0 ? "" : guide.slice(guide.indexOf("```sh", at) + 5, guide.indexOf("```", guide.indexOf("```sh", at) + 5)).trim();

  it("says where the two google/api files come from, and that dojang ships them in protos/", () => {
    expect(at).toBeGreaterThan(0);
    expect(sentence).toContain("google/api/annotations.proto");
    expect(sentence).toContain("google/api/http.proto");
    expect(sentence).toContain("github.com/googleapis/googleapis");
    expect(sentence).toContain("(../../protos)");
    for (const f of ["annotations.proto", "http.proto"]) expect(existsSync(join(REPO_ROOT, "protos", "google", "api", f)), `protos/google/api/${f}`).toBe(true);
    // shipped in the package too (package.json "files")
    expect(JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")).files).toContain("protos");
    expect(guide).not.toContain("path/to/googleapis");
  });

  it("its protoc line compiles a service with google.api.http rules, with dojang's protos/ where the sentence puts it", () => {
    const api = join(tmp.dir, "dojang", "protos", "google", "api");
    mkdirSync(api, { recursive: true });
    for (const f of ["annotations.proto", "http.proto"]) copyFileSync(join(REPO_ROOT, "protos", "google", "api", f), join(api, f));
    copyFileSync(join(REPO_ROOT, "test", "fixtures", "transcode", "shop.proto"), join(tmp.dir, "shop.proto"));
    expect(command).toMatch(/^protoc .*shop\.proto$/);
    const [bin, ...args] = command.split(/\s+/);
    expect(bin).toBe("protoc");
    execFileSync(systemBinary("protoc"), args, { cwd: tmp.dir, stdio: "pipe" });
    const set = readFileSync(join(tmp.dir, "shop.binpb"));
    // a FileDescriptorSet with --include_imports: the imports' file names are in it
    for (const name of ["google/api/annotations.proto", "google/api/http.proto", "shop.proto"]) expect(set.includes(Buffer.from(name))).toBe(true);
  });
});
