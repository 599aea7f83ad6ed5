// Where `dojang stat`, `top` and `tap` find the running dojang's admin listener, and its token.
// In order: --admin HOST:PORT (or $DOJANG_ADMIN); --config FILE (or $DOJANG_CONFIG: its admin
// address, as `dojang health` reads it); --pid-file PATH (or $DOJANG_PID_FILE: the config the
// process in it was started with, read from its command line and environment in /proc); else the
// embedded default's 127.0.0.1:9901. The token: $DOJANG_ADMIN_TOKEN, else the config's
// admin.token. One HTTP client for the three verbs: GET with a deadline, and a line stream.
import { readFileSync, readlinkSync } from "node:fs";
import { isAbsolute, join } from "node:path";
import { DEFAULT_CONFIG_YAML, configFromText, formatHostPort, loadConfigFile, parseHostPort, type Config, type HostPort } from "../config/index.js";
import { ConfigError } from "../errors.js";
import { healthTarget } from "../health.js";
import { readPidFile } from "../pid-file.js";
import { http } from "../proxy/downstream/node-http.js";

export interface AdminTarget {
  readonly host: string;
  readonly port: number;
  /** the bearer token to send; undefined when none is known */
  readonly token: string | undefined;
  /** how the address was found, for messages ("--admin", "--config dojang.yaml", "pid 123's config") */
  readonly via: string;
}

/** The options every view verb takes to find its dojang. */
export const TARGET_OPTIONS = {
  admin: { type: "string" },
  config: { type: "string", short: "c" },
  "pid-file": { type: "string" },
} as const;

export const TARGET_USAGE = `  --admin HOST:PORT     the admin listener to ask (default: $DOJANG_ADMIN, else the one in --config)
  --config FILE         the running dojang's config: its admin.address and admin.token (default: $DOJANG_CONFIG)
  --pid-file PATH       the pid file of the running dojang: the config it was started with (default: $DOJANG_PID_FILE)
                        the token, when the admin has one: $DOJANG_ADMIN_TOKEN, else admin.token from the config`;

type Env = Readonly<Record<string, string | undefined>>;

function nonEmpty(v: string | undefined): string | undefined {
  return v === undefined || v === "" ? undefined : v;
}

/** No dojang to ask: the pid file names no running one (exit 1, as an admin that does not answer). */
export class NotRunning {
  constructor(readonly why: string) {}
}

/** The target; the reason none could be found (a usage or config error: exit 2); or NotRunning. */
export function resolveTarget(args: { admin?: string | undefined; config?: string | undefined; "pid-file"?: string | undefined }, env: Env): AdminTarget | NotRunning | string {
  const envToken = nonEmpty(env["DOJANG_ADMIN_TOKEN"]);
  const admin = nonEmpty(args.admin ?? env["DOJANG_ADMIN"]);
  if (admin !== undefined) {
    const hp = parseHostPort(admin);
    if (!hp.ok) return `--admin: ${hp.error}`;
    return { host: hp.hostPort.host, port: hp.hostPort.port, token: envToken, via: "--admin" };
  }
  const file = nonEmpty(args.config ?? env["DOJANG_CONFIG"]);
  if (file !== undefined) return fromConfig(() => loadConfigFile(file, env), `--config ${file}`, envToken);
  const pidFile = nonEmpty(args["pid-file"] ?? env["DOJANG_PID_FILE"]);
  if (pidFile !== undefined) return fromPidFile(pidFile, envToken);
  return fromConfig(() => configFromText(DEFAULT_CONFIG_YAML, "<embedded default>", env), "the embedded default config", envToken);
}

function fromConfig(load: () => Config, via: string, envToken: string | undefined): AdminTarget | string {
  let c: Config;
  try {
    c = load();
  } catch (err) {
    return err instanceof ConfigError ? err.message.replaceAll("\n", "; ") : `cannot read the config: ${(err as Error).message}`;
  }
  const t = healthTarget(c);
  if (typeof t === "string") return `${t} (${via}); give --admin HOST:PORT`;
  return { host: t.host, port: t.port, token: envToken ?? c.admin?.token ?? undefined, via };
}

/**
 * The config the process in `pidFile` runs: its `--config` (or `-c`, or $DOJANG_CONFIG in its
 * environment), relative to its working directory, `${VAR}` expanded with its environment.
 * Linux (/proc) only; elsewhere --admin or --config says where.
 */
function fromPidFile(pidFile: string, envToken: string | undefined): AdminTarget | NotRunning | string {
  const s = readPidFile(pidFile);
  if (s.state !== "running") return new NotRunning(`${s.why}: is dojang running with --pid-file ${pidFile}?`);
  let argv: string[];
  let penv: Record<string, string>;
  let cwd: string;
  try {
    argv = readFileSync(`/proc/${s.pid}/cmdline`, "utf8").split("\0");
    penv = Object.fromEntries(
      readFileSync(`/proc/${s.pid}/environ`, "utf8")
        .split("\0")
        .filter((x) => x.includes("="))
        .map((x) => [x.slice(0, x.indexOf("=")), x.slice(x.indexOf("=") + 1)]),
    );
    cwd = readlinkSync(`/proc/${s.pid}/cwd`);
  } catch (err) {
    return `cannot read pid ${s.pid}'s command line (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}): give --admin HOST:PORT or --config FILE`;
  }
  let file: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--config" || a === "-c") file = argv[i + 1];
    else if (a.startsWith("--config=")) file = a.slice("--config=".length);
  }
  file = nonEmpty(file ?? penv["DOJANG_CONFIG"]);
  const via = `pid ${s.pid}'s config`;
  if (file === undefined) return fromConfig(() => configFromText(DEFAULT_CONFIG_YAML, "<embedded default>", penv), via, envToken);
  const path = isAbsolute(file) ? file : join(cwd, file);
  return fromConfig(() => loadConfigFile(path, penv), `${via} ${file}`, envToken);
}

export function targetUrl(t: AdminTarget, path: string): string {
  return `http://${formatHostPort({ host: t.host, port: t.port } as HostPort)}${path}`;
}

function headers(t: AdminTarget): Record<string, string> {
  return t.token === undefined ? {} : { authorization: `Bearer ${t.token}` };
}

/** What went wrong asking the admin, in one line (no token in it). */
function failure(t: AdminTarget, path: string, status: number, body: string): string {
  let why = body.trim().split("\n")[0] ?? "";
  try {
    const e = (JSON.parse(body) as { error?: unknown }).error;
    if (typeof e === "string") why = e;
  } catch {
    /* not JSON: the first line */
  }
  const hint = status === 401 ? (t.token === undefined ? " (set $DOJANG_ADMIN_TOKEN)" : " (the token was refused)") : status === 404 ? " (is `stats` off in its config, or an older dojang?)" : "";
  return `${targetUrl(t, path)} answered ${status}${why === "" ? "" : `: ${why}`}${hint}`;
}

/** GET `path` as JSON within `timeoutMs`: the body, or a one-line reason. Never throws. */
export function adminGet(t: AdminTarget, path: string, timeoutMs: number): Promise<{ ok: true; body: unknown } | { ok: false; why: string }> {
  return new Promise((resolve) => {
    let done = false;
    const finish = (r: { ok: true; body: unknown } | { ok: false; why: string }): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      req.destroy();
      resolve(r);
    };
    const req = http.get({ host: t.host, port: t.port, path, agent: false, headers: { ...headers(t), connection: "close" } }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => {
        if (res.statusCode !== 200) return finish({ ok: false, why: failure(t, path, res.statusCode ?? 0, body) });
        try {
          finish({ ok: true, body: JSON.parse(body) as unknown });
        } catch {
          finish({ ok: false, why: `${targetUrl(t, path)} answered something that is not JSON` });
        }
      });
      res.on("error", (err) => finish({ ok: false, why: `${targetUrl(t, path)}: ${err.message}` }));
    });
    req.on("error", (err: NodeJS.ErrnoException) => finish({ ok: false, why: `${targetUrl(t, path)}: ${err.code === "ECONNREFUSED" ? `connection refused (is dojang running? found through ${t.via})` : err.message}` }));
    const timer = setTimeout(() => finish({ ok: false, why: `${targetUrl(t, path)} did not answer within ${timeoutMs}ms` }), timeoutMs);
  });
}

/**
 * A GET whose answer is a stream of lines (GET /tap): each line to `onLine`; `ended` resolves
 * when it ends, with why (undefined: ended by close()). `onLine` returning false pauses the
 * stream (the reader's output is backed up) until resume(): dojang then holds, drops and counts.
 */
export function adminLines(t: AdminTarget, path: string, onLine: (line: string) => boolean): { readonly ended: Promise<string | undefined>; close(): void; resume(): void } {
  let closing = false;
  let req: ReturnType<typeof http.get>;
  let stream: { resume(): unknown } | undefined;
  const ended = new Promise<string | undefined>((resolve) => {
    req = http.get({ host: t.host, port: t.port, path, agent: false, headers: headers(t) }, (res) => {
      if (res.statusCode !== 200) {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (body += c));
        res.on("end", () => resolve(failure(t, path, res.statusCode ?? 0, body)));
        return;
      }
      stream = res;
      let rest = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => {
        rest += c;
        let nl: number;
        let more = true;
        while ((nl = rest.indexOf("\n")) >= 0) {
          const line = rest.slice(0, nl);
          rest = rest.slice(nl + 1);
          if (line !== "" && !onLine(line)) more = false;
        }
        if (!more) res.pause();
      });
      res.on("end", () => resolve(closing ? undefined : `${targetUrl(t, path)}: dojang ended the stream (stopping?)`));
      res.on("error", () => resolve(closing ? undefined : `${targetUrl(t, path)}: the stream broke`));
    });
    req.on("error", (err: NodeJS.ErrnoException) =>
      resolve(closing ? undefined : `${targetUrl(t, path)}: ${err.code === "ECONNREFUSED" ? `connection refused (is dojang running? found through ${t.via})` : err.message}`),
    );
  });
  return {
    ended,
    close() {
      closing = true;
      req.destroy();
    },
    resume() {
      stream?.resume();
    },
  };
}
