// Typed start-up and programmer errors. Data-plane failures are values (Outcome), never thrown.
// Each subclass has a stable string `code` callers can match on; `cause` is kept, Node's own
// errors are never mutated.

export class DojangError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "DojangError";
    this.code = code;
  }
}

/** One problem found in a config, with the key path it concerns (`listeners[0].routes[1].cluster`). */
export interface ConfigIssue {
  readonly path: string;
  readonly message: string;
}

export class ConfigError extends DojangError {
  readonly issues: readonly ConfigIssue[];
  constructor(source: string, issues: readonly ConfigIssue[], options?: { cause?: unknown }) {
    super(
      "DOJANG_ERR_CONFIG",
      `invalid config ${source}:\n` + issues.map((i) => `  ${i.path ? i.path + ": " : ""}${i.message}`).join("\n"),
      options,
    );
    this.name = "ConfigError";
    this.issues = issues;
  }
}

export class ListenError extends DojangError {
  constructor(address: string, options?: { cause?: unknown }) {
    super("DOJANG_ERR_LISTEN", `cannot listen on ${address}`, options);
    this.name = "ListenError";
  }
}
