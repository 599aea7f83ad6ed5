// `dojang tap`: the calls a running dojang ends, live, as they end (GET /tap on its admin
// listener): one line each, or NDJSON with -o json. Filters: method, code, failed, decided_by,
// route, client. dojang bounds what a slow reader costs it (drop and count); the drops are told
// here on stderr. Ends on Ctrl-C (exit 0), after --count records, or when dojang stops (exit 1).
import { parseArgs } from "node:util";
import { TAP_PARAMS } from "../proxy/observe/tap.js";
import { tapLine } from "./format.js";
import { TARGET_OPTIONS, TARGET_USAGE, adminLines, resolveTarget, NotRunning } from "./target.js";
import type { VerbResult } from "./stat.js";

export const TAP_USAGE = `usage: dojang tap [--method M] [--code C] [--failed] [--decided-by D] [--route R] [--client ADDR]
                  [-o json] [--count N] [--admin HOST:PORT | --config FILE | --pid-file PATH]
  --method M            pkg.Svc/Method, or pkg.Svc/* for a whole service (repeat, or a comma list)
  --code C              a final status, name or number (UNAVAILABLE, 14)
  --failed              only calls that did not end 0 OK
  --decided-by D        who decided the status (upstream, deadline, rbac ...; docs/reference/decided-by.md)
  --route R             a route label as in the access log (prefix:/, service:pkg.Svc, path:/pkg.Svc/M)
  --client ADDR         the client's address, or a CIDR block (10.0.0.0/8)
  -o json               one access record per line (NDJSON), as dojang wrote it
  --count N             stop after N calls
${TARGET_USAGE}
  exit 0 stopped (Ctrl-C, --count), 1 no answer, refused, or dojang ended the stream, 2 usage or config error`;

/** The GET /tap query for the filter flags (each may repeat or hold a comma list). */
export function tapQuery(v: { method?: string[]; code?: string[]; failed?: boolean; "decided-by"?: string[]; route?: string[]; client?: string[] }): string {
  const q = new URLSearchParams();
  const add = (k: (typeof TAP_PARAMS)[number], vs: string[] | undefined): void => {
    for (const x of vs ?? []) q.append(k, x);
  };
  add("method", v.method);
  add("code", v.code);
  if (v.failed === true) q.append("failed", "");
  add("decided_by", v["decided-by"]);
  add("route", v.route);
  add("client", v.client);
  return q.toString();
}

export interface TapIo {
  readonly out: NodeJS.WritableStream & { write(s: string): boolean };
  readonly err: NodeJS.WritableStream & { write(s: string): boolean };
  /** called with the function that stops the tap (the CLI binds SIGINT/SIGTERM to it) */
  readonly onStop?: (stop: () => void) => void;
}

export async function runTap(argv: readonly string[], env: Readonly<Record<string, string | undefined>>, io: TapIo): Promise<VerbResult> {
  let args;
  try {
    args = parseArgs({
      args: [...argv],
      options: {
        ...TARGET_OPTIONS,
        method: { type: "string", multiple: true },
        code: { type: "string", multiple: true },
        failed: { type: "boolean", default: false },
        "decided-by": { type: "string", multiple: true },
        route: { type: "string", multiple: true },
        client: { type: "string", multiple: true },
        output: { type: "string", short: "o" },
        count: { type: "string" },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
    }).values;
  } catch (err) {
    return { code: 2, out: `${(err as Error).message}\n${TAP_USAGE}` };
  }
  if (args.help) return { code: 0, out: TAP_USAGE };
  if (args.output !== undefined && args.output !== "json") return { code: 2, out: `-o: expected json, got "${args.output}"` };
  const count = args.count === undefined ? Infinity : /^[1-9]\d{0,8}$/.test(args.count) ? Number(args.count) : NaN;
  if (Number.isNaN(count)) return { code: 2, out: `--count: expected a whole number above 0, got "${args.count}"` };
  const t = resolveTarget(args, env);
  if (typeof t === "string") return { code: 2, out: t };
  if (t instanceof NotRunning) return { code: 1, out: t.why };
  const query = tapQuery(args);
  const json = args.output === "json";
  let seen = 0;
  let stopped = false;
  const h = adminLines(t, `/tap${query === "" ? "" : `?${query}`}`, (line) => {
    if (stopped) return true;
    let rec: Record<string, unknown>;
    try {
      rec = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return true;
    }
    const dropped = rec["tap_dropped"];
    if (typeof dropped === "number") {
      io.err.write(`dojang tap: ${dropped} call${dropped === 1 ? "" : "s"} not shown: this reader fell behind and dojang dropped them\n`);
      return true;
    }
    const more = io.out.write((json ? line : tapLine(rec)) + "\n");
    if (++seen >= count) stop();
    if (!more) io.out.once("drain", () => h.resume());
    return more;
  });
  function stop(): void {
    if (stopped) return;
    stopped = true;
    h.close();
  }
  io.onStop?.(stop);
  const why = await h.ended;
  if (why !== undefined && !stopped) return { code: 1, out: why };
  return { code: 0, out: "" };
}
