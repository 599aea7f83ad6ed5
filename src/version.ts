// dojang's version, on its own so that `dojang --version` (src/main.ts) loads nothing else.
export const VERSION = "0.1.0";
