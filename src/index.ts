// dojang's library entry: start a proxy in-process (tests, harnesses) and the building blocks.
import type { Logger } from "pino";
import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { configFromText, deepFreeze, isLoopbackHost, loadConfigFile, parseConfigValue, type Config } from "./config/index.js";
import { formatFaultRule, parseFaultAction, parseFaultRule, parsePercentage } from "./config/faults/parse.js";
import { ConfigError, DojangError } from "./errors.js";
import { Dojang } from "./proxy/dojang.js";
import { createLogger, type LogLevel } from "./proxy/observe/log.js";
import { nodeVersionProblem } from "./version.js";

import type { FaultRule, FaultRuleInput, FaultRuleStatus } from "./proxy/filters/fault/index.js";
import type { AccessRecord } from "./proxy/observe/log.js";

export { VERSION, NODE_RANGE } from "./version.js";

export interface StartOptions {
  /** YAML/JSON text, or an already-parsed object in the config file's shape */
  readonly config?: string | Readonly<Record<string, unknown>>;
  /** path of a config file (used when `config` is absent) */
  readonly configFile?: string;
  /** environment for `${VAR}` expansion; default process.env */
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly logger?: Logger;
  /** overrides the config's logLevel */
  readonly logLevel?: LogLevel;
}

export interface DojangHandle {
  /** "host:port" of the first listener */
  readonly address: string;
  /** "host:port" of the admin listener, if configured */
  readonly adminAddress: string | undefined;
  readonly instance: Dojang;
  /** fault rules, Toxiproxy-style (the same rule shape as the config's `faults:` lists) */
  readonly faults: {
    /** adds a rule and returns it normalized (with its id); throws DojangError with the reasons when invalid */
    add(rule: FaultRuleInput): FaultRule;
    remove(id: string): boolean;
    /** removes the API-added rules and zeroes every counter */
    reset(): void;
    /** every rule with how often it matched and fired */
    list(): FaultRuleStatus[];
  };
  /** the recent calls (the journal), oldest first: method, status, decided_by, faults, attempt, timings, bytes */
  readonly calls: readonly AccessRecord[];
  /** graceful close; `drainTimeoutMs` 0 cuts in-flight calls at once */
  close(drainTimeoutMs?: number): Promise<void>;
}

/** The library is the test harness: its calls journal is on unless the config says otherwise. */
export const LIBRARY_JOURNAL = 1000;

export function resolveConfig(opts: StartOptions): Config {
  const env = opts.env ?? process.env;
  if (typeof opts.config === "string") {
    const c = configFromText(opts.config, "<inline>", env);
    const j = /^journal\s*:/m.test(opts.config) || /"journal"\s*:/.test(opts.config) ? c : { ...c, journal: LIBRARY_JOURNAL };
    return libraryAdmin(j, saysMutations(yamlValue(opts.config)));
  }
  if (opts.config !== undefined) {
    const r = parseConfigValue("journal" in opts.config ? opts.config : { ...opts.config, journal: LIBRARY_JOURNAL }, env);
    if (!r.ok) throw new ConfigError("<object>", r.issues);
    return libraryAdmin(r.config, saysMutations(opts.config));
  }
  if (opts.configFile !== undefined) {
    const c = loadConfigFile(opts.configFile, env);
    return libraryAdmin(c, saysMutations(yamlValue(readFileSync(opts.configFile, "utf8"))));
  }
  throw new ConfigError("<none>", [{ path: "", message: "no config given (config or configFile)" }]);
}

/**
 * The library is the test harness: its admin takes fault rules (`admin.mutations` on) unless the
 * config says `admin.mutations` itself. Still secure by default: an admin that other machines can
 * reach and that has no token keeps mutations off (the CLI would refuse that config).
 */
function libraryAdmin(c: Config, explicit: boolean): Config {
  const a = c.admin;
  if (a === null || explicit || a.mutations) return c;
  if (a.token === null && !isLoopbackHost(a.address.host)) return c;
  return deepFreeze({ ...c, admin: { ...a, mutations: true } });
}

function saysMutations(raw: unknown): boolean {
  const admin = typeof raw === "object" && raw !== null ? (raw as { admin?: unknown }).admin : undefined;
  return typeof admin === "object" && admin !== null && Object.hasOwn(admin, "mutations");
}

/** The document as written (already validated by the caller), to see which keys it sets. */
function yamlValue(text: string): unknown {
  try {
    return parseYaml(text.startsWith("\uFEFF") ? text.slice(1) : text, { merge: true });
  } catch {
    return undefined;
  }
}

/**
 * Starts dojang in this process; ports 0 bind ephemeral ports (see `address`). On a Node.js older
 * than NODE_RANGE it rejects at once, before reading the config, with a DojangError (code
 * DOJANG_ERR_NODE_VERSION) whose one-line message says what is needed and how to get it: the
 * proxy would otherwise start and fail every call. It never exits the process that imported it.
 */
export async function startDojang(opts: StartOptions): Promise<DojangHandle> {
  const tooOld = nodeVersionProblem();
  if (tooOld !== undefined) throw new DojangError("DOJANG_ERR_NODE_VERSION", tooOld);
  const config = resolveConfig(opts);
  const logger = opts.logger ?? createLogger({ level: opts.logLevel ?? config.logLevel });
  // the config module is loaded here already: its fault parsers go in (handle.faults.add, the API)
  const d = new Dojang(config, { logger, faultParsers: { parseFaultRule, formatFaultRule, parseFaultAction, parsePercentage } });
  await d.start();
  return {
    address: d.address(),
    adminAddress: d.adminAddress,
    instance: d,
    faults: {
      add: (rule) => d.addFault(rule),
      remove: (id) => d.faults.remove(id),
      reset: () => d.faults.reset(performance.now()),
      list: () => d.listFaults(),
    },
    get calls() {
      return d.journal.last();
    },
    close: (ms?: number) => d.close(ms),
  };
}

export { Dojang } from "./proxy/dojang.js";
export { ConfigError, DojangError } from "./errors.js";
export type { Config } from "./config/index.js";
export type {
  FaultRule,
  FaultRuleStatus,
  FaultAction,
  FaultRuleInput,
  FaultActionInput,
  FaultMatchInput,
  FaultFireInput,
  MetadataMatchInput,
  AbortInput,
  HttpInput,
  ResetInput,
  GoawayInput,
  CloseConnectionInput,
  ShapeInput,
  DelayInput,
  DelayLengthInput,
  BandwidthInput,
  BlackholeInput,
  StallInput,
  DeadlineInput,
  UnreachableInput,
  UpstreamResetInput,
  DurationInput,
  SizeInput,
  GrpcCodeInput,
  GrpcCodeName,
  H2CodeInput,
  H2ErrorName,
} from "./proxy/filters/fault/index.js";
/** One call in the journal (`calls`, `GET /calls`): the access log's record. */
export type { AccessRecord as CallRecord, AccessRecord } from "./proxy/observe/log.js";
