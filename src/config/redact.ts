// What /config shows: the effective config with every secret replaced. Pure (no I/O), so the
// rule is tested without a server. A secret is a key whose name is in SECRET_KEYS, at any depth;
// a later secret (a TLS private key's contents, say) is one more name here.

/** Key names whose values are never shown: `admin.token` now. */
export const SECRET_KEYS: ReadonlySet<string> = new Set(["token"]);

import { REDACTED } from "../translate/grpc-path.js";

export { REDACTED };

/**
 * A copy of `value` in which every secret key's value is REDACTED, except null/undefined, which
 * stay as they are (so /config still says whether a token is set). The input is not changed.
 */
export function redactSecrets(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(redactSecrets);
  if (typeof value !== "object" || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    const shown = SECRET_KEYS.has(k) && v !== null && v !== undefined ? REDACTED : redactSecrets(v);
    Object.defineProperty(out, k, { value: shown, enumerable: true, writable: true, configurable: true });
  }
  return out;
}
