// dojang's version, and the Node.js versions it runs on: on their own, importing nothing, so that
// `dojang --version` loads nothing else and the launcher (src/cli.ts) can check the Node version
// before it loads anything.
export const VERSION = "0.1.0";

/**
 * The Node.js versions dojang works on (package.json "engines" says the same): node:http2 takes a
 * flat header list ([name, value, …]) in request() since 24.0.0 / 22.17.0 and in respond() since
 * 24.7.0 / 22.20.0, and dojang passes one on every call (src/proxy/call/headers.ts, headerList).
 * On an older node the proxy would start and then fail every call (13 INTERNAL), so the CLI and
 * startDojang() refuse to start instead. Measured: 22.19.0 and 24.6.0 fail every call, 22.20.0
 * and 24.7+ pass.
 */
export const NODE_RANGE = "^22.20.0 || >=24.7.0";

/** Whether `version` (process.versions.node, "22.20.0") is in NODE_RANGE. */
export function nodeSupported(version: string): boolean {
  const [major = 0, minor = 0] = version.split(".").map(Number);
  return (major === 22 && minor >= 20) || (major === 24 && minor >= 7) || major >= 25;
}

/**
 * One line saying what is needed and how to get it, when this node is too old; undefined when it
 * will do. Without a trailing newline.
 */
export function nodeVersionProblem(version: string = process.versions.node, execPath: string = process.execPath): string | undefined {
  if (nodeSupported(version)) return undefined;
  // Two places dojang runs from, two remedies: a clone of dojang has Node 24 as a dev dependency
  // already (npx runs node_modules/.bin/node), a project that installs dojang has to add one.
  return (
    `dojang needs Node.js ${NODE_RANGE} (node:http2 header lists); this is Node.js ${version} (${execPath}). ` +
    `In a clone of dojang (after npm install): npx node dist/cli.js ... runs it on the clone's own Node 24, as npm start and npm test do. ` +
    `In a project: npm i -D node@24, and run the tests or dojang through an npm script (npm test, npm start), ` +
    `which puts node_modules/.bin/node first on PATH`
  );
}
