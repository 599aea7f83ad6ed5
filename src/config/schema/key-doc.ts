// The JSON Schema's value kinds and the shape of a key's documentation (KeyDoc): what
// config/json-schema.ts and each filter's schema file (schema/auth.ts, rate-limit.ts, headers.ts)
// describe their keys with. Patterns are ECMA-262, as JSON Schema requires; every string value
// with a pattern or enum also accepts a `${VAR}` reference, since expansion happens before
// validation.
import { CODE_NAMES } from "../../translate/codes.js";
import { LIMITS } from "../types.js";
import { formatDuration } from "../units.js";

export type JsonSchema = { [key: string]: unknown };

/** Any string holding a `${` reference: its value is only known after expansion. */
export const ENV_REF = ".*\\$\\{.*";
export const withEnv = (re: string) => `^(?:${re}|${ENV_REF})$`;
export const NUM = "\\d+(?:\\.\\d+)?";
/** units.ts parseDuration: h, m, s, ms parts, largest first ("1m30s"); a number without a unit only as 0. */
export const DURATION_RE = `\\s*(?:0+(?:\\.0+)?|(?=\\d)(?:${NUM}h)?(?:${NUM}m)?(?:${NUM}s)?(?:${NUM}ms)?)\\s*`;
/** units.ts parseSize: bytes, or a number with B, KB, MB, GB, KiB, MiB, GiB (any case). */
export const SIZE_RE = `\\s*${NUM}\\s*(?:[Bb]|[KkMmGg][Ii]?[Bb])?\\s*`;
export const WHOLE_RE = "\\s*\\d+\\s*";
/** units.ts parseHostPort: host:port, IPv6 in brackets. */
export const HOST_PORT_RE = "(?:\\[[0-9A-Fa-f:.]+\\]|[^\\s:\\[\\]/]+):\\d{1,5}";
export const NAME_RE = "[A-Za-z0-9][A-Za-z0-9_.-]*";
export const PERCENT_RE = `\\s*${NUM}\\s*%?\\s*`;

// === value kinds ===

/**
 * A duration: text with a unit (the pattern). A number is refused unless it is 0 (30 could be
 * seconds or milliseconds: units.ts parseDuration), and then only where 0 is allowed (`min` 0).
 */
export const durationKind = (min = 0, nullable = false): JsonSchema =>
  min === 0
    ? { type: ["string", "integer", ...(nullable ? ["null"] : [])], pattern: withEnv(DURATION_RE), minimum: 0, maximum: 0 }
    : { type: nullable ? ["string", "null"] : "string", pattern: withEnv(DURATION_RE) };
export const sizeKind = (r: { min: number; max: number }): JsonSchema => ({
  type: ["string", "integer"],
  pattern: withEnv(SIZE_RE),
  minimum: r.min,
  maximum: r.max,
});
export const countKind = (r: { min: number; max: number }): JsonSchema => ({
  type: ["string", "integer"],
  pattern: withEnv(WHOLE_RE),
  minimum: r.min,
  maximum: r.max,
});
export const FLAG: JsonSchema = { type: ["boolean", "string"], pattern: withEnv("true|false") };
export const ADDRESS: JsonSchema = { type: "string", pattern: withEnv(HOST_PORT_RE) };
export const FILE: JsonSchema = { type: "string", minLength: 1 };
export const NULLABLE_FILE: JsonSchema = { type: ["string", "null"], minLength: 1 };
/** schema/tls.ts serverName: a DNS name, optionally "*." first (any case; dojang lower-cases it). */
export const SERVER_NAME_RE = "\\s*(?:\\*\\.)?[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\\s*";
export const SERVER_NAME: JsonSchema = { type: "string", pattern: withEnv(SERVER_NAME_RE) };
export const NAME: JsonSchema = { type: "string", pattern: withEnv(NAME_RE), maxLength: LIMITS.nameLength.max };
/** One of `values` (the parser is case-insensitive; the schema lists the canonical spelling). */
export const enumKind = (values: readonly string[]): JsonSchema => ({
  type: "string",
  anyOf: [{ enum: [...values] }, { pattern: `^${ENV_REF}$` }],
});
export const codeKind = (names: readonly string[], max: number, what: string): JsonSchema => ({
  anyOf: [
    { type: "integer", minimum: 0, maximum: max },
    { type: "string", enum: [...names] },
    { type: "string", pattern: withEnv("\\d+|0x[0-9A-Fa-f]+") },
  ],
  description: what,
});

export const dur = (ms: number | null) => (ms === null ? null : formatDuration(ms));

/** A route's retryOn entry (same shape as a fault's code). */
export const GRPC_CODE_KIND = codeKind(CODE_NAMES, 16, 'A gRPC status code: 0 to 16 or its name, e.g. "UNAVAILABLE".');

/** A key's documentation: its description, and the default and value kind zod cannot show (a transform). */
export interface KeyDoc {
  readonly description: string;
  readonly kind?: JsonSchema;
  readonly default?: unknown;
}
