// The log levels the config and the command line accept, apart from the schema (src/config/schema.ts)
// so that the served process can check --log-level without loading zod.
export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
