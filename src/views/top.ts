// `dojang top`: the live view of a running dojang's windowed stats, refreshed every --interval.
// In a terminal: the alternate screen, rows sorted by a key you choose (r rps, s success, l p99
// latency, c calls, n name), w changes the window, b what a row is (method, route, endpoint),
// failing rows (success under 95 %) in red; q or Ctrl-C leaves and gives the terminal back as it
// was. Not a terminal (a pipe, a file, CI): the same table as plain text at each refresh, no
// escape codes, no keys; --iterations N stops after N refreshes.
import { parseArgs } from "node:util";
import { parseDuration } from "../config/units.js";
import { STATS_WINDOWS, type StatsView } from "../proxy/observe/stats.js";
import { BY, SORT_KEYS, formatRps, formatSuccess, formatMs, rowsOf, sortRows, statTable, type By, type SortKey } from "./format.js";
import { TARGET_OPTIONS, TARGET_USAGE, adminGet, resolveTarget, targetUrl, NotRunning, type AdminTarget } from "./target.js";
import { checkWindowBy, VIEW_DEFAULT_TIMEOUT_MS, type VerbResult } from "./stat.js";

export const TOP_USAGE = `usage: dojang top [--window 10s|1m|10m] [--by method|route|endpoint] [--sort rps|success|p99|calls|name]
                  [--interval DURATION] [--iterations N] [--admin HOST:PORT | --config FILE | --pid-file PATH]
  --window W            the window the figures cover: 10s, 1m (default) or 10m
  --by KIND             one row per method (default), route, or upstream endpoint
  --sort KEY            the order rows start in (default rps)
  --interval DURATION   how often it refreshes (default 1s)
  --iterations N        stop after N refreshes (default: until q or Ctrl-C)
${TARGET_USAGE}
  keys (in a terminal): r rps, s success, l p99 latency, c calls, n name: sort; w window; b rows by; q or Ctrl-C quit
  not a terminal: the table as plain text at each refresh
  exit 0 stopped, 1 the last refresh had no answer, 2 usage or config error`;

const KEYS: Readonly<Record<string, SortKey>> = { r: "rps", s: "success", l: "p99", c: "calls", n: "name" };
const WINDOW_NAMES = Object.keys(STATS_WINDOWS);

export interface TopIo {
  readonly out: NodeJS.WritableStream & { write(s: string): boolean; isTTY?: boolean; columns?: number; rows?: number };
  readonly err: NodeJS.WritableStream & { write(s: string): boolean };
  readonly input: NodeJS.ReadableStream & { isTTY?: boolean; setRawMode?: (on: boolean) => unknown };
  /** called with the function that stops top (the CLI binds SIGINT/SIGTERM to it) */
  readonly onStop?: (stop: () => void) => void;
}

interface State {
  window: string;
  by: By;
  sort: SortKey;
  view: StatsView | undefined;
  error: string | undefined;
  at: Date | undefined;
}

const ESC = "\x1b[";
const RED = `${ESC}31m`;
const BOLD = `${ESC}1m`;
const DIM = `${ESC}2m`;
const RESET = `${ESC}0m`;

/** The screen for state `s`, fitted to `cols` × `rows` (escape codes included: a terminal only). */
export function screen(s: State, t: AdminTarget, cols: number, rows: number): string {
  const fit = (line: string): string => ([...line].length > cols ? [...line].slice(0, Math.max(0, cols - 1)).join("") + "…" : line);
  const head = `dojang top · ${targetUrl(t, "")} · window ${s.window} · by ${s.by} · sort ${s.sort}${s.at === undefined ? "" : ` · ${s.at.toLocaleTimeString()}`}`;
  const out = [BOLD + fit(head) + RESET];
  const v = s.view;
  if (v !== undefined) {
    const tot = v.total;
    out.push(fit(`all calls: ${formatRps(tot.rps)}/s  success ${formatSuccess(tot.success)}  p50 ${formatMs(tot.p50_ms)}  p99 ${formatMs(tot.p99_ms)}  failed ${tot.failed}`));
  }
  out.push(s.error === undefined ? "" : RED + fit(`no answer: ${s.error}`) + RESET);
  if (v !== undefined) {
    const sorted = sortRows(rowsOf(v, s.by), s.sort);
    const lines = statTable(sorted, s.by, false).split("\n");
    out.push(BOLD + fit(lines[0]!) + RESET);
    const room = Math.max(0, rows - out.length - 2);
    sorted.slice(0, room).forEach((r, i) => {
      const line = fit(lines[i + 1]!);
      out.push(r.success !== null && r.success < 0.95 ? RED + line + RESET : line);
    });
    if (sorted.length === 0) out.push(DIM + `(no calls in the last ${s.window})` + RESET);
    else if (sorted.length > room) out.push(DIM + `(${sorted.length - room} more)` + RESET);
  }
  while (out.length < rows - 1) out.push("");
  out.push(DIM + fit("r rps · s success · l latency · c calls · n name · w window · b by · q quit") + RESET);
  // home, then each line cleared to its end: no flicker from a whole-screen clear
  return `${ESC}H` + out.map((l) => l + `${ESC}K`).join("\r\n");
}

export async function runTop(argv: readonly string[], env: Readonly<Record<string, string | undefined>>, io: TopIo): Promise<VerbResult> {
  let args;
  try {
    args = parseArgs({
      args: [...argv],
      options: {
        ...TARGET_OPTIONS,
        window: { type: "string", default: "1m" },
        by: { type: "string", default: "method" },
        sort: { type: "string", default: "rps" },
        interval: { type: "string", default: "1s" },
        iterations: { type: "string" },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
    }).values;
  } catch (err) {
    return { code: 2, out: `${(err as Error).message}\n${TOP_USAGE}` };
  }
  if (args.help) return { code: 0, out: TOP_USAGE };
  const bad = checkWindowBy(args.window, args.by);
  if (bad !== undefined) return { code: 2, out: bad };
  if (!(SORT_KEYS as readonly string[]).includes(args.sort)) return { code: 2, out: `--sort: expected one of ${SORT_KEYS.join(", ")}, got "${args.sort}"` };
  const iv = parseDuration(args.interval);
  if (!iv.ok || iv.ms < 100 || /^\s*\d+(\.\d+)?\s*$/.test(args.interval)) return { code: 2, out: `--interval: expected a duration of at least 100ms with its unit ("1s", "500ms"), got "${args.interval}"` };
  const iterations = args.iterations === undefined ? Infinity : /^[1-9]\d{0,8}$/.test(args.iterations) ? Number(args.iterations) : NaN;
  if (Number.isNaN(iterations)) return { code: 2, out: `--iterations: expected a whole number above 0, got "${args.iterations}"` };
  const t = resolveTarget(args, env);
  if (typeof t === "string") return { code: 2, out: t };
  if (t instanceof NotRunning) return { code: 1, out: t.why };
  const s: State = { window: args.window, by: args.by as By, sort: args.sort as SortKey, view: undefined, error: undefined, at: undefined };
  const tty = io.out.isTTY === true && io.input.isTTY === true && typeof io.input.setRawMode === "function";
  return tty ? interactive(s, t, iv.ms, iterations, io) : plain(s, t, iv.ms, iterations, io);
}

async function refresh(s: State, t: AdminTarget): Promise<void> {
  const r = await adminGet(t, `/stats?window=${s.window}`, VIEW_DEFAULT_TIMEOUT_MS);
  s.at = new Date();
  if (r.ok) {
    s.view = r.body as StatsView;
    s.error = undefined;
  } else s.error = r.why;
}

/** A stoppable wait: resolves after `ms`, or at once when woken. */
function pause(ms: number): { done: Promise<void>; wake(): void } {
  let wake!: () => void;
  const done = new Promise<void>((r) => {
    const timer = setTimeout(r, ms);
    wake = () => {
      clearTimeout(timer);
      r();
    };
  });
  return { done, wake };
}

/** A promise that resolves when stop() is called (a refresh in flight is not waited for). */
function stopper(): { stopped: Promise<void>; stop(): void } {
  let stop!: () => void;
  const stopped = new Promise<void>((r) => (stop = r));
  return { stopped, stop };
}

async function plain(s: State, t: AdminTarget, everyMs: number, iterations: number, io: TopIo): Promise<VerbResult> {
  let stopped = false;
  let p: { done: Promise<void>; wake(): void } | undefined;
  const st = stopper();
  io.onStop?.(() => {
    stopped = true;
    st.stop();
    p?.wake();
  });
  for (let i = 0; i < iterations && !stopped; i++) {
    await Promise.race([refresh(s, t), st.stopped]);
    if (stopped) break;
    const stamp = s.at!.toISOString();
    if (s.error !== undefined) io.err.write(`dojang top ${stamp}: no answer: ${s.error}\n`);
    else {
      const v = s.view!;
      const rows = sortRows(rowsOf(v, s.by), s.sort);
      io.out.write(`dojang top ${stamp} · window ${s.window} · by ${s.by} · sort ${s.sort}\n${statTable(rows, s.by, false)}\n${rows.length === 0 ? `(no calls in the last ${s.window})\n` : ""}\n`);
    }
    if (i + 1 < iterations && !stopped) {
      p = pause(everyMs);
      await p.done;
    }
  }
  return s.error === undefined ? { code: 0, out: "" } : { code: 1, out: s.error };
}

async function interactive(s: State, t: AdminTarget, everyMs: number, iterations: number, io: TopIo): Promise<VerbResult> {
  const out = io.out;
  const input = io.input;
  let stopped = false;
  let p: { done: Promise<void>; wake(): void } | undefined;
  const draw = (): void => {
    out.write(screen(s, t, out.columns ?? 80, out.rows ?? 24));
  };
  const st = stopper();
  const stop = (): void => {
    stopped = true;
    st.stop();
    p?.wake();
  };
  const onKey = (data: Buffer | string): void => {
    for (const ch of String(data)) {
      if (ch === "q" || ch === "Q" || ch === "\x03" || ch === "\x04") return stop();
      const sort = KEYS[ch.toLowerCase()];
      if (sort !== undefined) s.sort = sort;
      else if (ch === "w") {
        s.window = WINDOW_NAMES[(WINDOW_NAMES.indexOf(s.window) + 1) % WINDOW_NAMES.length]!;
        s.view = undefined;
        p?.wake();
      } else if (ch === "b") s.by = BY[(BY.indexOf(s.by) + 1) % BY.length]!;
      else continue;
      draw();
    }
  };
  const onResize = (): void => draw();
  // the alternate screen and no cursor; raw keys (Ctrl-C arrives as a key, not as SIGINT)
  out.write(`${ESC}?1049h${ESC}?25l${ESC}2J`);
  input.setRawMode!(true);
  input.on("data", onKey);
  input.resume();
  out.on("resize", onResize);
  io.onStop?.(stop);
  try {
    for (let i = 0; i < iterations && !stopped; i++) {
      await Promise.race([refresh(s, t), st.stopped]);
      if (stopped) break;
      draw();
      if (i + 1 < iterations) {
        p = pause(everyMs);
        await p.done;
        p = undefined;
      }
    }
  } finally {
    input.off("data", onKey);
    out.off("resize", onResize);
    input.setRawMode!(false);
    input.pause();
    // the terminal as it was: cursor back, main screen back
    out.write(`${ESC}?25h${ESC}?1049l`);
  }
  return { code: 0, out: "" };
}
