// Merges a YAML fragment (--dojang-config-extra) into a generated dojang config.
// Objects merge key by key, recursively; arrays merge index by index (so a fragment
// `listeners: [{routes: [{faults: []}]}]` patches the first route of the first listener without
// restating it); anything else (scalars, null, an array meeting a non-array) replaces.
export function deepMerge(base, extra) {
  if (Array.isArray(base) && Array.isArray(extra)) {
    const out = base.slice();
    extra.forEach((v, i) => {
      out[i] = i < base.length ? deepMerge(base[i], v) : v;
    });
    return out;
  }
  if (isPlainObject(base) && isPlainObject(extra)) {
    const out = { ...base };
    for (const [k, v] of Object.entries(extra)) out[k] = k in base ? deepMerge(base[k], v) : v;
    return out;
  }
  return extra;
}

function isPlainObject(v) {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
