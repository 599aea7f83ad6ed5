// The real engines the tests talk to (go-control-plane, the rate-limit service, the trace backend,
// redis-server), built or installed by scripts/engines.mjs before vitest starts (npm test runs it).
import { existsSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(import.meta.dirname, "..", "..");

/** The path of a binary that scripts/engines.mjs built from test/engines/*. */
export function engineBinary(name: string): string {
  const p = join(ROOT, ".engines", "bin", name);
  if (!existsSync(p)) throw new Error(`engine ${name} is not built: run \`node scripts/engines.mjs\` (npm test does)`);
  return p;
}

/** A Debian program the tests start (e.g. redis-server), from PATH or /usr/sbin, /usr/bin. */
export function systemBinary(name: string): string {
  for (const dir of (process.env["PATH"] ?? "").split(":").concat(["/usr/sbin", "/usr/bin"])) {
    const p = join(dir, name);
    if (dir && existsSync(p)) return p;
  }
  throw new Error(`${name} is not installed: run \`node scripts/engines.mjs\` (npm test does), which installs it with apt-get`);
}
