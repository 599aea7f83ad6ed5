// Writes config/dojang.schema.json (the config file's JSON Schema) and
// config/dojang.fragment.schema.json (the same with nothing required, for bench fragments) from
// the zod schema as tsc compiled it: see src/config/json-schema.ts for what is derived and what is
// added. Run by `npm run build` after tsc; deterministic, so a build on a clean tree leaves the
// committed files unchanged. test/config/json-schema.test.ts checks that they are current.
import { readFileSync, writeFileSync } from "node:fs";

const { configJsonSchemaFiles } = await import(new URL("../dist/config/json-schema.js", import.meta.url).href);

for (const [name, text] of Object.entries(configJsonSchemaFiles())) {
  const file = new URL(`../config/${name}`, import.meta.url);
  let current;
  try {
    current = readFileSync(file, "utf8");
  } catch {
    current = undefined;
  }
  if (current !== text) {
    writeFileSync(file, text);
    console.log(`config-schema: wrote config/${name}`);
  }
}
