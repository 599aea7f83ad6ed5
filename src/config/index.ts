// Public surface of the config module: types, defaults, unit parsers, parse/load entry points.

export * from "./schema.js";
export * from "./units.js";
export * from "./env.js";
export * from "./issues.js";
export * from "./parse.js";
export * from "./load.js";
export * from "./default.js";
export * from "./memory.js";
