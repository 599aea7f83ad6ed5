// `dojang stat`: the windowed stats of a running dojang (GET /stats on its admin listener), once:
// per method, route or upstream endpoint, success rate, calls per second, p50/p95/p99 latency and
// who decided the failed calls. Linkerd's `viz stat`, for one proxy. Exit 0 printed, 1 no answer
// (or refused), 2 usage or config error.
import { parseArgs } from "node:util";
import { timeoutOption } from "../health.js";
import { STATS_WINDOWS, type StatsView } from "../proxy/observe/stats.js";
import { BY, rowsOf, statTable, type By } from "./format.js";
import { TARGET_OPTIONS, TARGET_USAGE, adminGet, resolveTarget, NotRunning } from "./target.js";

export const STAT_USAGE = `usage: dojang stat [--window 10s|1m|10m] [--by method|route|endpoint] [-o json|wide] [--timeout DURATION]
                   [--admin HOST:PORT | --config FILE | --pid-file PATH]
  --window W            the window the figures cover: 10s, 1m (default) or 10m
  --by KIND             one row per method (default), route, or upstream endpoint
  -o json|wide          json: GET /stats's answer as it is (every kind); wide: also each status × decided_by
  --timeout DURATION    how long to wait for the answer (default 5s)
${TARGET_USAGE}
  exit 0 printed, 1 no answer or refused, 2 usage or config error`;

export interface VerbResult {
  readonly code: 0 | 1 | 2;
  /** what goes to stdout (code 0) or stderr (otherwise); no trailing newline */
  readonly out: string;
}

export const VIEW_DEFAULT_TIMEOUT_MS = 5000;

/** Checks --window and --by; the first problem, or undefined. */
export function checkWindowBy(window: string, by: string): string | undefined {
  if (!Object.hasOwn(STATS_WINDOWS, window)) return `--window: expected one of ${Object.keys(STATS_WINDOWS).join(", ")}, got "${window}"`;
  if (!(BY as readonly string[]).includes(by)) return `--by: expected one of ${BY.join(", ")}, got "${by}"`;
  return undefined;
}

export async function runStat(argv: readonly string[], env: Readonly<Record<string, string | undefined>> = process.env): Promise<VerbResult> {
  let args;
  try {
    args = parseArgs({
      args: [...argv],
      options: {
        ...TARGET_OPTIONS,
        window: { type: "string", default: "1m" },
        by: { type: "string", default: "method" },
        output: { type: "string", short: "o" },
        timeout: { type: "string" },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
    }).values;
  } catch (err) {
    return { code: 2, out: `${(err as Error).message}\n${STAT_USAGE}` };
  }
  if (args.help) return { code: 0, out: STAT_USAGE };
  const bad = checkWindowBy(args.window, args.by);
  if (bad !== undefined) return { code: 2, out: bad };
  if (args.output !== undefined && args.output !== "json" && args.output !== "wide") return { code: 2, out: `-o: expected json or wide, got "${args.output}"` };
  const timeoutMs = timeoutOption(args.timeout, VIEW_DEFAULT_TIMEOUT_MS);
  if (typeof timeoutMs === "string") return { code: 2, out: timeoutMs };
  const t = resolveTarget(args, env);
  if (typeof t === "string") return { code: 2, out: t };
  if (t instanceof NotRunning) return { code: 1, out: t.why };
  const r = await adminGet(t, `/stats?window=${args.window}`, timeoutMs);
  if (!r.ok) return { code: 1, out: r.why };
  if (args.output === "json") return { code: 0, out: JSON.stringify(r.body, null, 2) };
  const v = r.body as StatsView;
  const rows = rowsOf(v, args.by as By);
  const table = statTable(rows, args.by as By, args.output === "wide");
  return { code: 0, out: rows.length === 0 ? `${table}\n(no calls in the last ${args.window})` : table };
}
